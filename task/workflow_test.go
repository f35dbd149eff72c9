package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
)

// taskHarness drives one TaskWorkflow in the test environment. Updates and queries
// are scheduled at fixed points of (skipped) time, one minute apart, so each one
// runs after the previous one has finished.
type taskHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	in  TaskInput
	at  time.Duration

	mu      sync.Mutex
	records []RecordTransitionInput
	calls   []CallActionInput
	recons  []ReconcileInput

	recordCall *testsuite.MockCallWrapper
}

var acts *TaskActivities

func newTaskHarness(t *testing.T, cfg TaskConfig) *taskHarness {
	var s testsuite.WorkflowTestSuite
	if !testing.Verbose() {
		s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	}
	h := &taskHarness{t: t, env: s.NewTestWorkflowEnvironment()}
	h.in = TaskInput{TenantID: "acme", TaskID: "t1", UserID: "u1", SessionID: "s1", AgentID: "a1", Actor: "agent:a1", Config: cfg}
	h.env.RegisterWorkflow(TaskWorkflow)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: TaskWorkflowID(h.in.TenantID, h.in.TaskID)})
	h.env.RegisterActivity(acts)
	h.recordCall = h.env.OnActivity(acts.RecordTransition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in RecordTransitionInput) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.records = append(h.records, in)
			return nil
		}).Maybe()
	return h
}

// onCall scripts CallAction answers in order; the last one repeats.
func (h *taskHarness) onCall(answers ...func() (*CallActionResult, error)) {
	h.env.OnActivity(acts.CallAction, mock.Anything, mock.Anything).Return(scripted(h, &h.calls, answers)).Maybe()
}

// onReconcile scripts Reconcile answers in order; the last one repeats.
func (h *taskHarness) onReconcile(answers ...func() (*ReconcileResult, error)) {
	h.env.OnActivity(acts.Reconcile, mock.Anything, mock.Anything).Return(scripted(h, &h.recons, answers)).Maybe()
}

// scripted is a mocked activity that records each input in inputs and gives the
// answers in order, the last one again and again.
func scripted[In, Out any](h *taskHarness, inputs *[]In, answers []func() (Out, error)) func(context.Context, In) (Out, error) {
	n := 0
	return func(_ context.Context, in In) (Out, error) {
		h.mu.Lock()
		*inputs = append(*inputs, in)
		i := min(n, len(answers)-1)
		n++
		h.mu.Unlock()
		return answers[i]()
	}
}

func applied() (*CallActionResult, error) {
	return &CallActionResult{Status: ActionApplied, Result: json.RawMessage(`{"ok":true}`)}, nil
}

func appErr(typ string) func() (*CallActionResult, error) {
	return func() (*CallActionResult, error) {
		return nil, temporal.NewApplicationError("simulated "+typ, typ)
	}
}

func reconciled(status string) func() (*ReconcileResult, error) {
	return func() (*ReconcileResult, error) {
		return &ReconcileResult{Status: status, Lookups: 2}, nil
	}
}

type updateOutcome struct {
	rejected error
	err      error
	view     TaskView
	done     bool
}

// update schedules an update one minute after the previous scheduled action.
func (h *taskHarness) update(name string, arg any) *updateOutcome {
	h.at += time.Minute
	return h.updateAt(h.at, name, arg)
}

func (h *taskHarness) updateAt(at time.Duration, name string, arg any) *updateOutcome {
	out := &updateOutcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, at), &testsuite.TestUpdateCallback{
			OnReject: func(err error) { out.rejected = err; out.done = true },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				out.err, out.done = err, true
				if v != nil {
					out.view = v.(TaskView)
				}
			},
		}, arg)
	}, at)
	return out
}

func (h *taskHarness) signal(name string, arg any) {
	h.at += time.Minute
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, arg) }, h.at)
}

// query schedules a state query and returns where the answer will be.
func (h *taskHarness) query() *TaskView {
	h.at += time.Minute
	return h.queryAt(h.at)
}

func (h *taskHarness) queryAt(at time.Duration) *TaskView {
	v := &TaskView{}
	h.env.RegisterDelayedCallback(func() {
		res, err := h.env.QueryWorkflow(TaskQueryState)
		require.NoError(h.t, err)
		require.NoError(h.t, res.Get(v))
	}, at)
	return v
}

