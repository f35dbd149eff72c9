package write

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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

// The versions of the write workflows (workflow.GetVersion), so the histories of
// writes started by an older binary still replay.
const (
	// fastWriteChange: the short steps (record, validate, govern, commit, index,
	// session, mark) run as local activities, and so does an in-process extractor:
	// a write with no LLM and no review is one workflow task.
	fastWriteChange  = "fast-write"
	fastWriteVersion = 1
	// markFailedChange: a write that fails marks its events FAILED with the reason.
	markFailedChange  = "mark-failed"
	markFailedVersion = 1
)

// steps runs the write path's steps: as local activities on the fast path, as
// regular activities in workflows started before it.
type steps struct {
	fast bool
	// rev is the write's Revision: from 1 on, no GetVersion markers.
	rev int
	// batched, in a batch on the fast path, gathers what to embed so it is embedded
	// in batches (flushIndex) rather than one Index per event.
	batched *IndexInput
	// regularIndex runs a batch's Index steps as regular activities (batch-slices),
	// which hold no workflow task open while they embed.
	regularIndex bool
}

// inline is whether Record and Commit do in-process what separate steps did before
// Revision 1: store the vectors of what they write (no Index step reading the text
// back) and, for an in-process extractor, extract and validate in Record. A batch
// gathers its vectors in flushIndex instead.
func (s steps) inline() bool { return s.rev >= 1 && s.batched == nil }

// index embeds in (the turn or the facts of one event) now, or adds it to the
// batch's; the future is nil when added.
func (s steps) index(ctx workflow.Context, in IndexInput) workflow.Future {
	if s.batched != nil {
		s.batched.EvidenceIDs = append(s.batched.EvidenceIDs, in.EvidenceIDs...)
		s.batched.FactIDs = append(s.batched.FactIDs, in.FactIDs...)
		return nil
	}
	var a *MemoryActivities
	return s.db(ctx, a.Index, in)
}

// indexChunk is how many texts one batched Index embeds.
const indexChunk = 64

// flushIndex embeds what the batch gathered, indexChunk texts per Index, all at
// once. A failed index leaves the commits intact (the vectors are an index).
func (s steps) flushIndex(ctx workflow.Context) {
	awaitIndex(ctx, s.startIndex(ctx))
}

// startIndex starts the Index steps of what the batch gathered and empties it;
// awaitIndex waits for them.
func (s steps) startIndex(ctx workflow.Context) []workflow.Future {
	if s.batched == nil {
		return nil
	}
	var a *MemoryActivities
	var fs []workflow.Future
	index := func(in IndexInput) {
		if s.regularIndex {
			fs = append(fs, workflow.ExecuteActivity(dbActivity(ctx), a.Index, in))
		} else {
			fs = append(fs, s.db(ctx, a.Index, in))
		}
	}
	for _, part := range chunks(s.batched.EvidenceIDs, indexChunk) {
		index(IndexInput{TenantID: s.batched.TenantID, EvidenceIDs: part})
	}
	for _, part := range chunks(s.batched.FactIDs, indexChunk) {
		index(IndexInput{TenantID: s.batched.TenantID, FactIDs: part})
	}
	s.batched.EvidenceIDs, s.batched.FactIDs = nil, nil
	return fs
}

func awaitIndex(ctx workflow.Context, fs []workflow.Future) {
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("batched index failed; the commits stand without vectors", "error", err)
		}
	}
}

func chunks[T any](xs []T, n int) [][]T {
	var out [][]T
	for i := 0; i < len(xs); i += n {
		out = append(out, xs[i:min(i+n, len(xs))])
	}
	return out
}

func (s steps) db(ctx workflow.Context, act, in any) workflow.Future {
	if s.fast {
		return workflow.ExecuteLocalActivity(fastLocalActivity(ctx), act, in)
	}
	return workflow.ExecuteActivity(dbActivity(ctx), act, in)
}

func (s steps) extract(ctx workflow.Context, local bool, in ExtractInput) workflow.Future {
	var a *MemoryActivities
	if s.fast && local {
		return workflow.ExecuteLocalActivity(localExtractActivity(ctx), a.Extract, in)
	}
	return workflow.ExecuteActivity(extractActivity(ctx), a.Extract, in)
}

