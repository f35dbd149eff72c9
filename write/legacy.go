package write

// Revisions 0 to 2 of MemoryWrite (memoryWriteSteps), and MemoryWriteBatch
// before revisions (memoryWriteBatchSteps: steps, written, writeEvent), versioned
// by GetVersion markers (fast-write, mark-failed, batch-slices, batch-runs,
// review-marks).
//
// A single write of revision 0 to 2 replays here: 0 is versioned by its
// GetVersion markers (fast-write, mark-failed), 1 and 2 by their input's Revision,
// with flags on steps. New writes are revision 3 (workflow.go). Delete the single
// write's part (memoryWriteSteps, and the Revision < 3 branch of memoryWrite)
// once no write of those revisions can be open: a write waits at most its
// ReviewTimeout (72 h by default, the longest a client set is the bound), so a
// week after every worker runs revision 3, check
//
//	temporal workflow count --query "WorkflowType='MemoryWrite' AND ExecutionStatus='Running' AND StartTime < '<the day revision 3 deployed>'"
//
// is 0, then delete it together with its histories in tests/replay/testdata
// (memorywrite_*_rev0/_rev1/_rev2 and _v0). The same holds for batches
// (WorkflowType='MemoryWriteBatch', histories memorywritebatch_fast_unsliced,
// _sliced and _runs); with both gone, this file, FastWrite, WriteRun and
// asFastWrite go too.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
)

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
	for _, in := range indexParts(s.batched) {
		if s.regularIndex {
			fs = append(fs, workflow.ExecuteActivity(dbActivity(ctx), a.Index, in))
		} else {
			fs = append(fs, s.db(ctx, a.Index, in))
		}
	}
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

// markFailed is markFailedBy through st's steps; a write of revision 0 started
// before mark-failed marks nothing.
func markFailed(ctx workflow.Context, st steps, err error, in MarkFailedInput) {
	if !marksFailed(err) || st.rev == 0 && workflow.GetVersion(ctx, markFailedChange, workflow.DefaultVersion, markFailedVersion) < markFailedVersion {
		return
	}
	markFailedBy(ctx, err, in, st.db)
}

// memoryWriteSteps is MemoryWrite in revisions 0 to 2, for the writes an older
// binary started (see the top of this file).
func memoryWriteSteps(ctx workflow.Context, in MemoryWriteInput, rv *reviewState) (res MemoryWriteResult, err error) {
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
		if err := awaitReview(ctx, ev.TenantID, rv, in.ReviewTimeout, false); err != nil {
			return w.res, err
		}
		if err := w.commit(ctx, st, w.ev, w.pending, rv.verdicts); err != nil {
			return w.res, err
		}
	}
	return w.res, nil
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
	x := Extracted{}
	if w.rec.Extracted != nil {
		x = *w.rec.Extracted
	} else if x, err = extractSteps(ctx, ExtractInput{Event: ev, Text: w.rec.Stored, Recent: w.rec.Recent, Known: w.rec.Known},
		st.fast && w.rec.LocalExtract, in.ExtractAttempts); err != nil {
		return nil, "", err
	}
	w.res.Attempts = x.Attempts
	switch {
	case x.Unparsed != "":
		return nil, x.Unparsed, nil
	case len(x.Errors) > 0:
		return nil, fmt.Sprintf("extraction did not validate after %d attempts: %s", in.ExtractAttempts, strings.Join(x.Errors, "; ")), nil
	}
	return x.Candidates, "", nil
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

// memoryWriteBatchSteps is MemoryWriteBatch before revision 3.
func memoryWriteBatchSteps(ctx workflow.Context, in MemoryWriteBatchInput, rv *reviewState) (out MemoryWriteBatchResult, err error) {
	st, slice := batchSteps(ctx, in)
	if err := validBatch(in); err != nil {
		return out, err
	}
	opts, par := batchOptions(in, st.fast)
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
	lb := &legacyBatch{st: st, opts: opts, events: in.Events, ws: make([]*written, len(in.Events)), rv: rv}
	err = writeBatchEvents(ctx, lb, par, slice, func() bool {
		return workflow.GetVersion(ctx, batchRunsChange, workflow.DefaultVersion, batchRunsVersion) >= batchRunsVersion
	})
	ws := lb.ws
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

// legacyBatch writes a batch's events as the batches before revision 3 did.
type legacyBatch struct {
	st     steps
	opts   MemoryWriteInput
	events []memory.IngestEvent
	ws     []*written
	rv     *reviewState
}

func (b *legacyBatch) write(ctx workflow.Context, idx []int, run bool) (int, error) {
	return writeEvents(ctx, b.st, b.opts, b.events, idx, b.ws, b.rv, run)
}

func (b *legacyBatch) startIndex(ctx workflow.Context) []workflow.Future { return b.st.startIndex(ctx) }

func (b *legacyBatch) eventsOf() []memory.IngestEvent { return b.events }

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
