package write

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
)

// The MemoryWrite state machine, with every activity mocked: these tests need no
// Temporal server and no Postgres, and timers are skipped.

var wa *MemoryActivities

// writeHarness runs one MemoryWrite or MemoryWriteBatch in the test environment and
// records what the workflow asked of its activities, in order.
type writeHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	mu       sync.Mutex
	log      []string // "record:<key>", "extract", "validate", "govern:<event>", "timer", "commit", "index", "mark:<status>"
	records  []RecordInput
	extracts []ExtractInput
	governs  []GovernInput
	commits  []CommitInput
	indexes  []IndexInput
	marks    []MarkEventInput
	failed   []MarkFailedInput
	review   []string    // values the EngramReview search attribute was set to
	subjects []string    // values the EngramSubject search attribute was set to
	started  time.Time   // workflow clock when Record ran
	commitAt []time.Time // workflow clock when each Commit ran
	indexErr error       // what Index returns
	// With Embed (Revision 1): Record stores the turn's vector unless turnUnembedded;
	// Commit stores the facts' vectors but those of factsUnembedded.
	turnUnembedded  bool
	factsUnembedded []string
	// recordExtracts, when set, makes the extractor in-process (Record says
	// LocalExtract), and is what its attempts in Write make of the turn.
	recordExtracts *Extracted
	recordErr      error // what Record fails with
	// steps is what each Write returned: run checks that a final one's Result is
	// what the workflow returns (the in-process answer, notice.go).
	steps        []WriteStep
	finalChecked int // runs whose result a final Write step matched
	// governItems is what Govern decides (governAlways); GovernCommit (revision 1)
	// governs with it, or fails with governErr, and commits through the Commit mock.
	governItems []Governed
	governErr   error
	// governFn, when set, decides each event's items instead (a batch's).
	governFn func(GovernInput) []Governed
	// sessionUnupdated: the session's update in Write fails (left to its step).
	sessionUnupdated bool
}

func newWriteHarness(t *testing.T) *writeHarness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	if !testing.Verbose() {
		s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	}
	h := &writeHarness{t: t, env: s.NewTestWorkflowEnvironment()}
	h.env.RegisterWorkflow(MemoryWrite)
	h.env.RegisterWorkflow(MemoryWriteBatch)
	h.env.RegisterActivity(wa)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: MemoryWriteWorkflowID("acme", "k1")})

	record := func(ctx context.Context, in RecordInput) (RecordResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.records = append(h.records, in)
		h.log = append(h.log, "record:"+in.Event.IdempotencyKey)
		if h.started.IsZero() {
			h.started = h.env.Now()
		}
		if h.recordErr != nil {
			return RecordResult{}, h.recordErr
		}
		return RecordResult{EventID: "ev-" + in.Event.IdempotencyKey, EvidenceID: "evd-" + in.Event.IdempotencyKey, Created: true, Indexed: in.Embed && !h.turnUnembedded,
			LocalExtract: h.recordExtracts != nil}, nil
	}
	h.env.OnActivity(wa.Record, mock.Anything, mock.Anything).Return(record)
	h.env.OnActivity(wa.Commit, mock.Anything, mock.Anything).Return(h.commit)
	session := func(_ context.Context, in UpdateSessionInput) (UpdateSessionResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.log = append(h.log, "session:"+in.Turn.EvidenceID)
		return UpdateSessionResult{Appended: true, TurnCount: 1}, nil
	}
	h.env.OnActivity(wa.UpdateSession, mock.Anything, mock.Anything).Return(session)
	governCommit := h.governCommit
	h.env.OnActivity(wa.GovernCommit, mock.Anything, mock.Anything).Return(governCommit)
	h.env.OnActivity(wa.Index, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in IndexInput) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.indexes = append(h.indexes, in)
			h.log = append(h.log, "index")
			return h.indexErr
		})
	mark := func(_ context.Context, in MarkEventInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.marks = append(h.marks, in)
		h.log = append(h.log, "mark:"+string(in.Status))
		return nil
	}
	h.env.OnActivity(wa.MarkEvent, mock.Anything, mock.Anything).Return(mark)
	// Write (and the FastWrite and WriteRun of older shapes) are the harness's own
	// steps in a row.
	p := parts{record: record, governCommit: governCommit, mark: mark,
		session: func(ctx context.Context, in UpdateSessionInput) (UpdateSessionResult, error) {
			if h.sessionUnupdated {
				return UpdateSessionResult{}, errors.New("the session's row is locked")
			}
			return session(ctx, in)
		}}
	p.extract, p.validate = h.inProcessExtractor()
	h.inProcess(p)
	h.env.OnActivity(wa.MarkFailed, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in MarkFailedInput) (int, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.failed = append(h.failed, in)
			h.log = append(h.log, "mark:FAILED")
			return len(in.Keys), nil
		})
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		h.mu.Lock()
		defer h.mu.Unlock()
		if v, ok := sa.GetKeyword(SearchAttrReview); ok {
			h.review = append(h.review, v)
		}
		if v, ok := sa.GetKeyword(SearchAttrSubject); ok {
			h.subjects = append(h.subjects, v)
		}
	}).Return(nil)
	h.env.SetOnTimerFiredListener(func(string) {
		h.mu.Lock()
		h.log = append(h.log, "timer")
		h.mu.Unlock()
	})
	return h
}

// governCommit is the GovernCommit mock: governItems (or governFn's) decided, the
// ACCEPTED committed through the Commit mock, or governErr.
func (h *writeHarness) governCommit(ctx context.Context, in GovernInput) (GovernCommitResult, error) {
	h.mu.Lock()
	h.governs = append(h.governs, in)
	h.log = append(h.log, "govern:"+in.Event.IdempotencyKey)
	items, gerr := h.governItems, h.governErr
	if h.governFn != nil {
		items = h.governFn(in)
	}
	h.mu.Unlock()
	var out GovernCommitResult
	if gerr != nil {
		return out, gerr
	}
	var now []Governed
	for _, it := range items {
		if it.Decision.Status == memory.CandidateNeedsConfirmation {
			out.Pending = append(out.Pending, it)
		} else {
			now = append(now, it)
		}
	}
	if len(now) > 0 {
		com, err := h.commit(ctx, CommitInput{Event: in.Event, EventID: in.EventID, EvidenceID: in.EvidenceID, WorkflowID: in.WorkflowID, Items: now, Embed: in.Embed})
		if err != nil {
			return out, err
		}
		out.Committed = com
	}
	return out, nil
}

// inProcess mocks the activities that run the write's steps in process (Write,
// and the FastWrite and WriteRun of older shapes, and a batch's WriteEvents) with
// the harness's own steps, p, in a row.
func (h *writeHarness) inProcess(p parts) {
	h.env.OnActivity(wa.Write, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in WriteInput) (WriteStep, error) {
			h.note("write")
			step, err := writeInProcess(ctx, in, p)
			if err == nil {
				h.mu.Lock()
				h.steps = append(h.steps, step)
				h.mu.Unlock()
			}
			return step, err
		})
	// A run's transactions are the harness's: none to commit, no user being erased.
	run := runSteps{parts: p,
		refuse: func(context.Context, string, string) error { return nil },
		begin: func(ctx context.Context) (context.Context, func(bool) error, error) {
			return ctx, func(bool) error { return nil }, nil
		}}
	h.env.OnActivity(wa.WriteRun, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in WriteRunInput) (WriteRunResult, error) {
			h.note(fmt.Sprintf("run:%d", len(in.Records)))
			return writeRun(ctx, in, run)
		})
	h.env.OnActivity(wa.WriteEvents, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in WriteEventsInput) (WriteEventsResult, error) {
			h.note(fmt.Sprintf("run:%d", len(in.Events)))
			return runEvents(ctx, in, run)
		})
	h.env.OnActivity(wa.FastWrite, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in FastWriteInput) (FastWriteResult, error) {
			h.note("fast")
			step, err := writeInProcess(ctx, in.writeInput(true), p)
			return asFastWrite(step), err
		})
}