func (h *taskHarness) run() {
	h.env.ExecuteWorkflow(TaskWorkflow, h.in)
	require.True(h.t, h.env.IsWorkflowCompleted())
}

func (h *taskHarness) result() TaskResult {
	require.NoError(h.t, h.env.GetWorkflowError())
	var r TaskResult
	require.NoError(h.t, h.env.GetWorkflowResult(&r))
	return r
}

func (h *taskHarness) transitions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		tr := r.Transition
		s := fmt.Sprintf("%d %s>%s", tr.Seq, tr.From, tr.To)
		if tr.Step != "" {
			s += " " + tr.Step
		}
		out = append(out, s)
	}
	return out
}

func ok(t *testing.T, o *updateOutcome, state memory.TaskState) {
	t.Helper()
	require.True(t, o.done, "update never finished")
	require.NoError(t, o.rejected)
	require.NoError(t, o.err)
	require.Equal(t, state, o.view.State)
}

func twoSteps() PlanRequest {
	return PlanRequest{Actor: "agent:a1", Goal: "book a trip", Steps: []TaskStep{
		{Name: "hotel", Action: "book_hotel", Input: json.RawMessage(`{"city":"Lisbon"}`)},
		{Name: "pay", Action: "pay", Input: json.RawMessage(`{"amount":120}`)},
	}}
}

func TestTaskHappyPath(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(applied)
	plan := h.update(TaskUpdatePlan, twoSteps())
	ask := h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{Actor: "agent:a1"})
	waiting := h.query()
	conf := h.update(TaskUpdateConfirm, ConfirmRequest{Actor: "user:u1"})
	s1 := h.update(TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"})
	mid := h.query()
	s2 := h.update(TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1", Step: "pay"})
	done := h.update(TaskUpdateComplete, CompleteRequest{Actor: "agent:a1"})
	h.run()

	ok(t, plan, memory.TaskPlanning)
	require.Equal(t, []string{"hotel", "pay"}, plan.view.Todo)
	require.Equal(t, "hotel", plan.view.NextStep)
	ok(t, ask, memory.TaskWaitingConfirmation)
	require.Equal(t, memory.TaskWaitingConfirmation, waiting.State)
	require.False(t, waiting.ConfirmDeadline.IsZero())
	ok(t, conf, memory.TaskExecuting)
	ok(t, s1, memory.TaskExecuting)
	require.Equal(t, []string{"hotel"}, s1.view.Done)
	require.Equal(t, "pay", mid.NextStep)
	require.Equal(t, []string{"pay"}, mid.Todo)
	require.Equal(t, StepDone, mid.Steps[0].Status)
	require.Equal(t, StepPending, mid.Steps[1].Status)
	ok(t, s2, memory.TaskExecuting)
	ok(t, done, memory.TaskCompleted)
	require.Empty(t, done.view.NextStep)

	r := h.result()
	require.Equal(t, memory.TaskCompleted, r.State)
	require.Equal(t, []string{"hotel", "pay"}, r.Done)
	require.Equal(t, []string{
		"1 >CREATED", "2 CREATED>PLANNING", "3 PLANNING>WAITING_CONFIRMATION", "4 WAITING_CONFIRMATION>EXECUTING",
		"5 EXECUTING>EXECUTING hotel", "6 EXECUTING>EXECUTING pay", "7 EXECUTING>COMPLETED",
	}, h.transitions())
	// The Postgres rows carry the task as of each transition.
	last := h.records[len(h.records)-1]
	require.Equal(t, "book a trip", last.Task.Goal)
	require.Equal(t, []string{"hotel", "pay"}, last.Task.Done)
	require.Equal(t, "task/acme/t1", last.Task.WorkflowID)
	require.Equal(t, "user:u1", h.records[3].Transition.Actor)
	// Each send carries the step's business key.
	require.Len(t, h.calls, 2)
	require.Equal(t, IdempotencyKey("acme", "t1", "hotel"), h.calls[0].IdempotencyKey)
	require.Equal(t, IdempotencyKey("acme", "t1", "pay"), h.calls[1].IdempotencyKey)
	require.JSONEq(t, `{"city":"Lisbon"}`, string(h.calls[0].Input))
	// The query's transitions are the ones written to Postgres.
	require.Len(t, done.view.Transitions, 7)
}

func TestTaskConfirmSignal(t *testing.T) {
	for _, reject := range []bool{false, true} {
		t.Run(fmt.Sprintf("reject=%v", reject), func(t *testing.T) {
			h := newTaskHarness(t, TaskConfig{})
			h.update(TaskUpdatePlan, twoSteps())
			h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{})
			h.signal(TaskSignalConfirm, ConfirmRequest{Actor: "reviewer:r1", Reject: reject})
			after := h.query()
			h.update(TaskUpdateCancel, CancelRequest{})
			h.run()
			if reject {
				require.Equal(t, memory.TaskCancelled, after.State)
				require.Contains(t, h.transitions(), "4 WAITING_CONFIRMATION>CANCELLED")
			} else {
				require.Equal(t, memory.TaskExecuting, after.State)
				require.Equal(t, "reviewer:r1", h.records[3].Transition.Actor)
				require.Contains(t, h.transitions(), "5 EXECUTING>CANCELLED")
			}
		})
	}
}

