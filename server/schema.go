package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

type schemaServer struct{ Deps }

// MaxSchemaBytes bounds one schema document.
const MaxSchemaBytes = 256 << 10

func (s *schemaServer) GetSchema(ctx context.Context, req *connect.Request[engramv1.GetSchemaRequest]) (*connect.Response[engramv1.GetSchemaResponse], error) {
	p, err := require(ctx, "GetSchema", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.Msg.Name)
	if name == "" {
		return nil, fieldErr("name", "is empty")
	}
	if req.Msg.Version < 0 {
		return nil, fieldErr("version", "is negative")
	}
	var versions []int
	var stored *storage.StoredSchema
	err = s.read(ctx, "get schema", func(ctx context.Context, st *storage.Store) error {
		var err error
		if versions, err = st.SchemaVersions(ctx, p.TenantID, name); err != nil {
			return fmt.Errorf("list schema versions: %w", err)
		}
		stored, err = st.GetSchema(ctx, p.TenantID, name, int(req.Msg.Version))
		switch {
		case errors.Is(err, storage.ErrNotFound):
			stored = nil // a built-in schema, or none
		case err != nil:
			return fmt.Errorf("load schema: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	out := &engramv1.GetSchemaResponse{}
	for _, v := range versions {
		out.Versions = append(out.Versions, int32(v))
	}
	if stored != nil {
		out.Schema = storedOut(stored)
		return connect.NewResponse(out), nil
	}
	src, ok := schema.BuiltinSource(name)
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("name: no schema %q (built-in: %s)", name, strings.Join(schema.BuiltinNames(), ", ")))
	}
	b, err := schema.Builtin(name)
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	if req.Msg.Version != 0 && int(req.Msg.Version) != b.Version {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("version: schema %q has no version %d", name, req.Msg.Version))
	}
	out.Schema = &engramv1.SchemaInfo{Name: name, Version: int32(b.Version), Builtin: true, Source: string(src), Description: b.Description}
	return connect.NewResponse(out), nil
}

func storedOut(st *storage.StoredSchema) *engramv1.SchemaInfo {
	return &engramv1.SchemaInfo{Name: st.Name, Version: int32(st.Version), Source: st.Source, CreatedBy: st.CreatedBy, CreatedAt: ts(st.CreatedAt), Description: st.Description}
}

func (s *schemaServer) PutSchema(ctx context.Context, req *connect.Request[engramv1.PutSchemaRequest]) (*connect.Response[engramv1.PutSchemaResponse], error) {
	p, err := require(ctx, "PutSchema", "admin")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	name := strings.TrimSpace(m.Name)
	switch {
	case name == "":
		return nil, fieldErr("name", "is empty")
	case strings.TrimSpace(m.Source) == "":
		return nil, fieldErr("source", "is empty")
	case len(m.Source) > MaxSchemaBytes:
		return nil, fieldErr("source", fmt.Sprintf("is %d bytes, the limit is %d", len(m.Source), MaxSchemaBytes))
	case m.ExpectedVersion != nil && *m.ExpectedVersion < 0:
		return nil, fieldErr("expected_version", "is negative")
	}
	sc, err := schema.Load([]byte(m.Source))
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("source: %w", err))
	}
	if sc.Name != name {
		return nil, fieldErr("name", fmt.Sprintf("%q does not match the document's name %q", name, sc.Name))
	}
	minVersion := 1
	if b, err := schema.Builtin(name); err == nil {
		minVersion = b.Version + 1 // a tenant's copy of a built-in schema continues its numbering
	}
	expected := -1
	if m.ExpectedVersion != nil {
		expected = int(*m.ExpectedVersion)
	}
	st := &storage.StoredSchema{Name: name, Source: m.Source, Description: sc.Description, CreatedBy: p.Name}
	if err := s.Store.PutSchema(ctx, p.TenantID, st, minVersion, expected); err != nil {
		return nil, toConnect(ctx, err)
	}
	s.Logger.InfoContext(ctx, "schema stored", "tenant", p.TenantID, "schema", name, "version", st.Version, "principal", p.Name)
	return connect.NewResponse(&engramv1.PutSchemaResponse{Schema: storedOut(st)}), nil
}

func (s *schemaServer) SuggestSchemaChanges(ctx context.Context, req *connect.Request[engramv1.SuggestSchemaChangesRequest]) (*connect.Response[engramv1.SuggestSchemaChangesResponse], error) {
	p, err := require(ctx, "SuggestSchemaChanges", "reviewer")
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.Msg.Name)
	if name == "" {
		return nil, fieldErr("name", "is empty")
	}
	// What the extractor produced in the last 30 days that the schema lacks, seen at
	// least twice, for the caller's tenant only.
	var all []lifecycle.SchemaSuggestion
	err = s.read(ctx, "suggest schema changes", func(ctx context.Context, st *storage.Store) (err error) {
		all, err = lifecycle.SuggestSchemaChanges(ctx, st, schema.Builtins, p.TenantID, time.Now().Add(-30*24*time.Hour), 2)
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("schema suggestions: %w", err))
	}
	out := &engramv1.SuggestSchemaChangesResponse{}
	for _, sg := range all {
		if sg.Schema != name {
			continue
		}
		field, desc := "predicates", fmt.Sprintf("add predicate %q", sg.Predicate)
		if sg.Kind == "attribute" {
			field = "predicates." + sg.Predicate + ".attributes"
			desc = fmt.Sprintf("add attribute %q to predicate %q", sg.Attribute, sg.Predicate)
		}
		if len(sg.Examples) > 0 {
			desc += "; e.g. " + strings.Join(sg.Examples, " | ")
		}
		out.Suggestions = append(out.Suggestions, &engramv1.SchemaSuggestion{Field: field, Description: desc, Occurrences: int64(sg.Count)})
	}
	if len(out.Suggestions) == 0 {
		out.Note = "nothing to suggest: in the last 30 days the extractor produced nothing (seen twice or more) that schema " + name + " lacks"
	}
	return connect.NewResponse(out), nil
}