// inProcessExtractor is the in-process extractor Write runs: attempt after attempt
// does not validate until recordExtracts' last, which gives its candidates, or its
// errors.
func (h *writeHarness) inProcessExtractor() (func(context.Context, ExtractInput) (llm.ExtractOutput, error), func(context.Context, ValidateInput) (ValidateResult, error)) {
	attempt := 0
	extract := func(context.Context, ExtractInput) (llm.ExtractOutput, error) {
		attempt++
		return llm.ExtractOutput{Raw: fmt.Sprintf("attempt %d", attempt), Extractor: "fake", Version: "1"}, nil
	}
	validate := func(context.Context, ValidateInput) (ValidateResult, error) {
		x := h.recordExtracts
		if attempt < x.Attempts || len(x.Errors) > 0 {
			return ValidateResult{Errors: orTryAgain(x.Errors)}, nil
		}
		attempt = 0
		return ValidateResult{Candidates: x.Candidates}, nil
	}
	return extract, validate
}

func orTryAgain(errs []string) []string {
	if len(errs) == 0 {
		return []string{"try again"}
	}
	return slices.Clone(errs)
}

// commit is the Commit mock: ACCEPTED items become facts; a verdict decides a reviewed one.
func (h *writeHarness) commit(ctx context.Context, in CommitInput) (CommitResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits = append(h.commits, in)
	h.commitAt = append(h.commitAt, h.env.Now())
	h.log = append(h.log, "commit")
	var out CommitResult
	for _, it := range in.Items {
		r := CommittedResult{CandidateID: it.CandidateID, Status: it.Decision.Status, Action: string(it.Decision.Action), MemoryKey: it.Proposal.MemoryKey, Reason: it.Decision.Reason}
		if v, ok := in.Verdicts[it.CandidateID]; ok {
			r.Reviewer = v.Reviewer
			r.Status = memory.CandidateAccepted
			if v.Kind == governance.VerdictReject {
				r.Status, r.Action = memory.CandidateRejected, string(governance.ActionNoop)
			}
		}
		if r.Status == memory.CandidateAccepted {
			r.FactID = "fact-" + it.CandidateID
			out.FactIDs = append(out.FactIDs, r.FactID)
			if in.Embed && !slices.Contains(h.factsUnembedded, r.FactID) {
				out.Indexed = append(out.Indexed, r.FactID)
			}
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// extractAlways makes every Extract call return the event's content as raw output.
func (h *writeHarness) extractAlways() {
	h.env.OnActivity(wa.Extract, mock.Anything, mock.Anything).Return(h.extractFn)
}

func (h *writeHarness) extractFn(_ context.Context, in ExtractInput) (llm.ExtractOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extracts = append(h.extracts, in)
	h.log = append(h.log, "extract")
	return llm.ExtractOutput{Raw: `{"candidates":["` + in.Event.Content + `"]}`, Extractor: "fake", Version: "1"}, nil
}

// validateAlways makes every Validate call succeed with cands.
func (h *writeHarness) validateAlways(cands ...memory.Candidate) {
	h.env.OnActivity(wa.Validate, mock.Anything, mock.Anything).Return(
		func(context.Context, ValidateInput) (ValidateResult, error) {
			h.note("validate")
			return ValidateResult{Candidates: cands}, nil
		})
}

// governAlways makes Govern return items, whatever the candidates.
func (h *writeHarness) governAlways(items ...Governed) {
	h.governItems = items
	h.env.OnActivity(wa.Govern, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in GovernInput) (GovernResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.governs = append(h.governs, in)
			h.log = append(h.log, "govern:"+in.Event.IdempotencyKey)
			return GovernResult{Items: items}, nil
		})
}

func (h *writeHarness) note(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

// at runs f at d of workflow time.
func (h *writeHarness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

func (h *writeHarness) signal(d time.Duration, req ReviewRequest) {
	h.at(d, func() { h.env.SignalWorkflow(SignalReview, req) })
}

// pendingAt queries the `pending` query at d; the returned pointer is filled then.
func (h *writeHarness) pendingAt(d time.Duration) *[]string {
	ids := &[]string{}
	h.at(d, func() {
		v, err := h.env.QueryWorkflow(QueryPending)
		require.NoError(h.t, err)
		var list []PendingCandidate
		require.NoError(h.t, v.Get(&list))
		*ids = []string{}
		for _, p := range list {
			*ids = append(*ids, p.CandidateID)
		}
	})
	return ids
}

// update sends the review update at d; the returned outcome is filled then.
type updateOutcome struct {
	accepted  bool
	rejectErr error
	result    any
	doneErr   error
	completed bool
}

func (h *writeHarness) update(d time.Duration, id string, req ReviewRequest) *updateOutcome {
	o := &updateOutcome{}
	h.at(d, func() {
		h.env.UpdateWorkflow(UpdateReview, id, &testsuite.TestUpdateCallback{
			OnAccept:   func() { o.accepted = true },
			OnReject:   func(err error) { o.rejectErr = err },
			OnComplete: func(r any, err error) { o.result, o.doneErr, o.completed = r, err, true },
		}, req)
	})
	return o
}

func (h *writeHarness) run(in MemoryWriteInput) MemoryWriteResult {
	h.t.Helper()
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var res MemoryWriteResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.steps); n > 0 {
		if last := h.steps[n-1]; last.Final() {
			want, _ := json.Marshal(res)
			got, _ := json.Marshal(last.Result)
			require.JSONEq(h.t, string(want), string(got), "what Write tells a waiting caller is the workflow's result")
			h.finalChecked++
		}
	}
	return res
}

func (h *writeHarness) called(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.log {
		if l == name || strings.HasPrefix(l, name+":") {
			n++
		}
	}
	return n
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func event(key, user, content string, at time.Time) memory.IngestEvent {
	return memory.IngestEvent{TenantID: "acme", IdempotencyKey: key, UserID: user, Content: content, OccurredAt: at, Schema: "general"}
}

func cand(pred, obj string, origin memory.Origin) memory.Candidate {
	return memory.Candidate{MemoryType: memory.TypePreference, Scope: memory.ScopeUser, Subject: "user", Predicate: pred, Object: obj,
		Content: "The user prefers " + obj + ".", Confidence: 0.9, Origin: origin, Extractor: "fake", Version: "1"}
}

func governed(id string, status memory.CandidateStatus, def string) Governed {
	c := cand("seat", "aisle "+id, memory.OriginStated)
	d := governance.Decision{Status: status, Action: governance.ActionCreate, Confidence: c.Confidence, Reason: "first value of the key"}
	if status == memory.CandidateNeedsConfirmation {
		c.Origin = memory.OriginInferred
		d.Reason = "inferred: needs confirmation"
	}
	return Governed{CandidateID: id, Candidate: c, Proposal: governance.Proposal{Candidate: c, MemoryKey: "user:u1:seat:" + id}, Decision: d, ReviewDefault: def}
}

func itemIDs(items []Governed) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.CandidateID)
	}
	return out
}

// withoutFirst drops the first occurrence of x (a step that runs concurrently with
// others, whose position in the log is not fixed).
func withoutFirst(log []string, x string) []string {
	out := []string{}
	dropped := false
	for _, l := range log {
		if l == x && !dropped {
			dropped = true
			continue
		}
		out = append(out, l)
	}
	return out
}

func writeInput() MemoryWriteInput {
	return MemoryWriteInput{Event: event("k1", "u1", "I always take an aisle seat", t0)}
}

// record → extract → validate ok → govern (all ACCEPTED) → commit → index.
func TestMemoryWriteHappyPath(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"), governed("c2", memory.CandidateAccepted, "reject"))

	res := h.run(writeInput())

	assert.Equal(t, WriteCommitted, res.Status)
	assert.Equal(t, 1, res.Attempts)
	assert.Equal(t, "ev-k1", res.EventID)
	assert.Equal(t, "evd-k1", res.EvidenceID)
	require.Len(t, res.Results, 2)
	assert.Equal(t, "fact-c1", res.Results[0].FactID)
	// The turn's index runs beside extraction, so its place in the log varies.
	assert.Equal(t, []string{"record:k1", "extract", "validate", "govern:k1", "commit", "index"}, withoutFirst(h.log, "index"))

	rec := h.records[0]
	assert.Equal(t, MemoryWriteWorkflowID("acme", "k1"), rec.WorkflowID)
	require.Len(t, h.governs, 1)
	assert.Equal(t, []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}, h.governs[0].Candidates)
	assert.Equal(t, "ev-k1", h.governs[0].EventID)
	require.Len(t, h.commits, 1)
	assert.Equal(t, []string{"c1", "c2"}, itemIDs(h.commits[0].Items))
	assert.Nil(t, h.commits[0].Verdicts)
	require.Len(t, h.indexes, 2)
	// The turn is indexed from right after record (whatever extraction makes of
	// it), the facts after commit; as local activities the two may end in either
	// order.
	assert.ElementsMatch(t, []IndexInput{
		{TenantID: "acme", EvidenceIDs: []string{"evd-k1"}},
		{TenantID: "acme", FactIDs: []string{"fact-c1", "fact-c2"}},
	}, h.indexes)
	assert.Empty(t, h.marks)
	assert.NotContains(t, h.review, ReviewPending)
	assert.Equal(t, []string{ReviewNone}, h.review)
}

