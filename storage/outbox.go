package storage

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// OutboxRow is one pending change for the external keyword index: a fact or
// evidence row (Kind FACT or EVIDENCE, RefID its id) to write or remove (Op UPSERT
// or DELETE).
type OutboxRow struct {
	ID       int64  `bun:"id"`
	TenantID string `bun:"tenant_id"`
	Kind     string `bun:"kind"`
	RefID    string `bun:"ref_id"`
	Op       string `bun:"op"`
	Attempts int    `bun:"attempts"`
}

// ClaimOutbox locks up to limit unprocessed outbox rows tried fewer than
// maxAttempts times, oldest first, with FOR UPDATE SKIP LOCKED so concurrent
// drainers never claim the same row. Call it in a transaction (Store.InTx) and mark
// the rows in the same one.
func ClaimOutbox(ctx context.Context, tx bun.IDB, maxAttempts, limit int) ([]OutboxRow, error) {
	var rows []OutboxRow
	err := tx.NewSelect().Table("outbox").Column("id", "tenant_id", "kind", "ref_id", "op", "attempts").
		Where("processed_at IS NULL AND attempts < ?", maxAttempts).
		OrderExpr("id").Limit(int64(limit)).For("UPDATE SKIP LOCKED").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("claim outbox rows: %w", err)
	}
	return rows, nil
}

// MarkOutboxProcessed records that the outbox rows ids reached the index.
func MarkOutboxProcessed(ctx context.Context, tx bun.IDB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.NewUpdate().Table("outbox").
		Set("processed_at = now(), attempts = attempts + 1, last_error = ''").
		Where("id IN (?)", bun.In(ids)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark outbox rows processed: %w", err)
	}
	return nil
}

// MarkOutboxFailed counts a failed attempt of outbox row id and keeps its error;
// the row stays pending.
func MarkOutboxFailed(ctx context.Context, tx bun.IDB, id int64, lastError string) error {
	_, err := tx.NewUpdate().Table("outbox").
		Set("attempts = attempts + 1, last_error = ?", lastError).
		Where("id = ?", id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("record outbox failure: %w", err)
	}
	return nil
}

// RevisionsOfFacts loads every revision of the memory keys of the tenant's facts
// ids (content as stored; Store.DecryptFacts makes it clear).
func RevisionsOfFacts(ctx context.Context, db bun.IDB, tenantID string, ids []string) ([]Fact, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var facts []Fact
	err := db.NewSelect().Model(&facts).ExcludeColumn("embedding").
		Where("tenant_id = ?", tenantID).
		Where("memory_key IN (SELECT memory_key FROM facts WHERE tenant_id = ? AND id IN (?))", tenantID, bun.In(ids)).
		Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("load facts to index: %w", err)
	}
	return facts, nil
}

// EvidenceByID loads the tenant's evidence rows ids (content as stored;
// Store.DecryptEvidence makes it clear).
func EvidenceByID(ctx context.Context, db bun.IDB, tenantID string, ids []string) ([]Evidence, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var evidence []Evidence
	err := db.NewSelect().Model(&evidence).ExcludeColumn("embedding").
		Where("tenant_id = ? AND id IN (?)", tenantID, bun.In(ids)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("load evidence to index: %w", err)
	}
	return evidence, nil
}

// FactsPage returns up to limit of the tenant's fact revisions with an id after
// afterID ("" for the first page), in id order, their content clear: a full rebuild
// of an index pages through them.
func (s *Store) FactsPage(ctx context.Context, tenantID, afterID string, limit int) ([]Fact, error) {
	var facts []Fact
	if err := s.page(ctx, &facts, tenantID, afterID, limit); err != nil {
		return nil, fmt.Errorf("read facts: %w", err)
	}
	return facts, s.DecryptFacts(facts)
}

// EvidencePage is FactsPage for evidence.
func (s *Store) EvidencePage(ctx context.Context, tenantID, afterID string, limit int) ([]Evidence, error) {
	var evs []Evidence
	if err := s.page(ctx, &evs, tenantID, afterID, limit); err != nil {
		return nil, fmt.Errorf("read evidence: %w", err)
	}
	return evs, s.DecryptEvidence(evs)
}

func (s *Store) page(ctx context.Context, model any, tenantID, afterID string, limit int) error {
	q := s.conn(ctx).NewSelect().Model(model).ExcludeColumn("embedding").Where("tenant_id = ?", tenantID)
	if afterID != "" {
		q = q.Where("id > ?", afterID)
	}
	return q.Order("id").Limit(int64(limit)).Scan(ctx)
}
