package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Fact is one revision of a governed memory. A change never overwrites a row: it
// writes revision n+1 and closes revision n.
type Fact struct {
	bun.BaseModel `bun:"table:facts"`

	TenantID          string            `bun:"tenant_id,notnull"`
	ID                string            `bun:"id,pk,type:uuid"`
	MemoryKey         string            `bun:"memory_key,notnull"`
	Revision          int               `bun:"revision,notnull"`
	OwnerType         string            `bun:"owner_type,notnull"`
	OwnerID           string            `bun:"owner_id,notnull"`
	Scope             memory.Scope      `bun:"scope,notnull"`
	DepartmentID      string            `bun:"department_id,notnull"`
	UserID            string            `bun:"user_id,notnull"`
	AgentID           string            `bun:"agent_id,notnull"`
	SessionID         string            `bun:"session_id,notnull"`
	TaskID            string            `bun:"task_id,notnull"`
	MemoryType        memory.MemoryType `bun:"memory_type,notnull"`
	Subject           string            `bun:"subject,notnull"`
	Predicate         string            `bun:"predicate,notnull"`
	Object            string            `bun:"object,notnull"`
	Content           string            `bun:"content,notnull"`
	Attributes        json.RawMessage   `bun:"attributes,type:jsonb,notnull"`
	EntityType        string            `bun:"entity_type,notnull"`
	EntityID          string            `bun:"entity_id,notnull"`
	Status            memory.FactStatus `bun:"status,notnull"`
	Origin            memory.Origin     `bun:"origin,notnull"`
	Confidence        float64           `bun:"confidence,notnull"`
	Importance        float64           `bun:"importance,notnull"`
	ValidFrom         time.Time         `bun:"valid_from,notnull"`
	ValidUntil        *time.Time        `bun:"valid_until"`
	ObservedAt        time.Time         `bun:"observed_at,notnull"`
	SupersedesID      *string           `bun:"supersedes_id,type:uuid"`
	SourceCandidateID *string           `bun:"source_candidate_id,type:uuid"`
	SchemaName        string            `bun:"schema_name,notnull"`
	SchemaVersion     int               `bun:"schema_version,notnull"`
	Reason            string            `bun:"reason,notnull"`
	KeyID             string            `bun:"key_id,notnull"`
	Embedding         *pgvector.Vector  `bun:"embedding,type:vector(512)"`
	// StatedAt are the times (valid time) the value was stated: the statement
	// that wrote the revision and every duplicate since (empty: ValidFrom alone).
	StatedAt []time.Time `bun:"stated_at,array,nullzero"`
	// RecordedAt is when the memory learned the revision (transaction time).
	RecordedAt time.Time `bun:"recorded_at,nullzero,notnull,default:current_timestamp"`
	// ClosedAt is when the memory stopped holding it as its key's current value
	// (retired_at in the API): when it was superseded, invalidated or expired, or
	// when it was recorded, for a revision that was historical from the start.
	ClosedAt *time.Time `bun:"closed_at"`
	// ChangedAt is since when the memory holds its status and validity as they
	// are (nil: since RecordedAt); the versions before are in fact_versions.
	ChangedAt *time.Time `bun:"changed_at"`
}

// Stated is StatedAt, or ValidFrom when none is recorded.
func (f *Fact) Stated() []time.Time {
	if len(f.StatedAt) == 0 {
		return []time.Time{f.ValidFrom}
	}
	return f.StatedAt
}

// ScopeRef returns the fact's scope with its ids.
func (f *Fact) ScopeRef() memory.ScopeRef {
	return memory.ScopeRef{Scope: f.Scope, DepartmentID: f.DepartmentID, UserID: f.UserID, AgentID: f.AgentID, SessionID: f.SessionID, TaskID: f.TaskID}
}

// WriteMode says how a new revision relates to the current one.
type WriteMode int

const (
	// WriteCurrent makes the new revision the ACTIVE one and closes the previous.
	WriteCurrent WriteMode = iota
	// WriteHistorical inserts a revision that was true before the current one (a
	// late-arriving older event); the current revision stays ACTIVE.
	WriteHistorical
)

