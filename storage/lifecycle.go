package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/engramhq/engram/memory"
)

// Subjects of an erasure.
const (
	SubjectUser   = "USER"
	SubjectTenant = "TENANT"
)

// Tombstone statuses.
const (
	ErasureRunning = "RUNNING"
	ErasureDone    = "DONE"
)

// ErrErasureInProgress is returned when a write targets a subject being erased.
var ErrErasureInProgress = errors.New("the subject is being erased: new writes are refused until the erasure finishes")

// Tombstone records an erasure: who asked, when, what was removed. It is the only
// row that names the subject after the erasure.
type Tombstone struct {
	bun.BaseModel `bun:"table:tombstones"`

	ID          int64            `bun:"id,pk,autoincrement"`
	TenantID    string           `bun:"tenant_id,notnull"`
	SubjectType string           `bun:"subject_type,notnull"`
	SubjectID   string           `bun:"subject_id,notnull"`
	RequestedBy string           `bun:"requested_by,notnull"`
	Reason      string           `bun:"reason,notnull"`
	Status      string           `bun:"status,notnull"`
	Counts      map[string]int64 `bun:"counts,type:jsonb,notnull"`
	RequestedAt time.Time        `bun:"requested_at,nullzero,notnull,default:current_timestamp"`
	FinishedAt  *time.Time       `bun:"finished_at"`
	WorkflowID  string           `bun:"workflow_id,notnull"`
	StepsDone   []string         `bun:"steps_done,array,notnull"`
}

// ErasureSubject names what is erased: one user of a tenant, or the whole tenant
// (UserID empty).
type ErasureSubject struct {
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id,omitempty"`
}

// Type is USER or TENANT.
func (s ErasureSubject) Type() string {
	if s.UserID == "" {
		return SubjectTenant
	}
	return SubjectUser
}

// ID is the user id, or the tenant id for a tenant erasure.
func (s ErasureSubject) ID() string {
	if s.UserID == "" {
		return s.TenantID
	}
	return s.UserID
}

func (s ErasureSubject) validate() error {
	if err := checkTenant(s.TenantID); err != nil {
		return err
	}
	if s.UserID != "" && strings.TrimSpace(s.UserID) == "" {
		return memory.FieldError{Field: "user_id", Problem: "is blank"}
	}
	return nil
}

// ErasureRequest is one request to erase a subject, kept for good: who asked, when
// and why, and, once its erasure finished, when and what it removed. The tombstone
// is the subject's erasure state, reopened by each new request.
type ErasureRequest struct {
	bun.BaseModel `bun:"table:erasure_requests"`

	ID          int64            `bun:"id,pk,autoincrement" json:"id"`
	TenantID    string           `bun:"tenant_id,notnull" json:"tenantId"`
	SubjectType string           `bun:"subject_type,notnull" json:"subjectType"`
	SubjectID   string           `bun:"subject_id,notnull" json:"subjectId"`
	RequestedBy string           `bun:"requested_by,notnull" json:"requestedBy"`
	Reason      string           `bun:"reason,notnull" json:"reason"`
	RequestedAt time.Time        `bun:"requested_at,nullzero,notnull,default:current_timestamp" json:"requestedAt"`
	WorkflowID  string           `bun:"workflow_id,notnull" json:"workflowId"`
	RunID       string           `bun:"run_id,notnull" json:"runId"`
	Status      string           `bun:"status,notnull" json:"status"`
	Counts      map[string]int64 `bun:"counts,type:jsonb,notnull" json:"counts"`
	FinishedAt  *time.Time       `bun:"finished_at" json:"finishedAt,omitempty"`
}

