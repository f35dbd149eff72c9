package write

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// pinSchema returns the reference a write keeps using from record to commit: the
// tenant's latest stored version ("travel@3") or the built-in ("travel@builtin"), so
// a PutSchema while a write waits for review does not change the rules under it, and
// no later step looks the schema up again.
func (a *MemoryActivities) pinSchema(ctx context.Context, tenantID, name string) (string, error) {
	if _, v := schema.SplitRef(name); v > 0 {
		return name, nil
	}
	if strings.HasSuffix(name, schema.BuiltinSuffix) {
		return name, nil
	}
	m := memoOf(ctx)
	if m != nil {
		if p, ok := m.pinned[[2]string{tenantID, name}]; ok {
			return p, nil
		}
	}
	pinned := name + schema.BuiltinSuffix
	sc, err := a.Store.GetSchema(ctx, tenantID, name, 0)
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case err != nil:
		return "", err
	default:
		pinned = fmt.Sprintf("%s@%d", name, sc.Version)
	}
	if m != nil {
		m.pinned[[2]string{tenantID, name}] = pinned
	}
	return pinned, nil
}

// schemaFor resolves a schema reference for a tenant.
func (a *MemoryActivities) schemaFor(ctx context.Context, tenantID, ref string) (*schema.Schema, error) {
	return a.Schemas(schema.WithTenant(ctx, tenantID), ref)
}
