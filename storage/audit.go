package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Reads for the evaluation harness and operators. Unlike the rest of the package,
// the *AnyTenant lookups do not filter by tenant: the harness uses them to see
// whose row a recalled id really is, so a leak across tenants shows.

// FactsByIDAnyTenant loads the facts ids, whichever tenant they belong to (content
// as stored).
func (s *Store) FactsByIDAnyTenant(ctx context.Context, ids []string) ([]Fact, error) {
	var fs []Fact
	if len(ids) == 0 {
		return nil, nil
	}
	err := s.conn(ctx).NewSelect().Model(&fs).ExcludeColumn("embedding").Where("id::text IN (?)", bun.In(ids)).Scan(ctx)
	return fs, err
}

// SupportingEvidenceAnyTenant returns the evidence ids supporting each of the facts
// ids, by fact id, whichever tenant they belong to.
func (s *Store) SupportingEvidenceAnyTenant(ctx context.Context, ids []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var links []struct {
		FactID     string `bun:"fact_id"`
		EvidenceID string `bun:"evidence_id"`
	}
	err := s.conn(ctx).NewSelect().Table("fact_evidence").Column("fact_id", "evidence_id").
		Where("fact_id::text IN (?) AND relation = ?", bun.In(ids), memory.RelSupport).Scan(ctx, &links)
	for _, l := range links {
		out[l.FactID] = append(out[l.FactID], l.EvidenceID)
	}
	return out, err
}

// EvidenceByIDAnyTenant loads the evidence rows ids, whichever tenant they belong to
// (content as stored).
func (s *Store) EvidenceByIDAnyTenant(ctx context.Context, ids []string) ([]Evidence, error) {
	var evs []Evidence
	if len(ids) == 0 {
		return nil, nil
	}
	err := s.conn(ctx).NewSelect().Model(&evs).ExcludeColumn("embedding").Where("id::text IN (?)", bun.In(ids)).Scan(ctx)
	return evs, err
}

// EvidenceOfUser lists a user's evidence that occurred at or before until, oldest
// first, content clear.
func (s *Store) EvidenceOfUser(ctx context.Context, tenantID, userID string, until time.Time) ([]Evidence, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var evs []Evidence
	if err := s.conn(ctx).NewSelect().Model(&evs).ExcludeColumn("embedding").
		Where("tenant_id = ? AND user_id = ? AND occurred_at <= ?", tenantID, userID, until).
		Order("occurred_at", "id").Scan(ctx); err != nil {
		return nil, err
	}
	return evs, s.DecryptEvidence(evs)
}

// RowQuerier is what the gauges below read with: a *sql.DB or a *bun.DB.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReviewQueueDepth counts the candidates awaiting human review, all tenants.
func ReviewQueueDepth(ctx context.Context, db RowQuerier) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM candidates WHERE status = '`+string(memory.CandidateNeedsConfirmation)+`'`).Scan(&n)
	return n, err
}

// OutboxBacklog counts the outbox rows not yet applied to the keyword index, all
// tenants, and the age of the oldest (not valid when there is none).
func OutboxBacklog(ctx context.Context, db RowQuerier) (pending int64, lagSeconds sql.NullFloat64, err error) {
	err = db.QueryRowContext(ctx, `SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM outbox WHERE processed_at IS NULL`).Scan(&pending, &lagSeconds)
	if err != nil {
		return 0, lagSeconds, fmt.Errorf("outbox backlog: %w", err)
	}
	return pending, lagSeconds, nil
}