// A failed index leaves the commit (and the result) intact.
func TestMemoryWriteIndexFailureKeepsCommit(t *testing.T) {
	h := newWriteHarness(t)
	h.indexErr = temporal.NewNonRetryableApplicationError("embedder down", "EmbedderDown", nil)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))

	res := h.run(writeInput())

	assert.Equal(t, WriteCommitted, res.Status)
	require.Len(t, res.Results, 1)
	assert.Equal(t, "fact-c1", res.Results[0].FactID)
	assert.Equal(t, 2, h.called("index"))
}

// Validation fails once, and the second extraction is given the errors.
func TestMemoryWriteValidationRetryFeedsErrorsBack(t *testing.T) {
	h := newWriteHarness(t)
	errs := []string{`candidates[0].scope: "GALAXY" is not allowed (allowed: USER, TASK)`, "candidates[0].object: is empty"}
	h.env.OnActivity(wa.Extract, mock.Anything, mock.MatchedBy(func(in ExtractInput) bool { return len(in.Feedback) == 0 })).
		Return(llm.ExtractOutput{Raw: "bad"}, nil).Once()
	h.env.OnActivity(wa.Extract, mock.Anything, mock.MatchedBy(func(in ExtractInput) bool { return reflect.DeepEqual(in.Feedback, errs) })).
		Return(llm.ExtractOutput{Raw: "good"}, nil).Once()
	h.env.OnActivity(wa.Validate, mock.Anything, ValidateInput{TenantID: "acme", Schema: "general", Raw: "bad"}).Return(ValidateResult{Errors: errs}, nil).Once()
	h.env.OnActivity(wa.Validate, mock.Anything, ValidateInput{TenantID: "acme", Schema: "general", Raw: "good"}).
		Return(ValidateResult{Candidates: []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}}, nil).Once()
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))

	res := h.run(writeInput())

	assert.Equal(t, WriteCommitted, res.Status)
	assert.Equal(t, 2, res.Attempts)
	h.env.AssertActivityNumberOfCalls(t, "Extract", 2)
	h.env.AssertActivityCalled(t, "Extract", mock.Anything, mock.MatchedBy(func(in ExtractInput) bool { return len(in.Feedback) == 0 }))
	h.env.AssertActivityCalled(t, "Extract", mock.Anything, mock.MatchedBy(func(in ExtractInput) bool { return reflect.DeepEqual(in.Feedback, errs) }))
	h.env.AssertActivityNumberOfCalls(t, "Validate", 2)
	assert.Equal(t, 1, h.called("commit"))
	assert.Empty(t, h.marks)
}

// Validation never succeeds: the event is UNPARSED, the reason holds the errors, and
// nothing is governed or committed.
func TestMemoryWriteValidationFailsEveryTime(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	n := 0
	h.env.OnActivity(wa.Validate, mock.Anything, mock.Anything).Return(
		func(context.Context, ValidateInput) (ValidateResult, error) {
			n++
			return ValidateResult{Errors: []string{fmt.Sprintf("candidates[0].origin: bad %d", n)}}, nil
		})
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	in := writeInput()
	in.ExtractAttempts = 3

	res := h.run(in)

	assert.Equal(t, WriteUnparsed, res.Status)
	assert.Equal(t, 3, res.Attempts)
	require.Len(t, h.marks, 1)
	m := h.marks[0]
	assert.Equal(t, memory.EventUnparsed, m.Status)
	assert.Equal(t, "acme", m.TenantID)
	assert.Equal(t, "ev-k1", m.EventID)
	assert.Contains(t, m.Reason, "after 3 attempts")
	assert.Contains(t, m.Reason, "candidates[0].origin: bad 3")
	assert.Equal(t, m.Reason, res.Reason)
	// Each re-extraction carried the previous attempt's errors.
	require.Len(t, h.extracts, 3)
	assert.Empty(t, h.extracts[0].Feedback)
	assert.Equal(t, []string{"candidates[0].origin: bad 1"}, h.extracts[1].Feedback)
	assert.Equal(t, []string{"candidates[0].origin: bad 2"}, h.extracts[2].Feedback)
	h.env.AssertActivityNotCalled(t, "Govern", mock.Anything, mock.Anything)
	h.env.AssertActivityNotCalled(t, "Commit", mock.Anything, mock.Anything)
	assert.Equal(t, 1, h.called("index"), "only the turn is indexed: it stays findable though nothing was extracted")
}

// The default bound is 3 attempts.
func TestMemoryWriteDefaultExtractAttempts(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.env.OnActivity(wa.Validate, mock.Anything, mock.Anything).Return(ValidateResult{Errors: []string{"x: bad"}}, nil)

	res := h.run(writeInput())

	assert.Equal(t, WriteUnparsed, res.Status)
	assert.Equal(t, 3, res.Attempts)
	h.env.AssertActivityNumberOfCalls(t, "Extract", 3)
}

// An extractor that refuses the request is not retried: UNPARSED, evidence kept.
func TestMemoryWriteExtractorRejected(t *testing.T) {
	h := newWriteHarness(t)
	h.env.OnActivity(wa.Extract, mock.Anything, mock.Anything).
		Return(llm.ExtractOutput{}, temporal.NewNonRetryableApplicationError("endpoint refused the request (400)", ErrTypeExtractorRejected, nil))

	res := h.run(writeInput())

	assert.Equal(t, WriteUnparsed, res.Status)
	assert.Equal(t, "evd-k1", res.EvidenceID)
	assert.Contains(t, res.Reason, "extractor failed")
	assert.Contains(t, res.Reason, "endpoint refused the request (400)")
	h.env.AssertActivityNumberOfCalls(t, "Extract", 1) // non-retryable: one call
	require.Len(t, h.marks, 1)
	assert.Equal(t, memory.EventUnparsed, h.marks[0].Status)
	assert.Contains(t, h.marks[0].Reason, "extractor failed")
	h.env.AssertActivityNotCalled(t, "Validate", mock.Anything, mock.Anything)
	h.env.AssertActivityNotCalled(t, "Govern", mock.Anything, mock.Anything)
	h.env.AssertActivityNotCalled(t, "Commit", mock.Anything, mock.Anything)
}

// An extractor that stays unavailable is retried by the activity's policy (5 attempts),
// then the event is UNPARSED.
func TestMemoryWriteExtractorUnavailable(t *testing.T) {
	h := newWriteHarness(t)
	h.env.OnActivity(wa.Extract, mock.Anything, mock.Anything).Return(llm.ExtractOutput{}, errors.New("connection refused"))

	res := h.run(writeInput())

	assert.Equal(t, WriteUnparsed, res.Status)
	assert.Contains(t, res.Reason, "extractor failed")
	h.env.AssertActivityNumberOfCalls(t, "Extract", 5)
	h.env.AssertActivityNotCalled(t, "Commit", mock.Anything, mock.Anything)
}

// Nothing worth remembering: NO_MEMORY and the event is marked COMMITTED.
func TestMemoryWriteNoCandidates(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways()

	res := h.run(writeInput())

	assert.Equal(t, WriteNoMemory, res.Status)
	assert.Equal(t, 1, res.Attempts)
	require.Len(t, h.marks, 1)
	assert.Equal(t, memory.EventCommitted, h.marks[0].Status)
	assert.Equal(t, "ev-k1", h.marks[0].EventID)
	h.env.AssertActivityNotCalled(t, "Govern", mock.Anything, mock.Anything)
	h.env.AssertActivityNotCalled(t, "Commit", mock.Anything, mock.Anything)
}

