package write

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
)

// MaxBatchEvents bounds one batch so its history stays far below Temporal's limit;
// clients split longer histories into several batches.
const MaxBatchEvents = 500

// MemoryWriteBatchInput ingests a long history in one workflow.
type MemoryWriteBatchInput struct {
	Events          []memory.IngestEvent `json:"events"`
	Parallelism     int                  `json:"parallelism,omitempty"` // users processed at once (default 16)
	ExtractAttempts int                  `json:"extract_attempts,omitempty"`
	ReviewTimeout   int64                `json:"review_timeout_seconds,omitempty"`
}

// MemoryWriteBatchResult has one result per event, in input order, and counts.
type MemoryWriteBatchResult struct {
	Results   []MemoryWriteResult `json:"results"`
	Committed int                 `json:"committed"`
	Unparsed  int                 `json:"unparsed"`
	NoMemory  int                 `json:"no_memory"`
	Reviewed  int                 `json:"reviewed"`
}

// MemoryWriteBatch runs the write path for many events with bounded parallelism:
// one user's events in time order (so governance sees them in order), several
// users at once. Candidates that need review wait together, once, at the end.
func MemoryWriteBatch(ctx workflow.Context, in MemoryWriteBatchInput) (MemoryWriteBatchResult, error) {
	return answering(ctx, in, memoryWriteBatch)
}

func memoryWriteBatch(ctx workflow.Context, in MemoryWriteBatchInput, rv *reviewState) (out MemoryWriteBatchResult, err error) {
	st := steps{fast: workflow.GetVersion(ctx, fastWriteChange, workflow.DefaultVersion, fastWriteVersion) >= fastWriteVersion}
	if st.fast && len(in.Events) > 0 {
		// The batch's turns and facts are embedded together, in chunks.
		st.batched = &IndexInput{TenantID: in.Events[0].TenantID}
	}
	if len(in.Events) == 0 {
		return out, temporal.NewNonRetryableApplicationError("events: is empty", memory.ErrTypeBadInput, nil)
	}
	if len(in.Events) > MaxBatchEvents {
		return out, temporal.NewNonRetryableApplicationError(fmt.Sprintf("events: %d events, a batch holds at most %d", len(in.Events), MaxBatchEvents), memory.ErrTypeBadInput, nil)
	}
	for i := range in.Events {
		if err := in.Events[i].Validate(); err != nil {
			return out, temporal.NewNonRetryableApplicationError(fmt.Sprintf("events[%d].%v", i, err), memory.ErrTypeBadInput, err)
		}
	}
	opts := withDefaults(MemoryWriteInput{ExtractAttempts: in.ExtractAttempts})
	if in.ReviewTimeout > 0 {
		opts.ReviewTimeout = secondsToDuration(in.ReviewTimeout)
	}
	par := in.Parallelism
	switch {
	case par > 0:
	case st.fast:
		par = 16 // local activities: the worker's slots, not the server, bound it
	default:
		par = 4
	}
	first := in.Events[0]
	_ = workflow.UpsertTypedSearchAttributes(ctx, memory.SearchAttrTenant.ValueSet(first.TenantID), memory.SearchAttrKind.ValueSet(WriteKind), SearchAttrReview.ValueSet(ReviewNone))
	reviewCh := workflow.GetSignalChannel(ctx, SignalReview)
	if err := registerReview(ctx, reviewCh, rv); err != nil {
		return out, err
	}

	defer func() {
		if len(in.Events) == 0 {
			return
		}
		f := MarkFailedInput{TenantID: in.Events[0].TenantID}
		for _, e := range in.Events {
			f.Keys = append(f.Keys, e.IdempotencyKey)
		}
		markFailed(ctx, st, err, f)
	}()
	// Group by user, each group in event-time order.
	groups := map[string][]int{}
	var users []string
	for i, e := range in.Events {
		if _, ok := groups[e.UserID]; !ok {
			users = append(users, e.UserID)
		}
		groups[e.UserID] = append(groups[e.UserID], i)
	}
	for _, u := range users {
		idx := groups[u]
		sort.SliceStable(idx, func(a, b int) bool { return in.Events[idx[a]].OccurredAt.Before(in.Events[idx[b]].OccurredAt) })
	}
	ws := make([]*written, len(in.Events))
	var firstErr error
	next := 0
	running := 0
	for w := 0; w < par && w < len(users); w++ {
		running++
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { running-- }()
			for next < len(users) && firstErr == nil {
				u := users[next]
				next++
				for _, i := range groups[u] {
					wr, err := writeEvent(ctx, st, opts, in.Events[i], rv)
					ws[i] = wr
					if err != nil {
						firstErr = fmt.Errorf("events[%d]: %w", i, err)
						return
					}
				}
			}
		})
	}
	if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
		return out, err
	}
	// What was committed is searchable by meaning before reviews are awaited.
	st.flushIndex(ctx)
	if firstErr != nil {
		return out, firstErr
	}
	if len(rv.pending) > 0 {
		if err := awaitReview(ctx, rv, opts.ReviewTimeout); err != nil {
			return out, err
		}
		for _, w := range ws {
			if len(w.pending) == 0 {
				continue
			}
			if err := w.commit(ctx, st, w.ev, w.pending, rv.verdicts); err != nil {
				return out, err
			}
			out.Reviewed += len(w.pending)
		}
		st.flushIndex(ctx)
	}
	for _, w := range ws {
		out.Results = append(out.Results, w.res)
		switch w.res.Status {
		case WriteCommitted:
			out.Committed++
		case WriteUnparsed:
			out.Unparsed++
		case WriteNoMemory:
			out.NoMemory++
		}
	}
	return out, nil
}

func secondsToDuration(s int64) time.Duration { return time.Duration(s) * time.Second }
