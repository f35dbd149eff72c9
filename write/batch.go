package write

import (
	"cmp"
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
	// SliceEvents is how many events one workflow task writes at most (default
	// DefaultBatchSlice; see batchSlicesChange).
	SliceEvents int `json:"slice_events,omitempty"`
}

// batchSlicesChange (workflow.GetVersion): a batch writes its events in slices of
// at most SliceEvents and sliceTime, each slice's local activities in a workflow task of its
// own (a 1 ms timer ends it), and embeds each slice in regular activities while
// the next slice is written. A workflow task stays open until its local
// activities finish: the whole batch's writes and embeddings were one task (500
// events: over 5 s, TMPRL1104), which the worker must heartbeat past 8 s and
// the server times out at 10 s on a busy machine, writing it all again.
const (
	batchSlicesChange  = "batch-slices"
	batchSlicesVersion = 1
)

// batchRunsChange (workflow.GetVersion): a batch writes each user's events in runs
// of up to MaxRunEvents, one WriteRun local activity each (see run.go), where it
// wrote each event in a Record, an Extract, a Validate, an UpdateSession and a
// MarkEvent local activity of its own.
const (
	batchRunsChange  = "batch-runs"
	batchRunsVersion = 1
)

// A workflow task of a batch writes at most DefaultBatchSlice events, and begins
// none after sliceTime: with the events in flight then, a task runs about 0.5 to
// 0.8 s however busy the machine (on two shared cores one event took 10 to 90 ms).
const (
	DefaultBatchSlice = 256
	sliceTime         = 500 * time.Millisecond
	sliceClockEvery   = 4 // events between looks at the clock (each is a marker in the history)
)

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
	st, slice := batchSteps(ctx, in)
	if err := validBatch(in); err != nil {
		return out, err
	}
	opts, par := batchOptions(in, st)
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
	ws, err := writeBatchEvents(ctx, st, in, opts, par, slice, rv)
	if err != nil {
		return out, err
	}
	if len(rv.pending) > 0 {
		if out.Reviewed, err = reviewBatch(ctx, st, first.TenantID, ws, rv, opts.ReviewTimeout); err != nil {
			return out, err
		}
	}
	for _, w := range ws {
		out.Results = append(out.Results, w.res)
	}
	out.count()
	return out, nil
}

// batchSteps are the batch's steps by the versions it started under (the fast
// path's local activities; slices of events per workflow task) and its slice.
func batchSteps(ctx workflow.Context, in MemoryWriteBatchInput) (st steps, slice int) {
	st = steps{fast: workflow.GetVersion(ctx, fastWriteChange, workflow.DefaultVersion, fastWriteVersion) >= fastWriteVersion}
	if st.fast && len(in.Events) > 0 {
		// The batch's turns and facts are embedded together, in chunks.
		st.batched = &IndexInput{TenantID: in.Events[0].TenantID}
	}
	// slice: events per workflow task; 0: all (a batch started before batch-slices)
	if st.fast && workflow.GetVersion(ctx, batchSlicesChange, workflow.DefaultVersion, batchSlicesVersion) >= batchSlicesVersion {
		slice, st.regularIndex = cmp.Or(max(in.SliceEvents, 0), DefaultBatchSlice), true
	}
	return st, slice
}

// validBatch refuses a batch that can never be written (no events, too many, an
// invalid event), naming the event.
func validBatch(in MemoryWriteBatchInput) error {
	if len(in.Events) == 0 {
		return temporal.NewNonRetryableApplicationError("events: is empty", memory.ErrTypeBadInput, nil)
	}
	if len(in.Events) > MaxBatchEvents {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("events: %d events, a batch holds at most %d", len(in.Events), MaxBatchEvents), memory.ErrTypeBadInput, nil)
	}
	for i := range in.Events {
		if err := in.Events[i].Validate(); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("events[%d].%v", i, err), memory.ErrTypeBadInput, err)
		}
	}
	return nil
}

// batchOptions are each event's write options and how many users' events are
// written at once.
func batchOptions(in MemoryWriteBatchInput, st steps) (MemoryWriteInput, int) {
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
	return opts, par
}

// byUser groups the events' indexes by user, in order of first appearance, each
// group in event-time order.
func byUser(events []memory.IngestEvent) (groups map[string][]int, users []string) {
	groups = map[string][]int{}
	for i, e := range events {
		if _, ok := groups[e.UserID]; !ok {
			users = append(users, e.UserID)
		}
		groups[e.UserID] = append(groups[e.UserID], i)
	}
	for _, u := range users {
		idx := groups[u]
		sort.SliceStable(idx, func(a, b int) bool { return events[idx[a]].OccurredAt.Before(events[idx[b]].OccurredAt) })
	}
	return groups, users
}