func TestTaskConfirmSignalIgnoredWhenIllegal(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.update(TaskUpdatePlan, twoSteps())
	h.signal(TaskSignalConfirm, ConfirmRequest{Actor: "reviewer:r1"})
	after := h.query()
	h.update(TaskUpdateCancel, CancelRequest{})
	h.run()
	require.Equal(t, memory.TaskPlanning, after.State)
	require.Equal(t, int64(2), after.Seq)
}

func TestTaskConfirmationTimeout(t *testing.T) {
	t.Run("default cancel", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{}) // 24h, cancel
		h.update(TaskUpdatePlan, twoSteps())
		h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{})
		before := h.queryAt(23 * time.Hour)
		h.run()
		require.Equal(t, memory.TaskWaitingConfirmation, before.State)
		r := h.result()
		require.Equal(t, memory.TaskCancelled, r.State)
		last := h.records[len(h.records)-1].Transition
		require.Equal(t, "4 WAITING_CONFIRMATION>CANCELLED", h.transitions()[3])
		require.Equal(t, "system", last.Actor)
		require.Contains(t, last.Reason, "no confirmation within 24h0m0s")
		// The timeout fired 24h after the request, not before.
		require.Equal(t, 24*time.Hour, last.At.Sub(h.records[2].Transition.At))
	})
	t.Run("default confirm", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{ConfirmationTimeout: time.Hour, ConfirmationDefault: ConfirmDefaultConfirm})
		h.update(TaskUpdatePlan, twoSteps())
		h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{})
		after := h.queryAt(3 * time.Hour)
		h.updateAt(4*time.Hour, TaskUpdateCancel, CancelRequest{})
		h.run()
		require.Equal(t, memory.TaskExecuting, after.State)
		require.Equal(t, "4 WAITING_CONFIRMATION>EXECUTING", h.transitions()[3])
	})
	t.Run("answered in time", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{ConfirmationTimeout: time.Hour})
		h.update(TaskUpdatePlan, twoSteps())
		h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{})
		h.update(TaskUpdateConfirm, ConfirmRequest{})
		after := h.queryAt(5 * time.Hour)
		h.updateAt(6*time.Hour, TaskUpdateCancel, CancelRequest{Reason: "changed my mind"})
		h.run()
		require.Equal(t, memory.TaskExecuting, after.State)
		require.Equal(t, "5 EXECUTING>CANCELLED", h.transitions()[4])
	})
}

// reach schedules the updates that bring a fresh task to state.
// runStep reaches EXECUTING, runs the next step, then (thenCancel) cancels the
// task, and runs the workflow; it returns the step's outcome.
func (h *taskHarness) runStep(thenCancel bool) *updateOutcome {
	h.reach(memory.TaskExecuting)
	run := h.update(TaskUpdateRunStep, RunStepRequest{})
	if thenCancel {
		h.update(TaskUpdateCancel, CancelRequest{})
	}
	h.run()
	return run
}

