package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// StoredSchema is one version of a tenant's domain schema document.
type StoredSchema struct {
	bun.BaseModel `bun:"table:schemas"`

	TenantID    string    `bun:"tenant_id,pk"`
	Name        string    `bun:"name,pk"`
	Version     int       `bun:"version,pk"`
	Source      string    `bun:"source,notnull"`
	Description string    `bun:"description,notnull"`
	CreatedBy   string    `bun:"created_by,notnull"`
	CreatedAt   time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// ErrVersionConflict is returned when the latest stored version is not the expected one.
var ErrVersionConflict = fmt.Errorf("schema version conflict")

// PutSchema stores s as the next version of its name for the tenant (1 when none
// is stored, or minVersion when that is higher, so a tenant's first copy of a
// built-in schema continues its numbering). With expected >= 0 it fails with
// ErrVersionConflict unless the latest stored version is expected.
func (s *Store) PutSchema(ctx context.Context, tenantID string, sc *StoredSchema, minVersion, expected int) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if strings.TrimSpace(sc.Name) == "" {
		return memory.FieldError{Field: "name", Problem: "is empty"}
	}
	sc.TenantID = tenantID
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended(?, 1))", tenantID+"\x1fschema\x1f"+sc.Name); err != nil {
			return err
		}
		var latest int
		if err := tx.NewSelect().Model((*StoredSchema)(nil)).ColumnExpr("coalesce(max(version), 0)").
			Where("tenant_id = ? AND name = ?", tenantID, sc.Name).Scan(ctx, &latest); err != nil {
			return fmt.Errorf("read schema versions: %w", err)
		}
		if expected >= 0 && latest != expected {
			return fmt.Errorf("%w: latest stored version of %q is %d, not %d", ErrVersionConflict, sc.Name, latest, expected)
		}
		sc.Version = max(latest+1, minVersion)
		if _, err := tx.NewInsert().Model(sc).ExcludeColumn("created_at").Returning("created_at").Exec(ctx); err != nil {
			return fmt.Errorf("insert schema: %w", err)
		}
		return nil
	})
}

// GetSchema loads one stored version (version 0: the latest) or ErrNotFound.
func (s *Store) GetSchema(ctx context.Context, tenantID, name string, version int) (*StoredSchema, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	sc := new(StoredSchema)
	if version > 0 {
		return sc, notFound(firstPrepared(ctx, s.conn(ctx), schemaVersionSQL, sc, tenantID, name, version))
	}
	return sc, notFound(firstPrepared(ctx, s.conn(ctx), schemaLatestSQL, sc, tenantID, name))
}

// schemaLatestSQL selects a stored schema's latest version ($1 tenant, $2 name).
var schemaLatestSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*StoredSchema)(nil)).Where("tenant_id = ? AND name = ?", p...).Order("version DESC").Limit(1).String()
})

// schemaVersionSQL selects a stored schema ($1 tenant, $2 name) at a version ($3).
var schemaVersionSQL = statementText(3, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*StoredSchema)(nil)).Where("tenant_id = ? AND name = ? AND version = ?", p...).String()
})

// SchemaVersions lists the stored versions of a schema, ascending.
func (s *Store) SchemaVersions(ctx context.Context, tenantID, name string) ([]int, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []int
	err := s.conn(ctx).NewSelect().Model((*StoredSchema)(nil)).Column("version").
		Where("tenant_id = ? AND name = ?", tenantID, name).Order("version").Scan(ctx, &out)
	return out, err
}

// LookupSchema is GetSchema in the shape schema.Stored asks for: the source text
// and version, found false (and no error) when the tenant stored none.
func (s *Store) LookupSchema(ctx context.Context, tenantID, name string, version int) (string, int, bool, error) {
	sc, err := s.GetSchema(ctx, tenantID, name, version)
	if errors.Is(err, ErrNotFound) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	return sc.Source, sc.Version, true, nil
}