// BeginErasure records (or re-opens) the tombstone of a subject in state RUNNING,
// and appends the request of the erasure run runID (ErasureRequest) unless it is
// recorded. From then on ErasureInProgress reports true and the write path refuses
// the subject. It is idempotent: the same workflow calling again changes nothing; a
// new request after a finished erasure starts a new one (counts are reset), and
// the earlier requests stay.
func (s *Store) BeginErasure(ctx context.Context, subj ErasureSubject, requestedBy, reason, workflowID, runID string) (*Tombstone, error) {
	if err := subj.validate(); err != nil {
		return nil, err
	}
	var t *Tombstone
	err := s.InTx(ctx, func(ctx context.Context, _ bun.Tx) error {
		var err error
		if t, err = s.beginErasure(ctx, subj, requestedBy, reason, workflowID); err != nil {
			return err
		}
		if runID == "" {
			return nil
		}
		r := &ErasureRequest{TenantID: subj.TenantID, SubjectType: subj.Type(), SubjectID: subj.ID(), RequestedBy: requestedBy, Reason: reason,
			RequestedAt: t.RequestedAt, WorkflowID: workflowID, RunID: runID, Status: ErasureRunning, Counts: map[string]int64{}}
		_, err = s.conn(ctx).NewInsert().Model(r).
			On("CONFLICT (tenant_id, subject_type, subject_id, run_id) WHERE run_id <> '' DO NOTHING").Exec(ctx)
		if err != nil {
			return fmt.Errorf("record erasure request: %w", err)
		}
		return nil
	})
	return t, err
}

func (s *Store) beginErasure(ctx context.Context, subj ErasureSubject, requestedBy, reason, workflowID string) (*Tombstone, error) {
	t := &Tombstone{TenantID: subj.TenantID, SubjectType: subj.Type(), SubjectID: subj.ID(), RequestedBy: requestedBy,
		Reason: reason, Status: ErasureRunning, Counts: map[string]int64{}, WorkflowID: workflowID, StepsDone: []string{}}
	// The same workflow retrying keeps its progress; anything else starts over.
	const sameRun = "(tombstone.workflow_id = EXCLUDED.workflow_id AND tombstone.status = 'RUNNING')"
	_, err := s.conn(ctx).NewInsert().Model(t).
		On("CONFLICT (tenant_id, subject_type, subject_id) DO UPDATE").
		Set("status = 'RUNNING'").
		Set("requested_by = CASE WHEN " + sameRun + " THEN tombstone.requested_by ELSE EXCLUDED.requested_by END").
		Set("reason = CASE WHEN " + sameRun + " THEN tombstone.reason ELSE EXCLUDED.reason END").
		Set("counts = CASE WHEN " + sameRun + " THEN tombstone.counts ELSE '{}'::jsonb END").
		Set("steps_done = CASE WHEN " + sameRun + " THEN tombstone.steps_done ELSE '{}' END").
		Set("requested_at = CASE WHEN " + sameRun + " THEN tombstone.requested_at ELSE now() END").
		Set("finished_at = NULL, workflow_id = EXCLUDED.workflow_id").
		Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin erasure: %w", err)
	}
	return s.GetTombstone(ctx, subj)
}

// GetTombstone loads the tombstone of a subject, or ErrNotFound.
func (s *Store) GetTombstone(ctx context.Context, subj ErasureSubject) (*Tombstone, error) {
	if err := subj.validate(); err != nil {
		return nil, err
	}
	t := new(Tombstone)
	err := s.conn(ctx).NewSelect().Model(t).
		Where("tenant_id = ? AND subject_type = ? AND subject_id = ?", subj.TenantID, subj.Type(), subj.ID()).Scan(ctx)
	return t, notFound(err)
}

// ListTombstones lists a tenant's tombstones, newest first.
func (s *Store) ListTombstones(ctx context.Context, tenantID string) ([]Tombstone, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Tombstone
	err := s.conn(ctx).NewSelect().Model(&out).Where("tenant_id = ?", tenantID).Order("requested_at DESC").Scan(ctx)
	return out, err
}

