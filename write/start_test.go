package write

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
)

// waitedOutcome is what the outcome update answered, and when (workflow clock).
type waitedOutcome struct {
	completed bool
	at        time.Time
	out       Outcome[MemoryWriteResult]
	err       error
}

// outcomeAt sends UpdateOutcome at d, as Update-with-Start sends it with the start
// when d is 0.
func (h *writeHarness) outcomeAt(d time.Duration) *waitedOutcome {
	o := &waitedOutcome{}
	h.at(d, func() {
		h.env.UpdateWorkflow(UpdateOutcome, "outcome-1", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { o.err = err },
			OnComplete: func(r any, err error) {
				o.completed, o.at, o.err = true, h.env.Now(), err
				if v, ok := r.(Outcome[MemoryWriteResult]); ok {
					o.out = v
				}
			},
		})
	})
	return o
}

func TestOutcomeAnswersTheResult(t *testing.T) {
	h := newWriteHarness(t)
	h.extractAlways()
	h.validateAlways(cand("seat", "aisle", memory.OriginStated))
	h.governAlways(governed("c1", memory.CandidateAccepted, "reject"))
	o := h.outcomeAt(0)

	res := h.run(writeInput())

	require.True(t, o.completed)
	require.NoError(t, o.err)
	assert.False(t, o.out.PendingReview)
	assert.Equal(t, res, o.out.Result)
	assert.Equal(t, "fact-c1", o.out.Result.Results[0].FactID)
}

// A write waiting for review answers PendingReview at once (after committing what
// needs no review), not when the review ends.
func TestOutcomeAnswersPendingReview(t *testing.T) {
	h := reviewSetup(t, "reject")
	o := h.outcomeAt(0)
	var commitsAtAnswer int
	h.at(time.Minute, func() { commitsAtAnswer = len(h.commits) })
	h.update(time.Hour, "u-1", ReviewRequest{CandidateID: "c-rev", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}})
	during := h.outcomeAt(30 * time.Minute)

	res := h.run(writeInput())

	require.True(t, o.completed)
	require.NoError(t, o.err)
	assert.True(t, o.out.PendingReview)
	assert.True(t, o.at.Before(h.started.Add(time.Minute)), "answered at %s, the write started at %s", o.at, h.started)
	assert.Equal(t, 1, commitsAtAnswer, "the trusted candidate was committed before the answer")
	// Asked again while the review waits, the answer is the same, at once.
	require.True(t, during.completed)
	assert.True(t, during.out.PendingReview)
	assert.Equal(t, h.started.Add(30*time.Minute), during.at)
	assert.Len(t, h.commits, 2)
	assert.Equal(t, WriteCommitted, res.Status)
}

// A write that fails answers its error, with its type.
func TestOutcomeAnswersTheFailure(t *testing.T) {
	h := newWriteHarness(t)
	in := writeInput()
	in.Event.Content = ""
	o := h.outcomeAt(0)

	h.env.ExecuteWorkflow(MemoryWrite, in)

	require.Error(t, h.env.GetWorkflowError())
	require.True(t, o.completed)
	var ae *temporal.ApplicationError
	require.True(t, errors.As(o.err, &ae), "%T: %v", o.err, o.err)
	assert.Equal(t, memory.ErrTypeBadInput, ae.Type())
}

func TestMemoryWriteBatchWorkflowID(t *testing.T) {
	assert.Equal(t, "write-batch/acme/b1", MemoryWriteBatchWorkflowID("acme", "b1"))
	assert.Equal(t, "write/acme/b1", MemoryWriteWorkflowID("acme", "b1"))
	long := MemoryWriteBatchWorkflowID("acme", string(make([]byte, 100)))
	assert.Regexp(t, `^write-batch/acme/h-[0-9a-f]{32}$`, long)
}