// reviewSetup: c-ok is trusted, c-rev needs confirmation.
func reviewSetup(t *testing.T, def string) *writeHarness {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginInferred))
	h.governAlways(governed("c-ok", memory.CandidateAccepted, "reject"), governed("c-rev", memory.CandidateNeedsConfirmation, def))
	return h
}

// Trusted candidates are committed at once; the rest wait for the review signal.
func TestMemoryWriteReviewSignal(t *testing.T) {
	cases := []struct {
		name    string
		verdict governance.Verdict
		status  memory.CandidateStatus
	}{
		{"confirm", governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}, memory.CandidateAccepted},
		{"reject", governance.Verdict{Kind: governance.VerdictReject, Reviewer: "alice", Note: "not true"}, memory.CandidateRejected},
		{"edit", governance.Verdict{Kind: governance.VerdictEdit, Reviewer: "alice", Object: "window"}, memory.CandidateAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := reviewSetup(t, "reject")
			var commitsBefore int
			var reviewBefore []string
			h.at(30*time.Minute, func() {
				h.mu.Lock()
				commitsBefore = len(h.commits)
				reviewBefore = append([]string(nil), h.review...)
				h.mu.Unlock()
			})
			pendingBefore := h.pendingAt(45 * time.Minute)
			var list []PendingCandidate
			h.at(50*time.Minute, func() {
				v, err := h.env.QueryWorkflow(QueryPending)
				require.NoError(t, err)
				require.NoError(t, v.Get(&list))
			})
			h.signal(time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: tc.verdict})

			res := h.run(writeInput())

			// Before the signal: the trusted item was committed alone, and the candidate waits.
			assert.Equal(t, 1, commitsBefore)
			assert.Equal(t, []string{"c-rev"}, *pendingBefore)
			assert.Equal(t, []string{ReviewNone, ReviewPending}, reviewBefore)
			require.Len(t, list, 1)
			p := list[0]
			assert.Equal(t, "user:u1:seat:c-rev", p.MemoryKey)
			assert.Equal(t, "INFERRED", p.Origin)
			assert.Equal(t, "USER", p.Scope)
			assert.Equal(t, "reject", p.Default)
			assert.Equal(t, "CREATE", p.OnConfirm)
			assert.Equal(t, "inferred: needs confirmation", p.Reason)
			assert.Equal(t, []string{"evd-k1"}, p.Evidence)
			assert.NotEmpty(t, p.Deadline)

			require.Len(t, h.commits, 2)
			assert.Equal(t, []string{"c-ok"}, itemIDs(h.commits[0].Items))
			assert.Nil(t, h.commits[0].Verdicts)
			assert.Equal(t, []string{"c-rev"}, itemIDs(h.commits[1].Items))
			assert.Equal(t, map[string]governance.Verdict{"c-rev": tc.verdict}, h.commits[1].Verdicts)
			assert.Equal(t, "ev-k1", h.commits[1].EventID)
			assert.Equal(t, "evd-k1", h.commits[1].EvidenceID)
			// The second commit happened after the review, an hour in.
			assert.GreaterOrEqual(t, h.commitAt[1].Sub(h.started), time.Hour)
			assert.Less(t, h.commitAt[1].Sub(h.started), 2*time.Hour)

			assert.Equal(t, WriteCommitted, res.Status)
			require.Len(t, res.Results, 2)
			assert.Equal(t, "c-rev", res.Results[1].CandidateID)
			assert.Equal(t, tc.status, res.Results[1].Status)
			assert.Equal(t, "alice", res.Results[1].Reviewer)
			assert.Equal(t, []string{ReviewNone, ReviewPending, ReviewDone}, h.review)
			wantIndex := 3 // the turn, the trusted fact, the reviewed fact
			if tc.status != memory.CandidateAccepted {
				wantIndex = 2 // a rejected candidate has no fact to index
			}
			assert.Equal(t, wantIndex, h.called("index"))
		})
	}
}

// When every candidate needs review nothing is committed before the verdict.
func TestMemoryWriteOnlyPendingCommitsOnce(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginInferred))
	h.governAlways(governed("c-rev", memory.CandidateNeedsConfirmation, "reject"))
	h.signal(time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}})

	res := h.run(writeInput())

	assert.Equal(t, WriteCommitted, res.Status)
	require.Len(t, h.commits, 1)
	assert.Equal(t, []string{"c-rev"}, itemIDs(h.commits[0].Items))
	assert.Equal(t, "alice", h.commits[0].Verdicts["c-rev"].Reviewer)
}

// The review update: the validator rejects an unknown id, an unknown decision, an
// edit without a value and a second review of one candidate, without touching state.
func TestMemoryWriteReviewUpdate(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginInferred))
	h.governAlways(governed("c1", memory.CandidateNeedsConfirmation, "reject"), governed("c2", memory.CandidateNeedsConfirmation, "reject"))
	confirm := governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "bob"}
	edit := governance.Verdict{Kind: governance.VerdictEdit, Reviewer: "bob", Object: "window"}

	unknownID := h.update(time.Hour, "u-1", ReviewRequest{CandidateID: "nope", Verdict: confirm})
	badDecision := h.update(time.Hour+time.Minute, "u-2", ReviewRequest{CandidateID: "c1", Verdict: governance.Verdict{Kind: "maybe", Reviewer: "bob"}})
	afterRejects := h.pendingAt(time.Hour + 2*time.Minute)
	ok := h.update(time.Hour+3*time.Minute, "u-3", ReviewRequest{CandidateID: "c1", Verdict: confirm})
	again := h.update(time.Hour+4*time.Minute, "u-4", ReviewRequest{CandidateID: "c1", Verdict: governance.Verdict{Kind: governance.VerdictReject, Reviewer: "eve"}})
	afterAgain := h.pendingAt(time.Hour + 5*time.Minute)
	noValue := h.update(time.Hour+6*time.Minute, "u-5", ReviewRequest{CandidateID: "c2", Verdict: governance.Verdict{Kind: governance.VerdictEdit, Reviewer: "bob"}})
	last := h.update(time.Hour+7*time.Minute, "u-6", ReviewRequest{CandidateID: "c2", Verdict: edit})

	res := h.run(writeInput())

	rejected := func(o *updateOutcome, want string) {
		t.Helper()
		require.Error(t, o.rejectErr)
		assert.False(t, o.accepted)
		assert.Contains(t, o.rejectErr.Error(), want)
		var ae *temporal.ApplicationError
		require.True(t, errors.As(o.rejectErr, &ae), "%T", o.rejectErr)
		assert.Equal(t, ErrTypeInvalidReview, ae.Type())
	}
	rejected(unknownID, `"nope" is not awaiting review`)
	rejected(badDecision, `unknown decision "maybe"`)
	assert.Equal(t, []string{"c1", "c2"}, *afterRejects)
	assert.True(t, ok.accepted)
	assert.NoError(t, ok.rejectErr)
	assert.True(t, ok.completed)
	assert.NoError(t, ok.doneErr)
	assert.Equal(t, "recorded", ok.result)
	rejected(again, "already reviewed")
	assert.Equal(t, []string{"c2"}, *afterAgain)
	rejected(noValue, "edited_value")
	assert.True(t, last.accepted)
	assert.True(t, last.completed)

	assert.Equal(t, WriteCommitted, res.Status)
	require.Len(t, h.commits, 1)
	assert.Equal(t, []string{"c1", "c2"}, itemIDs(h.commits[0].Items))
	assert.Equal(t, map[string]governance.Verdict{"c1": confirm, "c2": edit}, h.commits[0].Verdicts)
	assert.Equal(t, []string{ReviewNone, ReviewPending, ReviewDone}, h.review)
}

