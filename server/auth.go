package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/engramhq/engram/storage"
)

// Principal is who calls, resolved from the API key. The tenant always comes from
// here, never from a request.
type Principal struct {
	KeyID        string
	TenantID     string
	Name         string
	Roles        []string
	UserID       string   // the user the key is bound to, if any
	DepartmentID string   // the department the key is bound to, if any
	AgentID      string   // the agent the key is bound to, if any
	AllowedUsers []string // further users an agent key may act for
}

// Has reports whether the principal holds role. Admin holds every role within its
// tenant.
func (p *Principal) Has(role string) bool {
	return slices.Contains(p.Roles, role) || slices.Contains(p.Roles, storage.RoleAdmin)
}

// Restricted reports whether the principal may act for some users only. A key that
// names neither a bound user nor allowed users may act for any user of its tenant;
// reviewers and admins are never restricted.
func (p *Principal) Restricted() bool {
	if p.Has(storage.RoleReviewer) {
		return false
	}
	return p.UserID != "" || len(p.AllowedUsers) > 0
}

// MayActFor reports whether the principal may write or read memory of user.
func (p *Principal) MayActFor(user string) bool {
	if !p.Restricted() {
		return true
	}
	return user == p.UserID || slices.Contains(p.AllowedUsers, user)
}

// Users is the set of users a restricted principal may act for.
func (p *Principal) Users() []string {
	var out []string
	if p.UserID != "" {
		out = append(out, p.UserID)
	}
	for _, u := range p.AllowedUsers {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

type principalKey struct{}

// PrincipalFrom returns the authenticated principal of a request.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p (for tests of code below the interceptor).
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// KeyResolver resolves an API key string to its record.
type KeyResolver interface {
	LookupAPIKey(ctx context.Context, key string) (*storage.APIKey, error)
}

// require returns the principal when it holds one of roles, PERMISSION_DENIED
// otherwise.
func require(ctx context.Context, what string, roles ...string) (*Principal, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no API key"))
	}
	for _, r := range roles {
		if p.Has(r) {
			return p, nil
		}
	}
	return nil, connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("%s needs the %s role; the key of %q has %s", what, strings.Join(roles, " or "), p.Name, strings.Join(p.Roles, ", ")))
}

// userFor returns the user a request acts for: the request's, or the key's bound
// user when the request names none; PERMISSION_DENIED when the key may not act for
// that user, INVALID_ARGUMENT (naming field) when there is none.
func userFor(p *Principal, field, requested string) (string, error) {
	u := strings.TrimSpace(requested)
	if u == "" {
		u = p.UserID
	}
	if u == "" {
		return "", fieldErr(field, "is empty: name the user (the API key is not bound to one)")
	}
	if !p.MayActFor(u) {
		return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("the key of %q may not act for user %q (allowed: %s)", p.Name, u, strings.Join(p.Users(), ", ")))
	}
	return u, nil
}

// bound returns the request's value for a field the key may bind (agent,
// department): the key's value when the request has none; PERMISSION_DENIED when
// they differ.
func bound(p *Principal, field, keyValue, requested string) (string, error) {
	requested = strings.TrimSpace(requested)
	if keyValue == "" || p.Has(storage.RoleReviewer) {
		return requested, nil
	}
	if requested == "" || requested == keyValue {
		return keyValue, nil
	}
	return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: the key of %q is bound to %q, not %q", field, p.Name, keyValue, requested))
}
