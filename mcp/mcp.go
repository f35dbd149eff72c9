// Package mcp is Engram's Model Context Protocol server (the official Go SDK):
// remember, recall, facts, tasks and reviews as MCP tools, over Streamable HTTP
// (mounted at /mcp by `engram serve`) and over stdio (`engram mcp`, for desktop
// agents that start a process). Every tool calls the API's own handler with the
// principal of the caller's API key — a bearer token on HTTP, ENGRAM_API_KEY on
// stdio — so the tenant, the roles and the validation are exactly the API's.
// It imports only server.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engramhq/engram/server"
)

// Version is reported to MCP clients as the server's version.
var Version = "0.1.0"

// Options configure the MCP server.
type Options struct {
	// Handlers are the API's services (server.NewHandlers).
	Handlers server.Handlers
	// Keys resolve API keys (the storage.Store).
	Keys   server.KeyResolver
	Logger *slog.Logger
	// Observe, when set, is told of every tool call (for metrics).
	Observe func(tool string, err error, took time.Duration)
}

type engine struct {
	h       server.Handlers
	keys    server.KeyResolver
	log     *slog.Logger
	observe func(string, error, time.Duration)
	// args is each tool's input type, for strictArgs.
	args map[string]reflect.Type
	// stdioKey is the key of a stdio session; empty on HTTP, where each request
	// brings its own.
	stdioKey string
}

const principalExtra = "engram.principal"

// principal is the caller of a tool call: from the bearer token of the HTTP
// request, or the stdio session's key, resolved again on every call so that a
// revoked key stops working at once.
func (e *engine) principal(ctx context.Context, req *sdk.CallToolRequest) (*server.Principal, error) {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		if p, ok := req.Extra.TokenInfo.Extra[principalExtra].(*server.Principal); ok {
			return p, nil
		}
	}
	if e.stdioKey == "" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no API key"))
	}
	return server.Authenticate(ctx, e.keys, e.stdioKey)
}

func newEngine(o Options) (*engine, error) {
	if o.Handlers.Memory == nil || o.Handlers.Task == nil || o.Handlers.Review == nil || o.Keys == nil {
		return nil, errors.New("mcp: Handlers and Keys are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &engine{h: o.Handlers, keys: o.Keys, log: o.Logger, observe: o.Observe}, nil
}

const instructions = `Engram is this agent's durable memory. Call recall before answering when earlier ` +
	`conversations may matter (preferences, constraints, decisions, task state) and put its context in your reasoning; ` +
	`call remember with what the user said (and what you did) so it is kept. Facts are versioned: ` +
	`a new value supersedes the old, guesses wait for a human reviewer, forget_fact invalidates a wrong one. ` +
	`Use task_start/task_get/task_step for multi-step work whose state must survive restarts.`

func (e *engine) server() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "engram", Title: "Engram memory", Version: Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: e.log})
	e.addTools(s)
	s.AddReceivingMiddleware(e.strictArgs)
	return s
}

// NewHTTPHandler returns the Streamable HTTP endpoint. Every request needs
// `Authorization: Bearer <API key>`; without a valid one it is refused with 401
// before any MCP message is read.
func NewHTTPHandler(o Options) (http.Handler, error) {
	e, err := newEngine(o)
	if err != nil {
		return nil, err
	}
	s := e.server()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Logger: e.log, SessionTimeout: 30 * time.Minute})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, err := server.Authenticate(ctx, e.keys, token)
		if err != nil {
			if connect.CodeOf(err) == connect.CodeUnauthenticated {
				return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, connectMessage(err))
			}
			return nil, errors.New(connectMessage(err))
		}
		// UserID binds an MCP session to the key that opened it.
		return &auth.TokenInfo{UserID: p.KeyID, Scopes: p.Roles, Extra: map[string]any{principalExtra: p}}, nil
	}
	bearer := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSpace(r.Header.Get("Authorization")) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="engram"`)
			http.Error(w, "missing API key: send the header `Authorization: Bearer <key>` (create one with `engram keys create`)", http.StatusUnauthorized)
			return
		}
		bearer.ServeHTTP(w, r)
	}), nil
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// ServeStdio runs one MCP session over in/out (stdin and stdout) for the API key
// key, until the client closes the stream or ctx ends. The key is checked first:
// a missing, unknown or revoked key is an error before any message is answered.
func ServeStdio(ctx context.Context, o Options, key string, in io.ReadCloser, out io.WriteCloser) error {
	e, err := newEngine(o)
	if err != nil {
		return err
	}
	if strings.TrimSpace(key) == "" {
		return errors.New("ENGRAM_API_KEY is not set: the MCP server acts with an API key (create one with `engram keys create`)")
	}
	if _, err := server.Authenticate(ctx, e.keys, key); err != nil {
		return fmt.Errorf("ENGRAM_API_KEY: %s", connectMessage(err))
	}
	e.stdioKey = strings.TrimSpace(key)
	return e.server().Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
}