// An invalid signal is ignored (and shown in the details); a valid one then completes.
func TestMemoryWriteInvalidSignalIgnored(t *testing.T) {
	h := reviewSetup(t, "reject")
	confirm := governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}
	h.signal(time.Hour, ReviewRequest{CandidateID: "nope", Verdict: confirm})
	h.signal(time.Hour+time.Minute, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: "maybe", Reviewer: "alice"}})
	h.signal(time.Hour+2*time.Minute, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm}}) // no reviewer
	still := h.pendingAt(time.Hour + 3*time.Minute)
	var commits int
	h.at(time.Hour+3*time.Minute, func() { h.mu.Lock(); commits = len(h.commits); h.mu.Unlock() })
	var details string
	h.at(time.Hour+3*time.Minute, func() {
		v, err := h.env.QueryWorkflow("__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		details = md.GetCurrentDetails()
	})
	h.signal(2*time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: confirm})

	res := h.run(writeInput())

	assert.Equal(t, []string{"c-rev"}, *still)
	assert.Equal(t, 1, commits, "an invalid signal must not commit anything")
	// The Web UI's current details: the candidate, the JSON to send, the ignored signals.
	assert.Contains(t, details, "1 memory candidate(s) await review")
	assert.Contains(t, details, "{\"candidate_id\": \"c-rev\",\n \"decision\": \"confirm\"")
	assert.Less(t, strings.Index(details, `"candidate_id"`), strings.Index(details, "why review"), "the payload comes first: the UI cuts the end")
	assert.Contains(t, details, `ignored signal: candidate_id: "nope" is not awaiting review`)
	assert.Contains(t, details, `unknown decision "maybe"`)
	assert.Contains(t, details, "reviewer: empty")
	assert.Equal(t, WriteCommitted, res.Status)
	require.Len(t, h.commits, 2)
	assert.Equal(t, map[string]governance.Verdict{"c-rev": confirm}, h.commits[1].Verdicts)
	assert.GreaterOrEqual(t, h.commitAt[1].Sub(h.started), 2*time.Hour)
}

// No review within ReviewTimeout: the schema's default applies; time is skipped.
func TestMemoryWriteReviewTimeout(t *testing.T) {
	for _, tc := range []struct {
		def    string
		kind   governance.VerdictKind
		status memory.CandidateStatus
	}{
		{"confirm", governance.VerdictConfirm, memory.CandidateAccepted},
		{"reject", governance.VerdictReject, memory.CandidateRejected},
	} {
		t.Run(tc.def, func(t *testing.T) {
			start := time.Now()
			h := reviewSetup(t, tc.def)
			before := h.pendingAt(71 * time.Hour)
			in := writeInput()
			in.ReviewTimeout = 72 * time.Hour

			res := h.run(in)

			assert.Less(t, time.Since(start), 5*time.Second, "time skipping")
			assert.Equal(t, []string{"c-rev"}, *before, "still pending just before the deadline")
			require.Len(t, h.commits, 2)
			v, ok := h.commits[1].Verdicts["c-rev"]
			require.True(t, ok)
			assert.Equal(t, tc.kind, v.Kind)
			assert.Equal(t, "engram:review-timeout", v.Reviewer)
			assert.Contains(t, v.Note, "no review within 72h0m0s")
			assert.GreaterOrEqual(t, h.commitAt[1].Sub(h.started), 72*time.Hour)
			assert.Less(t, h.commitAt[1].Sub(h.started), 73*time.Hour)
			assert.Equal(t, tc.status, res.Results[1].Status)
			assert.Equal(t, []string{ReviewNone, ReviewPending, ReviewDone}, h.review)
		})
	}
}

// The default review timeout is 72h.
func TestMemoryWriteReviewTimeoutDefault(t *testing.T) {
	h := reviewSetup(t, "confirm")
	res := h.run(writeInput())
	assert.Equal(t, WriteCommitted, res.Status)
	require.Len(t, h.commits, 2)
	assert.Equal(t, "engram:review-timeout", h.commits[1].Verdicts["c-rev"].Reviewer)
	assert.GreaterOrEqual(t, h.commitAt[1].Sub(h.started), 72*time.Hour)
}

// A verdict for some candidates and the timeout for the rest.
func TestMemoryWriteReviewPartialThenTimeout(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginInferred))
	h.governAlways(governed("c1", memory.CandidateNeedsConfirmation, "confirm"), governed("c2", memory.CandidateNeedsConfirmation, "confirm"))
	reject := governance.Verdict{Kind: governance.VerdictReject, Reviewer: "alice"}
	h.signal(time.Hour, ReviewRequest{CandidateID: "c2", Verdict: reject})
	in := writeInput()
	in.ReviewTimeout = 10 * time.Hour

	h.run(in)

	require.Len(t, h.commits, 1)
	vs := h.commits[0].Verdicts
	assert.Equal(t, reject, vs["c2"])
	assert.Equal(t, governance.VerdictConfirm, vs["c1"].Kind)
	assert.Equal(t, "engram:review-timeout", vs["c1"].Reviewer)
	d := h.commitAt[0].Sub(h.started)
	assert.True(t, d >= 10*time.Hour && d < 11*time.Hour, "the deadline does not move when a verdict arrives: %s", d)
}

// A review committed after the wait uses the event as validated (with its defaults).
func TestMemoryWriteReviewCommitUsesValidatedEvent(t *testing.T) {
	h := reviewSetup(t, "confirm")
	in := writeInput()
	in.Event.Schema, in.Event.ActorType, in.Event.EventType = "", "", ""

	h.run(in)

	require.Len(t, h.commits, 2)
	for i, c := range h.commits {
		assert.Equal(t, "general", c.Event.Schema, "commit %d", i)
		assert.Equal(t, "USER", c.Event.ActorType, "commit %d", i)
		assert.Equal(t, "MESSAGE", c.Event.EventType, "commit %d", i)
	}
}

// Bad input fails the workflow, non-retryably, before any activity.
func TestMemoryWriteBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*memory.IngestEvent)
		field string
	}{
		{"empty user", func(e *memory.IngestEvent) { e.UserID = " " }, "user_id"},
		{"empty tenant", func(e *memory.IngestEvent) { e.TenantID = "" }, "tenant_id"},
		{"no time", func(e *memory.IngestEvent) { e.OccurredAt = time.Time{} }, "occurred_at"},
		{"empty content", func(e *memory.IngestEvent) { e.Content = "" }, "content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newWriteHarness(t)
			h.extractAlways()
			started := 0
			h.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { started++ })
			in := writeInput()
			tc.edit(&in.Event)

			h.env.ExecuteWorkflow(MemoryWrite, in)

			require.True(t, h.env.IsWorkflowCompleted())
			err := h.env.GetWorkflowError()
			require.Error(t, err)
			var ae *temporal.ApplicationError
			require.True(t, errors.As(err, &ae), "%T: %v", err, err)
			assert.Equal(t, memory.ErrTypeBadInput, ae.Type())
			assert.True(t, ae.NonRetryable())
			assert.Contains(t, err.Error(), tc.field)
			assert.Zero(t, started)
			assert.Empty(t, h.log)
		})
	}
}

// PauseBeforeCommit is a durable timer between governance and commit.
func TestMemoryWritePauseBeforeCommit(t *testing.T) {
	start := time.Now()
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	in := writeInput()
	in.PauseBeforeCommit = 10 * time.Minute

	res := h.run(in)

	assert.Equal(t, WriteCommitted, res.Status)
	assert.Equal(t, []string{"record:k1", "extract", "validate", "govern:k1", "timer", "commit", "index"}, withoutFirst(h.log, "index"))
	require.Len(t, h.commitAt, 1)
	assert.GreaterOrEqual(t, h.commitAt[0].Sub(h.started), 10*time.Minute)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// --- batch ---

// batchHarness: extraction output, validation and governance are driven by the
// event's content.
func batchHarness(t *testing.T) *writeHarness {
	h := newWriteHarness(t)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "write-batch/acme/b1"})
	h.extractAlways()
	h.env.OnActivity(wa.Validate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ValidateInput) (ValidateResult, error) {
			h.note("validate")
			switch {
			case strings.Contains(in.Raw, "nothing"):
				return ValidateResult{}, nil
			case strings.Contains(in.Raw, "garbled"):
				return ValidateResult{Errors: []string{"candidates: not an array"}}, nil
			}
			return ValidateResult{Candidates: []memory.Candidate{cand("seat", in.Raw, memory.OriginStated)}}, nil
		})
	h.governFn = func(in GovernInput) []Governed {
		id := "c-" + in.Event.IdempotencyKey
		if strings.Contains(in.Event.Content, "maybe") {
			return []Governed{governed(id, memory.CandidateNeedsConfirmation, "reject")}
		}
		return []Governed{governed(id, memory.CandidateAccepted, "reject")}
	}
	h.env.OnActivity(wa.Govern, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in GovernInput) (GovernResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.governs = append(h.governs, in)
			h.log = append(h.log, "govern:"+in.Event.IdempotencyKey)
			return GovernResult{Items: h.governFn(in)}, nil
		})
	return h
}