// writeBatchEvents writes the batch's events: par users at once, one user's
// events in their order, in slices per workflow task, each slice embedded beside
// the next; what was committed is searchable by meaning before it returns.
func writeBatchEvents(ctx workflow.Context, st steps, in MemoryWriteBatchInput, opts MemoryWriteInput, par, slice int, rv *reviewState) ([]*written, error) {
	groups, users := byUser(in.Events)
	ws := make([]*written, len(in.Events))
	var firstErr error
	next := 0
	running := 0
	// A slice is full after slice events, or once it has run sliceTime (looked at
	// every sliceClockEvery events, the clock recorded in the history as a side
	// effect, so a replay decides the same); an event past it waits for the next.
	// started and writing count the slice's events begun and still being written.
	started, writing, full := 0, 0, false
	var sliceStart time.Time
	if slice > 0 {
		sliceStart = wallClock(ctx)
	}
	runs := slice > 0 && workflow.GetVersion(ctx, batchRunsChange, workflow.DefaultVersion, batchRunsVersion) >= batchRunsVersion
	for w := 0; w < par && w < len(users); w++ {
		running++
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { running-- }()
			for next < len(users) && firstErr == nil {
				u := users[next]
				next++
				idx := groups[u]
				for k := 0; k < len(idx); {
					n := 1 // events of the step: an event, or a run (WriteRun)
					if runs {
						n = min(MaxRunEvents, len(idx)-k)
					}
					if slice > 0 {
						if workflow.Await(ctx, func() bool { return !full }) != nil || firstErr != nil {
							return
						}
						n = min(n, slice-started)
						started += n
						full = started >= slice || (runs || started%sliceClockEvery == 0) && wallClock(ctx).Sub(sliceStart) >= sliceTime
					}
					writing++
					done, err := writeEvents(ctx, st, opts, in.Events, idx[k:k+n], ws, rv, runs)
					writing--
					if err != nil {
						firstErr = err
						return
					}
					k += done
				}
			}
		})
	}
	var indexing []workflow.Future
	for {
		if err := workflow.Await(ctx, func() bool { return running == 0 || (full && writing == 0) }); err != nil {
			return ws, err
		}
		if running == 0 {
			break
		}
		// The slice is written: embed it beside the next, and end this workflow task.
		earlier := indexing
		indexing = append(indexing, st.startIndex(ctx)...)
		if err := nextTask(ctx, earlier); err != nil {
			return ws, err
		}
		started, full, sliceStart = 0, false, wallClock(ctx)
	}
	// What was committed is searchable by meaning before reviews are awaited.
	awaitIndex(ctx, append(indexing, st.startIndex(ctx)...))
	return ws, firstErr
}

// reviewBatch awaits the reviews the batch's candidates wait for and commits what
// the reviewers (or the timeout's defaults) decided; it returns how many
// candidates were reviewed. Asked while reviews are awaited, the batch answers
// each event's own status.
func reviewBatch(ctx workflow.Context, st steps, tenant string, ws []*written, rv *reviewState, timeout time.Duration) (int, error) {
	var soFar MemoryWriteBatchResult
	for _, w := range ws {
		soFar.Results = append(soFar.Results, w.soFar())
	}
	soFar.count()
	rv.soFar = soFar
	if err := awaitReview(ctx, tenant, rv, timeout, false); err != nil {
		return 0, err
	}
	reviewed := 0
	for _, w := range ws {
		if len(w.pending) == 0 {
			continue
		}
		if err := w.commit(ctx, st, w.ev, w.pending, rv.verdicts); err != nil {
			return reviewed, err
		}
		reviewed += len(w.pending)
	}
	st.flushIndex(ctx)
	return reviewed, nil
}

// count sets the counts of the results' statuses.
func (r *MemoryWriteBatchResult) count() {
	for _, res := range r.Results {
		switch res.Status {
		case WriteCommitted:
			r.Committed++
		case WriteUnparsed:
			r.Unparsed++
		case WriteNoMemory:
			r.NoMemory++
		}
	}
}

// writeEvents writes the events of idx (one user's, in time order) into ws: as a
// run (WriteRun), or one by one. done is how many it wrote, at least one; err names
// the event that failed the batch.
func writeEvents(ctx workflow.Context, st steps, opts MemoryWriteInput, events []memory.IngestEvent, idx []int, ws []*written, rv *reviewState, run bool) (done int, err error) {
	var rr WriteRunResult
	if run {
		var a *MemoryActivities
		wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
		in := WriteRunInput{ExtractAttempts: opts.ExtractAttempts}
		for _, i := range idx {
			in.Records = append(in.Records, RecordInput{Event: events[i], WorkflowID: wfID})
		}
		if err := workflow.ExecuteLocalActivity(fastLocalActivity(ctx), a.WriteRun, in).Get(ctx, &rr); err != nil {
			return 0, fmt.Errorf("events[%d]: %w", idx[0], err)
		}
	}
	for j := range rr.Results {
		i := idx[j]
		wr, err := writeEventFrom(ctx, st, opts, events[i], rv, &rr.Results[j])
		ws[i] = wr
		if err != nil {
			return j, fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	done = len(rr.Results)
	if done == len(idx) || done > 0 && !rr.Results[done-1].Done {
		return done, nil // all written, or the last goes on from its Record
	}
	// Not in a run (or the run left it: it fails for good): the event's own steps.
	i := idx[done]
	wr, err := writeEvent(ctx, st, opts, events[i], rv)
	ws[i] = wr
	if err != nil {
		return done, fmt.Errorf("events[%d]: %w", i, err)
	}
	return done + 1, nil
}

// wallClock is the time now, recorded in the history (a side effect), so a replay
// sees the time the run saw.
func wallClock(ctx workflow.Context) time.Time {
	var t time.Time
	_ = workflow.SideEffect(ctx, func(workflow.Context) any { return time.Now() }).Get(&t)
	return t
}

// nextTask ends the workflow task; the next starts with the first of a 1 ms
// timer and the end of an embedding started before. An embedding that ended while
// this task ran starts the next at once (the server answers this task's
// completion with it), where a timer waits for the server's timer queue (1.1-1.3 s
// on a busy dev server, engram ingest --file's batch histories).
func nextTask(ctx workflow.Context, indexing []workflow.Future) error {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, time.Millisecond), func(workflow.Future) {})
	for _, f := range indexing {
		if !f.IsReady() {
			sel.AddFuture(f, func(workflow.Future) {})
		}
	}
	sel.Select(ctx)
	return ctx.Err()
}

func secondsToDuration(s int64) time.Duration { return time.Duration(s) * time.Second }