func (h *taskHarness) reach(state memory.TaskState) {
	switch state {
	case memory.TaskCreated:
	case memory.TaskPlanning:
		h.update(TaskUpdatePlan, twoSteps())
	case memory.TaskWaitingConfirmation:
		h.reach(memory.TaskPlanning)
		h.update(TaskUpdateRequestConfirmation, RequestConfirmationRequest{})
	case memory.TaskExecuting:
		h.reach(memory.TaskWaitingConfirmation)
		h.update(TaskUpdateConfirm, ConfirmRequest{})
	case memory.TaskCancelled:
		h.update(TaskUpdateCancel, CancelRequest{})
	case memory.TaskCompleted:
		h.reach(memory.TaskExecuting)
		h.update(TaskUpdateRunStep, RunStepRequest{})
		h.update(TaskUpdateRunStep, RunStepRequest{})
		h.update(TaskUpdateComplete, CompleteRequest{})
	case memory.TaskFailed:
		h.reach(memory.TaskExecuting)
		h.update(TaskUpdateRunStep, RunStepRequest{}) // with a CallAction that fails
	default:
		h.t.Fatalf("cannot reach %s", state)
	}
}

func TestTaskIllegalTransitions(t *testing.T) {
	type op struct {
		name string
		arg  any
	}
	var (
		plan    = op{TaskUpdatePlan, twoSteps()}
		ask     = op{TaskUpdateRequestConfirmation, RequestConfirmationRequest{}}
		confirm = op{TaskUpdateConfirm, ConfirmRequest{}}
		run     = op{TaskUpdateRunStep, RunStepRequest{}}
		compl   = op{TaskUpdateComplete, CompleteRequest{}}
		cancel  = op{TaskUpdateCancel, CancelRequest{}}
	)
	cases := []struct {
		state memory.TaskState
		op    op
		want  string
	}{
		{memory.TaskCreated, ask, "cannot request_confirmation: task is CREATED, plan it first"},
		{memory.TaskCreated, confirm, "cannot confirm: task is CREATED, plan it and request confirmation first"},
		{memory.TaskCreated, run, "cannot run_step: task is CREATED"},
		{memory.TaskCreated, compl, "cannot complete: task is CREATED"},
		{memory.TaskPlanning, confirm, "cannot confirm: task is PLANNING, request confirmation first"},
		{memory.TaskPlanning, run, "cannot run_step: task is PLANNING"},
		{memory.TaskPlanning, compl, "cannot complete: task is PLANNING"},
		{memory.TaskWaitingConfirmation, plan, "cannot plan: task is WAITING_CONFIRMATION"},
		{memory.TaskWaitingConfirmation, ask, "cannot request_confirmation: task is WAITING_CONFIRMATION already"},
		{memory.TaskWaitingConfirmation, run, "cannot run_step: task is WAITING_CONFIRMATION, confirm it first"},
		{memory.TaskWaitingConfirmation, compl, "cannot complete: task is WAITING_CONFIRMATION, confirm it first"},
		{memory.TaskExecuting, plan, "cannot plan: task is EXECUTING"},
		{memory.TaskExecuting, ask, "cannot request_confirmation: task is EXECUTING, it was confirmed already"},
		{memory.TaskExecuting, confirm, "cannot confirm: task is EXECUTING, it was confirmed already"},
		{memory.TaskExecuting, compl, "cannot complete: task is EXECUTING with 2 step(s) not done (next: hotel)"},
		{memory.TaskCancelled, run, "cannot run_step: task is CANCELLED, which is final"},
		{memory.TaskCancelled, cancel, "cannot cancel: task is CANCELLED, which is final"},
		{memory.TaskCancelled, plan, "cannot plan: task is CANCELLED, which is final"},
		{memory.TaskCompleted, run, "cannot run_step: task is COMPLETED, which is final"},
		{memory.TaskCompleted, cancel, "cannot cancel: task is COMPLETED, which is final"},
		{memory.TaskFailed, run, "cannot run_step: task is FAILED, which is final"},
		{memory.TaskFailed, compl, "cannot complete: task is FAILED, which is final"},
		{memory.TaskFailed, cancel, "cannot cancel: task is FAILED, which is final"},
	}
	for _, c := range cases {
		t.Run(string(c.state)+"/"+c.op.name, func(t *testing.T) {
			h := newTaskHarness(t, TaskConfig{})
			if c.state == memory.TaskFailed {
				h.onCall(appErr(ErrTypeActionRejected))
			} else {
				h.onCall(applied)
			}
			h.reach(c.state)
			before := h.query()
			got := h.update(c.op.name, c.op.arg)
			after := h.query()
			if !c.state.Terminal() {
				h.update(TaskUpdateCancel, CancelRequest{})
			}
			h.run()
			require.True(t, got.done)
			require.Error(t, got.rejected, "update should be rejected by its validator")
			require.Contains(t, got.rejected.Error(), c.want)
			require.Equal(t, c.state, before.State)
			require.Equal(t, c.state, after.State, "state must not change")
			require.Equal(t, before.Seq, after.Seq, "no transition may be recorded")
		})
	}
}