func TestMemoryWriteBatch(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		h := batchHarness(t)
		// Input order is not time order; each user's events must run in time order.
		evs := []memory.IngestEvent{
			event("u1-c", "u1", "maybe a window seat", t0.Add(3*time.Hour)),
			event("u2-b", "u2", "garbled", t0.Add(2*time.Hour)),
			event("u1-a", "u1", "aisle seat", t0.Add(1*time.Hour)),
			event("u2-a", "u2", "vegetarian meals", t0.Add(1*time.Hour)),
			event("u1-b", "u1", "nothing here", t0.Add(2*time.Hour)),
		}
		pending := h.pendingAt(time.Hour)
		confirm := governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}
		h.signal(2*time.Hour, ReviewRequest{CandidateID: "c-u1-c", Verdict: confirm})

		h.env.ExecuteWorkflow(MemoryWriteBatch, MemoryWriteBatchInput{Events: evs, Parallelism: 2, ExtractAttempts: 2, Revision: rev})

		require.True(t, h.env.IsWorkflowCompleted())
		require.NoError(t, h.env.GetWorkflowError())
		var res MemoryWriteBatchResult
		require.NoError(t, h.env.GetWorkflowResult(&res))

		perUser := map[string][]string{}
		for _, r := range h.records {
			perUser[r.Event.UserID] = append(perUser[r.Event.UserID], r.Event.IdempotencyKey)
			assert.Equal(t, "write-batch/acme/b1", r.WorkflowID)
		}
		assert.Equal(t, []string{"u1-a", "u1-b", "u1-c"}, perUser["u1"])
		assert.Equal(t, []string{"u2-a", "u2-b"}, perUser["u2"])
		// Governance too sees each user's events in time order.
		govPerUser := map[string][]string{}
		for _, g := range h.governs {
			govPerUser[g.Event.UserID] = append(govPerUser[g.Event.UserID], g.Event.IdempotencyKey)
		}
		assert.Equal(t, []string{"u1-a", "u1-c"}, govPerUser["u1"])
		assert.Equal(t, []string{"u2-a"}, govPerUser["u2"])

		assert.Equal(t, []string{"c-u1-c"}, *pending)
		require.Len(t, res.Results, 5)
		want := []string{WriteCommitted, WriteUnparsed, WriteCommitted, WriteCommitted, WriteNoMemory}
		for i, r := range res.Results {
			assert.Equal(t, want[i], r.Status, "results[%d] (%s)", i, evs[i].IdempotencyKey)
			assert.Equal(t, "ev-"+evs[i].IdempotencyKey, r.EventID, "results are in input order")
		}
		assert.Equal(t, 2, res.Results[1].Attempts)
		assert.Equal(t, 3, res.Committed)
		assert.Equal(t, 1, res.Unparsed)
		assert.Equal(t, 1, res.NoMemory)
		assert.Equal(t, 1, res.Reviewed)

		// Two immediate commits, then the reviewed one with its verdict.
		require.Len(t, h.commits, 3)
		last := h.commits[2]
		assert.Equal(t, []string{"c-u1-c"}, itemIDs(last.Items))
		assert.Equal(t, "ev-u1-c", last.EventID)
		assert.Equal(t, "u1-c", last.Event.IdempotencyKey)
		assert.Equal(t, map[string]governance.Verdict{"c-u1-c": confirm}, last.Verdicts)
		require.Len(t, res.Results[0].Results, 1)
		assert.Equal(t, "alice", res.Results[0].Results[0].Reviewer)
		marks := map[string]string{}
		for _, m := range h.marks {
			marks[m.EventID] = string(m.Status)
		}
		assert.Equal(t, map[string]string{"ev-u2-b": "UNPARSED", "ev-u1-b": "COMMITTED"}, marks)
		assert.Equal(t, []string{ReviewNone, ReviewPending, ReviewDone}, h.review)
	})
}

// A batch writes at most SliceEvents events per workflow task: each slice ends
// the task (with a timer beside the embeddings), each user's events stay in time order across slices, and every turn is
// embedded once (each slice's in Index steps of its own). With the default
// slice a small batch is one slice.
func TestMemoryWriteBatchSlices(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		var evs []memory.IngestEvent
		for i, u := range []string{"u1", "u2", "u1", "u3", "u2", "u1", "u3"} {
			evs = append(evs, event(fmt.Sprintf("%s-%d", u, i), u, fmt.Sprintf("aisle seat %d", i), t0.Add(time.Duration(i)*time.Minute)))
		}
		// With slices of 2, the 7 events take at least 4 tasks: 3 timers, more when a
		// user's run (WriteRun) leaves a slice part full for users that wait.
		for _, tc := range []struct {
			slice, timers, most int
		}{{2, 3, 6}, {0, 0, 0}} {
			t.Run(fmt.Sprintf("slice %d", tc.slice), func(t *testing.T) {
				h := batchHarness(t)
				// Each slice ends with a timer (the next task starts with it, or with an
				// earlier slice's embedding).
				h.env.SetOnTimerScheduledListener(func(string, time.Duration) { h.note("slice") })
				h.env.ExecuteWorkflow(MemoryWriteBatch, MemoryWriteBatchInput{Events: evs, Parallelism: 3, SliceEvents: tc.slice, Revision: rev})
				require.True(t, h.env.IsWorkflowCompleted())
				require.NoError(t, h.env.GetWorkflowError())
				var res MemoryWriteBatchResult
				require.NoError(t, h.env.GetWorkflowResult(&res))
				assert.Equal(t, len(evs), res.Committed)

				assert.GreaterOrEqual(t, h.called("slice"), tc.timers)
				assert.LessOrEqual(t, h.called("slice"), tc.most)
				perSlice, most := 0, 0
				for _, l := range h.log {
					switch {
					case l == "slice":
						perSlice = 0
					case strings.HasPrefix(l, "record:"):
						perSlice++
						most = max(most, perSlice)
					}
				}
				if tc.slice > 0 {
					assert.Equal(t, tc.slice, most, "events written in one workflow task")
				}
				perUser := map[string][]string{}
				for _, r := range h.records {
					perUser[r.Event.UserID] = append(perUser[r.Event.UserID], r.Event.IdempotencyKey)
				}
				assert.Equal(t, []string{"u1-0", "u1-2", "u1-5"}, perUser["u1"])
				assert.Equal(t, []string{"u2-1", "u2-4"}, perUser["u2"])
				assert.Equal(t, []string{"u3-3", "u3-6"}, perUser["u3"])
				var indexed []string
				for _, in := range h.indexes {
					indexed = append(indexed, in.EvidenceIDs...)
				}
				var want []string
				for _, e := range evs {
					want = append(want, "evd-"+e.IdempotencyKey)
				}
				assert.ElementsMatch(t, want, indexed, "every turn embedded once")
			})
		}
	})
}

// Batch review times out after ReviewTimeout seconds.
func TestMemoryWriteBatchReviewTimeout(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		h := batchHarness(t)
		evs := []memory.IngestEvent{event("u1-a", "u1", "maybe aisle", t0)}

		h.env.ExecuteWorkflow(MemoryWriteBatch, MemoryWriteBatchInput{Events: evs, ReviewTimeout: 3600, Revision: rev})

		require.NoError(t, h.env.GetWorkflowError())
		var res MemoryWriteBatchResult
		require.NoError(t, h.env.GetWorkflowResult(&res))
		assert.Equal(t, 1, res.Reviewed)
		require.Len(t, h.commits, 1)
		v := h.commits[0].Verdicts["c-u1-a"]
		assert.Equal(t, governance.VerdictReject, v.Kind)
		assert.Equal(t, "engram:review-timeout", v.Reviewer)
		d := h.commitAt[0].Sub(h.started)
		assert.True(t, d >= time.Hour && d < 2*time.Hour, "%s", d)
	})
}

