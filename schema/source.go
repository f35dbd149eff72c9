package schema

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Source resolves a schema reference ("travel", "travel@3", "travel@builtin") for
// the tenant WithTenant put in ctx. The write path, recall and the schema report
// all resolve schemas through one.
type Source func(ctx context.Context, ref string) (*Schema, error)

// BuiltinSuffix pins a reference to the built-in schema of that name
// ("travel@builtin"), so later steps resolve it without asking the database.
const BuiltinSuffix = "@builtin"

type tenantKey struct{}

// WithTenant tells a Source whose schemas to look at.
func WithTenant(ctx context.Context, tenantID string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenantID)
}

// TenantFrom is the tenant WithTenant put in ctx ("" when none).
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// SplitRef splits "travel@3" into name and version (0: none given; also for
// "travel@builtin").
func SplitRef(ref string) (string, int) {
	name, v, ok := strings.Cut(ref, "@")
	if !ok {
		return ref, 0
	}
	if "@"+v == BuiltinSuffix {
		return name, 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return ref, 0
	}
	return name, n
}

// Builtins resolves only the built-in schemas (a "@version" suffix is ignored),
// each parsed once and shared, as Stored shares them (parsing one costs
// milliseconds, and writes and recalls resolve their schema on every step).
func Builtins(_ context.Context, ref string) (*Schema, error) {
	name, _ := SplitRef(ref)
	if s, ok := builtinCache.Load(name); ok {
		return s.(*Schema), nil
	}
	s, err := Builtin(name)
	if err != nil {
		return nil, err
	}
	builtinCache.Store(name, s)
	return s, nil
}

var builtinCache sync.Map // name → *Schema

// Lookup finds a tenant's stored schema source text: version 0 asks for the
// latest. found is false when the tenant stored none of that name (or not that
// version); err is for failures only.
type Lookup func(ctx context.Context, tenantID, name string, version int) (source string, gotVersion int, found bool, err error)

// Stored resolves "name" or "name@version": the tenant's stored schema when it has
// one (the tenant comes from WithTenant), otherwise the built-in schema of that
// name. Loaded schemas are cached by tenant, name and version, which never change
// once stored, and so are the built-ins (parsing one costs milliseconds, and a
// write reads its schema in every step).
func Stored(lookup Lookup) Source {
	var cache sync.Map
	builtin := func(name string) (*Schema, error) { return Builtins(context.Background(), name) }
	return func(ctx context.Context, ref string) (*Schema, error) {
		name, version := SplitRef(ref)
		if strings.HasSuffix(ref, BuiltinSuffix) {
			return builtin(name)
		}
		tenant := TenantFrom(ctx)
		if tenant == "" || lookup == nil {
			return builtin(name)
		}
		if version > 0 {
			if s, ok := cache.Load(fmt.Sprintf("%s\x1f%s\x1f%d", tenant, name, version)); ok {
				return s.(*Schema), nil
			}
		}
		src, got, found, err := lookup(ctx, tenant, name, version)
		switch {
		case err != nil:
			return nil, fmt.Errorf("load schema %s: %w", name, err)
		case !found && version > 0:
			return nil, fmt.Errorf("schema %s has no stored version %d", name, version)
		case !found:
			if _, ok := builtinSource(name); !ok {
				return nil, fmt.Errorf("unknown schema %q: this tenant stored none of that name and it is not built in (built-ins: %s)", name, strings.Join(BuiltinNames(), ", "))
			}
			return builtin(name)
		}
		key := fmt.Sprintf("%s\x1f%s\x1f%d", tenant, name, got)
		if s, ok := cache.Load(key); ok {
			return s.(*Schema), nil
		}
		s, err := Load([]byte(src))
		if err != nil {
			return nil, fmt.Errorf("stored schema %s@%d: %w", name, got, err)
		}
		s.Version = got // facts record the version they were written under
		cache.Store(key, s)
		return s, nil
	}
}
