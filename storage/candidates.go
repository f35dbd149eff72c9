package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Candidate is a proposed memory and its governance outcome.
type Candidate struct {
	bun.BaseModel `bun:"table:candidates"`

	TenantID         string                 `bun:"tenant_id,notnull"`
	ID               string                 `bun:"id,pk,type:uuid"`
	EventID          string                 `bun:"event_id,type:uuid,notnull"`
	WorkflowID       string                 `bun:"workflow_id,notnull"`
	MemoryType       memory.MemoryType      `bun:"memory_type,notnull"`
	Scope            memory.Scope           `bun:"scope,notnull"`
	DepartmentID     string                 `bun:"department_id,notnull"`
	UserID           string                 `bun:"user_id,notnull"`
	AgentID          string                 `bun:"agent_id,notnull"`
	SessionID        string                 `bun:"session_id,notnull"`
	TaskID           string                 `bun:"task_id,notnull"`
	MemoryKey        string                 `bun:"memory_key,notnull"`
	Subject          string                 `bun:"subject,notnull"`
	Predicate        string                 `bun:"predicate,notnull"`
	Object           string                 `bun:"object,notnull"`
	Content          string                 `bun:"content,notnull"`
	EntityType       string                 `bun:"entity_type,notnull"`
	EntityID         string                 `bun:"entity_id,notnull"`
	Attributes       json.RawMessage        `bun:"attributes,type:jsonb,notnull"`
	Relations        json.RawMessage        `bun:"relations,type:jsonb,notnull"`
	Confidence       float64                `bun:"confidence,notnull"`
	Origin           memory.Origin          `bun:"origin,notnull"`
	Retraction       bool                   `bun:"retraction,notnull"`
	Extractor        string                 `bun:"extractor,notnull"`
	ExtractorVersion string                 `bun:"extractor_version,notnull"`
	SchemaName       string                 `bun:"schema_name,notnull"`
	SchemaVersion    int                    `bun:"schema_version,notnull"`
	ValidFrom        *time.Time             `bun:"valid_from"`
	ValidUntil       *time.Time             `bun:"valid_until"`
	Status           memory.CandidateStatus `bun:"status,notnull"`
	Action           string                 `bun:"action,notnull"`
	Reason           string                 `bun:"reason,notnull"`
	FactID           *string                `bun:"fact_id,type:uuid"`
	Reviewer         string                 `bun:"reviewer,notnull"`
	ReviewNote       string                 `bun:"review_note,notnull"`
	ReviewedAt       *time.Time             `bun:"reviewed_at"`
	CreatedAt        time.Time              `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt        time.Time              `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

func (c *Candidate) validate() error {
	if err := checkTenant(c.TenantID); err != nil {
		return err
	}
	if c.ID == "" {
		return memory.FieldError{Field: "id", Problem: "is empty (candidate ids are deterministic per workflow)"}
	}
	if c.EventID == "" {
		return memory.FieldError{Field: "event_id", Problem: "is empty"}
	}
	if !c.MemoryType.Valid() {
		return memory.FieldError{Field: "memory_type", Problem: fmt.Sprintf("unknown value %q", c.MemoryType)}
	}
	ref := memory.ScopeRef{Scope: c.Scope, DepartmentID: c.DepartmentID, UserID: c.UserID, AgentID: c.AgentID, SessionID: c.SessionID, TaskID: c.TaskID}
	if err := ref.Validate(); err != nil {
		return err
	}
	if !c.Origin.Valid() {
		return memory.FieldError{Field: "origin", Problem: fmt.Sprintf("unknown value %q (allowed: STATED, INFERRED)", c.Origin)}
	}
	if c.Confidence < 0 || c.Confidence > 1 {
		return memory.FieldError{Field: "confidence", Problem: fmt.Sprintf("%.3f is outside [0, 1]", c.Confidence)}
	}
	if c.Status == "" {
		c.Status = memory.CandidatePending
	}
	if !c.Status.Valid() {
		return memory.FieldError{Field: "status", Problem: fmt.Sprintf("unknown value %q", c.Status)}
	}
	if len(c.Attributes) == 0 {
		c.Attributes = json.RawMessage("{}")
	}
	if len(c.Relations) == 0 {
		c.Relations = json.RawMessage("[]")
	}
	return nil
}

// UpsertCandidate inserts a candidate or, when its id exists (a retried commit),
// updates its governance outcome. Idempotent by candidate id.
func UpsertCandidate(ctx context.Context, db bun.IDB, tenantID string, c *Candidate) error {
	c.TenantID = tenantID
	if err := c.validate(); err != nil {
		return err
	}
	_, err := db.NewInsert().Model(c).
		On("CONFLICT (id) DO UPDATE").
		Set("status = EXCLUDED.status, action = EXCLUDED.action, reason = EXCLUDED.reason, fact_id = EXCLUDED.fact_id, memory_key = EXCLUDED.memory_key, object = EXCLUDED.object, content = EXCLUDED.content, confidence = EXCLUDED.confidence, reviewer = EXCLUDED.reviewer, review_note = EXCLUDED.review_note, reviewed_at = EXCLUDED.reviewed_at, updated_at = now()").
		Where("candidate.tenant_id = EXCLUDED.tenant_id").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert candidate: %w", err)
	}
	return nil
}

