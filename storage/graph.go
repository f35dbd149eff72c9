package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Entity is an instance of a schema entity type (User, Order, ServiceTicket, …).
type Entity struct {
	bun.BaseModel `bun:"table:entities"`

	TenantID   string          `bun:"tenant_id,pk"`
	Type       string          `bun:"type,pk"`
	ID         string          `bun:"id,pk"`
	UserID     string          `bun:"user_id,notnull"`
	State      string          `bun:"state,notnull"`
	Attributes json.RawMessage `bun:"attributes,type:jsonb,notnull"`
	CreatedAt  time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt  time.Time       `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// Edge is a typed relationship between two entities.
type Edge struct {
	bun.BaseModel `bun:"table:edges"`

	TenantID   string          `bun:"tenant_id,notnull"`
	ID         int64           `bun:"id,pk,autoincrement"`
	Type       string          `bun:"type,notnull"`
	FromType   string          `bun:"from_type,notnull"`
	FromID     string          `bun:"from_id,notnull"`
	ToType     string          `bun:"to_type,notnull"`
	ToID       string          `bun:"to_id,notnull"`
	UserID     string          `bun:"user_id,notnull"`
	Attributes json.RawMessage `bun:"attributes,type:jsonb,notnull"`
	ValidFrom  time.Time       `bun:"valid_from,notnull"`
	ValidUntil *time.Time      `bun:"valid_until"`
	EvidenceID *string         `bun:"evidence_id,type:uuid"`
	CreatedAt  time.Time       `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// UpsertEntity creates an entity or merges into it: attributes are merged, a
// non-empty state replaces the stored one.
func UpsertEntity(ctx context.Context, db bun.IDB, tenantID string, e *Entity) error {
	e.TenantID = tenantID
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if strings.TrimSpace(e.Type) == "" {
		return memory.FieldError{Field: "entity.type", Problem: "is empty"}
	}
	if strings.TrimSpace(e.ID) == "" {
		return memory.FieldError{Field: "entity.id", Problem: "is empty"}
	}
	if len(e.Attributes) == 0 {
		e.Attributes = json.RawMessage("{}")
	} else if !json.Valid(e.Attributes) {
		return memory.FieldError{Field: "entity.attributes", Problem: "is not valid JSON"}
	}
	_, err := db.NewInsert().Model(e).
		On("CONFLICT (tenant_id, type, id) DO UPDATE").
		Set("state = CASE WHEN EXCLUDED.state <> '' THEN EXCLUDED.state ELSE entity.state END").
		Set("user_id = CASE WHEN entity.user_id = '' THEN EXCLUDED.user_id ELSE entity.user_id END").
		Set("attributes = entity.attributes || EXCLUDED.attributes").
		Set("updated_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert entity %s/%s: %w", e.Type, e.ID, err)
	}
	return nil
}

// UpsertEdge records a relationship, creating bare endpoint entities when missing.
func UpsertEdge(ctx context.Context, db bun.IDB, tenantID string, e *Edge) error {
	e.TenantID = tenantID
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	for field, v := range map[string]string{"edge.type": e.Type, "edge.from_type": e.FromType, "edge.from_id": e.FromID, "edge.to_type": e.ToType, "edge.to_id": e.ToID} {
		if strings.TrimSpace(v) == "" {
			return memory.FieldError{Field: field, Problem: "is empty"}
		}
	}
	for _, end := range [][2]string{{e.FromType, e.FromID}, {e.ToType, e.ToID}} {
		if err := UpsertEntity(ctx, db, tenantID, &Entity{Type: end[0], ID: end[1], UserID: e.UserID}); err != nil {
			return err
		}
	}
	if len(e.Attributes) == 0 {
		e.Attributes = json.RawMessage("{}")
	}
	if e.ValidFrom.IsZero() {
		e.ValidFrom = time.Now().UTC()
	}
	_, err := db.NewInsert().Model(e).
		On("CONFLICT (tenant_id, type, from_type, from_id, to_type, to_id) DO UPDATE").
		Set("attributes = edge.attributes || EXCLUDED.attributes").
		Set("evidence_id = coalesce(edge.evidence_id, EXCLUDED.evidence_id)").
		Returning("id").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert edge: %w", err)
	}
	return nil
}

// GetEntity loads one entity of the tenant.
func (s *Store) GetEntity(ctx context.Context, tenantID, typ, id string) (*Entity, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	e := new(Entity)
	err := s.conn(ctx).NewSelect().Model(e).Where("tenant_id = ? AND type = ? AND id = ?", tenantID, typ, id).Scan(ctx)
	return e, notFound(err)
}

// EntitiesOfUser lists the entities owned by a user (used to resolve references
// such as "the order that never arrived").
func (s *Store) EntitiesOfUser(ctx context.Context, tenantID, userID string, limit int) ([]Entity, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	var out []Entity
	err := selectPrepared(ctx, s.conn(ctx), entitiesOfUserSQL, &out, tenantID, userID, limit)
	return out, err
}

// entitiesOfUserSQL selects a user's entities, latest first ($1 tenant, $2 user,
// $3 limit).
var entitiesOfUserSQL = statementText(3, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Entity)(nil)).Where("tenant_id = ? AND user_id = ?", p[:2]...).
		Order("updated_at DESC").String() + " LIMIT $3"
})

// EdgesFrom lists edges leaving or entering an entity.
func (s *Store) EdgesOf(ctx context.Context, tenantID, typ, id string) ([]Edge, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Edge
	err := s.conn(ctx).NewSelect().Model(&out).
		Where("tenant_id = ?", tenantID).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("from_type = ? AND from_id = ?", typ, id).WhereOr("to_type = ? AND to_id = ?", typ, id)
		}).Order("id").Scan(ctx)
	return out, err
}