func (f *Fact) validate() error {
	if err := checkTenant(f.TenantID); err != nil {
		return err
	}
	if strings.TrimSpace(f.MemoryKey) == "" {
		return memory.FieldError{Field: "memory_key", Problem: "is empty"}
	}
	if err := f.ScopeRef().Validate(); err != nil {
		return err
	}
	if !f.MemoryType.Valid() {
		return memory.FieldError{Field: "memory_type", Problem: fmt.Sprintf("unknown value %q", f.MemoryType)}
	}
	if f.Origin == "" {
		f.Origin = memory.OriginStated
	}
	if !f.Origin.Valid() {
		return memory.FieldError{Field: "origin", Problem: fmt.Sprintf("unknown value %q (allowed: STATED, INFERRED)", f.Origin)}
	}
	if strings.TrimSpace(f.Content) == "" {
		return memory.FieldError{Field: "content", Problem: "is empty"}
	}
	if f.Confidence < 0 || f.Confidence > 1 {
		return memory.FieldError{Field: "confidence", Problem: fmt.Sprintf("%.3f is outside [0, 1]", f.Confidence)}
	}
	if f.Importance == 0 {
		f.Importance = 0.5
	}
	if f.Importance < 0 || f.Importance > 1 {
		return memory.FieldError{Field: "importance", Problem: fmt.Sprintf("%.3f is outside [0, 1]", f.Importance)}
	}
	if f.ValidFrom.IsZero() {
		return memory.FieldError{Field: "valid_from", Problem: "is missing"}
	}
	if f.ValidUntil != nil && f.ValidUntil.Before(f.ValidFrom) {
		return memory.FieldError{Field: "valid_until", Problem: "is before valid_from"}
	}
	if f.ObservedAt.IsZero() {
		f.ObservedAt = f.ValidFrom
	}
	if len(f.Attributes) == 0 {
		f.Attributes = json.RawMessage("{}")
	} else if !json.Valid(f.Attributes) {
		return memory.FieldError{Field: "attributes", Problem: "is not valid JSON"}
	}
	return validateEmbedding("embedding", f.Embedding)
}

// LockMemoryKey serialises writers of one memory key until the transaction ends;
// read the existing revisions after taking it so a decision sees the latest state.
func LockMemoryKey(ctx context.Context, tx bun.IDB, tenantID, memoryKey string) error {
	return lockKey(ctx, tx, tenantID, memoryKey)
}

// lockKey serialises writers of one memory key for the rest of the transaction, so
// concurrent writers never both see "no ACTIVE revision".
func lockKey(ctx context.Context, db bun.IDB, tenantID, memoryKey string) error {
	_, err := db.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", tenantID+"\x1f"+memoryKey)
	return err
}

// CurrentFact returns the ACTIVE revision of a memory key, or ErrNotFound.
func CurrentFact(ctx context.Context, db bun.IDB, tenantID, memoryKey string) (*Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	f := new(Fact)
	return f, notFound(firstPrepared(ctx, db, currentFactSQL, f, tenantID, memoryKey))
}

// currentFactSQL selects the ACTIVE revision of a memory key ($1 tenant, $2 key).
var currentFactSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Fact)(nil)).ExcludeColumn("embedding").
		Where("tenant_id = ? AND memory_key = ? AND status = 'ACTIVE'", p...).String()
})

// WriteFactRevision writes f as the next revision of its memory key inside db,
// which should be a transaction (commit writes everything in one). With
// WriteCurrent the previous ACTIVE revision is closed (SUPERSEDED, valid_until set);
// with WriteHistorical f is stored closed, ending where the next revision begins.
func WriteFactRevision(ctx context.Context, db bun.IDB, tenantID string, f *Fact, mode WriteMode, searchText string) (*Fact, error) {
	return writeFactRevision(ctx, db, tenantID, f, mode, searchText, false)
}

// WriteFactRevisionLocked is WriteFactRevision for a caller that already holds
// LockMemoryKey(f.MemoryKey) in the transaction db (one statement fewer).
func WriteFactRevisionLocked(ctx context.Context, tx bun.Tx, tenantID string, f *Fact, mode WriteMode, searchText string) (*Fact, error) {
	return writeFactRevision(ctx, tx, tenantID, f, mode, searchText, true)
}

