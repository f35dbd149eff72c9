package write

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
)

// retryPolicy backs off from initial, doubling up to maxInterval, for at most
// attempts tries; the error types retrying cannot fix are not retried.
func retryPolicy(initial, maxInterval time.Duration, attempts int32) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: initial, BackoffCoefficient: 2, MaximumInterval: maxInterval, MaximumAttempts: attempts, NonRetryableErrorTypes: NonRetryable}
}

// Activity options of the write path. Each step has its own timeout and retry
// policy; errors retrying cannot fix are listed as non-retryable.
func dbActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryPolicy(200*time.Millisecond, 30*time.Second, 20),
	})
}

func localActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         retryPolicy(200*time.Millisecond, 5*time.Second, 10),
	})
}

// fastLocalActivity runs a short, idempotent database step as a local activity:
// no round trip through the server. A retry whose backoff exceeds the SDK's local
// retry threshold waits on a workflow timer, so an outage of minutes is ridden out
// as the regular activities did; after that the write fails and says why.
func fastLocalActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            retryPolicy(100*time.Millisecond, 30*time.Second, 20),
	})
}

// localExtractActivity runs an in-process extractor (the rule extractor) as a
// local activity, with the retry policy of an extraction.
func localExtractActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryPolicy(time.Second, 30*time.Second, 5),
	})
}

// subjectAttr is the EngramSubject value of a user: the id, or a hash of an id
// longer than a search attribute may hold.
func subjectAttr(user string) string {
	if len(user) <= 1000 {
		return user
	}
	return memory.TemporalIDPart(user)
}

func extractActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 90 * time.Second, // one LLM call, with the client's own timeout inside
		// The activity heartbeats while the call runs, so a dead worker is noticed in
		// seconds rather than at the end of the start-to-close timeout.
		HeartbeatTimeout: 10 * time.Second,
		RetryPolicy:      retryPolicy(time.Second, 30*time.Second, 5),
	})
}

// MemoryWrite turns one event into governed memory: record → extract → validate
// (re-extract with the errors, bounded) → govern → commit what is trusted → await
// review of the rest → commit it → index. Its id comes from tenant + idempotency
// key, so a retried Ingest never writes twice.
func MemoryWrite(ctx workflow.Context, in MemoryWriteInput) (MemoryWriteResult, error) {
	return answering(ctx, in, memoryWrite)
}

// upsertSubject sets the search attributes a revision-1 write does not start with.
func upsertSubject(ctx workflow.Context, ev memory.IngestEvent) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, memory.SearchAttrTenant.ValueSet(ev.TenantID), SearchAttrSubject.ValueSet(subjectAttr(ev.UserID)))
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func withDefaults(in MemoryWriteInput) MemoryWriteInput {
	if in.ExtractAttempts <= 0 {
		in.ExtractAttempts = 3
	}
	if in.ReviewTimeout <= 0 {
		in.ReviewTimeout = 72 * time.Hour
	}
	return in
}

// pendingItem is a candidate awaiting review, with the event it came from.
type pendingItem struct {
	item     Governed
	evidence string
}