// ErasureInProgress reports whether the user (or the whole tenant) is being erased.
// The write path calls it before storing anything and refuses the write when true.
func (s *Store) ErasureInProgress(ctx context.Context, tenantID, userID string) (bool, error) {
	if err := checkTenant(tenantID); err != nil {
		return false, err
	}
	var n int
	err := selectPrepared(ctx, s.conn(ctx), erasureInProgressSQL, &n, tenantID, userID)
	if err != nil {
		return false, fmt.Errorf("check erasure: %w", err)
	}
	return n > 0, nil
}

// erasureInProgressSQL counts the RUNNING erasures of a tenant ($1) or of its
// user ($2).
var erasureInProgressSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Tombstone)(nil)).ColumnExpr("count(*)").
		Where("tenant_id = ? AND status = 'RUNNING'", p[0]).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("subject_type = 'TENANT' AND subject_id = ?", p[0]).
				WhereOr("subject_type = 'USER' AND subject_id = ?", p[1])
		}).String()
})

// RecordErasureStep adds a finished step and its count to the tombstone.
func (s *Store) RecordErasureStep(ctx context.Context, subj ErasureSubject, step string, n int64) error {
	if err := subj.validate(); err != nil {
		return err
	}
	_, err := s.conn(ctx).NewUpdate().Model((*Tombstone)(nil)).
		Set("counts = counts || jsonb_build_object(?::text, ?::bigint)", step, n).
		Set("steps_done = CASE WHEN ? = ANY(steps_done) THEN steps_done ELSE array_append(steps_done, ?::text) END", step, step).
		Where("tenant_id = ? AND subject_type = ? AND subject_id = ?", subj.TenantID, subj.Type(), subj.ID()).Exec(ctx)
	if err != nil {
		return fmt.Errorf("record erasure step %s: %w", step, err)
	}
	return nil
}