func writeFactRevision(ctx context.Context, db bun.IDB, tenantID string, f *Fact, mode WriteMode, searchText string, locked bool) (*Fact, error) {
	f.TenantID = tenantID
	if err := f.validate(); err != nil {
		return nil, err
	}
	if !locked {
		if err := lockKey(ctx, db, tenantID, f.MemoryKey); err != nil {
			return nil, fmt.Errorf("lock memory key: %w", err)
		}
	}
	maxRev, err := maxRevision(ctx, db, tenantID, f.MemoryKey)
	if err != nil {
		return nil, err
	}
	f.Revision = maxRev + 1
	now := time.Now().UTC()
	switch mode {
	case WriteCurrent:
		cur, err := CurrentFact(ctx, db, tenantID, f.MemoryKey)
		if err != nil && err != ErrNotFound {
			return nil, err
		}
		if err == nil {
			end := f.ValidFrom
			if end.Before(cur.ValidFrom) {
				end = cur.ValidFrom
			}
			if _, err := db.NewUpdate().Model((*Fact)(nil)).
				Set("status = 'SUPERSEDED', valid_until = ?, closed_at = ?", end, now).
				Where("tenant_id = ? AND id = ?", tenantID, cur.ID).Exec(ctx); err != nil {
				return nil, fmt.Errorf("close revision %d: %w", cur.Revision, err)
			}
			f.SupersedesID = &cur.ID
		}
		if f.Status == "" {
			f.Status = memory.FactActive
		}
	case WriteHistorical:
		// The historical revision ends where governance said (the next statement of
		// another value); without an end, where the first later live revision begins.
		if f.ValidUntil == nil {
			var next Fact
			err := db.NewSelect().Model(&next).Column("id", "valid_from").
				Where("tenant_id = ? AND memory_key = ? AND valid_from > ? AND status IN ('ACTIVE', 'SUPERSEDED')", tenantID, f.MemoryKey, f.ValidFrom).
				Order("valid_from ASC").Limit(1).Scan(ctx)
			if err == nil {
				vu := next.ValidFrom
				f.ValidUntil = &vu
			} else if notFound(err) != ErrNotFound {
				return nil, fmt.Errorf("find next revision: %w", err)
			}
		}
		if f.Status == "" || f.Status == memory.FactActive {
			f.Status = memory.FactSuperseded
		}
		f.ClosedAt = &now
	default:
		return nil, fmt.Errorf("unknown write mode %d", mode)
	}
	if !f.Status.Valid() {
		return nil, memory.FieldError{Field: "status", Problem: fmt.Sprintf("unknown value %q", f.Status)}
	}
	if len(f.StatedAt) == 0 {
		f.StatedAt = []time.Time{f.ValidFrom}
	}
	q := db.NewInsert().Model(f).Value("search", "to_tsvector('english', ?)", searchText).Returning("id, recorded_at")
	if f.ID == "" {
		q = q.ExcludeColumn("id")
	}
	if _, err := q.Exec(ctx); err != nil {
		return nil, fmt.Errorf("insert fact revision: %w", err)
	}
	return f, nil
}

// maxRevision is the key's highest revision number, 0 for none.
func maxRevision(ctx context.Context, db bun.IDB, tenantID, memoryKey string) (int, error) {
	var maxRev int
	if err := selectPrepared(ctx, db, maxRevisionSQL, &maxRev, tenantID, memoryKey); err != nil {
		return 0, fmt.Errorf("read revisions: %w", err)
	}
	return maxRev, nil
}

// maxRevisionSQL is the highest revision of a memory key ($1 tenant, $2 key).
var maxRevisionSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Fact)(nil)).ColumnExpr("coalesce(max(revision), 0)").
		Where("tenant_id = ? AND memory_key = ?", p...).String()
})

// WriteFact is WriteFactRevision in its own transaction.
func (s *Store) WriteFact(ctx context.Context, tenantID string, f *Fact, mode WriteMode, searchText string) (*Fact, error) {
	var out *Fact
	err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var err error
		out, err = WriteFactRevision(ctx, tx, tenantID, f, mode, searchText)
		return err
	})
	return out, err
}