func TestTaskInvalidRequests(t *testing.T) {
	cases := map[string]PlanRequest{
		"goal is empty":               {Steps: twoSteps().Steps},
		"step 1 has no name":          {Goal: "g", Steps: []TaskStep{{Action: "x"}}},
		`step "a" has no action`:      {Goal: "g", Steps: []TaskStep{{Name: "a"}}},
		`step name "a" is used twice`: {Goal: "g", Steps: []TaskStep{{Name: "a", Action: "x"}, {Name: "a", Action: "y"}}},
		`contains '/'`:                {Goal: "g", Steps: []TaskStep{{Name: "a/b", Action: "x"}}},
	}
	for want, req := range cases {
		t.Run(want, func(t *testing.T) {
			h := newTaskHarness(t, TaskConfig{})
			got := h.update(TaskUpdatePlan, req)
			after := h.query()
			h.update(TaskUpdateCancel, CancelRequest{})
			h.run()
			require.Error(t, got.rejected)
			require.Contains(t, got.rejected.Error(), want)
			require.Equal(t, memory.TaskCreated, after.State)
		})
	}
	t.Run("unknown step", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{})
		h.reach(memory.TaskExecuting)
		got := h.update(TaskUpdateRunStep, RunStepRequest{Step: "nope"})
		h.update(TaskUpdateCancel, CancelRequest{})
		h.run()
		require.ErrorContains(t, got.rejected, `no step "nope" in the plan (steps: hotel, pay)`)
	})
	t.Run("tenant with slash", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{})
		h.in.TenantID = "a/b"
		h.run()
		require.ErrorContains(t, h.env.GetWorkflowError(), `tenant_id "a/b" contains '/'`)
	})
}

func TestTaskReplanAndCancelFromEveryState(t *testing.T) {
	for _, s := range []memory.TaskState{memory.TaskCreated, memory.TaskPlanning, memory.TaskWaitingConfirmation, memory.TaskExecuting} {
		t.Run(string(s), func(t *testing.T) {
			h := newTaskHarness(t, TaskConfig{})
			h.reach(s)
			c := h.update(TaskUpdateCancel, CancelRequest{Actor: "user:u1", Reason: "no longer needed"})
			h.run()
			ok(t, c, memory.TaskCancelled)
			last := h.records[len(h.records)-1].Transition
			require.Equal(t, s, last.From)
			require.Equal(t, "no longer needed", last.Reason)
			require.Equal(t, memory.TaskCancelled, h.result().State)
		})
	}
	t.Run("replan", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{})
		h.update(TaskUpdatePlan, twoSteps())
		re := h.update(TaskUpdatePlan, PlanRequest{Goal: "book a hotel only", Steps: twoSteps().Steps[:1]})
		h.update(TaskUpdateCancel, CancelRequest{})
		h.run()
		ok(t, re, memory.TaskPlanning)
		require.Equal(t, []string{"hotel"}, re.view.Todo)
		require.Equal(t, "3 PLANNING>PLANNING", h.transitions()[2])
	})
}

