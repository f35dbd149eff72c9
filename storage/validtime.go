package storage

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Valid time and transaction time of fact revisions (issue 28). Valid time
// (valid_from/valid_until) is when a value was true in the world, from the
// statements' occurred_at; governance places each statement there, whatever
// order writes commit in, and the functions here apply what it decided. Transaction
// time is when the memory held a revision as it is: recorded_at, closed_at (the
// API's retired_at), and fact_versions, which a trigger fills with every status
// and validity a revision had before its current one.

// statedSQL is a row's stated_at, or its valid_from when none is recorded.
const statedSQL = "(CASE WHEN cardinality(stated_at) = 0 THEN ARRAY[valid_from] ELSE stated_at END)"

// TrimRevision ends a live revision's validity at at (never before its
// valid_from), as SUPERSEDED if it was ACTIVE, keeping the statements up to at: a
// statement of another value was made inside its window. The caller holds the
// key's lock.
func TrimRevision(ctx context.Context, tx bun.IDB, tenantID, factID string, at time.Time) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	_, err := tx.NewUpdate().Model((*Fact)(nil)).
		Set("valid_until = greatest(valid_from, ?::timestamptz)", at).
		Set("closed_at = CASE WHEN status = 'ACTIVE' THEN clock_timestamp() ELSE closed_at END").
		Set("status = CASE WHEN status = 'ACTIVE' THEN 'SUPERSEDED' ELSE status END").
		Set("stated_at = ARRAY(SELECT s FROM unnest("+statedSQL+") s WHERE s <= ?::timestamptz ORDER BY s)", at).
		Where("tenant_id = ? AND id = ? AND status IN ('ACTIVE', 'SUPERSEDED')", tenantID, factID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("trim revision: %w", err)
	}
	return nil
}

// RestateFact records a duplicate statement of a fact's value at at: its
// confidence rises to confidence (never falls), at joins its statements, and with
// extendFrom set its validity starts there (the statement came before it).
func RestateFact(ctx context.Context, tx bun.IDB, tenantID, factID string, confidence float64, at time.Time, extendFrom *time.Time) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if confidence < 0 || confidence > 1 {
		return memory.FieldError{Field: "confidence", Problem: fmt.Sprintf("%.3f is outside [0, 1]", confidence)}
	}
	q := tx.NewUpdate().Model((*Fact)(nil)).Set("confidence = greatest(confidence, ?)", confidence)
	if !at.IsZero() {
		q = q.Set("stated_at = array_append("+statedSQL+", ?::timestamptz)", at)
	}
	if extendFrom != nil {
		q = q.Set("valid_from = least(valid_from, ?::timestamptz)", *extendFrom)
	}
	_, err := q.Where("tenant_id = ? AND id = ?", tenantID, factID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("restate fact: %w", err)
	}
	return nil
}

// ReopenRevision writes the next revision of src's key with src's value again,
// valid from..until with status (ACTIVE when src was current), stated at stated:
// a late statement split src, and src's value holds again from its first
// statement after it. The evidence of src's events from from on moves to the new
// revision (src keeps at least what it had before from). The caller holds the
// key's lock and has trimmed src already.
func ReopenRevision(ctx context.Context, tx bun.IDB, tenantID, srcID string, from time.Time, until *time.Time, status memory.FactStatus, stated []time.Time, supersedes, reason string) (*Fact, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if status != memory.FactActive && status != memory.FactSuperseded {
		return nil, memory.FieldError{Field: "status", Problem: fmt.Sprintf("%q cannot reopen a value (allowed: ACTIVE, SUPERSEDED)", status)}
	}
	if len(stated) == 0 {
		stated = []time.Time{from}
	}
	src := new(Fact)
	if err := tx.NewSelect().Model(src).Where("tenant_id = ? AND id = ?", tenantID, srcID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("read the revision to reopen: %w", notFound(err))
	}
	maxRev, err := maxRevision(ctx, tx, tenantID, src.MemoryKey)
	if err != nil {
		return nil, err
	}
	f := *src
	f.ID, f.Revision, f.Status, f.ValidFrom, f.ValidUntil, f.StatedAt = "", maxRev+1, status, from, until, stated
	f.RecordedAt, f.ChangedAt, f.ClosedAt, f.Reason = time.Time{}, nil, nil, reason
	f.SupersedesID = nil
	if supersedes != "" {
		f.SupersedesID = &supersedes
	}
	if status != memory.FactActive {
		now := time.Now().UTC()
		f.ClosedAt = &now
	}
	if _, err := tx.NewInsert().Model(&f).ExcludeColumn("id").
		Value("search", "(SELECT search FROM facts WHERE tenant_id = ? AND id = ?)", tenantID, srcID).
		Returning("id, recorded_at").Exec(ctx); err != nil {
		return nil, fmt.Errorf("reopen revision: %w", err)
	}
	id := f.ID
	// The evidence of the statements from `from` on goes with them.
	if _, err := tx.NewRaw(`WITH moved AS (
		INSERT INTO fact_evidence (tenant_id, fact_id, evidence_id, relation)
		SELECT fe.tenant_id, ?, fe.evidence_id, fe.relation FROM fact_evidence fe
		JOIN evidence e ON e.tenant_id = fe.tenant_id AND e.id = fe.evidence_id
		WHERE fe.tenant_id = ? AND fe.fact_id = ? AND e.occurred_at >= ?
		ON CONFLICT DO NOTHING RETURNING evidence_id)
	DELETE FROM fact_evidence fe WHERE fe.tenant_id = ? AND fe.fact_id = ? AND fe.evidence_id IN (SELECT evidence_id FROM moved)
		AND EXISTS (SELECT 1 FROM fact_evidence k JOIN evidence e ON e.tenant_id = k.tenant_id AND e.id = k.evidence_id
			WHERE k.tenant_id = ? AND k.fact_id = ? AND e.occurred_at < ?)`,
		id, tenantID, srcID, from, tenantID, srcID, tenantID, srcID, from).Exec(ctx); err != nil {
		return nil, fmt.Errorf("move evidence to the reopened revision: %w", err)
	}
	return &f, nil
}