// memoryWrite runs a write of the current revision (3): the Write step, then what
// it left to the workflow (writeOne.finish), then the review of what waits for
// one. A write an older binary started runs as it started (memoryWriteSteps).
func memoryWrite(ctx workflow.Context, in MemoryWriteInput, rv *reviewState) (res MemoryWriteResult, err error) {
	if legacyRevision(in.Revision) {
		return memoryWriteSteps(ctx, in, rv)
	}
	ev := in.Event
	if err := ev.Validate(); err != nil {
		return MemoryWriteResult{}, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
	}
	in = withDefaults(in)
	// The review signal is registered up front so the Web UI lists it.
	if err := registerReview(ctx, workflow.GetSignalChannel(ctx, SignalReview), rv); err != nil {
		return MemoryWriteResult{}, err
	}
	w := &writeOne{ev: ev, in: in, rv: rv}
	defer func() {
		markFailedBy(ctx, err, MarkFailedInput{TenantID: ev.TenantID, EventIDs: nonEmpty(w.step.Result.EventID), Keys: []string{ev.IdempotencyKey}}, localStep)
	}()
	err = w.write(ctx)
	if refusedDuringErasure(err) {
		// The erasure's last sweep finds this history (the event's content is in its
		// input) by these.
		upsertSubject(ctx, ev)
	}
	if err != nil || len(w.step.Pending) == 0 {
		return w.step.Result, err
	}
	upsertSubject(ctx, ev) // reviewers filter a tenant's pending writes
	rv.soFar = w.soFar()
	if err := awaitReview(ctx, ev.TenantID, rv, in.ReviewTimeout, true); err != nil {
		return w.step.Result, err
	}
	return w.step.Result, w.commitReviewed(ctx)
}

// marksFailed is whether a write that ended with err marks its events FAILED: not
// when it succeeded, nor when its key was reused for another event (that event is
// someone else's write).
func marksFailed(err error) bool {
	var ae *temporal.ApplicationError
	return err != nil && !(errors.As(err, &ae) && ae.Type() == ErrTypeIdempotencyConflict)
}

// markFailedBy records, when a write ends with err (marksFailed), that its events
// can never finish (FAILED, with the reason), through step. It runs on a
// disconnected context, so a cancelled write is marked too.
func markFailedBy(ctx workflow.Context, err error, in MarkFailedInput, step func(workflow.Context, any, any) workflow.Future) {
	if !marksFailed(err) {
		return
	}
	var a *MemoryActivities
	in.Reason = "the write failed: " + rootMessage(err)
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if merr := step(dctx, a.MarkFailed, in).Get(dctx, nil); merr != nil {
		workflow.GetLogger(ctx).Error("could not mark the failed write's events FAILED", "error", merr)
	}
}

// legacyRevision is whether a write (or batch) of revision rev runs a shape before
// revision 3 (legacy.go). One a newer binary started fails the workflow task (it
// is retried, on a worker of that binary) rather than run as an older shape.
func legacyRevision(rev int) bool {
	if rev > WriteRevision {
		panic(fmt.Sprintf("write revision %d is newer than this worker's %d", rev, WriteRevision))
	}
	return rev < 3
}

func refusedDuringErasure(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrTypeErasureInProgress
}

// localStep runs a short, idempotent step of the write path as a local activity.
func localStep(ctx workflow.Context, act, in any) workflow.Future {
	return workflow.ExecuteLocalActivity(fastLocalActivity(ctx), act, in)
}

// writeOne is one event's write in a workflow (revision 3).
type writeOne struct {
	ev   memory.IngestEvent // the event as the write uses it (schema pinned)
	in   MemoryWriteInput
	rv   *reviewState
	step WriteStep
	// gathered, in a batch, gathers what is stored without its vector, which the
	// batch embeds in chunks; a single write stores the vectors with the rows and
	// indexes what that left at once.
	gathered *IndexInput
}

// write runs the Write step and what it leaves to the workflow.
func (w *writeOne) write(ctx workflow.Context) error {
	var a *MemoryActivities
	wi := WriteInput{Event: w.ev, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, ExtractAttempts: w.in.ExtractAttempts,
		Embed: w.gathered == nil, Hold: w.in.PauseBeforeCommit > 0}
	if err := localStep(ctx, a.Write, wi).Get(ctx, &w.step); err != nil {
		return err
	}
	return w.finish(ctx)
}

