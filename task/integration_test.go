package task

// Integration tests of the task workflow against the real Temporal dev server, a real
// Postgres and a local HTTP action server (internal/actionserver). They need the
// stack: eval "$(scripts/stack env)".

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/internal/actionserver"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

type taskIT struct {
	t      *testing.T
	c      client.Client
	store  *storage.Store
	dbURL  string
	srv    *actionserver.Server
	queue  string
	tenant string
}

func newTaskIT(t *testing.T, withWorker bool) *taskIT {
	t.Helper()
	c := testenv.Temporal(t)
	st, dbURL := testenv.StoreURL(t)
	srv, err := actionserver.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.Dedup = false // a resend would show as a second effect
	it := &taskIT{t: t, c: c, store: st, dbURL: dbURL, srv: srv, queue: testenv.TaskQueue(t), tenant: "acme-" + testenv.RandomID(6)}
	if withWorker {
		w := sdkworker.New(c, it.queue, sdkworker.Options{})
		Register(w, &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Store: st})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
	return it
}

func (it *taskIT) start(taskID string, cfg TaskConfig) TaskInput {
	it.t.Helper()
	in := TaskInput{TenantID: it.tenant, TaskID: taskID, UserID: "u1", SessionID: "s1", AgentID: "a1", Actor: "agent:a1", Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := Start(ctx, it.c, it.queue, in)
	require.NoError(it.t, err)
	require.Equal(it.t, memory.TaskCreated, v.State)
	return in
}

// Start answers once the CREATED transition is in Postgres; starting the task again
// is AlreadyStarted, whether it runs or not.
func TestTaskIntegrationStart(t *testing.T) {
	it := newTaskIT(t, true)
	in := it.start("s1", fastConfig())
	row := it.dbTask("s1")
	require.Equal(t, memory.TaskCreated, row.State, "the row is there when Start returns")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Start(ctx, it.c, it.queue, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	require.ErrorAs(t, err, &started)
}

func (it *taskIT) updateHandle(taskID, name string, arg any, stage client.WorkflowUpdateStage) (client.WorkflowUpdateHandle, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return it.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: TaskWorkflowID(it.tenant, taskID), UpdateName: name, Args: []any{arg}, WaitForStage: stage,
	})
}