// Overlap is two live revisions (ACTIVE or SUPERSEDED) of one memory key whose
// validity windows overlap: at some instant both claim to be the value.
type Overlap struct {
	MemoryKey string    `json:"memory_key" bun:"memory_key"`
	RevisionA int       `json:"revision_a" bun:"revision_a"`
	RevisionB int       `json:"revision_b" bun:"revision_b"`
	From      time.Time `json:"from" bun:"from"` // where the overlap begins
}

// Overlaps lists every pair of live revisions of one key valid at the same time
// in the tenant's memory; it should be empty (governance keeps at most one
// revision valid at any instant, whatever order writes commit in).
func (s *Store) Overlaps(ctx context.Context, tenantID string) ([]Overlap, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var out []Overlap
	err := s.conn(ctx).NewRaw(`SELECT a.memory_key, a.revision AS revision_a, b.revision AS revision_b, greatest(a.valid_from, b.valid_from) AS "from"
		FROM facts a JOIN facts b ON b.tenant_id = a.tenant_id AND b.memory_key = a.memory_key AND b.revision > a.revision
		WHERE a.tenant_id = ? AND a.status IN ('ACTIVE', 'SUPERSEDED') AND b.status IN ('ACTIVE', 'SUPERSEDED')
		AND tstzrange(a.valid_from, a.valid_until) && tstzrange(b.valid_from, b.valid_until)
		ORDER BY a.memory_key, a.revision, b.revision`, tenantID).Scan(ctx, &out)
	return out, err
}

var (
	factColsOnce sync.Once
	factCols     []string
)

// factColumns are the facts columns the Fact model reads.
func factColumns(db bun.IDB) []string {
	factColsOnce.Do(func() {
		t := db.Dialect().Tables().Get(reflect.TypeOf((*Fact)(nil)).Elem())
		for _, f := range t.Fields {
			factCols = append(factCols, f.Name)
		}
	})
	return factCols
}

// knownAtTable is the tenant's fact revisions as the memory held them at k
// (transaction time): those recorded by k, each with the status and validity it
// had then (from fact_versions when it changed since), retired only if it was
// by k. It stands in for the facts table (alias fact) in a select: the text with
// its arguments, for ModelTableExpr.
func knownAtTable(db bun.IDB, tenantID string, k time.Time) (string, []any) {
	var cols []string
	var args []any
	k = k.UTC()
	for _, c := range factColumns(db) {
		switch c {
		case "status", "valid_from", "valid_until":
			cols = append(cols, fmt.Sprintf("CASE WHEN v.fact_id IS NULL THEN f.%[1]s ELSE v.%[1]s END AS %[1]s", c))
		case "closed_at":
			cols = append(cols, "CASE WHEN f.closed_at <= ? THEN f.closed_at END AS closed_at")
			args = append(args, k)
		case "changed_at":
			cols = append(cols, "CASE WHEN v.fact_id IS NULL THEN f.changed_at ELSE v.held_from END AS changed_at")
		default:
			cols = append(cols, "f."+c)
		}
	}
	text := "(SELECT " + strings.Join(cols, ", ") + " FROM facts f LEFT JOIN LATERAL (SELECT fv.fact_id, fv.status, fv.valid_from, fv.valid_until, fv.held_from FROM fact_versions fv " +
		"WHERE fv.tenant_id = f.tenant_id AND fv.fact_id = f.id AND fv.held_from <= ? AND fv.held_until > ? ORDER BY fv.held_from DESC LIMIT 1) v " +
		"ON coalesce(f.changed_at, f.recorded_at) > ? WHERE f.tenant_id = ? AND f.recorded_at <= ?) AS fact"
	return text, append(args, k, k, k, tenantID, k)
}

// from sets q's table: the facts as held at ff.KnownAt, or the facts table.
func (ff FactFilter) from(db bun.IDB, q *bun.SelectQuery, tenantID string) *bun.SelectQuery {
	if ff.KnownAt.IsZero() {
		return q
	}
	text, args := knownAtTable(db, tenantID, ff.KnownAt)
	return q.ModelTableExpr(text, args...)
}

// FactState is a revision's status and validity as the memory held them at a
// time (transaction time), and whether it was retired by then.
type FactState struct {
	ID         string            `bun:"id"`
	Status     memory.FactStatus `bun:"status"`
	ValidFrom  time.Time         `bun:"valid_from"`
	ValidUntil *time.Time        `bun:"valid_until"`
	ClosedAt   *time.Time        `bun:"closed_at"`
}

// FactStatesAt returns, for the revisions ids of the tenant recorded by k, the
// status and validity each had at k, by id (a revision recorded later is absent).
func FactStatesAt(ctx context.Context, db bun.IDB, tenantID string, ids []string, k time.Time) (map[string]FactState, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	out := map[string]FactState{}
	if len(ids) == 0 {
		return out, nil
	}
	text, args := knownAtTable(db, tenantID, k)
	var rows []FactState
	if err := db.NewRaw("SELECT fact.id, fact.status, fact.valid_from, fact.valid_until, fact.closed_at FROM "+text+" WHERE fact.id IN (?)",
		append(args, bun.In(ids))...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read revisions as known at %s: %w", k.UTC().Format(time.RFC3339), err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}