// markFailed records, when a write ends with err, that its events can never
// finish (FAILED, with the reason), unless err is a key reused for another event
// (that event is someone else's write). It runs on a disconnected context, so a
// cancelled write is marked too.
func markFailed(ctx workflow.Context, st steps, err error, in MarkFailedInput) {
	var ae *temporal.ApplicationError
	if err == nil || (errors.As(err, &ae) && ae.Type() == ErrTypeIdempotencyConflict) {
		return
	}
	if st.rev == 0 && workflow.GetVersion(ctx, markFailedChange, workflow.DefaultVersion, markFailedVersion) < markFailedVersion {
		return
	}
	var a *MemoryActivities
	in.Reason = "the write failed: " + rootMessage(err)
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if merr := st.db(dctx, a.MarkFailed, in).Get(dctx, nil); merr != nil {
		workflow.GetLogger(ctx).Error("could not mark the failed write's events FAILED", "error", merr)
	}
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

func memoryWrite(ctx workflow.Context, in MemoryWriteInput, rv *reviewState) (res MemoryWriteResult, err error) {
	if in.Revision > WriteRevision {
		// A newer binary started it: fail the task (it is retried) rather than run it
		// as an older shape.
		panic(fmt.Sprintf("write revision %d is newer than this worker's %d", in.Revision, WriteRevision))
	}
	st := steps{fast: true, rev: in.Revision}
	if in.Revision == 0 {
		st.fast = workflow.GetVersion(ctx, fastWriteChange, workflow.DefaultVersion, fastWriteVersion) >= fastWriteVersion
	}
	ev := in.Event
	if err := ev.Validate(); err != nil {
		return MemoryWriteResult{}, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
	}
	in = withDefaults(in)
	if in.Revision == 0 {
		// From revision 1 on the starter sets them (Prepare).
		_ = workflow.UpsertTypedSearchAttributes(ctx,
			memory.SearchAttrTenant.ValueSet(ev.TenantID), memory.SearchAttrKind.ValueSet(WriteKind),
			SearchAttrSubject.ValueSet(subjectAttr(ev.UserID)), SearchAttrReview.ValueSet(ReviewNone))
	}
	// The review signal is registered up front so the Web UI lists it.
	reviewCh := workflow.GetSignalChannel(ctx, SignalReview)
	if err := registerReview(ctx, reviewCh, rv); err != nil {
		return MemoryWriteResult{}, err
	}
	defer func() {
		markFailed(ctx, st, err, MarkFailedInput{TenantID: ev.TenantID, EventIDs: nonEmpty(res.EventID), Keys: []string{ev.IdempotencyKey}})
	}()
	w, err := writeEvent(ctx, st, in, ev, rv)
	var ae *temporal.ApplicationError
	if st.rev >= 1 && errors.As(err, &ae) && ae.Type() == ErrTypeErasureInProgress {
		// Refused while the user is erased: the erasure's last sweep finds this
		// history (the event's content is in its input) by these.
		upsertSubject(ctx, ev)
	}
	if err != nil || w.res.Status != WriteCommitted {
		return w.res, err
	}
	if len(w.pending) > 0 {
		if st.rev >= 1 {
			upsertSubject(ctx, ev) // reviewers filter a tenant's pending writes
		}
		rv.soFar = w.soFar()
		if err := awaitReview(ctx, ev.TenantID, rv, in.ReviewTimeout); err != nil {
			return w.res, err
		}
		if err := w.commit(ctx, st, w.ev, w.pending, rv.verdicts); err != nil {
			return w.res, err
		}
	}
	return w.res, nil
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

// written is one event's progress through the write path.
type written struct {
	ev      memory.IngestEvent // the event as the write uses it (schema pinned)
	rec     RecordResult
	res     MemoryWriteResult
	pending []pendingItem
}

// soFar is the event's result while its candidates wait for review: PENDING_REVIEW
// with what was committed without a reviewer, else its result.
func (w *written) soFar() MemoryWriteResult {
	res := w.res
	res.Results = slices.Clone(res.Results)
	if len(w.pending) > 0 {
		res.Status = WritePendingReview
	}
	return res
}

// pendingItem is a candidate awaiting review, with the event it came from.
type pendingItem struct {
	item     Governed
	evidence string
}

// writeEvent runs record → extract/validate → govern → commit of the trusted
// candidates for one event; candidates that need a human are returned pending.
func writeEvent(ctx workflow.Context, st steps, in MemoryWriteInput, ev memory.IngestEvent, rv *reviewState) (*written, error) {
	return writeEventFrom(ctx, st, in, ev, rv, nil)
}

// writeEventFrom is writeEvent after its first step, when pre (a batch's WriteRun)
// holds what it did.
func writeEventFrom(ctx workflow.Context, st steps, in MemoryWriteInput, ev memory.IngestEvent, rv *reviewState, pre *FastWriteResult) (*written, error) {
	w := &written{}
	fast, err := w.record(ctx, st, in, ev, pre)
	if err != nil {
		return w, err
	}
	if w.rec.Schema != "" {
		// The schema version is pinned at record: a PutSchema while this write runs
		// (or waits days for review) does not change its rules.
		ev.Schema = w.rec.Schema
	}
	w.ev = ev
	defer w.sideSteps(ctx, st, ev)()

	if fast != nil && fast.Done {
		w.res.Status, w.res.Reason, w.res.Attempts = fast.Status, fast.Reason, fast.Attempts
		if fast.Governed != nil {
			w.governed(ctx, st, ev, *fast.Governed, rv, in.ReviewTimeout)
		}
		return w, nil
	}
	cands, unparsed, err := w.extract(ctx, st, in, ev)
	if err != nil {
		return w, err
	}
	if unparsed != "" {
		return w, w.mark(ctx, st, ev, WriteUnparsed, memory.EventUnparsed, unparsed)
	}
	if len(cands) == 0 {
		return w, w.mark(ctx, st, ev, WriteNoMemory, memory.EventCommitted, "nothing to remember")
	}
	return w, w.govern(ctx, st, in, ev, cands, rv)
}

// record runs the write's first step: Record, or the whole write in one step
// (FastWrite, Revision 2, when the extractor runs in process), unless the API's
// in-process fast path already ran it (pre). It returns the fast path's result,
// if one ran.
func (w *written) record(ctx workflow.Context, st steps, in MemoryWriteInput, ev memory.IngestEvent, pre *FastWriteResult) (*FastWriteResult, error) {
	var a *MemoryActivities
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	rin := RecordInput{Event: ev, WorkflowID: wfID, Embed: st.inline()}
	if st.inline() {
		rin.ExtractAttempts, rin.UpdateSession = in.ExtractAttempts, true
	}
	var fast *FastWriteResult
	if pre != nil {
		w.rec, fast = pre.Record, pre
	} else if st.rev >= 2 && st.inline() && in.PauseBeforeCommit == 0 {
		// Revision 2: the whole write in one step when the extractor runs in process.
		var fw FastWriteResult
		if err := st.db(ctx, a.FastWrite, FastWriteInput{Record: rin, ExtractAttempts: in.ExtractAttempts}).Get(ctx, &fw); err != nil {
			return nil, err
		}
		w.rec, fast = fw.Record, &fw
	} else if err := st.db(ctx, a.Record, rin).Get(ctx, &w.rec); err != nil {
		return nil, err
	}
	w.res = MemoryWriteResult{EventID: w.rec.EventID, EvidenceID: w.rec.EvidenceID}
	return fast, nil
}

// sideSteps starts what runs beside extraction and returns what settles them
// (deferred by the caller, so both are settled before the write returns). The
// turn is indexed and added to the session's working memory while extraction
// runs: neither blocks the write. The turn is searchable by meaning whatever
// extraction makes of it (what was said but never became a fact must still be
// found); a session that cannot take the turn (it belongs to another user) never
// fails the write. (From revision 1 Record did both itself unless it says
// otherwise.)
func (w *written) sideSteps(ctx workflow.Context, st steps, ev memory.IngestEvent) func() {
	var a *MemoryActivities
	type sideStep struct {
		what string
		f    workflow.Future
	}
	var side []sideStep
	if !w.rec.Indexed {
		if f := st.index(ctx, IndexInput{TenantID: ev.TenantID, EvidenceIDs: []string{w.rec.EvidenceID}}); f != nil {
			side = append(side, sideStep{"evidence index", f})
		}
	}
	if ev.SessionID != "" && !w.rec.SessionUpdated {
		side = append(side, sideStep{"session", st.db(ctx, a.UpdateSession, SessionTurn(ev, w.rec.EvidenceID, w.rec.Text(ev)))})
	}
	return func() {
		for _, sd := range side {
			if err := sd.f.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn(sd.what+" not updated", "error", err)
			}
		}
	}
}

// mark settles a write that commits nothing: its result's status and reason, and
// the event's status.
func (w *written) mark(ctx workflow.Context, st steps, ev memory.IngestEvent, status string, evStatus memory.EventStatus, reason string) error {
	var a *MemoryActivities
	w.res.Status = status
	if status == WriteUnparsed {
		w.res.Reason = reason
	}
	return st.db(ctx, a.MarkEvent, MarkEventInput{TenantID: ev.TenantID, EventID: w.rec.EventID, Status: evStatus, Reason: reason}).Get(ctx, nil)
}

// extract proposes the candidates and validates them against the schema, trying
// again with the validation errors as feedback (ExtractAttempts times), unless
// Record already did (an in-process extractor, Revision 1 on). unparsed, when not
// empty, is why the write keeps the evidence and invents nothing.
func (w *written) extract(ctx workflow.Context, st steps, in MemoryWriteInput, ev memory.IngestEvent) (cands []memory.Candidate, unparsed string, err error) {
	var a *MemoryActivities
	logger := workflow.GetLogger(ctx)
	var feedback []string
	attempts := in.ExtractAttempts
	if x := w.rec.Extracted; x != nil {
		w.res.Attempts, cands, feedback, attempts = x.Attempts, x.Candidates, x.Errors, 0
	}
	for attempt := 1; attempt <= attempts; attempt++ {
		w.res.Attempts = attempt
		var out llm.ExtractOutput
		err := st.extract(ctx, w.rec.LocalExtract, ExtractInput{Event: ev, Text: w.rec.Stored, Recent: w.rec.Recent, Known: w.rec.Known, Feedback: feedback}).Get(ctx, &out)
		if err != nil {
			// The extractor stayed unavailable or refused: keep the evidence, invent nothing.
			logger.Warn("extraction failed", "attempt", attempt, "error", err)
			return nil, fmt.Sprintf("extractor failed: %v", rootMessage(err)), nil
		}
		var v ValidateResult
		// Validation is a pure function of the schema and the output: a local activity,
		// no round trip through the server.
		if err := workflow.ExecuteLocalActivity(localActivity(ctx), a.Validate, ValidateInput{TenantID: ev.TenantID, Schema: ev.Schema, Raw: out.Raw}).Get(ctx, &v); err != nil {
			return nil, "", err
		}
		if len(v.Errors) == 0 {
			cands, feedback = namedExtractor(v.Candidates, out), nil
			break
		}
		logger.Info("extraction did not validate", "attempt", attempt, "errors", len(v.Errors))
		feedback = v.Errors
	}
	if feedback != nil {
		return nil, fmt.Sprintf("extraction did not validate after %d attempts: %s", in.ExtractAttempts, strings.Join(feedback, "; ")), nil
	}
	return cands, "", nil
}

// govern decides each candidate and commits what needs no reviewer: in one step
// (GovernCommit, Revision 1) when the write runs inline, else Govern, then the
// review wait's registration and the commit of the rest.
func (w *written) govern(ctx workflow.Context, st steps, in MemoryWriteInput, ev memory.IngestEvent, cands []memory.Candidate, rv *reviewState) error {
	var a *MemoryActivities
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	gin := GovernInput{Event: ev, EventID: w.rec.EventID, EvidenceID: w.rec.EvidenceID, WorkflowID: wfID, Candidates: cands}
	if st.inline() && in.PauseBeforeCommit == 0 {
		// Revision 1: govern and commit the trusted candidates in one step.
		gin.Embed = true
		var gc GovernCommitResult
		if err := st.db(ctx, a.GovernCommit, gin).Get(ctx, &gc); err != nil {
			return err
		}
		w.res.Status = WriteCommitted
		w.governed(ctx, st, ev, gc, rv, in.ReviewTimeout)
		return nil
	}
	var gov GovernResult
	if err := st.db(ctx, a.Govern, gin).Get(ctx, &gov); err != nil {
		return err
	}
	var now []pendingItem
	for _, it := range gov.Items {
		p := pendingItem{item: it, evidence: w.rec.EvidenceID}
		if it.Decision.Status == memory.CandidateNeedsConfirmation {
			w.pending = append(w.pending, p)
		} else {
			now = append(now, p)
		}
	}
	rv.add(ctx, w.pending, in.ReviewTimeout)
	if in.PauseBeforeCommit > 0 {
		if err := workflow.Sleep(ctx, in.PauseBeforeCommit); err != nil {
			return err
		}
	}
	w.res.Status = WriteCommitted
	if len(now) > 0 {
		return w.commit(ctx, st, ev, now, nil)
	}
	return nil
}

// governed takes in what GovernCommit did: the candidates left for a reviewer, the
// results of those committed, and an index of facts committed without a vector.
func (w *written) governed(ctx workflow.Context, st steps, ev memory.IngestEvent, gc GovernCommitResult, rv *reviewState, reviewTimeout time.Duration) {
	for _, it := range gc.Pending {
		w.pending = append(w.pending, pendingItem{item: it, evidence: w.rec.EvidenceID})
	}
	rv.add(ctx, w.pending, reviewTimeout)
	w.res.Results = append(w.res.Results, gc.Committed.Results...)
	w.indexFacts(ctx, st, ev, gc.Committed)
}

// commit commits items of this event (with verdicts for reviewed ones) and indexes
// the new facts.
func (w *written) commit(ctx workflow.Context, st steps, ev memory.IngestEvent, items []pendingItem, verdicts map[string]governance.Verdict) error {
	var a *MemoryActivities
	gov := make([]Governed, len(items))
	for i, p := range items {
		gov[i] = p.item
	}
	var com CommitResult
	in := CommitInput{Event: ev, EventID: w.rec.EventID, EvidenceID: w.rec.EvidenceID, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Items: gov, Verdicts: verdicts, Embed: st.inline()}
	if err := st.db(ctx, a.Commit, in).Get(ctx, &com); err != nil {
		return err
	}
	w.res.Results = append(w.res.Results, com.Results...)
	w.indexFacts(ctx, st, ev, com)
	return nil
}

// indexFacts embeds the facts a commit wrote without their vector. Vectors are an
// index, not the truth: a failed index leaves the commit intact.
func (w *written) indexFacts(ctx workflow.Context, st steps, ev memory.IngestEvent, com CommitResult) {
	toIndex := slices.DeleteFunc(slices.Clone(com.FactIDs), func(id string) bool { return slices.Contains(com.Indexed, id) })
	if len(toIndex) == 0 {
		return
	}
	f := st.index(ctx, IndexInput{TenantID: ev.TenantID, FactIDs: toIndex})
	if f == nil {
		return
	}
	if err := f.Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("index failed; facts are committed without vectors", "error", err)
	}
}

func rootMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return err.Error()
}

// reviewState holds the candidates awaiting a human and the verdicts received.
type reviewState struct {
	deadline time.Time
	defaults map[string]string
	pending  []PendingCandidate
	verdicts map[string]governance.Verdict
	rejected []string // signals that could not be applied, shown in the details
	// waiting is true while the workflow waits for reviews (what UpdateOutcome
	// answers PendingReview for).
	waiting bool
	// marked are the verdicts recorded in Postgres (MarkDecided), by candidate id.
	marked map[string]bool
	// soFar is the workflow's result so far (a MemoryWriteResult or a
	// MemoryWriteBatchResult), which UpdateOutcome answers with while it waits.
	soFar any
}

// add makes candidates reviewable as soon as governance has decided them, before
// anything is committed, so a review sent at once (e.g. by the API, which reads
// pending candidates from Postgres) is accepted. The deadline starts with the first.
func (r *reviewState) add(ctx workflow.Context, items []pendingItem, timeout time.Duration) {
	if len(items) == 0 {
		return
	}
	if r.deadline.IsZero() {
		r.deadline = workflow.Now(ctx).Add(timeout)
	}
	if r.defaults == nil {
		r.defaults = map[string]string{}
	}
	for _, p := range items {
		it := p.item
		c := it.Candidate
		r.pending = append(r.pending, PendingCandidate{
			CandidateID: it.CandidateID, MemoryKey: it.Proposal.MemoryKey, Content: c.Content, Predicate: c.Predicate,
			Object: c.Object, Scope: string(c.Scope), Origin: string(c.Origin), Confidence: c.Confidence,
			Reason: it.Decision.Reason, OnConfirm: string(it.Decision.Action), Default: it.ReviewDefault,
			Deadline: r.deadline.UTC().Format(time.RFC3339), Evidence: []string{p.evidence},
		})
		r.defaults[it.CandidateID] = it.ReviewDefault
	}
}