func TestTaskOutcomeUnknownReconciledApplied(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(appErr(ErrTypeActionOutcomeUnknown), applied)
	// Reconciling takes ten minutes: long enough to look at the task meanwhile.
	h.env.OnActivity(acts.Reconcile, mock.Anything, mock.Anything).After(10*time.Minute).Return(
		&ReconcileResult{Status: ActionApplied, Result: json.RawMessage(`{"booking":"B1"}`), Lookups: 4}, nil).Once()
	h.reach(memory.TaskExecuting)
	run := h.update(TaskUpdateRunStep, RunStepRequest{})
	during := h.queryAt(h.at + 5*time.Minute)
	illegalCancel := h.updateAt(h.at+6*time.Minute, TaskUpdateCancel, CancelRequest{})
	illegalRun := h.updateAt(h.at+7*time.Minute, TaskUpdateRunStep, RunStepRequest{})
	h.at += 20 * time.Minute
	h.update(TaskUpdateCancel, CancelRequest{})
	h.run()

	require.Equal(t, memory.TaskOutcomeUnknown, during.State)
	require.Equal(t, StepOutcomeUnknown, during.Steps[0].Status)
	require.Contains(t, during.LastError, "simulated ActionOutcomeUnknown")
	require.ErrorContains(t, illegalCancel.rejected, `cannot cancel: task is OUTCOME_UNKNOWN, the outcome of step "hotel" must be reconciled first`)
	require.ErrorContains(t, illegalRun.rejected, `cannot run_step: task is OUTCOME_UNKNOWN, the outcome of step "hotel" is being reconciled`)
	ok(t, run, memory.TaskExecuting)
	require.Equal(t, []string{"hotel"}, run.view.Done)
	require.JSONEq(t, `{"booking":"B1"}`, string(run.view.Steps[0].Result))
	require.Empty(t, run.view.LastError)
	require.Len(t, h.calls, 1, "a step whose outcome is unknown is never sent again")
	require.Equal(t, h.calls[0].IdempotencyKey, IdempotencyKey("acme", "t1", "hotel"))
	require.Equal(t, []string{"5 EXECUTING>OUTCOME_UNKNOWN hotel", "6 OUTCOME_UNKNOWN>EXECUTING hotel"}, h.transitions()[4:6])
	require.Contains(t, h.records[5].Transition.Reason, "was applied")
	require.Equal(t, memory.TaskOutcomeUnknown, h.records[4].Task.State)
}

func TestTaskOutcomeUnknownReconciledNotApplied(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(appErr(ErrTypeActionOutcomeUnknown), applied)
	h.onReconcile(reconciled(ActionNotApplied))
	run := h.runStep(true)

	ok(t, run, memory.TaskExecuting)
	require.Equal(t, []string{"hotel"}, run.view.Done)
	require.Len(t, h.calls, 2)
	require.Equal(t, h.calls[0].IdempotencyKey, h.calls[1].IdempotencyKey, "the resend uses the same key")
	require.Equal(t, 2, run.view.Steps[0].Sends)
	require.Len(t, h.recons, 1)
	require.Equal(t, h.calls[0].IdempotencyKey, h.recons[0].IdempotencyKey)
	require.Equal(t, []string{"5 EXECUTING>OUTCOME_UNKNOWN hotel", "6 OUTCOME_UNKNOWN>EXECUTING hotel", "7 EXECUTING>EXECUTING hotel"}, h.transitions()[4:7])
	require.Contains(t, h.records[5].Transition.Reason, "sending it again with the same key")
}

func TestTaskOutcomeUnknownReconciledFailed(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(appErr(ErrTypeActionOutcomeUnknown))
	h.onReconcile(func() (*ReconcileResult, error) {
		return &ReconcileResult{Status: ActionFailed, Error: "room sold out"}, nil
	})
	run := h.runStep(false)
	ok(t, run, memory.TaskFailed)
	require.Contains(t, run.view.LastError, "room sold out")
	require.Equal(t, memory.TaskFailed, h.result().State)
	require.Len(t, h.calls, 1)
}

func TestTaskActivityTimeoutIsUnknown(t *testing.T) {
	// A worker killed mid-call surfaces as an activity timeout: that too must be
	// reconciled, not resent.
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(func() (*CallActionResult, error) {
		return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	}, applied)
	h.onReconcile(reconciled(ActionApplied))
	run := h.runStep(true)
	ok(t, run, memory.TaskExecuting)
	require.Len(t, h.calls, 1)
	require.Len(t, h.recons, 1)
}