// finish runs, as steps of their own, what Write left: the session's update and
// the turn's vector (beside extraction: neither fails the write), extraction by an
// extractor out of process and the outcome, or a held write's governance; then it
// makes what waits for a reviewer reviewable and indexes the facts stored without
// a vector.
func (w *writeOne) finish(ctx workflow.Context) error {
	if w.step.Schema != "" {
		w.ev.Schema = w.step.Schema
	}
	defer w.sideSteps(ctx)()
	var a *MemoryActivities
	switch {
	case w.step.Extract != nil:
		x, err := extractSteps(ctx, *w.step.Extract, w.step.LocalExtract, w.in.ExtractAttempts)
		if err != nil {
			return err
		}
		if w.in.PauseBeforeCommit > 0 && w.step.hold(x) {
			return w.finishHeld(ctx)
		}
		wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
		err = settle(&w.step, w.ev, wfID, true, w.in.ExtractAttempts, x,
			func(m MarkEventInput) error { return localStep(ctx, a.MarkEvent, m).Get(ctx, nil) },
			func(g GovernInput) (gc GovernCommitResult, err error) {
				return gc, localStep(ctx, a.GovernCommit, g).Get(ctx, &gc)
			})
		if err != nil {
			return err
		}
	case w.step.Extracted != nil:
		return w.finishHeld(ctx)
	}
	w.rv.add(ctx, pendingItems(w.step.Pending, w.step.Result.EvidenceID), w.in.ReviewTimeout)
	w.indexFacts(ctx)
	return nil
}

// finishHeld finishes a held write: governance, the pause, the commit.
func (w *writeOne) finishHeld(ctx workflow.Context) error {
	if err := w.governHeld(ctx); err != nil {
		return err
	}
	w.indexFacts(ctx)
	return nil
}

// sideSteps starts the session's update and the turn's Index when Write left them,
// and returns what settles them.
func (w *writeOne) sideSteps(ctx workflow.Context) func() {
	var a *MemoryActivities
	var fs []workflow.Future
	if u := &w.step.Unindexed; len(u.EvidenceIDs) > 0 {
		if w.gathered != nil {
			w.gathered.EvidenceIDs = append(w.gathered.EvidenceIDs, u.EvidenceIDs...)
		} else {
			fs = append(fs, localStep(ctx, a.Index, IndexInput{TenantID: u.TenantID, EvidenceIDs: u.EvidenceIDs}))
		}
		u.EvidenceIDs = nil
	}
	if w.step.Session != nil {
		fs = append(fs, localStep(ctx, a.UpdateSession, *w.step.Session))
	}
	return func() {
		for _, f := range fs {
			if err := f.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("a side step of the write failed; the write stands", "error", err)
			}
		}
	}
}

// governHeld governs a held write's candidates (PauseBeforeCommit), pauses, and
// commits those that need no reviewer.
func (w *writeOne) governHeld(ctx workflow.Context) error {
	var a *MemoryActivities
	var gov GovernResult
	gin := GovernInput{Event: w.ev, EventID: w.step.Result.EventID, EvidenceID: w.step.Result.EvidenceID,
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Candidates: w.step.Extracted}
	if err := localStep(ctx, a.Govern, gin).Get(ctx, &gov); err != nil {
		return err
	}
	var now []Governed
	for _, it := range gov.Items {
		if it.Decision.Status == memory.CandidateNeedsConfirmation {
			w.step.Pending = append(w.step.Pending, it)
		} else {
			now = append(now, it)
		}
	}
	w.rv.add(ctx, pendingItems(w.step.Pending, w.step.Result.EvidenceID), w.in.ReviewTimeout)
	if err := workflow.Sleep(ctx, w.in.PauseBeforeCommit); err != nil {
		return err
	}
	w.step.Result.Status = WriteCommitted
	if len(now) == 0 {
		return nil
	}
	return w.commit(ctx, now, nil)
}