// CloseFact ends the ACTIVE revision of a key with the given status (INVALIDATED
// on retraction, EXPIRED when its validity passed) at time at.
func CloseFact(ctx context.Context, db bun.IDB, tenantID, memoryKey string, status memory.FactStatus, at time.Time, reason string) (*Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if status != memory.FactInvalidated && status != memory.FactExpired {
		return nil, memory.FieldError{Field: "status", Problem: fmt.Sprintf("%q cannot close a fact (allowed: INVALIDATED, EXPIRED)", status)}
	}
	if err := lockKey(ctx, db, tenantID, memoryKey); err != nil {
		return nil, err
	}
	cur, err := CurrentFact(ctx, db, tenantID, memoryKey)
	if err != nil {
		return nil, err
	}
	end := at
	if end.Before(cur.ValidFrom) {
		end = cur.ValidFrom
	}
	if cur.ValidUntil != nil && cur.ValidUntil.Before(end) {
		end = *cur.ValidUntil
	}
	now := time.Now().UTC()
	_, err = db.NewUpdate().Model((*Fact)(nil)).
		Set("status = ?, valid_until = ?, closed_at = ?, reason = ?", status, end, now, reason).
		Where("tenant_id = ? AND id = ?", tenantID, cur.ID).Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("close fact: %w", err)
	}
	cur.Status, cur.ValidUntil, cur.ClosedAt, cur.Reason = status, &end, &now, reason
	return cur, nil
}

// LinkFactEvidence records that evidence supports (or conflicts with) a fact.
func LinkFactEvidence(ctx context.Context, db bun.IDB, tenantID, factID, evidenceID string, rel memory.EvidenceRelation) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if rel == "" {
		rel = memory.RelSupport
	}
	_, err := db.NewRaw("INSERT INTO fact_evidence (tenant_id, fact_id, evidence_id, relation) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
		tenantID, factID, evidenceID, string(rel)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("link fact evidence: %w", err)
	}
	return nil
}

// FactEvidenceIDs lists the evidence ids behind a fact.
func (s *Store) FactEvidenceIDs(ctx context.Context, tenantID, factID string) ([]string, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var ids []string
	err := s.conn(ctx).NewSelect().Table("fact_evidence").Column("evidence_id").
		Where("tenant_id = ? AND fact_id = ?", tenantID, factID).Order("created_at").Scan(ctx, &ids)
	return ids, err
}

// GetFact loads one fact revision of the tenant.
func (s *Store) GetFact(ctx context.Context, tenantID, id string) (*Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	f := new(Fact)
	err := s.conn(ctx).NewSelect().Model(f).ExcludeColumn("embedding").Where("tenant_id = ? AND id = ?", tenantID, id).Scan(ctx)
	if err != nil {
		return f, notFound(err)
	}
	f.Content, err = s.DecryptContent(f.KeyID, f.Content)
	return f, err
}

// FactHistory returns every revision of a memory key, oldest first by validity.
func (s *Store) FactHistory(ctx context.Context, tenantID, memoryKey string) ([]Fact, error) {
	return s.FactHistoryRestricted(ctx, tenantID, memoryKey, nil)
}

// FactHistoryRestricted is FactHistory limited further by restrict (e.g. to the
// users an API key may read); nil restricts nothing beyond the tenant.
func (s *Store) FactHistoryRestricted(ctx context.Context, tenantID, memoryKey string, restrict func(*bun.SelectQuery) *bun.SelectQuery) ([]Fact, error) {
	return s.FactHistoryKnownAt(ctx, tenantID, memoryKey, time.Time{}, restrict)
}

// FactHistoryKnownAt is FactHistoryRestricted as the memory held the key at
// knownAt (zero: now): the revisions recorded by then, with the status and
// validity they had.
func (s *Store) FactHistoryKnownAt(ctx context.Context, tenantID, memoryKey string, knownAt time.Time, restrict func(*bun.SelectQuery) *bun.SelectQuery) ([]Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Fact
	q := FactFilter{KnownAt: knownAt}.from(s.conn(ctx), s.conn(ctx).NewSelect().Model(&out).ExcludeColumn("embedding"), tenantID).
		Where("tenant_id = ? AND memory_key = ?", tenantID, memoryKey)
	if restrict != nil {
		q = restrict(q)
	}
	if err := q.Order("valid_from ASC", "revision ASC").Scan(ctx); err != nil {
		return nil, err
	}
	return out, s.DecryptFacts(out)
}

// FactFilter narrows fact listings. Empty fields do not filter.
type FactFilter struct {
	ID        string
	UserID    string
	TaskID    string
	MemoryKey string
	Predicate string
	Scope     memory.Scope
	Statuses  []memory.FactStatus
	Limit     int
	// KnownAt, when set, reads the revisions as the memory held them then
	// (transaction time): those recorded by then, with the status and validity
	// they had.
	KnownAt time.Time
	// Restrict, when set, narrows the query further (an API key's readable users).
	Restrict func(*bun.SelectQuery) *bun.SelectQuery
}