func (r *reviewState) pendingList() []PendingCandidate {
	out := []PendingCandidate{}
	for _, p := range r.pending {
		if _, done := r.verdicts[p.CandidateID]; !done {
			out = append(out, p)
		}
	}
	return out
}

func (r *reviewState) validate(req ReviewRequest) error {
	found := false
	for _, p := range r.pending {
		if p.CandidateID == req.CandidateID {
			found = true
		}
	}
	if !found {
		ids := []string{}
		for _, p := range r.pendingList() {
			ids = append(ids, p.CandidateID)
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("candidate_id: %q is not awaiting review here (pending: %s)", req.CandidateID, strings.Join(ids, ", ")), ErrTypeInvalidReview, nil)
	}
	if _, done := r.verdicts[req.CandidateID]; done {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("candidate_id: %q was already reviewed", req.CandidateID), ErrTypeInvalidReview, nil)
	}
	if err := req.Verdict.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidReview, err)
	}
	return nil
}

// details is what a reviewer reads in the Web UI's current details. The UI's frame
// for them cuts the end of their text (32 px in UI 2.42) and is about 590 px wide on a
// 1280 px screen, so the payload to send comes first, on lines that fit, and what can be
// spared comes last.
func (r *reviewState) details(deadline time.Time) string {
	var b strings.Builder
	list := r.pendingList()
	fmt.Fprintf(&b, "### %d memory candidate(s) await review\n\n", len(list))
	for _, e := range r.rejected {
		fmt.Fprintf(&b, "> ignored signal: %s\n\n", e)
	}
	fmt.Fprintf(&b, "Send the **review** signal (More Actions → Send a Signal) before %s with:\n\n", deadline.UTC().Format(time.RFC3339))
	for _, p := range list {
		fmt.Fprintf(&b, "```json\n{\"candidate_id\": \"%s\",\n \"decision\": \"confirm\", \"reviewer\": \"your-name\", \"note\": \"\"}\n```\n\n", p.CandidateID)
		fmt.Fprintf(&b, "**%s** · `%s` · %s, %s, confidence %.2f · why review: %s · on confirm: %s · on timeout: %s\n\n", p.Content, p.MemoryKey, p.Scope, p.Origin, p.Confidence, p.Reason, p.OnConfirm, p.Default)
	}
	b.WriteString("`decision` is `confirm`, `reject` or `edit` (with `edited_value`); without one by then, the schema default applies.\n")
	return b.String()
}

