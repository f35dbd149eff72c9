package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/engramhq/engram/gen/engram/v1/engramv1connect"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// Handlers are the API's service implementations. Other front ends of the same
// process (the MCP server) call them directly, with the caller's Principal in the
// context (WithPrincipal), so every rule of the API — tenant from the key, roles,
// validation, field-named errors — holds there too.
type Handlers struct {
	Memory engramv1connect.MemoryServiceHandler
	Review engramv1connect.ReviewServiceHandler
	Task   engramv1connect.TaskServiceHandler
	Schema engramv1connect.SchemaServiceHandler
}

// NewHandlers returns the service implementations over d (defaults applied as in New).
func NewHandlers(d Deps) (Handlers, error) {
	d, err := d.withDefaults()
	if err != nil {
		return Handlers{}, err
	}
	return Handlers{Memory: &memoryServer{d}, Review: &reviewServer{d}, Task: &taskServer{d}, Schema: &schemaServer{d}}, nil
}

func (d Deps) withDefaults() (Deps, error) {
	if d.Store == nil || d.Temporal == nil {
		return d, errors.New("server: Store and Temporal are required")
	}
	if d.ReadStore == nil {
		d.ReadStore = d.Store
	}
	if d.ReadMaxBytes <= 0 {
		d.ReadMaxBytes = DefaultReadMaxBytes
	}
	if d.Config.TaskQueue == "" {
		d.Config.TaskQueue = "engram"
	}
	if d.Logger == nil {
		d.Logger = slogDefault()
	}
	if d.Ingestor == nil {
		d.Ingestor = write.NewIngestor(d.Store, d.Temporal, write.IngestorOptions{
			TaskQueue: d.Config.TaskQueue, ExtractAttempts: d.Config.ExtractAttempts, ReviewTimeout: d.Config.ReviewTimeout,
		})
	}
	return d, nil
}

// keyLookupTimeout bounds the lookup of an API key: a request whose caller set no
// deadline (an MCP client, a plain HTTP call) must not wait without end for a
// connection or a row. A lookup is one indexed select; past this it is UNAVAILABLE.
var keyLookupTimeout = 5 * time.Second

// Authenticate resolves an API key to its Principal. A missing, unknown or revoked
// key is UNAUTHENTICATED; a lookup that does not end within keyLookupTimeout is
// UNAVAILABLE.
func Authenticate(ctx context.Context, keys KeyResolver, key string) (*Principal, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("missing API key: send the header `Authorization: Bearer <key>` (create one with `engram keys create`)"))
	}
	lookupCtx, cancel := context.WithTimeout(ctx, keyLookupTimeout)
	defer cancel()
	k, err := keys.LookupAPIKey(lookupCtx, key)
	if errors.Is(err, storage.ErrBadKey) {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("resolve api key: %w", err))
	}
	return &Principal{
		KeyID: k.ID, TenantID: k.TenantID, Name: k.Principal, Roles: k.Roles,
		UserID: k.UserID, DepartmentID: k.DepartmentID, AgentID: k.AgentID, AllowedUsers: k.AllowedUsers,
	}, nil
}

// AuthenticateHeader resolves an `Authorization: Bearer <key>` header value.
func AuthenticateHeader(ctx context.Context, keys KeyResolver, header string) (*Principal, error) {
	h := strings.TrimSpace(header)
	if h == "" {
		return Authenticate(ctx, keys, "")
	}
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("malformed Authorization header: expected `Bearer <key>`"))
	}
	return Authenticate(ctx, keys, key)
}