func TestMemoryWriteBatchBadInput(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		many := make([]memory.IngestEvent, MaxBatchEvents+1)
		for i := range many {
			many[i] = event(fmt.Sprintf("k%d", i), "u1", "x", t0)
		}
		bad := []memory.IngestEvent{event("a", "u1", "x", t0), event("b", "u2", "y", t0), event("c", "", "z", t0)}
		for _, tc := range []struct {
			name   string
			events []memory.IngestEvent
			want   string
		}{
			{"empty", nil, "events: is empty"},
			{"too many", many, fmt.Sprintf("a batch holds at most %d", MaxBatchEvents)},
			{"invalid event", bad, "events[2].user_id"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := batchHarness(t)
				h.env.ExecuteWorkflow(MemoryWriteBatch, MemoryWriteBatchInput{Events: tc.events, Revision: rev})
				require.True(t, h.env.IsWorkflowCompleted())
				err := h.env.GetWorkflowError()
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				var ae *temporal.ApplicationError
				require.True(t, errors.As(err, &ae))
				assert.Equal(t, memory.ErrTypeBadInput, ae.Type())
				assert.True(t, ae.NonRetryable())
				assert.Empty(t, h.log, "no activity runs")
			})
		}
	})
}

// An activity failure in the batch names the event.
func TestMemoryWriteBatchActivityErrorNamesEvent(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		h := newWriteHarness(t)
		h.extractAlways()
		h.env.OnActivity(wa.Validate, mock.Anything, mock.Anything).
			Return(ValidateResult{}, temporal.NewNonRetryableApplicationError("unknown schema", memory.ErrTypeUnknownSchema, nil))
		evs := []memory.IngestEvent{event("a", "u1", "x", t0), event("b", "u1", "y", t0.Add(time.Minute))}

		h.env.ExecuteWorkflow(MemoryWriteBatch, MemoryWriteBatchInput{Events: evs, Revision: rev})

		err := h.env.GetWorkflowError()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "events[0]")
		assert.Contains(t, err.Error(), "unknown schema")
		assert.Equal(t, 1, h.called("record"), "the user's later events are not written after a failure")
	})
}

// A write that fails (here governance, with an error retrying cannot fix) marks its
// event FAILED with the reason instead of leaving it PROCESSING.
func TestMemoryWriteFailureMarksTheEventFailed(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.env.OnActivity(wa.Govern, mock.Anything, mock.Anything).Return(GovernResult{},
		temporal.NewNonRetryableApplicationError("memory_key: too long for an index row", memory.ErrTypeBadInput, nil))

	h.env.ExecuteWorkflow(MemoryWrite, writeInput())

	require.True(t, h.env.IsWorkflowCompleted())
	require.Error(t, h.env.GetWorkflowError())
	require.Len(t, h.failed, 1)
	f := h.failed[0]
	assert.Equal(t, "acme", f.TenantID)
	assert.Equal(t, []string{"ev-k1"}, f.EventIDs)
	assert.Equal(t, []string{"k1"}, f.Keys)
	assert.Contains(t, f.Reason, "memory_key: too long for an index row")
	assert.Equal(t, "mark:FAILED", h.log[len(h.log)-1])
	assert.Empty(t, h.commits)
}

// recordFailing runs a MemoryWrite whose Record fails with err and returns what
// MarkFailed was asked.
func recordFailing(t *testing.T, err error) []MarkFailedInput {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(MemoryWrite)
	env.RegisterActivity(wa)
	env.OnActivity(wa.Record, mock.Anything, mock.Anything).Return(RecordResult{}, err)
	var failed []MarkFailedInput
	env.OnActivity(wa.MarkFailed, mock.Anything, mock.Anything).Return(func(_ context.Context, in MarkFailedInput) (int, error) {
		failed = append(failed, in)
		return 1, nil
	})
	env.ExecuteWorkflow(MemoryWrite, writeInput())
	require.Error(t, env.GetWorkflowError())
	return failed
}

// Record failing for good (before the workflow knows the event's id) marks the
// event by its idempotency key.
func TestMemoryWriteRecordFailureMarksByKey(t *testing.T) {
	failed := recordFailing(t, temporal.NewNonRetryableApplicationError("locator: contains a NUL byte", memory.ErrTypeBadInput, nil))
	require.Len(t, failed, 1)
	assert.Empty(t, failed[0].EventIDs)
	assert.Equal(t, []string{"k1"}, failed[0].Keys)
	assert.Contains(t, failed[0].Reason, "locator: contains a NUL byte")
}

// A key reused for another event is that event's write: it is not marked FAILED.
func TestMemoryWriteIdempotencyConflictMarksNothing(t *testing.T) {
	assert.Empty(t, recordFailing(t, temporal.NewNonRetryableApplicationError("key used for another event", ErrTypeIdempotencyConflict, nil)))
}

// A failed batch marks the events it did not finish FAILED, by key.
func TestMemoryWriteBatchFailureMarksItsEventsFailed(t *testing.T) {
	forRevisions(t, func(t *testing.T, rev int) {
		h := newWriteHarness(t)
		h.extractAlways()
		h.validateAlways(cand("seat", "aisle", memory.OriginStated))
		h.env.OnActivity(wa.Govern, mock.Anything, mock.Anything).Return(GovernResult{},
			temporal.NewNonRetryableApplicationError("boom", memory.ErrTypeBadInput, nil))
		h.governErr = temporal.NewNonRetryableApplicationError("boom", memory.ErrTypeBadInput, nil)
		in := MemoryWriteBatchInput{Events: []memory.IngestEvent{event("b1", "u1", "aisle seat", t0), event("b2", "u2", "window seat", t0)}, Revision: rev}

		h.env.ExecuteWorkflow(MemoryWriteBatch, in)

		require.Error(t, h.env.GetWorkflowError())
		require.Len(t, h.failed, 1)
		assert.Equal(t, []string{"b1", "b2"}, h.failed[0].Keys)
		assert.Contains(t, h.failed[0].Reason, "boom")
	})
}

// A write started by Prepare (WriteRevision) runs the same steps with its search
// attributes set at start: it upserts none until it waits for review, and a failed
// one is still marked FAILED.
func TestMemoryWriteRevisionSetsAttributesAtStart(t *testing.T) {
	_, in := Prepare("q", writeInput())
	require.Equal(t, WriteRevision, in.Revision)

	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	res := h.run(in)
	assert.Equal(t, WriteCommitted, res.Status)
	// Record and Commit stored the vectors: no Index step.
	assert.Equal(t, []string{"write", "record:k1", "extract", "validate", "govern:k1", "commit"}, h.log)
	assert.True(t, h.records[0].Embed)
	assert.True(t, h.commits[0].Embed)
	assert.Empty(t, h.review, "no search attribute upsert on a write that needs no review")

	// What Record or Commit could not embed is left to Index.
	h = newWriteHarness(t)
	h.turnUnembedded, h.factsUnembedded = true, []string{"fact-c2"}
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"), governed("c2", memory.CandidateAccepted, "reject"))
	h.run(in)
	assert.ElementsMatch(t, []IndexInput{
		{TenantID: "acme", EvidenceIDs: []string{"evd-k1"}},
		{TenantID: "acme", FactIDs: []string{"fact-c2"}},
	}, h.indexes)

	h = reviewSetup(t, "reject")
	h.signal(time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}})
	h.run(in)
	assert.Equal(t, []string{ReviewPending, ReviewDone}, h.review)

	h = newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governErr = temporal.NewNonRetryableApplicationError("memory_key: too long for an index row", memory.ErrTypeBadInput, nil)
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	require.Len(t, h.failed, 1)
	assert.Equal(t, []string{"ev-k1"}, h.failed[0].EventIDs)
}

// Prepare starts a write with no search attributes (each costs the visibility store
// CPU on every write); one refused during an erasure sets its tenant and subject, so
// the erasure's last sweep finds its history, and so does one waiting for review.
func TestPrepareSetsNoSearchAttributes(t *testing.T) {
	o, in := Prepare("q", writeInput())
	assert.Equal(t, MemoryWriteWorkflowID("acme", "k1"), o.ID)
	assert.Zero(t, o.TypedSearchAttributes.Size())

	h := newWriteHarness(t)
	h.recordErr = temporal.NewNonRetryableApplicationError("user is being erased", ErrTypeErasureInProgress, nil)
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	assert.Equal(t, []string{"u1"}, h.subjects)

	h = reviewSetup(t, "reject")
	h.signal(time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}})
	h.run(in)
	assert.Equal(t, []string{"u1"}, h.subjects)

	h = newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	h.run(in)
	assert.Empty(t, h.subjects)
}