// commit commits items of the event (with the verdicts of reviewed ones).
func (w *writeOne) commit(ctx workflow.Context, items []Governed, verdicts map[string]governance.Verdict) error {
	var a *MemoryActivities
	var com CommitResult
	in := CommitInput{Event: w.ev, EventID: w.step.Result.EventID, EvidenceID: w.step.Result.EvidenceID,
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Items: items, Verdicts: verdicts, Embed: w.gathered == nil}
	if err := localStep(ctx, a.Commit, in).Get(ctx, &com); err != nil {
		return err
	}
	w.step.committed(com)
	return nil
}

// commitReviewed commits what waited for review, as the reviewers (or the
// timeout's defaults) decided, and indexes its facts.
func (w *writeOne) commitReviewed(ctx workflow.Context) error {
	pending := w.step.Pending
	w.step.Pending = nil
	if err := w.commit(ctx, pending, w.rv.verdicts); err != nil {
		return err
	}
	w.indexFacts(ctx)
	return nil
}

// indexFacts embeds the facts committed without their vector. Vectors are an
// index, not the truth: a failed index leaves the commit intact.
func (w *writeOne) indexFacts(ctx workflow.Context) {
	u := &w.step.Unindexed
	if len(u.FactIDs) == 0 {
		return
	}
	if w.gathered != nil {
		w.gathered.FactIDs = append(w.gathered.FactIDs, u.FactIDs...)
		u.FactIDs = nil
		return
	}
	var a *MemoryActivities
	if err := localStep(ctx, a.Index, IndexInput{TenantID: w.ev.TenantID, FactIDs: u.FactIDs}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("index failed; facts are committed without vectors", "error", err)
	}
	u.FactIDs = nil
}

// soFar is the write's result while candidates wait for review: PENDING_REVIEW
// with what was committed without a reviewer when its own do, else its result.
func (w *writeOne) soFar() MemoryWriteResult {
	res := w.step.Result
	res.Results = slices.Clone(res.Results)
	if len(w.step.Pending) > 0 {
		res.Status = WritePendingReview
	}
	return res
}

func pendingItems(items []Governed, evidenceID string) []pendingItem {
	out := make([]pendingItem, len(items))
	for i, it := range items {
		out[i] = pendingItem{item: it, evidence: evidenceID}
	}
	return out
}

// extractSteps proposes the candidates with the Extract step (a local activity for
// an in-process extractor) and validates them against the schema, trying again
// with the validation errors as feedback, up to attempts times. An extractor that
// stayed unavailable or refused leaves Unparsed set: the write keeps the evidence
// and invents nothing.
func extractSteps(ctx workflow.Context, in ExtractInput, local bool, attempts int) (Extracted, error) {
	var a *MemoryActivities
	var x Extracted
	for attempt := 1; attempt <= attempts; attempt++ {
		x.Attempts = attempt
		var f workflow.Future
		if local {
			f = workflow.ExecuteLocalActivity(localExtractActivity(ctx), a.Extract, in)
		} else {
			f = workflow.ExecuteActivity(extractActivity(ctx), a.Extract, in)
		}
		var out llm.ExtractOutput
		if err := f.Get(ctx, &out); err != nil {
			workflow.GetLogger(ctx).Warn("extraction failed", "attempt", attempt, "error", err)
			x.Unparsed = fmt.Sprintf("extractor failed: %v", rootMessage(err))
			return x, nil
		}
		var v ValidateResult
		// Validation is a pure function of the schema and the output: a local activity,
		// no round trip through the server.
		vin := ValidateInput{TenantID: in.Event.TenantID, Schema: in.Event.Schema, Raw: out.Raw}
		if err := workflow.ExecuteLocalActivity(localActivity(ctx), a.Validate, vin).Get(ctx, &v); err != nil {
			return x, err
		}
		if len(v.Errors) == 0 {
			x.Candidates, x.Errors = namedExtractor(v.Candidates, out), nil
			return x, nil
		}
		workflow.GetLogger(ctx).Info("extraction did not validate", "attempt", attempt, "errors", len(v.Errors))
		x.Errors, in.Feedback = v.Errors, v.Errors
	}
	return x, nil
}