func (it *taskIT) update(taskID, name string, arg any) (TaskView, error) {
	h, err := it.updateHandle(taskID, name, arg, client.WorkflowUpdateStageCompleted)
	if err != nil {
		return TaskView{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var v TaskView
	err = h.Get(ctx, &v)
	return v, err
}

func (it *taskIT) mustUpdate(taskID, name string, arg any, want memory.TaskState) TaskView {
	it.t.Helper()
	v, err := it.update(taskID, name, arg)
	require.NoError(it.t, err, "%s", name)
	require.Equal(it.t, want, v.State, "%s: last error %q", name, v.LastError)
	return v
}

func (it *taskIT) query(taskID string) TaskView {
	it.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := it.c.QueryWorkflow(ctx, TaskWorkflowID(it.tenant, taskID), "", TaskQueryState)
	require.NoError(it.t, err)
	var v TaskView
	require.NoError(it.t, res.Get(&v))
	return v
}

func (it *taskIT) toExecuting(taskID string) {
	it.t.Helper()
	it.mustUpdate(taskID, TaskUpdatePlan, PlanRequest{Actor: "agent:a1", Goal: "book a trip to Lisbon", Steps: []TaskStep{
		{Name: "hotel", Action: "book_hotel", Input: json.RawMessage(`{"city":"Lisbon","nights":2}`)},
		{Name: "pay", Action: "pay", Input: json.RawMessage(`{"amount":240}`)},
	}}, memory.TaskPlanning)
	it.mustUpdate(taskID, TaskUpdateRequestConfirmation, RequestConfirmationRequest{Actor: "agent:a1"}, memory.TaskWaitingConfirmation)
	it.mustUpdate(taskID, TaskUpdateConfirm, ConfirmRequest{Actor: "user:u1"}, memory.TaskExecuting)
}

// dbTask reads the task row recall would read.
func (it *taskIT) dbTask(taskID string) *storage.Task {
	it.t.Helper()
	task, err := it.store.GetTask(context.Background(), it.tenant, taskID)
	require.NoError(it.t, err)
	return task
}

// requireRowsMatch checks that task_transitions holds exactly the workflow's transitions.
func (it *taskIT) requireRowsMatch(taskID string, v TaskView) []storage.TaskTransition {
	it.t.Helper()
	rows, err := it.store.ListTaskTransitions(context.Background(), it.tenant, taskID)
	require.NoError(it.t, err)
	require.Len(it.t, rows, len(v.Transitions))
	for i, tr := range v.Transitions {
		r := rows[i]
		require.Equal(it.t, tr.Seq, r.Seq)
		require.Equal(it.t, tr.From, r.FromState, "seq %d", tr.Seq)
		require.Equal(it.t, tr.To, r.ToState, "seq %d", tr.Seq)
		require.Equal(it.t, tr.Actor, r.Actor, "seq %d", tr.Seq)
		require.Equal(it.t, tr.Reason, r.Reason, "seq %d", tr.Seq)
		require.Equal(it.t, tr.Step, r.Step, "seq %d", tr.Seq)
		require.WithinDuration(it.t, tr.At, r.At, time.Millisecond, "seq %d", tr.Seq)
	}
	return rows
}

func fastConfig() TaskConfig {
	return TaskConfig{
		CallTimeout: 2 * time.Second, SendRetryInterval: 200 * time.Millisecond, MaxSends: 3,
		ReconcilePollInterval: 200 * time.Millisecond, ReconcileMaxPollInterval: 500 * time.Millisecond,
		ReconcileHeartbeatTimeout: 3 * time.Second, Linger: time.Minute,
	}
}

func TestTaskIntegrationHappyPath(t *testing.T) {
	it := newTaskIT(t, true)
	it.start("trip", fastConfig())
	require.Equal(t, memory.TaskCreated, it.query("trip").State)

	it.mustUpdate("trip", TaskUpdatePlan, PlanRequest{Actor: "agent:a1", Goal: "book a trip to Lisbon", Steps: []TaskStep{
		{Name: "hotel", Action: "book_hotel", Input: json.RawMessage(`{"city":"Lisbon"}`)},
		{Name: "pay", Action: "pay", Input: json.RawMessage(`{"amount":240}`)},
	}}, memory.TaskPlanning)
	it.mustUpdate("trip", TaskUpdateRequestConfirmation, RequestConfirmationRequest{Actor: "agent:a1"}, memory.TaskWaitingConfirmation)

	// Illegal: complete before confirm. Rejected, named, nothing changes.
	_, err := it.update("trip", TaskUpdateComplete, CompleteRequest{Actor: "agent:a1"})
	require.ErrorContains(t, err, "cannot complete: task is WAITING_CONFIRMATION, confirm it first")
	require.Equal(t, memory.TaskWaitingConfirmation, it.query("trip").State)
	require.Equal(t, memory.TaskWaitingConfirmation, it.dbTask("trip").State)

	it.mustUpdate("trip", TaskUpdateConfirm, ConfirmRequest{Actor: "user:u1"}, memory.TaskExecuting)
	v := it.mustUpdate("trip", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, memory.TaskExecuting)
	require.Equal(t, []string{"hotel"}, v.Done)
	require.Equal(t, "pay", v.NextStep)
	// Recall's view, from Postgres, is already up to date when the update returns.
	row := it.dbTask("trip")
	require.Equal(t, []string{"hotel"}, row.Done)
	require.Equal(t, []string{"pay"}, row.Todo)
	require.Equal(t, "pay", row.NextStep)

	it.mustUpdate("trip", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, memory.TaskExecuting)
	v = it.mustUpdate("trip", TaskUpdateComplete, CompleteRequest{Actor: "agent:a1"}, memory.TaskCompleted)

	rows := it.requireRowsMatch("trip", v)
	var path []string
	for _, r := range rows {
		path = append(path, fmt.Sprintf("%s>%s", r.FromState, r.ToState))
	}
	require.Equal(t, []string{">CREATED", "CREATED>PLANNING", "PLANNING>WAITING_CONFIRMATION", "WAITING_CONFIRMATION>EXECUTING",
		"EXECUTING>EXECUTING", "EXECUTING>EXECUTING", "EXECUTING>COMPLETED"}, path)
	row = it.dbTask("trip")
	require.Equal(t, memory.TaskCompleted, row.State)
	require.Equal(t, "book a trip to Lisbon", row.Goal)
	require.Equal(t, []string{"hotel", "pay"}, row.Done)
	require.Equal(t, TaskWorkflowID(it.tenant, "trip"), row.WorkflowID)
	require.Equal(t, int64(7), row.Seq)

	for _, step := range []string{"hotel", "pay"} {
		key := IdempotencyKey(it.tenant, "trip", step)
		require.Equal(t, 1, it.srv.Applied(key), step)
	}

	// Illegal after the end: run a step on a completed task.
	_, err = it.update("trip", TaskUpdateRunStep, RunStepRequest{})
	require.ErrorContains(t, err, "cannot run_step: task is COMPLETED, which is final")
}

func TestTaskIntegrationRunStepAfterCancel(t *testing.T) {
	it := newTaskIT(t, true)
	it.start("c1", fastConfig())
	it.toExecuting("c1")
	it.mustUpdate("c1", TaskUpdateCancel, CancelRequest{Actor: "user:u1", Reason: "plans changed"}, memory.TaskCancelled)
	_, err := it.update("c1", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"})
	require.ErrorContains(t, err, "cannot run_step: task is CANCELLED, which is final")
	v := it.query("c1")
	require.Equal(t, memory.TaskCancelled, v.State)
	require.Empty(t, it.srv.Requests())
	row := it.dbTask("c1")
	require.Equal(t, memory.TaskCancelled, row.State)
	it.requireRowsMatch("c1", v)
}

// The endpoint applies the effect and stalls past the call timeout: OUTCOME_UNKNOWN
// in the query and in Postgres, then reconcile finds APPLIED; one effect.
func TestTaskIntegrationStallReconcilesApplied(t *testing.T) {
	it := newTaskIT(t, true)
	cfg := fastConfig()
	cfg.CallTimeout = 500 * time.Millisecond
	it.start("stall", cfg)
	it.toExecuting("stall")
	key := IdempotencyKey(it.tenant, "stall", "hotel")
	it.srv.Script(actionserver.ApplyThenStall(5 * time.Second))
	it.srv.HoldStatus(true) // the endpoint cannot tell yet: keeps the task in OUTCOME_UNKNOWN

	h, err := it.updateHandle("stall", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, client.WorkflowUpdateStageAccepted)
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, "OUTCOME_UNKNOWN in the query", func() bool { return it.query("stall").State == memory.TaskOutcomeUnknown })
	testenv.Eventually(t, 10*time.Second, "OUTCOME_UNKNOWN in Postgres", func() bool { return it.dbTask("stall").State == memory.TaskOutcomeUnknown })
	testenv.Eventually(t, 10*time.Second, "a status lookup", func() bool { return it.srv.Lookups(key) >= 2 })
	v := it.query("stall")
	require.Equal(t, StepOutcomeUnknown, v.Steps[0].Status)
	require.Contains(t, v.LastError, "request sent, no answer")
	require.Contains(t, it.dbTask("stall").LastError, "request sent, no answer")
	require.Len(t, it.srv.RequestsFor(key), 1, "never sent again while unknown")

	it.srv.HoldStatus(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h.Get(ctx, &v))
	require.Equal(t, memory.TaskExecuting, v.State)
	require.Equal(t, []string{"hotel"}, v.Done)
	require.Equal(t, 1, it.srv.Applied(key), "applied exactly once")
	require.Len(t, it.srv.RequestsFor(key), 1)

	rows := it.requireRowsMatch("stall", v)
	n := len(rows)
	require.Equal(t, memory.TaskOutcomeUnknown, rows[n-2].ToState)
	require.Equal(t, memory.TaskOutcomeUnknown, rows[n-1].FromState)
	require.Equal(t, memory.TaskExecuting, rows[n-1].ToState)
	require.Contains(t, rows[n-1].Reason, "was applied")
}

// The endpoint drops the request unapplied: reconcile finds NOT_APPLIED, the step
// is sent again with the same key and applied once.
func TestTaskIntegrationDroppedResentWithSameKey(t *testing.T) {
	it := newTaskIT(t, true)
	it.start("drop", fastConfig())
	it.toExecuting("drop")
	key := IdempotencyKey(it.tenant, "drop", "hotel")
	it.srv.Script(actionserver.Drop)

	v := it.mustUpdate("drop", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, memory.TaskExecuting)
	require.Equal(t, []string{"hotel"}, v.Done)
	reqs := it.srv.RequestsFor(key)
	require.Len(t, reqs, 2)
	require.Equal(t, "DROPPED", reqs[0].Outcome)
	require.Equal(t, "APPLIED", reqs[1].Outcome)
	require.Equal(t, 1, it.srv.Applied(key))
	require.GreaterOrEqual(t, it.srv.Lookups(key), 1)

	rows := it.requireRowsMatch("drop", v)
	var tail []string
	for _, r := range rows[4:] {
		tail = append(tail, fmt.Sprintf("%s>%s", r.FromState, r.ToState))
	}
	require.Equal(t, []string{"EXECUTING>OUTCOME_UNKNOWN", "OUTCOME_UNKNOWN>EXECUTING", "EXECUTING>EXECUTING"}, tail)
	require.Contains(t, rows[5].Reason, "not applied, sending it again with the same key")
}

// The endpoint is down: bounded retries, then FAILED with the reason; nothing applied.
// Down for a shorter while: the retries carry the step through, applied once.
func TestTaskIntegrationEndpointDown(t *testing.T) {
	t.Run("for good", func(t *testing.T) {
		it := newTaskIT(t, true)
		it.start("down", fastConfig())
		it.toExecuting("down")
		it.srv.Down()
		v := it.mustUpdate("down", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, memory.TaskFailed)
		require.Contains(t, v.LastError, `step "hotel" not sent after 3 attempt(s)`)
		require.Contains(t, v.LastError, "connection refused")
		require.Equal(t, 3, v.Steps[0].Sends)
		require.Zero(t, it.srv.TotalApplied())
		require.Empty(t, it.srv.Requests())
		row := it.dbTask("down")
		require.Equal(t, memory.TaskFailed, row.State)
		require.Contains(t, row.LastError, "connection refused")
		it.requireRowsMatch("down", v)
	})
	t.Run("for a while", func(t *testing.T) {
		it := newTaskIT(t, true)
		cfg := fastConfig()
		cfg.MaxSends = 6
		it.start("blip", cfg)
		it.toExecuting("blip")
		it.srv.DownFor(700 * time.Millisecond)
		v := it.mustUpdate("blip", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, memory.TaskExecuting)
		require.Equal(t, []string{"hotel"}, v.Done)
		require.Greater(t, v.Steps[0].Sends, 1)
		require.Equal(t, 1, it.srv.Applied(IdempotencyKey(it.tenant, "blip", "hotel")))
		require.Len(t, it.srv.Requests(), 1)
	})
}

// The worker is SIGKILLed while the task is OUTCOME_UNKNOWN and restarted: the
// reconcile resumes on the new worker and the effect is still applied once. The
// worker is the real `engram worker` binary.
func TestTaskIntegrationWorkerKilledDuringOutcomeUnknown(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	it := newTaskIT(t, false)
	cfg := fastConfig()
	cfg.CallTimeout = 500 * time.Millisecond
	cfg.ReconcileHeartbeatTimeout = 2 * time.Second

	w1 := testenv.StartProcess(t, testenv.WorkerEnv(t, it.dbURL, it.queue, "ENGRAM_ACTION_URL="+it.srv.URL()), bin, "worker")
	it.start("kill", cfg)
	it.toExecuting("kill")
	key := IdempotencyKey(it.tenant, "kill", "hotel")
	it.srv.Script(actionserver.ApplyThenStall(5 * time.Second))
	it.srv.HoldStatus(true)

	h, err := it.updateHandle("kill", TaskUpdateRunStep, RunStepRequest{Actor: "agent:a1"}, client.WorkflowUpdateStageAccepted)
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, "OUTCOME_UNKNOWN", func() bool { return it.query("kill").State == memory.TaskOutcomeUnknown })
	testenv.Eventually(t, 10*time.Second, "reconcile polling on the first worker", func() bool { return it.srv.Lookups(key) >= 2 })

	w1.Kill()
	lookupsAtKill := it.srv.Lookups(key)
	require.Equal(t, memory.TaskOutcomeUnknown, it.dbTask("kill").State)

	testenv.StartProcess(t, testenv.WorkerEnv(t, it.dbURL, it.queue, "ENGRAM_ACTION_URL="+it.srv.URL()), bin, "worker")
	testenv.Eventually(t, 60*time.Second, "reconcile resumed on the second worker", func() bool { return it.srv.Lookups(key) > lookupsAtKill+1 })
	require.Equal(t, memory.TaskOutcomeUnknown, it.query("kill").State)
	it.srv.HoldStatus(false)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var v TaskView
	require.NoError(t, h.Get(ctx, &v))
	require.Equal(t, memory.TaskExecuting, v.State, "last error %q", v.LastError)
	require.Equal(t, []string{"hotel"}, v.Done)
	require.Equal(t, 1, it.srv.Applied(key), "applied exactly once")
	require.Len(t, it.srv.RequestsFor(key), 1, "never resent")
	it.requireRowsMatch("kill", v)
}