// A write of a newer revision than this worker knows fails its workflow task (to be
// retried on a newer worker) instead of running as an older shape.
func TestMemoryWriteNewerRevisionIsNotRun(t *testing.T) {
	h := newWriteHarness(t)
	in := writeInput()
	in.Revision = WriteRevision + 1
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	assert.Contains(t, h.env.GetWorkflowError().Error(), "newer than this worker's")
	assert.Empty(t, h.records)
}

// Revision 3 with an in-process extractor: Write records, extracts, validates and
// settles the write in one step, whose result is the workflow's; one whose
// extraction never validated makes the event UNPARSED with the errors, as the steps
// did. With an extractor out of process the steps run.
func TestMemoryWriteInOneStep(t *testing.T) {
	_, in := Prepare("q", writeInput())
	h := newWriteHarness(t)
	h.recordExtracts = &Extracted{Attempts: 1, Candidates: []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}}
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	res := h.run(in)
	assert.Equal(t, WriteCommitted, res.Status)
	assert.Equal(t, []string{"write", "record:k1", "govern:k1", "commit"}, h.log, "one step")
	assert.Equal(t, 1, h.finalChecked, "Write's answer was checked against the result")
	assert.Equal(t, []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}, h.governs[0].Candidates)

	h = newWriteHarness(t)
	h.recordExtracts = &Extracted{Attempts: 3, Errors: []string{"candidates[0].predicate: unknown"}}
	res = h.run(in)
	assert.Equal(t, WriteUnparsed, res.Status)
	assert.Equal(t, 3, res.Attempts)
	assert.Contains(t, res.Reason, "did not validate after 3 attempts: candidates[0].predicate: unknown")
	require.Len(t, h.marks, 1)
	assert.Equal(t, memory.EventUnparsed, h.marks[0].Status)
	assert.Equal(t, 1, h.finalChecked)

	// An extractor out of process (an LLM): the steps run after Write.
	h = newWriteHarness(t)
	h.extractAlways()
	h.validateAlways()
	res = h.run(in)
	assert.Equal(t, WriteNoMemory, res.Status)
	assert.Equal(t, []string{"write", "record:k1", "extract", "validate", "mark:COMMITTED"}, h.log)
	assert.Zero(t, h.finalChecked, "Write was not final: the caller waits for the workflow")

	// Nothing to remember ends in the one step.
	h = newWriteHarness(t)
	h.recordExtracts = &Extracted{Attempts: 1}
	res = h.run(in)
	assert.Equal(t, WriteNoMemory, res.Status)
	assert.Equal(t, []string{"write", "record:k1", "mark:COMMITTED"}, h.log)
	assert.Equal(t, 1, h.finalChecked)

	// A candidate for a reviewer: Write governs and commits the rest, the workflow
	// waits, then commits the reviewed one; its answer is not final.
	h = newWriteHarness(t)
	h.recordExtracts = &Extracted{Attempts: 1, Candidates: []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}}
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"), governed("c-rev", memory.CandidateNeedsConfirmation, "reject"))
	h.signal(time.Hour, ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}})
	res = h.run(in)
	assert.Equal(t, WriteCommitted, res.Status)
	assert.Equal(t, []string{"write", "record:k1", "govern:k1", "commit", "commit"}, withoutMarks(h.log))
	require.Len(t, res.Results, 2)
	assert.Equal(t, "alice", res.Results[1].Reviewer)
	assert.Zero(t, h.finalChecked)
	assert.Equal(t, []string{ReviewPending, ReviewDone}, h.review)
}

// withoutMarks drops what the review wait records beside the steps.
func withoutMarks(log []string) []string {
	return slices.DeleteFunc(slices.Clone(log), func(l string) bool { return l == "timer" })
}

// The session is updated inside Write; the UpdateSession step runs only when that
// failed in a way a retry may fix, and a revision-0 write keeps its step.
func TestMemoryWriteUpdatesTheSession(t *testing.T) {
	in := writeInput()
	in.Event.SessionID = "s1"
	_, rin := Prepare("q", in)
	for _, tc := range []struct {
		name      string
		in        MemoryWriteInput
		unupdated bool
		wantSteps int // session updates logged: in Write and as a step
	}{
		{"revision 3", rin, false, 1},
		{"revision 3, Write could not", rin, true, 1},
		{"revision 0", in, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newWriteHarness(t)
			h.sessionUnupdated = tc.unupdated
			h.extractAlways()
			h.validateAlways()
			h.run(tc.in)
			n := 0
			for _, l := range h.log {
				if l == "session:evd-k1" {
					n++
				}
			}
			assert.Equal(t, tc.wantSteps, n, "log %v", h.log)
			if tc.in.Revision == 3 {
				assert.Equal(t, "write", h.log[0])
				if !tc.unupdated {
					assert.Equal(t, "session:evd-k1", h.log[2], "in Write, after Record: %v", h.log)
				}
			}
		})
	}
}

// Revision 3 with PauseBeforeCommit: Write holds the candidates, the workflow
// governs, pauses on a durable timer, then commits (the crash tests kill the worker
// in the pause), whether the extractor runs in process or not.
func TestMemoryWriteHeldPausesBeforeCommit(t *testing.T) {
	_, in := Prepare("q", writeInput())
	in.PauseBeforeCommit = 10 * time.Minute
	for _, inProcess := range []bool{true, false} {
		h := newWriteHarness(t)
		if inProcess {
			h.recordExtracts = &Extracted{Attempts: 1, Candidates: []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}}
		} else {
			h.extractAlways()
			h.validateAlways(cand("seat", "aisle", memory.OriginStated))
		}
		h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
		res := h.run(in)
		assert.Equal(t, WriteCommitted, res.Status)
		want := []string{"write", "record:k1", "govern:k1", "timer", "commit"}
		if !inProcess {
			want = []string{"write", "record:k1", "extract", "validate", "govern:k1", "timer", "commit"}
		}
		assert.Equal(t, want, h.log)
		require.Len(t, h.commitAt, 1)
		assert.GreaterOrEqual(t, h.commitAt[0].Sub(h.started), 10*time.Minute)
		assert.Zero(t, h.finalChecked, "a held Write is not final")
	}
}

// Revision 3: a write that fails marks its event FAILED, by key when Write failed
// (by id when a step after it did: TestMemoryWriteRevisionSetsAttributesAtStart);
// a key reused for another event marks nothing.
func TestMemoryWriteInOneStepMarksFailures(t *testing.T) {
	_, in := Prepare("q", writeInput())
	h := newWriteHarness(t)
	h.recordExtracts = &Extracted{Attempts: 1, Candidates: []memory.Candidate{cand("seat", "aisle", memory.OriginStated)}}
	h.governErr = temporal.NewNonRetryableApplicationError("memory_key: too long for an index row", memory.ErrTypeBadInput, nil)
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	require.Len(t, h.failed, 1)
	assert.Empty(t, h.failed[0].EventIDs, "Write failed as a whole: its result, and the event's id, are not known")
	assert.Equal(t, []string{"k1"}, h.failed[0].Keys)
	assert.Contains(t, h.failed[0].Reason, "memory_key: too long for an index row")

	h = newWriteHarness(t)
	h.recordErr = temporal.NewNonRetryableApplicationError("locator: contains a NUL byte", memory.ErrTypeBadInput, nil)
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	require.Len(t, h.failed, 1)
	assert.Equal(t, []string{"k1"}, h.failed[0].Keys)

	h = newWriteHarness(t)
	h.recordErr = temporal.NewNonRetryableApplicationError("key reused", ErrTypeIdempotencyConflict, nil)
	h.env.ExecuteWorkflow(MemoryWrite, in)
	require.Error(t, h.env.GetWorkflowError())
	assert.Empty(t, h.failed)
}

// forRevisions runs f for a batch started before revisions (legacy.go) and one of
// the current revision.
func forRevisions(t *testing.T, f func(t *testing.T, rev int)) {
	for _, rev := range []int{0, WriteRevision} {
		t.Run(fmt.Sprintf("revision %d", rev), func(t *testing.T) { f(t, rev) })
	}
}