// FinishErasure marks the tombstone DONE: writes for the subject are accepted again
// (a returning user starts from nothing). The request of the erasure run runID (an
// erasure begun before requests were kept: the one the tombstone remembers) is
// DONE too, with the tombstone's counts.
func (s *Store) FinishErasure(ctx context.Context, subj ErasureSubject, runID string) (*Tombstone, error) {
	if err := subj.validate(); err != nil {
		return nil, err
	}
	err := s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.NewUpdate().Model((*Tombstone)(nil)).Set("status = 'DONE', finished_at = coalesce(finished_at, now())").
			Where("tenant_id = ? AND subject_type = ? AND subject_id = ?", subj.TenantID, subj.Type(), subj.ID()).Exec(ctx)
		if err != nil {
			return fmt.Errorf("finish erasure: %w", err)
		}
		_, err = tx.NewRaw(`UPDATE erasure_requests r SET status = 'DONE', counts = t.counts, finished_at = coalesce(r.finished_at, t.finished_at)
			FROM tombstones t
			WHERE t.tenant_id = ? AND t.subject_type = ? AND t.subject_id = ?
			  AND r.tenant_id = t.tenant_id AND r.subject_type = t.subject_type AND r.subject_id = t.subject_id
			  AND r.status = 'RUNNING' AND (r.run_id = ? OR r.run_id = '' AND r.workflow_id = t.workflow_id)`,
			subj.TenantID, subj.Type(), subj.ID(), runID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("finish erasure request: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.GetTombstone(ctx, subj)
}

// ListErasureRequests lists every erasure request of a tenant, newest first.
func (s *Store) ListErasureRequests(ctx context.Context, tenantID string) ([]ErasureRequest, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	out := []ErasureRequest{}
	err := s.conn(ctx).NewSelect().Model(&out).Where("tenant_id = ?", tenantID).Order("requested_at DESC", "id DESC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list erasure requests: %w", err)
	}
	return out, nil
}

// ErasureSteps are the Postgres steps of an erasure, in the order they must run:
// links and dependants before what they point at, so every step can be retried on
// its own and a crash between steps leaves nothing a later step cannot find.
var ErasureSteps = []string{
	"outbox", "access_log", "sessions", "task_transitions", "tasks",
	"facts", "fact_evidence", "candidate_evidence", "candidates",
	"edges", "entities_release", "entities", "evidence", "events", "api_keys",
}

// userFacts selects the facts of a user: their own (user_id or owner), and shared
// facts whose only supporting evidence is theirs (nobody else stated them, so after
// the erasure nothing would support them).
const userFacts = `(f.user_id = ?user OR (f.owner_type = 'USER' AND f.owner_id = ?user) OR (f.user_id = '' AND EXISTS (
	SELECT 1 FROM fact_evidence fe JOIN evidence e ON e.tenant_id = fe.tenant_id AND e.id = fe.evidence_id
	WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id AND e.user_id = ?user) AND NOT EXISTS (
	SELECT 1 FROM fact_evidence fe JOIN evidence e ON e.tenant_id = fe.tenant_id AND e.id = fe.evidence_id
	WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id AND e.user_id <> ?user)))`

// userEntities selects the entities of a user: those they own and the entity that
// stands for them (User/<id>).
const userEntities = `(n.user_id = ?user OR (lower(n.type) = 'user' AND n.id = ?user))`

// erasureTarget is the table and row condition of one step, with the alias used in
// the condition. ?tenant and ?user are bound by name.
func erasureTarget(step string, tenantOnly bool) (table, alias, cond string, err error) {
	if tenantOnly {
		switch step {
		case "outbox", "access_log", "sessions", "task_transitions", "tasks", "fact_evidence", "facts",
			"candidate_evidence", "candidates", "edges", "entities", "evidence", "events", "api_keys":
			return step, "x", "x.tenant_id = ?tenant", nil
		case "entities_release":
			return "entities", "x", "false", nil
		}
		return "", "", "", fmt.Errorf("unknown erasure step %q", step)
	}
	switch step {
	case "outbox":
		return "outbox", "o", `o.tenant_id = ?tenant AND (
			o.ref_id IN (SELECT f.id FROM facts f WHERE f.tenant_id = ?tenant AND ` + userFacts + `)
			OR o.ref_id IN (SELECT e.id FROM evidence e WHERE e.tenant_id = ?tenant AND e.user_id = ?user))`, nil
	case "access_log":
		return "access_log", "a", "a.tenant_id = ?tenant AND a.user_id = ?user", nil
	case "sessions":
		return "sessions", "s", "s.tenant_id = ?tenant AND s.user_id = ?user", nil
	case "task_transitions":
		return "task_transitions", "tt", "tt.tenant_id = ?tenant AND tt.task_id IN (SELECT t.id FROM tasks t WHERE t.tenant_id = ?tenant AND t.user_id = ?user)", nil
	case "tasks":
		return "tasks", "t", "t.tenant_id = ?tenant AND t.user_id = ?user", nil
	case "fact_evidence":
		return "fact_evidence", "l", `l.tenant_id = ?tenant AND (
			l.fact_id IN (SELECT f.id FROM facts f WHERE f.tenant_id = ?tenant AND ` + userFacts + `)
			OR l.evidence_id IN (SELECT e.id FROM evidence e WHERE e.tenant_id = ?tenant AND e.user_id = ?user))`, nil
	case "facts":
		// Deleting a fact cascades its evidence links; the next step removes the
		// user's links to facts that stay (shared facts others support too).
		return "facts", "f", "f.tenant_id = ?tenant AND " + userFacts, nil
	case "candidate_evidence":
		return "candidate_evidence", "l", `l.tenant_id = ?tenant AND (
			l.candidate_id IN (SELECT c.id FROM candidates c WHERE c.tenant_id = ?tenant AND c.user_id = ?user)
			OR l.evidence_id IN (SELECT e.id FROM evidence e WHERE e.tenant_id = ?tenant AND e.user_id = ?user))`, nil
	case "candidates":
		return "candidates", "c", `c.tenant_id = ?tenant AND (c.user_id = ?user
			OR c.event_id IN (SELECT ev.id FROM events ev WHERE ev.tenant_id = ?tenant AND ev.user_id = ?user))`, nil
	case "edges":
		// Their own edges and edges touching the entity that stands for them; edges
		// other users recorded to an entity this user created stay (next step).
		return "edges", "g", `g.tenant_id = ?tenant AND (g.user_id = ?user
			OR (lower(g.from_type) = 'user' AND g.from_id = ?user) OR (lower(g.to_type) = 'user' AND g.to_id = ?user))`, nil
	case "entities_release":
		// An entity this user created that other users' edges still point at (one
		// order two people talk about) is not deleted: it passes to one of them and
		// loses the attributes this user's statements gave it.
		return "entities", "n", "n.tenant_id = ?tenant AND " + userEntities + ` AND EXISTS (
			SELECT 1 FROM edges g WHERE g.tenant_id = n.tenant_id AND g.user_id <> ?user
			AND ((g.from_type = n.type AND g.from_id = n.id) OR (g.to_type = n.type AND g.to_id = n.id)))`, nil
	case "entities":
		return "entities", "n", "n.tenant_id = ?tenant AND " + userEntities, nil
	case "evidence":
		return "evidence", "e", `e.tenant_id = ?tenant AND (e.user_id = ?user
			OR e.event_id IN (SELECT ev.id FROM events ev WHERE ev.tenant_id = ?tenant AND ev.user_id = ?user))`, nil
	case "events":
		return "events", "ev", "ev.tenant_id = ?tenant AND ev.user_id = ?user", nil
	case "api_keys":
		return "api_keys", "k", "k.tenant_id = ?tenant AND k.user_id = ?user", nil
	}
	return "", "", "", fmt.Errorf("unknown erasure step %q", step)
}

type erasureArgs struct {
	Tenant string `bun:"tenant"`
	User   string `bun:"user"`
}

// EraseBatch deletes at most limit rows of one erasure step and returns how many
// it deleted; call it until it returns 0. Each call is its own transaction, so a
// crash loses at most one batch of work and a retry finds what is left.
func (s *Store) EraseBatch(ctx context.Context, subj ErasureSubject, step string, limit int) (int64, error) {
	if err := subj.validate(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		limit = 500
	}
	table, alias, cond, err := erasureTarget(step, subj.UserID == "")
	if err != nil {
		return 0, err
	}
	q := fmt.Sprintf("DELETE FROM %[1]s WHERE ctid IN (SELECT %[2]s.ctid FROM %[1]s %[2]s WHERE %[3]s LIMIT %[4]d)", table, alias, cond, limit)
	if step == "entities_release" && subj.UserID != "" {
		q = fmt.Sprintf(`UPDATE entities SET attributes = '{}'::jsonb, updated_at = now(), user_id = coalesce((
			SELECT g.user_id FROM edges g WHERE g.tenant_id = entities.tenant_id AND g.user_id <> ?user
			AND ((g.from_type = entities.type AND g.from_id = entities.id) OR (g.to_type = entities.type AND g.to_id = entities.id))
			ORDER BY g.id LIMIT 1), '')
			WHERE ctid IN (SELECT %[1]s.ctid FROM entities %[1]s WHERE %[2]s LIMIT %[3]d)`, alias, cond, limit)
	}
	res, err := s.conn(ctx).NewRaw(q, erasureArgs{Tenant: subj.TenantID, User: subj.UserID}).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("erase %s: %w", step, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// CountSubjectRows counts what is left of a subject in one erasure step's table (the
// same condition EraseBatch deletes by). Tests and `engram erase --dry-run` use it.
func (s *Store) CountSubjectRows(ctx context.Context, subj ErasureSubject, step string) (int64, error) {
	if err := subj.validate(); err != nil {
		return 0, err
	}
	table, alias, cond, err := erasureTarget(step, subj.UserID == "")
	if err != nil {
		return 0, err
	}
	var n int64
	q := fmt.Sprintf("SELECT count(*) FROM %s %s WHERE %s", table, alias, cond)
	err = s.conn(ctx).NewRaw(q, erasureArgs{Tenant: subj.TenantID, User: subj.UserID}).Scan(ctx, &n)
	return n, err
}

// SubjectTaskIDs lists the task ids of a subject (their workflows are deleted from
// Temporal with the rest).
func (s *Store) SubjectTaskIDs(ctx context.Context, subj ErasureSubject) ([]string, error) {
	if err := subj.validate(); err != nil {
		return nil, err
	}
	q := s.conn(ctx).NewSelect().Table("tasks").Column("id").Where("tenant_id = ?", subj.TenantID)
	if subj.UserID != "" {
		q = q.Where("user_id = ?", subj.UserID)
	}
	var ids []string
	err := q.Order("id").Scan(ctx, &ids)
	return ids, err
}

// SubjectWorkflowIDs lists the ids of the write workflows recorded on the subject's
// events (Temporal visibility may lag; these are known from Postgres).
func (s *Store) SubjectWorkflowIDs(ctx context.Context, subj ErasureSubject) ([]string, error) {
	if err := subj.validate(); err != nil {
		return nil, err
	}
	q := s.conn(ctx).NewSelect().Table("events").ColumnExpr("DISTINCT workflow_id").Where("tenant_id = ? AND workflow_id <> ''", subj.TenantID)
	if subj.UserID != "" {
		q = q.Where("user_id = ?", subj.UserID)
	}
	var ids []string
	err := q.Scan(ctx, &ids)
	return ids, err
}

// AccessEntry is one read of memory: who (principal), why (purpose), about whom
// (user), what was asked and which facts and evidence were returned.
type AccessEntry struct {
	bun.BaseModel `bun:"table:access_log"`

	ID          int64     `bun:"id,pk,autoincrement"`
	TenantID    string    `bun:"tenant_id,notnull"`
	Principal   string    `bun:"principal,notnull"`
	Purpose     string    `bun:"purpose,notnull"`
	UserID      string    `bun:"user_id,notnull"`
	Query       string    `bun:"query,notnull"`
	FactIDs     []string  `bun:"fact_ids,array,type:uuid[],notnull"`
	EvidenceIDs []string  `bun:"evidence_ids,array,type:uuid[],notnull"`
	At          time.Time `bun:"at,nullzero,notnull,default:current_timestamp"`
}

// MaxLoggedQuery bounds the query text kept in the access log.
const MaxLoggedQuery = 2000

// LogAccess records that principal read a user's memory for purpose: the query and
// the ids returned. Every API read calls it once per request; recall writes its
// entries in batches through RecordAccess.
func (s *Store) LogAccess(ctx context.Context, tenantID, principal, purpose, userID, query string, factIDs, evidenceIDs []string) error {
	return s.RecordAccess(ctx, []AccessEntry{{TenantID: tenantID, Principal: principal, Purpose: purpose, UserID: userID,
		Query: query, FactIDs: factIDs, EvidenceIDs: evidenceIDs}}, false, false)
}

// RecordAccess stores access-log entries in one statement, the only writer of
// access_log: a query longer than MaxLoggedQuery characters is cut at a
// character boundary, an entry's time defaults to now. With countReads, every
// fact returned also gets access_count += times returned and last_accessed_at =
// the latest read in fact_access (recall: what is used stays important; an audit
// listing is not use). Facts deleted meanwhile are skipped.
// relaxedCommit does not wait for the WAL flush (synchronous_commit off), for
// entries a crash would lose anyway (a queue in memory).
func (s *Store) RecordAccess(ctx context.Context, es []AccessEntry, countReads, relaxedCommit bool) error {
	if len(es) == 0 {
		return nil
	}
	type bump struct {
		n  int
		at time.Time
	}
	bumps := map[[2]string]*bump{}
	now := time.Now().UTC()
	for i := range es {
		e := &es[i]
		if err := checkTenant(e.TenantID); err != nil {
			return err
		}
		if r := []rune(e.Query); len(r) > MaxLoggedQuery {
			e.Query = string(r[:MaxLoggedQuery])
		}
		if e.FactIDs == nil {
			e.FactIDs = []string{}
		}
		if e.EvidenceIDs == nil {
			e.EvidenceIDs = []string{}
		}
		if e.At.IsZero() {
			e.At = now
		}
		if !countReads {
			continue
		}
		for _, id := range e.FactIDs {
			k := [2]string{e.TenantID, id}
			b := bumps[k]
			if b == nil {
				b = &bump{}
				bumps[k] = b
			}
			b.n++
			if e.At.After(b.at) {
				b.at = e.At
			}
		}
	}
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if relaxedCommit {
			if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
		}
		if _, err := tx.NewInsert().Model(&es).ExcludeColumn("id").Exec(ctx); err != nil {
			return fmt.Errorf("log access: %w", err)
		}
		if len(bumps) == 0 {
			return nil
		}
		// Sorted so that concurrent writers lock rows in the same order.
		keys := make([][2]string, 0, len(bumps))
		for k := range bumps {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y [2]string) int { return strings.Compare(x[0]+"/"+x[1], y[0]+"/"+y[1]) })
		tenants, ids := make([]string, len(keys)), make([]string, len(keys))
		ns, ats := make([]int, len(keys)), make([]time.Time, len(keys))
		for i, k := range keys {
			tenants[i], ids[i], ns[i], ats[i] = k[0], k[1], bumps[k].n, bumps[k].at
		}
		_, err := tx.NewRaw(`INSERT INTO fact_access AS a (tenant_id, fact_id, access_count, last_accessed_at)
			SELECT u.tenant_id, u.id, u.n, u.at FROM unnest(?::text[], ?::uuid[], ?::int[], ?::timestamptz[]) AS u(tenant_id, id, n, at)
			WHERE EXISTS (SELECT 1 FROM facts f WHERE f.tenant_id = u.tenant_id AND f.id = u.id)
			ON CONFLICT (tenant_id, fact_id) DO UPDATE SET access_count = a.access_count + excluded.access_count,
				last_accessed_at = greatest(a.last_accessed_at, excluded.last_accessed_at)`,
			pgdialect.Array(tenants), pgdialect.Array(ids), pgdialect.Array(ns), pgdialect.Array(ats)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update access counts: %w", err)
		}
		return nil
	})
}