// LinkCandidateEvidence links a candidate to evidence.
func LinkCandidateEvidence(ctx context.Context, db bun.IDB, tenantID, candidateID, evidenceID string, rel memory.EvidenceRelation) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if rel != memory.RelSupport && rel != memory.RelConflict && rel != memory.RelReference {
		return memory.FieldError{Field: "relation", Problem: fmt.Sprintf("unknown value %q (allowed: SUPPORT, CONFLICT, REFERENCE)", rel)}
	}
	_, err := db.NewRaw("INSERT INTO candidate_evidence (tenant_id, candidate_id, evidence_id, relation) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
		tenantID, candidateID, evidenceID, string(rel)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("link candidate evidence: %w", err)
	}
	return nil
}

// MarkDecided records a reviewer's verdict on a candidate its write has not
// committed yet (a write commits once every candidate of it is decided): who, the
// note and when. The candidate leaves the pending list (CandidateFilter.Undecided)
// and stays NEEDS_CONFIRMATION until the commit, which records the outcome. A
// candidate already marked or committed is left as it is.
func MarkDecided(ctx context.Context, db bun.IDB, tenantID, id, reviewer, note string) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	_, err := db.NewUpdate().Model((*Candidate)(nil)).
		Set("reviewer = ?, review_note = ?, reviewed_at = now(), updated_at = now()", reviewer, note).
		Where("tenant_id = ? AND id = ? AND status = ? AND reviewed_at IS NULL", tenantID, id, memory.CandidateNeedsConfirmation).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark candidate decided: %w", err)
	}
	return nil
}

// MarkDecided is MarkDecided on the store's connection.
func (s *Store) MarkDecided(ctx context.Context, tenantID, id, reviewer, note string) error {
	return MarkDecided(ctx, s.conn(ctx), tenantID, id, reviewer, note)
}

// GetCandidate loads one candidate of the tenant.
func (s *Store) GetCandidate(ctx context.Context, tenantID, id string) (*Candidate, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	c := new(Candidate)
	err := s.conn(ctx).NewSelect().Model(c).Where("tenant_id = ? AND id = ?", tenantID, id).Scan(ctx)
	return c, notFound(err)
}

// CandidateFilter narrows ListCandidates; empty fields do not filter.
type CandidateFilter struct {
	Status     memory.CandidateStatus
	EventID    string
	WorkflowID string
	UserID     string
	// Undecided leaves out candidates a reviewer has decided (MarkDecided) whose
	// write has not committed them yet: what still awaits a reviewer.
	Undecided bool
	Limit     int // at most this many (capped at 1000); 0: all
}

// ListCandidates lists a tenant's candidates matching f, oldest first.
func (s *Store) ListCandidates(ctx context.Context, tenantID string, f CandidateFilter) ([]Candidate, error) {
	return ListCandidates(ctx, s.conn(ctx), tenantID, f)
}

// ListCandidates is Store.ListCandidates on db (a transaction).
func ListCandidates(ctx context.Context, db bun.IDB, tenantID string, f CandidateFilter) ([]Candidate, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Candidate
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	// One prepared statement per set of filters given (its text is its key).
	args := []any{tenantID, limit}
	cols := []string{}
	for _, c := range []struct{ col, v string }{{"status", string(f.Status)}, {"event_id", f.EventID}, {"workflow_id", f.WorkflowID}, {"user_id", f.UserID}} {
		if c.v != "" {
			cols = append(cols, c.col)
			args = append(args, c.v)
		}
	}
	text := statementText(len(args), func(db bun.IDB, p []any) string {
		q := db.NewSelect().Model((*Candidate)(nil)).Where("tenant_id = ?", p[0])
		for i, c := range cols {
			q = q.Where("? = ?", bun.Ident(c), p[2+i])
		}
		if f.Undecided {
			q = q.Where("reviewed_at IS NULL")
		}
		return q.Order("created_at", "id").String() + " LIMIT $2"
	})
	if err := selectPrepared(ctx, db, text, &out, args...); err != nil {
		return nil, fmt.Errorf("list candidates: %w", err)
	}
	return out, nil
}

// CandidateEvidenceIDs returns the evidence ids linked to each of cands, by
// candidate id, in link order.
func (s *Store) CandidateEvidenceIDs(ctx context.Context, tenantID string, cands []Candidate) (map[string][]string, error) {
	out := map[string][]string{}
	if len(cands) == 0 {
		return out, nil
	}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
	}
	var rows []struct {
		CandidateID string `bun:"candidate_id"`
		EvidenceID  string `bun:"evidence_id"`
	}
	err := s.conn(ctx).NewSelect().Table("candidate_evidence").Column("candidate_id", "evidence_id").
		Where("tenant_id = ? AND candidate_id IN (?)", tenantID, bun.In(ids)).Order("created_at").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load candidate evidence: %w", err)
	}
	for _, r := range rows {
		out[r.CandidateID] = append(out[r.CandidateID], r.EvidenceID)
	}
	return out, nil
}
