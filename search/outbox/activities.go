package outbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
)

// OutboxActivities push the outbox (rows written in the same transaction as the
// facts they name) to the Typesense keyword index. They are registered only when
// Typesense is configured; otherwise Postgres full-text is the keyword index and
// the outbox is left alone.
type OutboxActivities struct {
	Store  *storage.Store
	Index  *typesense.Index
	Logger *slog.Logger
}

// Outbox defaults.
const (
	DefaultDrainBatch       = 200
	MaxDrainBatch           = 1000
	DefaultOutboxAttempts   = 10
	maxOutboxErrorBytes     = 2000
	ErrTypeIndexUnavailable = "IndexUnavailable"
)

// DrainInput is the DrainOutbox activity's input.
type DrainInput struct {
	Batch int `json:"batch,omitempty"` // rows claimed at once (default 200, max 1000)
	// MaxAttempts bounds retries of one row (default 10); a row that reached it is
	// left unprocessed, with its last error, for an operator or a reindex.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// DrainResult says what one drain did.
type DrainResult struct {
	Claimed   int    `json:"claimed"`
	Upserted  int    `json:"upserted"`  // documents written
	Deleted   int    `json:"deleted"`   // documents removed
	Processed int    `json:"processed"` // outbox rows marked processed
	Failed    int    `json:"failed"`    // rows whose attempt failed (retried later)
	LastError string `json:"last_error,omitempty"`
}

// More reports whether the batch was full, so more rows are likely waiting.
func (r DrainResult) More(batch int) bool {
	if batch <= 0 {
		batch = DefaultDrainBatch
	}
	return r.Claimed >= batch
}

func (a *OutboxActivities) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// EnsureTypesense creates the collection if needed (idempotent); the indexer
// workflow runs it before draining.
func (a *OutboxActivities) EnsureTypesense(ctx context.Context) error {
	if err := a.Index.EnsureCollection(ctx); err != nil {
		if typesense.IsUnavailable(err) {
			return temporal.NewApplicationErrorWithCause(err.Error(), ErrTypeIndexUnavailable, err)
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
	}
	return nil
}

// DrainOutbox claims pending outbox rows with FOR UPDATE SKIP LOCKED (so several
// drainers never take the same row), loads the rows they name tenant by tenant,
// writes or deletes their documents and marks the outbox rows processed, all
// before the claiming transaction commits. When Typesense fails, the rows it
// concerned get attempts+1 and last_error and stay pending for a later drain;
// the activity itself succeeds so the workflow decides when to try again.
//
// A fact row re-indexes every revision of its memory key: the write path only
// queues the new revision, but the one it superseded changed too (status,
// valid_until).
func (a *OutboxActivities) DrainOutbox(ctx context.Context, in DrainInput) (DrainResult, error) {
	var res DrainResult
	batch := in.Batch
	if batch <= 0 {
		batch = DefaultDrainBatch
	}
	batch = min(batch, MaxDrainBatch)
	maxAttempts := in.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultOutboxAttempts
	}
	err := a.Store.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		rows, err := storage.ClaimOutbox(ctx, tx, maxAttempts, batch)
		if err != nil {
			return err
		}
		res.Claimed = len(rows)
		if len(rows) == 0 {
			return nil
		}
		heartbeat(ctx, res)
		byTenant := map[string][]storage.OutboxRow{}
		var tenants []string
		for _, r := range rows {
			if _, ok := byTenant[r.TenantID]; !ok {
				tenants = append(tenants, r.TenantID)
			}
			byTenant[r.TenantID] = append(byTenant[r.TenantID], r)
		}
		var done []int64
		failed := map[int64]string{}
		for _, tenant := range tenants {
			ok, bad, up, del, err := a.drainTenant(ctx, tx, tenant, byTenant[tenant])
			if err != nil {
				return err
			}
			done = append(done, ok...)
			for id, msg := range bad {
				failed[id] = msg
			}
			res.Upserted += up
			res.Deleted += del
			heartbeat(ctx, res)
		}
		if err := storage.MarkOutboxProcessed(ctx, tx, done); err != nil {
			return err
		}
		for id, msg := range failed {
			if len(msg) > maxOutboxErrorBytes {
				msg = msg[:maxOutboxErrorBytes]
			}
			if err := storage.MarkOutboxFailed(ctx, tx, id, msg); err != nil {
				return err
			}
			res.LastError = msg
		}
		res.Processed, res.Failed = len(done), len(failed)
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.Failed > 0 {
		a.logger().Warn("outbox drain: index writes failed; rows stay pending", "claimed", res.Claimed, "failed", res.Failed, "error", res.LastError)
	}
	return res, nil
}

// drainTenant indexes one tenant's claimed rows. It returns the outbox ids done,
// the ids that failed with their error, and document counts. An error return is a
// database failure (the whole drain rolls back and is retried).
func (a *OutboxActivities) drainTenant(ctx context.Context, tx bun.Tx, tenant string, rows []storage.OutboxRow) (done []int64, failed map[int64]string, upserted, deleted int, err error) {
	failed = map[int64]string{}
	var factIDs, evidenceIDs []string
	for _, r := range rows {
		if r.Op != "UPSERT" {
			continue
		}
		if r.Kind == "FACT" {
			factIDs = append(factIDs, r.RefID)
		} else {
			evidenceIDs = append(evidenceIDs, r.RefID)
		}
	}
	// Load what Postgres holds now: the outbox only says which rows changed.
	facts, err := storage.RevisionsOfFacts(ctx, tx, tenant, factIDs)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	evidence, err := storage.EvidenceByID(ctx, tx, tenant, evidenceIDs)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	// Documents carry the clear (redacted) text; the rows may be sealed at rest.
	if err := a.Store.DecryptFacts(facts); err != nil {
		return nil, nil, 0, 0, err
	}
	if err := a.Store.DecryptEvidence(evidence); err != nil {
		return nil, nil, 0, 0, err
	}
	present := map[string]bool{}
	var docs []typesense.Document
	for i := range facts {
		present["FACT/"+facts[i].ID] = true
		docs = append(docs, typesense.FactDocument(&facts[i]))
	}
	for i := range evidence {
		present["EVIDENCE/"+evidence[i].ID] = true
		docs = append(docs, typesense.EvidenceDocument(&evidence[i]))
	}
	// Upserts first, in one import; a refused document fails only its own rows.
	upsertErr := error(nil)
	refused := map[string]string{}
	if len(docs) > 0 {
		upsertErr = a.Index.Upsert(ctx, docs)
		var ie *typesense.ImportError
		if errors.As(upsertErr, &ie) {
			refused, upsertErr = ie.Failed, nil
		}
		if upsertErr == nil {
			upserted = len(docs) - len(refused)
		}
	}
	kindOf := map[string]recall.Kind{"FACT": recall.KindFact, "EVIDENCE": recall.KindEvidence}
	deletedRef := map[string]error{}
	for _, r := range rows {
		key := r.Kind + "/" + r.RefID
		if r.Op == "UPSERT" && present[key] {
			switch {
			case upsertErr != nil:
				failed[r.ID] = upsertErr.Error()
			case refused[typesense.DocID(tenant, kindOf[r.Kind], r.RefID)] != "":
				failed[r.ID] = refused[typesense.DocID(tenant, kindOf[r.Kind], r.RefID)]
			default:
				done = append(done, r.ID)
			}
			continue
		}
		// DELETE, or an UPSERT whose row is gone (erased): remove the document.
		derr, seen := deletedRef[key]
		if !seen {
			derr = a.Index.Delete(ctx, tenant, kindOf[r.Kind], r.RefID)
			deletedRef[key] = derr
			if derr == nil {
				deleted++
			}
		}
		if derr != nil {
			failed[r.ID] = derr.Error()
		} else {
			done = append(done, r.ID)
		}
	}
	return done, failed, upserted, deleted, nil
}

// ReindexInput names the tenant to rebuild.
type ReindexInput struct {
	TenantID string `json:"tenant_id"`
	PageSize int    `json:"page_size,omitempty"`
}

// ReindexTypesense rebuilds a tenant's documents from Postgres (facts, every
// revision, and evidence), then removes the tenant's documents it did not write
// (rows deleted meanwhile). It heartbeats its cursor and resumes from it after a
// worker restart.
func (a *OutboxActivities) ReindexTypesense(ctx context.Context, in ReindexInput) (typesense.ReindexResult, error) {
	var cur typesense.ReindexCursor
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &cur); err != nil {
			cur = typesense.ReindexCursor{}
		}
	}
	if cur.StartedAt == 0 {
		cur.StartedAt = time.Now().Unix()
	}
	res, err := a.Index.Reindex(ctx, a.Store, in.TenantID, typesense.ReindexOptions{
		PageSize: in.PageSize,
		Resume:   cur,
		Progress: func(c typesense.ReindexCursor) { heartbeat(ctx, c) },
	})
	var fe memory.FieldError
	switch {
	case errors.As(err, &fe):
		return res, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
	case err != nil && typesense.IsUnavailable(err):
		return res, temporal.NewApplicationErrorWithCause(err.Error(), ErrTypeIndexUnavailable, err)
	case err != nil:
		return res, err
	}
	a.logger().Info("typesense reindex done", "tenant", in.TenantID, "facts", res.Facts, "evidence", res.Evidence, "stale_removed", res.StaleRemoved)
	return res, nil
}