// FactReads is how often a fact revision was recalled and when last (zero and nil
// if never).
func (s *Store) FactReads(ctx context.Context, tenantID, factID string) (int64, *time.Time, error) {
	if err := checkTenant(tenantID); err != nil {
		return 0, nil, err
	}
	var row struct {
		N  int64     `bun:"access_count"`
		At time.Time `bun:"last_accessed_at"`
	}
	err := s.conn(ctx).NewSelect().Table("fact_access").Column("access_count", "last_accessed_at").
		Where("tenant_id = ? AND fact_id = ?", tenantID, factID).Scan(ctx, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return row.N, &row.At, nil
}

// AccessFilter narrows an audit listing. Empty fields do not filter.
type AccessFilter struct {
	UserID    string
	Principal string
	Since     time.Time
	Limit     int
}

// ListAccess lists reads of a tenant's memory, newest first.
func (s *Store) ListAccess(ctx context.Context, tenantID string, f AccessFilter) ([]AccessEntry, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []AccessEntry
	q := s.conn(ctx).NewSelect().Model(&out).Where("tenant_id = ?", tenantID)
	if f.UserID != "" {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Principal != "" {
		q = q.Where("principal = ?", f.Principal)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since)
	}
	limit := f.Limit
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	err := q.Order("at DESC", "id DESC").Limit(int64(limit)).Scan(ctx)
	return out, err
}

// MarshalCounts renders tombstone counts for logs and the CLI.
func MarshalCounts(c map[string]int64) string {
	b, _ := json.Marshal(c)
	return string(b)
}
