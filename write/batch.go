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
	// Revision is the batch's shape, as a single write's (StartBatch sets
	// WriteRevision); 0 is a batch started before revisions (legacy.go).
	Revision int `json:"revision,omitempty"`
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

func memoryWriteBatch(ctx workflow.Context, in MemoryWriteBatchInput, rv *reviewState) (out MemoryWriteBatchResult, err error) {
	if legacyRevision(in.Revision) {
		return memoryWriteBatchSteps(ctx, in, rv)
	}
	if err := validBatch(in); err != nil {
		return out, err
	}
	opts, par := batchOptions(in, true)
	first := in.Events[0]
	_ = workflow.UpsertTypedSearchAttributes(ctx, memory.SearchAttrTenant.ValueSet(first.TenantID), memory.SearchAttrKind.ValueSet(WriteKind), SearchAttrReview.ValueSet(ReviewNone))
	if err := registerReview(ctx, workflow.GetSignalChannel(ctx, SignalReview), rv); err != nil {
		return out, err
	}
	defer func() {
		f := MarkFailedInput{TenantID: first.TenantID}
		for _, e := range in.Events {
			f.Keys = append(f.Keys, e.IdempotencyKey)
		}
		markFailedBy(ctx, err, f, localStep)
	}()
	b := &batch{opts: opts, events: in.Events, ws: make([]*writeOne, len(in.Events)), gathered: &IndexInput{TenantID: first.TenantID}}
	for i, e := range in.Events {
		b.ws[i] = &writeOne{ev: e, in: opts, rv: rv, gathered: b.gathered}
	}
	slice := cmp.Or(max(in.SliceEvents, 0), DefaultBatchSlice)
	if err := writeBatchEvents(ctx, b, par, slice, func() bool { return true }); err != nil {
		return out, err
	}
	if len(rv.pending) > 0 {
		if out.Reviewed, err = b.review(ctx, first.TenantID, rv); err != nil {
			return out, err
		}
	}
	for _, w := range b.ws {
		out.Results = append(out.Results, w.step.Result)
	}
	out.count()
	return out, nil
}

// batchWriter writes a batch's events: revision 3's batch, or legacyBatch.
type batchWriter interface {
	eventsOf() []memory.IngestEvent
	// write writes the events of idx (one user's, in time order), as a run when
	// run, or one; done is how many it wrote, at least one; err names the event
	// that failed the batch.
	write(ctx workflow.Context, idx []int, run bool) (done int, err error)
	// startIndex starts the Index steps of what was gathered, and empties it.
	startIndex(ctx workflow.Context) []workflow.Future
}

// batch is a batch of revision 3: each event is a writeOne, written in runs of one
// user's events (WriteEvents), what a run leaves finished by the event's own steps;
// what is stored without its vector is gathered and embedded in chunks.
type batch struct {
	opts     MemoryWriteInput
	events   []memory.IngestEvent
	ws       []*writeOne
	gathered *IndexInput
}

func (b *batch) eventsOf() []memory.IngestEvent { return b.events }

func (b *batch) write(ctx workflow.Context, idx []int, _ bool) (int, error) {
	var a *MemoryActivities
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	var in WriteEventsInput
	for _, i := range idx {
		in.Events = append(in.Events, WriteInput{Event: b.events[i], WorkflowID: wfID, ExtractAttempts: b.opts.ExtractAttempts})
	}
	var out WriteEventsResult
	if err := localStep(ctx, a.WriteEvents, in).Get(ctx, &out); err != nil {
		return 0, fmt.Errorf("events[%d]: %w", idx[0], err)
	}
	for j, step := range out.Steps {
		w := b.ws[idx[j]]
		w.step = step
		if err := w.finish(ctx); err != nil {
			return j, fmt.Errorf("events[%d]: %w", idx[j], err)
		}
	}
	done := len(out.Steps)
	if done == len(idx) || done > 0 && out.Steps[done-1].Result.Status == "" {
		return done, nil // all written, or the last went on from its Write
	}
	// The run left the event: it fails for good, alone, naming it.
	i := idx[done]
	if err := b.ws[i].write(ctx); err != nil {
		return done, fmt.Errorf("events[%d]: %w", i, err)
	}
	return done + 1, nil
}

func (b *batch) startIndex(ctx workflow.Context) []workflow.Future {
	var a *MemoryActivities
	var fs []workflow.Future
	for _, in := range indexParts(b.gathered) {
		fs = append(fs, workflow.ExecuteActivity(dbActivity(ctx), a.Index, in))
	}
	return fs
}

// indexParts is what g gathered as Index inputs of indexChunk texts each (the
// turns first, then the facts), and empties g.
func indexParts(g *IndexInput) []IndexInput {
	var out []IndexInput
	for _, part := range chunks(g.EvidenceIDs, indexChunk) {
		out = append(out, IndexInput{TenantID: g.TenantID, EvidenceIDs: part})
	}
	for _, part := range chunks(g.FactIDs, indexChunk) {
		out = append(out, IndexInput{TenantID: g.TenantID, FactIDs: part})
	}
	g.EvidenceIDs, g.FactIDs = nil, nil
	return out
}

// review awaits the reviews the batch's candidates wait for and commits what the
// reviewers (or the timeout's defaults) decided; it returns how many candidates
// were reviewed. Asked while reviews are awaited, the batch answers each event's
// own status.
func (b *batch) review(ctx workflow.Context, tenant string, rv *reviewState) (int, error) {
	var soFar MemoryWriteBatchResult
	for _, w := range b.ws {
		soFar.Results = append(soFar.Results, w.soFar())
	}
	soFar.count()
	rv.soFar = soFar
	if err := awaitReview(ctx, tenant, rv, b.opts.ReviewTimeout, true); err != nil {
		return 0, err
	}
	reviewed := 0
	for _, w := range b.ws {
		n := len(w.step.Pending)
		if n == 0 {
			continue
		}
		if err := w.commitReviewed(ctx); err != nil {
			return reviewed, err
		}
		reviewed += n
	}
	awaitIndex(ctx, b.startIndex(ctx))
	return reviewed, nil
}

// batchOptions are each event's write options and how many users' events are
// written at once.
func batchOptions(in MemoryWriteBatchInput, fast bool) (MemoryWriteInput, int) {
	opts := withDefaults(MemoryWriteInput{ExtractAttempts: in.ExtractAttempts})
	if in.ReviewTimeout > 0 {
		opts.ReviewTimeout = secondsToDuration(in.ReviewTimeout)
	}
	par := in.Parallelism
	switch {
	case par > 0:
	case fast:
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
func writeBatchEvents(ctx workflow.Context, bw batchWriter, par, slice int, runsVersion func() bool) error {
	groups, users := byUser(bw.eventsOf())
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
	runs := slice > 0 && runsVersion()
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
					done, err := bw.write(ctx, idx[k:k+n], runs)
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
			return err
		}
		if running == 0 {
			break
		}
		// The slice is written: embed it beside the next, and end this workflow task.
		earlier := indexing
		indexing = append(indexing, bw.startIndex(ctx)...)
		if err := nextTask(ctx, earlier); err != nil {
			return err
		}
		started, full, sliceStart = 0, false, wallClock(ctx)
	}
	// What was committed is searchable by meaning before reviews are awaited.
	awaitIndex(ctx, append(indexing, bw.startIndex(ctx)...))
	return firstErr
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