// whereEq adds "column = v" to q unless v is empty.
func whereEq[T ~string](q *bun.SelectQuery, column string, v T) *bun.SelectQuery {
	if v == "" {
		return q
	}
	return q.Where("? = ?", bun.Ident(column), v)
}

func (ff FactFilter) apply(q *bun.SelectQuery) *bun.SelectQuery {
	if ff.ID != "" {
		q = q.Where("id = ?", ff.ID)
	}
	if ff.Restrict != nil {
		q = ff.Restrict(q)
	}
	q = whereEq(q, "user_id", ff.UserID)
	q = whereEq(q, "task_id", ff.TaskID)
	q = whereEq(q, "memory_key", ff.MemoryKey)
	q = whereEq(q, "predicate", ff.Predicate)
	q = whereEq(q, "scope", ff.Scope)
	if len(ff.Statuses) > 0 {
		q = q.Where("status IN (?)", bun.In(ff.Statuses))
	}
	limit := ff.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return q.Limit(int64(limit))
}

// ListFacts lists facts of the tenant, newest first.
func (s *Store) ListFacts(ctx context.Context, tenantID string, ff FactFilter) ([]Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Fact
	q := ff.from(s.conn(ctx), s.conn(ctx).NewSelect().Model(&out).ExcludeColumn("embedding"), tenantID).Where("tenant_id = ?", tenantID)
	if err := ff.apply(q).Order("recorded_at DESC", "revision DESC").Scan(ctx); err != nil {
		return nil, err
	}
	return out, s.DecryptFacts(out)
}

// FactsAsOf returns the revisions that were valid at time t: valid_from <= t and
// (valid_until is null or valid_until > t). A retracted fact was believed until its
// retraction, so its closed window still answers questions about earlier times.
func (s *Store) FactsAsOf(ctx context.Context, tenantID string, t time.Time, ff FactFilter) ([]Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if t.IsZero() {
		return nil, memory.FieldError{Field: "as_of", Problem: "is missing"}
	}
	var out []Fact
	q := ff.from(s.conn(ctx), s.conn(ctx).NewSelect().Model(&out).ExcludeColumn("embedding"), tenantID).
		Where("tenant_id = ?", tenantID).
		Where("valid_from <= ?", t).
		Where("(valid_until IS NULL OR valid_until > ?)", t)
	if err := ff.apply(q).Order("memory_key", "revision DESC").Scan(ctx); err != nil {
		return nil, err
	}
	return out, s.DecryptFacts(out)
}

// Revisions lists every revision of a memory key through db (a transaction when the
// caller holds the key's lock).
func Revisions(ctx context.Context, db bun.IDB, tenantID, memoryKey string) ([]Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Fact
	err := selectPrepared(ctx, db, revisionsSQL, &out, tenantID, memoryKey)
	return out, err
}

// revisionsSQL selects every revision of a memory key ($1 tenant, $2 key).
var revisionsSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Fact)(nil)).ExcludeColumn("embedding").
		Where("tenant_id = ? AND memory_key = ?", p...).
		Order("valid_from ASC", "revision ASC").String()
})

// ActiveBySubjectPredicate lists ACTIVE facts of one subject and predicate that a
// user can see (any scope), so governance can show broader-scope values that stay.
func ActiveBySubjectPredicate(ctx context.Context, db bun.IDB, tenantID, userID, subject, predicate string) ([]Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Fact
	err := selectPrepared(ctx, db, activeBySubjectPredicateSQL, &out, tenantID, predicate, subject, userID)
	return out, err
}

// activeBySubjectPredicateSQL selects the ACTIVE facts of a tenant ($1),
// predicate ($2) and subject ($3) that a user ($4) can see.
var activeBySubjectPredicateSQL = statementText(4, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Fact)(nil)).ExcludeColumn("embedding").
		Where("tenant_id = ? AND status = 'ACTIVE' AND predicate = ? AND lower(subject) = lower(?)", p[:3]...).
		Where("(user_id = ? OR scope IN ('TENANT', 'DEPARTMENT'))", p[3]).
		Limit(50).String()
})

