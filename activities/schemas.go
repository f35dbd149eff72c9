package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

type tenantKey struct{}

// WithTenant tells a SchemaSource whose schemas to look at.
func WithTenant(ctx context.Context, tenantID string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenantID)
}

func tenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// builtinSuffix pins a write to the built-in schema of that name ("travel@builtin"),
// so later steps resolve it without asking the database.
const builtinSuffix = "@builtin"

// SplitSchemaRef splits "travel@3" into name and version (0: none given; also for
// "travel@builtin").
func SplitSchemaRef(ref string) (string, int) {
	name, v, ok := strings.Cut(ref, "@")
	if !ok {
		return ref, 0
	}
	if "@"+v == builtinSuffix {
		return name, 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return ref, 0
	}
	return name, n
}

// StoredSchemas resolves "name" or "name@version": the tenant's schema stored with
// PutSchema when it has one (the tenant comes from WithTenant), otherwise the
// built-in schema of that name. Loaded schemas are cached by tenant, name and
// version, which never change once stored.
func StoredSchemas(st *storage.Store) SchemaSource {
	var cache sync.Map
	return func(ctx context.Context, ref string) (*schema.Schema, error) {
		name, version := SplitSchemaRef(ref)
		if strings.HasSuffix(ref, builtinSuffix) {
			return schema.Builtin(name)
		}
		tenant := tenantFrom(ctx)
		if tenant != "" && st != nil {
			if version > 0 {
				if s, ok := cache.Load(fmt.Sprintf("%s\x1f%s\x1f%d", tenant, name, version)); ok {
					return s.(*schema.Schema), nil
				}
			}
			sc, err := st.GetSchema(ctx, tenant, name, version)
			switch {
			case err == nil:
				key := fmt.Sprintf("%s\x1f%s\x1f%d", tenant, name, sc.Version)
				if s, ok := cache.Load(key); ok {
					return s.(*schema.Schema), nil
				}
				s, err := schema.Load([]byte(sc.Source))
				if err != nil {
					return nil, fmt.Errorf("stored schema %s@%d: %w", name, sc.Version, err)
				}
				s.Version = sc.Version // facts record the version they were written under
				cache.Store(key, s)
				return s, nil
			case !errors.Is(err, storage.ErrNotFound):
				return nil, fmt.Errorf("load schema %s: %w", name, err)
			case version > 0:
				return nil, fmt.Errorf("schema %s has no stored version %d", name, version)
			}
		}
		return schema.Builtin(name)
	}
}

// pinSchema returns the reference a write keeps using from record to commit: the
// tenant's latest stored version ("travel@3") or the built-in ("travel@builtin"), so
// a PutSchema while a write waits for review does not change the rules under it, and
// no later step looks the schema up again.
func (a *MemoryActivities) pinSchema(ctx context.Context, tenantID, name string) (string, error) {
	if _, v := SplitSchemaRef(name); v > 0 {
		return name, nil
	}
	if strings.HasSuffix(name, builtinSuffix) {
		return name, nil
	}
	sc, err := a.Store.GetSchema(ctx, tenantID, name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return name + builtinSuffix, nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s@%d", name, sc.Version), nil
}

// schemaFor resolves a schema reference for a tenant.
func (a *MemoryActivities) schemaFor(ctx context.Context, tenantID, ref string) (*schema.Schema, error) {
	return a.Schemas(WithTenant(ctx, tenantID), ref)
}