func TestTaskEndpointDown(t *testing.T) {
	t.Run("down for good: bounded retries then FAILED", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{MaxSends: 3})
		h.onCall(appErr(ErrTypeActionNotSent))
		h.onReconcile(reconciled(ActionApplied))
		run := h.runStep(false)
		ok(t, run, memory.TaskFailed)
		require.Len(t, h.calls, 3)
		require.Empty(t, h.recons, "a request that never left needs no reconciling")
		require.Contains(t, run.view.LastError, `step "hotel" not sent after 3 attempt(s)`)
		require.Contains(t, run.view.LastError, "simulated ActionNotSent")
		require.Equal(t, StepFailed, run.view.Steps[0].Status)
		require.Equal(t, "5 EXECUTING>FAILED hotel", h.transitions()[4])
		require.Equal(t, memory.TaskFailed, h.result().State)
	})
	t.Run("down for a while", func(t *testing.T) {
		h := newTaskHarness(t, TaskConfig{})
		h.onCall(appErr(ErrTypeActionNotSent), appErr(ErrTypeActionNotSent), applied)
		run := h.runStep(true)
		ok(t, run, memory.TaskExecuting)
		require.Len(t, h.calls, 3)
		require.Equal(t, []string{"hotel"}, run.view.Done)
	})
}

func TestTaskStepFailures(t *testing.T) {
	cases := map[string]struct {
		answer func() (*CallActionResult, error)
		want   string
	}{
		"endpoint says FAILED": {func() (*CallActionResult, error) {
			return &CallActionResult{Status: ActionFailed, Error: "card declined"}, nil
		}, `step "hotel" failed at the action endpoint: card declined`},
		"endpoint rejects": {appErr(ErrTypeActionRejected), "simulated ActionRejected"},
		"bad input":        {appErr(ErrTypeTaskBadInput), "simulated TaskBadInput"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newTaskHarness(t, TaskConfig{})
			h.onCall(c.answer)
			h.onReconcile(reconciled(ActionApplied))
			run := h.runStep(false)
			ok(t, run, memory.TaskFailed)
			require.Contains(t, run.view.LastError, c.want)
			require.Len(t, h.calls, 1)
			require.Empty(t, h.recons)
		})
	}
}

func TestTaskStepInFlightBlocksOtherUpdates(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.env.OnActivity(acts.CallAction, mock.Anything, mock.Anything).After(10 * time.Minute).Return(applied())
	h.reach(memory.TaskExecuting)
	run := h.update(TaskUpdateRunStep, RunStepRequest{})
	second := h.updateAt(h.at+2*time.Minute, TaskUpdateRunStep, RunStepRequest{Step: "pay"})
	compl := h.updateAt(h.at+3*time.Minute, TaskUpdateComplete, CompleteRequest{})
	cancel := h.updateAt(h.at+4*time.Minute, TaskUpdateCancel, CancelRequest{})
	h.at += 20 * time.Minute
	h.update(TaskUpdateCancel, CancelRequest{})
	h.run()
	ok(t, run, memory.TaskExecuting)
	require.ErrorContains(t, second.rejected, `cannot run_step: task is EXECUTING and step "hotel" is still running`)
	require.ErrorContains(t, compl.rejected, `cannot complete: task is EXECUTING and step "hotel" is running`)
	require.ErrorContains(t, cancel.rejected, `cannot cancel: task is EXECUTING and step "hotel" is running`)
}

func TestTaskRunStepWhenAllDone(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{})
	h.onCall(applied)
	h.reach(memory.TaskExecuting)
	h.update(TaskUpdateRunStep, RunStepRequest{})
	h.update(TaskUpdateRunStep, RunStepRequest{})
	again := h.update(TaskUpdateRunStep, RunStepRequest{})
	redo := h.update(TaskUpdateRunStep, RunStepRequest{Step: "hotel"})
	h.update(TaskUpdateComplete, CompleteRequest{})
	h.run()
	require.ErrorContains(t, again.rejected, "cannot run_step: task is EXECUTING and every step is done, complete it")
	require.ErrorContains(t, redo.rejected, `cannot run_step: task is EXECUTING and step "hotel" is done already`)
	require.Len(t, h.calls, 2)
}