// SetFactEmbedding stores a fact's vector.
func (s *Store) SetFactEmbedding(ctx context.Context, tenantID, factID string, v pgvector.Vector) error {
	if err := validateEmbedding("embedding", &v); err != nil {
		return err
	}
	_, err := s.conn(ctx).NewUpdate().Model((*Fact)(nil)).Set("embedding = ?", v).
		Where("tenant_id = ? AND id = ?", tenantID, factID).Exec(ctx)
	return err
}

// SetEvidenceEmbeddings sets the vectors of many turns of the tenant in one
// statement: one statement-level trigger run and one round trip for all, where
// SetEvidenceEmbedding for each ran them per turn (2.5 ms a turn of Postgres's
// time when a batch's Index steps set 3,000: pg_stat_statements).
func (s *Store) SetEvidenceEmbeddings(ctx context.Context, tenantID string, ids []string, vs []pgvector.Vector) error {
	if len(ids) != len(vs) {
		return fmt.Errorf("storage: %d evidence ids for %d vectors", len(ids), len(vs))
	}
	if len(ids) == 0 {
		return nil
	}
	texts := make([]string, len(vs))
	for i := range vs {
		if err := validateEmbedding(fmt.Sprintf("embeddings[%d]", i), &vs[i]); err != nil {
			return err
		}
		texts[i] = vs[i].String()
	}
	_, err := s.conn(ctx).NewRaw(`UPDATE evidence e SET embedding = d.v
		FROM unnest(?::uuid[], ?::vector[]) AS d(id, v)
		WHERE e.tenant_id = ? AND e.id = d.id`, TextArray(ids), TextArray(texts), tenantID).Exec(ctx)
	return err
}

// ErrFactNotActive is returned by InvalidateFact for a revision that is neither
// ACTIVE nor already INVALIDATED (superseded or expired).
var ErrFactNotActive = errors.New("only the ACTIVE revision can be invalidated")

// InvalidateFact closes the ACTIVE fact revision id as INVALIDATED (valid until now,
// or its valid_from when that is later) with reason, and queues it for the search
// index, in one transaction under the memory key's lock. It is idempotent: a fact
// already INVALIDATED is returned unchanged. It returns ErrNotFound for an unknown
// id and ErrFactNotActive, with the fact, for another status. The fact's content is
// returned as stored.
func (s *Store) InvalidateFact(ctx context.Context, tenantID, id, reason string) (*Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	f := new(Fact)
	load := func(ctx context.Context, tx bun.Tx) error {
		return tx.NewSelect().Model(f).ExcludeColumn("embedding").Where("tenant_id = ? AND id = ?", tenantID, id).Scan(ctx)
	}
	err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := load(ctx, tx); err != nil {
			return notFound(err)
		}
		if err := lockKey(ctx, tx, tenantID, f.MemoryKey); err != nil {
			return err
		}
		if err := load(ctx, tx); err != nil { // as it is now that the key is ours
			return err
		}
		if f.Status == memory.FactInvalidated {
			return nil
		}
		if f.Status != memory.FactActive {
			return ErrFactNotActive
		}
		now := time.Now().UTC()
		until := now
		if until.Before(f.ValidFrom) {
			until = f.ValidFrom
		}
		if _, err := tx.NewUpdate().Model((*Fact)(nil)).
			Set("status = ?, valid_until = ?, closed_at = ?, reason = ?", memory.FactInvalidated, until, now, reason).
			Where("tenant_id = ? AND id = ?", tenantID, f.ID).Exec(ctx); err != nil {
			return fmt.Errorf("invalidate fact: %w", err)
		}
		if err := EnqueueFact(ctx, tx, tenantID, f.ID); err != nil {
			return fmt.Errorf("write outbox: %w", err)
		}
		f.Status, f.ValidUntil, f.ClosedAt, f.Reason = memory.FactInvalidated, &until, &now, reason
		return nil
	})
	return f, err
}

// VisibleTo narrows fact queries to what a key restricted to users may read: those
// users' facts and, among facts without a user, the tenant-wide ones, its
// department's (departmentID) and its agent's (agentID). For FactFilter.Restrict.
func VisibleTo(users []string, departmentID, agentID string) func(*bun.SelectQuery) *bun.SelectQuery {
	return func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("(user_id IN (?) OR (user_id = '' AND (scope = 'TENANT' OR (scope = 'DEPARTMENT' AND department_id <> '' AND department_id = ?) OR (scope = 'AGENT' AND agent_id <> '' AND agent_id = ?))))",
			bun.In(users), departmentID, agentID)
	}
}