// registerReview installs the review update handler and the signal reader at
// workflow start, so a review sent early is validated against what is pending (and
// refused with a clear message) rather than rejected as an unknown update.
func registerReview(ctx workflow.Context, ch workflow.ReceiveChannel, rv *reviewState) error {
	apply := func(req ReviewRequest) {
		rv.verdicts[req.CandidateID] = req.Verdict
		workflow.GetLogger(ctx).Info("review received", "candidate_id", req.CandidateID, "decision", req.Kind, "reviewer", req.Reviewer)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReview,
		func(ctx workflow.Context, req ReviewRequest) (string, error) {
			apply(req)
			return "recorded", nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ReviewRequest) error { return rv.validate(req) }},
	); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req ReviewRequest
			ch.Receive(ctx, &req)
			if err := rv.validate(req); err != nil {
				rv.rejected = append(rv.rejected, err.Error())
				continue
			}
			apply(req)
		}
	})
	return workflow.SetQueryHandler(ctx, QueryPending, func() ([]PendingCandidate, error) { return rv.pendingList(), nil })
}

// reviewMarksChange (workflow.GetVersion): a write waiting for reviews records each
// verdict in Postgres as it arrives (MarkDecided), where a candidate decided from the
// Web UI stayed on the pending list until the write's last candidate was decided.
const (
	reviewMarksChange  = "review-marks"
	reviewMarksVersion = 1
)