func TestTaskContinueAsNewCarriesState(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{ConfirmationTimeout: 2 * time.Hour})
	h.onCall(applied)
	h.reach(memory.TaskExecuting)
	h.update(TaskUpdateRunStep, RunStepRequest{})
	h.at += time.Minute
	h.env.RegisterDelayedCallback(func() { h.env.SetContinueAsNewSuggested(true) }, h.at)
	// Any event wakes the workflow up to notice the suggestion.
	h.signal("wake", nil)
	h.run()

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "want continue-as-new, got %v", h.env.GetWorkflowError())
	var next TaskInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Carry)
	c := next.Carry
	require.Equal(t, memory.TaskExecuting, c.State)
	require.Equal(t, "book a trip", c.Goal)
	require.Equal(t, int64(5), c.Seq)
	require.Equal(t, 1, c.Runs)
	require.Len(t, c.Transitions, 5)
	require.Equal(t, StepDone, c.Steps[0].Status)
	require.Equal(t, StepPending, c.Steps[1].Status)
	require.Equal(t, h.in.TenantID, next.TenantID)
	require.Equal(t, 2*time.Hour, next.Config.ConfirmationTimeout)

	// The continued run picks up where the first stopped.
	h2 := newTaskHarness(t, next.Config)
	h2.in = next
	h2.onCall(applied)
	view := h2.query()
	s2 := h2.update(TaskUpdateRunStep, RunStepRequest{})
	done := h2.update(TaskUpdateComplete, CompleteRequest{})
	h2.run()
	require.Equal(t, memory.TaskExecuting, view.State)
	require.Equal(t, "pay", view.NextStep)
	require.Equal(t, 1, view.Runs)
	ok(t, s2, memory.TaskExecuting)
	ok(t, done, memory.TaskCompleted)
	require.Equal(t, []string{"6 EXECUTING>EXECUTING pay", "7 EXECUTING>COMPLETED"}, h2.transitions(), "no second CREATED, seq continues")
	require.Len(t, h2.calls, 1)
	require.Equal(t, IdempotencyKey("acme", "t1", "pay"), h2.calls[0].IdempotencyKey)
}

func TestTaskContinueAsNewWhileWaitingKeepsDeadline(t *testing.T) {
	h := newTaskHarness(t, TaskConfig{ConfirmationTimeout: 2 * time.Hour, MaxHistoryEvents: 1})
	h.in.Carry = &TaskCarry{
		State: memory.TaskWaitingConfirmation, Goal: "g", Seq: 3,
		Steps:           []TaskStepState{{TaskStep: TaskStep{Name: "a", Action: "x"}, Status: StepPending}},
		ConfirmDeadline: time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC),
	}
	h.env.SetStartTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h.in.Config.MaxHistoryEvents = 0 // default: no continue-as-new in this short run
	h.run()
	r := h.result()
	require.Equal(t, memory.TaskCancelled, r.State)
	last := h.records[len(h.records)-1].Transition
	require.Equal(t, int64(4), last.Seq)
	require.Equal(t, time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC), last.At, "the carried deadline holds, not a fresh timeout")
}

func TestTaskRecordsPendingBeforeReturning(t *testing.T) {
	// A transition is in Postgres before the update that made it returns.
	h := newTaskHarness(t, TaskConfig{})
	h.recordCall.After(30 * time.Second)
	p := h.update(TaskUpdatePlan, twoSteps())
	h.update(TaskUpdateCancel, CancelRequest{})
	h.run()
	ok(t, p, memory.TaskPlanning)
	require.Len(t, h.records, 3)
	require.True(t, strings.HasPrefix(h.transitions()[1], "2 CREATED>PLANNING"))
}

// The input check names the first bad field in a fixed order (no map iteration in
// workflow code): both ids empty is always tenant_id.
func TestValidateTaskInputOrder(t *testing.T) {
	for range 50 {
		err := validateTaskInput(TaskInput{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "tenant_id is empty")
	}
	err := validateTaskInput(TaskInput{TenantID: "a/b", TaskID: "c/d"})
	require.ErrorContains(t, err, `tenant_id "a/b" contains '/'`)
	require.NoError(t, validateTaskInput(TaskInput{TenantID: "acme", TaskID: "t1"}))
}
