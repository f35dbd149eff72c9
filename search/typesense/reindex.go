package typesense

import (
	"context"
	"time"

	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// ReindexCursor is where a reindex stands; an activity heartbeats it and resumes
// from it.
type ReindexCursor struct {
	StartedAt int64  `json:"started_at"` // unix seconds when the run began
	Phase     string `json:"phase"`      // "", facts, evidence, cleanup, done
	AfterID   string `json:"after_id"`   // last row id written in the phase
	Facts     int    `json:"facts"`
	Evidence  int    `json:"evidence"`
}

// ReindexOptions tune a reindex.
type ReindexOptions struct {
	PageSize int           // rows read and imported at once (default 500)
	Resume   ReindexCursor // zero: from the start
	Progress func(ReindexCursor)
	// StaleMargin: documents last written more than this before the run began, and
	// not rewritten by it, are deleted at the end (default 1m, to tolerate clock
	// skew between workers; negative: no margin).
	StaleMargin time.Duration
}

// ReindexResult counts what a reindex wrote and removed.
type ReindexResult struct {
	Facts        int `json:"facts"`
	Evidence     int `json:"evidence"`
	StaleRemoved int `json:"stale_removed"`
}

// Reindex rebuilds one tenant's documents from Postgres, streaming facts (every
// revision) and evidence in id order, page by page, then deletes the tenant's
// documents the run did not write (rows that no longer exist). Running it while
// the outbox indexer works is safe: both write what Postgres holds.
func (ix *Index) Reindex(ctx context.Context, store *storage.Store, tenantID string, opts ReindexOptions) (ReindexResult, error) {
	if err := checkValue("tenant_id", tenantID); err != nil {
		return ReindexResult{}, err
	}
	page := opts.PageSize
	if page <= 0 {
		page = 500
	}
	margin := opts.StaleMargin
	if margin == 0 {
		margin = time.Minute
	} else if margin < 0 {
		margin = 0
	}
	cur := opts.Resume
	if cur.StartedAt == 0 {
		cur.StartedAt = time.Now().Unix()
	}
	if cur.Phase == "" {
		cur.Phase = "facts"
	}
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(cur)
		}
	}
	if err := ix.EnsureCollection(ctx); err != nil {
		return ReindexResult{}, err
	}
	for cur.Phase == "facts" {
		facts, err := store.FactsPage(ctx, tenantID, cur.AfterID, page)
		if err != nil {
			return result(cur), err
		}
		docs := make([]Document, len(facts))
		for i := range facts {
			docs[i] = FactDocument(&facts[i])
		}
		if err := ix.Upsert(ctx, docs); err != nil {
			return result(cur), err
		}
		cur.Facts += len(facts)
		if len(facts) < page {
			cur.Phase, cur.AfterID = "evidence", ""
		} else {
			cur.AfterID = facts[len(facts)-1].ID
		}
		progress()
	}
	for cur.Phase == "evidence" {
		evs, err := store.EvidencePage(ctx, tenantID, cur.AfterID, page)
		if err != nil {
			return result(cur), err
		}
		docs := make([]Document, len(evs))
		for i := range evs {
			docs[i] = EvidenceDocument(&evs[i])
		}
		if err := ix.Upsert(ctx, docs); err != nil {
			return result(cur), err
		}
		cur.Evidence += len(evs)
		if len(evs) < page {
			cur.Phase, cur.AfterID = "cleanup", ""
		} else {
			cur.AfterID = evs[len(evs)-1].ID
		}
		progress()
	}
	res := result(cur)
	if cur.Phase == "cleanup" {
		n, err := ix.DeleteByFilter(ctx, tenantID, Filter{IndexedBefore: cur.StartedAt - int64(margin/time.Second)})
		if err != nil {
			return res, err
		}
		res.StaleRemoved = n
		cur.Phase = "done"
		progress()
	}
	return res, nil
}

func result(c ReindexCursor) ReindexResult {
	return ReindexResult{Facts: c.Facts, Evidence: c.Evidence}
}

// Kinds lists both document kinds.
var Kinds = []recall.Kind{recall.KindFact, recall.KindEvidence}