// markDecided records the verdicts received and not yet recorded. A failure is
// logged: the commit records every verdict anyway.
func (r *reviewState) markDecided(ctx workflow.Context, tenant string) {
	in := MarkDecidedInput{TenantID: tenant}
	for _, p := range r.pending {
		if v, ok := r.verdicts[p.CandidateID]; ok && !r.marked[p.CandidateID] {
			in.Decided = append(in.Decided, ReviewRequest{CandidateID: p.CandidateID, Verdict: v})
		}
	}
	if len(in.Decided) == 0 {
		return
	}
	var a *MemoryActivities
	if err := workflow.ExecuteLocalActivity(localActivity(ctx), a.MarkDecided, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("verdicts not recorded before the commit", "error", err)
		return
	}
	if r.marked == nil {
		r.marked = map[string]bool{}
	}
	for _, d := range in.Decided {
		r.marked[d.CandidateID] = true
	}
}

// awaitReview waits, when any candidate needs confirmation, for a verdict per
// candidate through the review signal or update, until the timeout; then the
// schema's default applies to what is left.
func awaitReview(ctx workflow.Context, tenant string, rv *reviewState, timeout time.Duration) error {
	deadline := rv.deadline
	if len(rv.pending) == 0 {
		return nil
	}
	marks := workflow.GetVersion(ctx, reviewMarksChange, workflow.DefaultVersion, reviewMarksVersion) >= reviewMarksVersion
	rv.waiting = true
	defer func() { rv.waiting = false }()
	_ = workflow.UpsertTypedSearchAttributes(ctx, SearchAttrReview.ValueSet(ReviewPending))
	workflow.SetCurrentDetails(ctx, rv.details(deadline))
	for {
		if marks {
			rv.markDecided(ctx, tenant)
		}
		n := len(rv.pendingList())
		nRejected := len(rv.rejected)
		ok, err := workflow.AwaitWithTimeout(ctx, deadline.Sub(workflow.Now(ctx)), func() bool {
			return len(rv.pendingList()) != n || len(rv.rejected) != nRejected
		})
		if err != nil {
			return err
		}
		workflow.SetCurrentDetails(ctx, rv.details(deadline))
		if len(rv.pendingList()) == 0 {
			break
		}
		if !ok { // timed out: the schema's default decides what nobody reviewed
			ids := []string{}
			for _, p := range rv.pendingList() {
				ids = append(ids, p.CandidateID)
			}
			sort.Strings(ids)
			for _, id := range ids {
				kind := governance.VerdictReject
				if rv.defaults[id] == "confirm" {
					kind = governance.VerdictConfirm
				}
				rv.verdicts[id] = governance.Verdict{Kind: kind, Reviewer: "engram:review-timeout", Note: fmt.Sprintf("no review within %s; schema default %s", timeout, kind)}
			}
			break
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SearchAttrReview.ValueSet(ReviewDone))
	workflow.SetCurrentDetails(ctx, "review finished")
	return nil
}
