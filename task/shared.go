package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/memory"
)

// Names of the task workflow's updates, signal and query. Clients, the API and the
// Temporal Web UI use these strings.
const (
	TaskUpdatePlan                = "plan"
	TaskUpdateRequestConfirmation = "request_confirmation"
	TaskUpdateConfirm             = "confirm"
	TaskUpdateRunStep             = "run_step"
	TaskUpdateComplete            = "complete"
	TaskUpdateCancel              = "cancel"
	// TaskUpdateRecorded changes nothing: it returns the task once every transition
	// so far is in Postgres. Start sends it with the start (Update-with-Start).
	TaskUpdateRecorded = "recorded"
	// TaskSignalConfirm lets a reviewer confirm (or reject) from the Web UI, where
	// sending a signal is one click; its payload is a ConfirmRequest.
	TaskSignalConfirm = "confirm"
	TaskQueryState    = "state"
)

// Error types of rejected task updates.
const (
	ErrTypeIllegalTransition  = "IllegalTaskTransition"
	ErrTypeInvalidTaskRequest = "InvalidTaskRequest"
)

// SearchAttrTaskState is the task's state, upserted on every transition beside
// memory.SearchAttrTenant and memory.SearchAttrKind (Keyword, registered by
// scripts/stack).
var SearchAttrTaskState = temporal.NewSearchAttributeKeyKeyword("EngramTaskState")

// TaskKind is the EngramKind of task workflows.
const TaskKind = "task"

// TaskWorkflowID is the workflow id of a task: one workflow per task.
func TaskWorkflowID(tenantID, taskID string) string {
	return "task/" + memory.TemporalIDPart(tenantID) + "/" + memory.TemporalIDPart(taskID)
}

// TaskStartOptions are the options to start a task workflow with: its id, the
// search attributes (so a new task is findable before its first transition) and a
// summary for the Web UI. Starting an existing task, running or finished, fails
// with AlreadyStarted.
func TaskStartOptions(taskQueue string, in TaskInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       TaskWorkflowID(in.TenantID, in.TaskID),
		TaskQueue:                                taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			memory.SearchAttrTenant.ValueSet(in.TenantID),
			memory.SearchAttrKind.ValueSet(TaskKind),
			SearchAttrTaskState.ValueSet(string(memory.TaskCreated)),
		),
		StaticSummary: fmt.Sprintf("task %s of tenant %s", in.TaskID, in.TenantID),
	}
}

// Start starts the task workflow and returns the task once its CREATED transition
// is in Postgres (Update-with-Start with TaskUpdateRecorded: no polling), so the
// caller's next read finds it. An existing task is *serviceerror.WorkflowExecutionAlreadyStarted.
func Start(ctx context.Context, c client.Client, taskQueue string, in TaskInput) (TaskView, error) {
	var v TaskView
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: c.NewWithStartWorkflowOperation(TaskStartOptions(taskQueue, in), TaskWorkflow, in),
		UpdateOptions:          client.UpdateWorkflowOptions{UpdateName: TaskUpdateRecorded, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err == nil {
		err = h.Get(ctx, &v)
	}
	return v, err
}

// ConfirmDefault is what happens when nobody confirms in time.
type ConfirmDefault string

const (
	ConfirmDefaultCancel  ConfirmDefault = "cancel"
	ConfirmDefaultConfirm ConfirmDefault = "confirm"
)

// TaskConfig tunes one task. Zero values take the defaults in parentheses.
type TaskConfig struct {
	// ConfirmationTimeout is how long WAITING_CONFIRMATION waits (24h).
	ConfirmationTimeout time.Duration `json:"confirmation_timeout,omitempty"`
	// ConfirmationDefault is applied when it expires (cancel: no side effect runs
	// without someone having said yes, unless configured otherwise).
	ConfirmationDefault ConfirmDefault `json:"confirmation_default,omitempty"`
	// CallTimeout bounds one HTTP call to the action endpoint (30s).
	CallTimeout time.Duration `json:"call_timeout,omitempty"`
	// MaxSends bounds the sends of one step: refused connections and resends after
	// NOT_APPLIED together (5).
	MaxSends int `json:"max_sends,omitempty"`
	// SendRetryInterval is the first wait after a refused send; it doubles up to
	// a minute (1s).
	SendRetryInterval time.Duration `json:"send_retry_interval,omitempty"`
	// ReconcilePollInterval / ReconcileMaxPollInterval shape the status lookups (1s, 30s).
	ReconcilePollInterval    time.Duration `json:"reconcile_poll_interval,omitempty"`
	ReconcileMaxPollInterval time.Duration `json:"reconcile_max_poll_interval,omitempty"`
	// ReconcileHeartbeatTimeout: a reconcile attempt whose worker went silent this
	// long is retried elsewhere (20s).
	ReconcileHeartbeatTimeout time.Duration `json:"reconcile_heartbeat_timeout,omitempty"`
	// Linger keeps a finished task's workflow open this long, so a late update (run a
	// step after cancel) is rejected by name of the final state rather than with
	// "workflow already completed" (1h).
	Linger time.Duration `json:"linger,omitempty"`
	// MaxHistoryEvents continues the workflow as new past this many events, besides
	// the server's own suggestion (5000).
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
}

func (c TaskConfig) withDefaults() TaskConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ConfirmationTimeout, 24*time.Hour)
	def(&c.CallTimeout, 30*time.Second)
	def(&c.SendRetryInterval, time.Second)
	def(&c.ReconcilePollInterval, time.Second)
	def(&c.ReconcileMaxPollInterval, 30*time.Second)
	def(&c.ReconcileHeartbeatTimeout, 20*time.Second)
	def(&c.Linger, time.Hour)
	if c.ConfirmationDefault == "" {
		c.ConfirmationDefault = ConfirmDefaultCancel
	}
	if c.MaxSends <= 0 {
		c.MaxSends = 5
	}
	if c.MaxHistoryEvents <= 0 {
		c.MaxHistoryEvents = 5000
	}
	return c
}

// TaskInput starts (or continues) a task workflow.
type TaskInput struct {
	TenantID  string `json:"tenant_id"`
	TaskID    string `json:"task_id"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	// Actor is who created the task; it is recorded on the CREATED transition.
	Actor  string     `json:"actor,omitempty"`
	Config TaskConfig `json:"config"`
	// Carry is the state handed over by continue-as-new; nil for a new task.
	Carry *TaskCarry `json:"carry,omitempty"`
}

// TaskStep is one planned step. Action names what the action endpoint should do;
// Input is passed to it verbatim.
type TaskStep struct {
	Name   string          `json:"name"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// StepStatus is the state of one step.
type StepStatus string

const (
	StepPending        StepStatus = "PENDING"
	StepRunning        StepStatus = "RUNNING"
	StepOutcomeUnknown StepStatus = "OUTCOME_UNKNOWN"
	StepDone           StepStatus = "DONE"
	StepFailed         StepStatus = "FAILED"
)

// TaskStepState is a step with its progress.
type TaskStepState struct {
	TaskStep
	Status         StepStatus      `json:"status"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Sends          int             `json:"sends"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
}

// TaskTransition is one change of state as the workflow saw it; the same rows go to
// task_transitions.
type TaskTransition struct {
	Seq    int64            `json:"seq"`
	From   memory.TaskState `json:"from"`
	To     memory.TaskState `json:"to"`
	Actor  string           `json:"actor"`
	Reason string           `json:"reason"`
	Step   string           `json:"step,omitempty"`
	At     time.Time        `json:"at"`
}

// keptTransitions is how many recent transitions the workflow keeps (and carries
// over continue-as-new) for the query; Postgres keeps them all.
const keptTransitions = 100

// TaskCarry is everything a continued run needs.
type TaskCarry struct {
	State     memory.TaskState `json:"state"`
	Goal      string           `json:"goal"`
	Steps     []TaskStepState  `json:"steps"`
	LastError string           `json:"last_error"`
	Seq       int64            `json:"seq"`
	CreatedAt time.Time        `json:"created_at"`
	// ConfirmDeadline is set while WAITING_CONFIRMATION.
	ConfirmDeadline time.Time        `json:"confirm_deadline"`
	Transitions     []TaskTransition `json:"transitions"`
	Runs            int              `json:"runs"`
}

// TaskView is what the state query and every update return.
type TaskView struct {
	TenantID        string           `json:"tenant_id"`
	TaskID          string           `json:"task_id"`
	Goal            string           `json:"goal"`
	State           memory.TaskState `json:"state"`
	Done            []string         `json:"done"`
	Todo            []string         `json:"todo"`
	NextStep        string           `json:"next_step"`
	LastError       string           `json:"last_error"`
	Steps           []TaskStepState  `json:"steps"`
	Seq             int64            `json:"seq"`
	ConfirmDeadline time.Time        `json:"confirm_deadline"`
	// InFlight is the step being sent or reconciled right now, if any.
	InFlight    string           `json:"in_flight,omitempty"`
	Transitions []TaskTransition `json:"transitions"`
	// Runs counts continue-as-new hand-overs.
	Runs int `json:"runs"`
}

// TaskResult is returned when the task reaches COMPLETED, FAILED or CANCELLED.
type TaskResult struct {
	State     memory.TaskState `json:"state"`
	Done      []string         `json:"done"`
	LastError string           `json:"last_error"`
	Seq       int64            `json:"seq"`
}

// PlanRequest sets the goal and steps; allowed until confirmation is requested.
type PlanRequest struct {
	Actor string     `json:"actor"`
	Goal  string     `json:"goal"`
	Steps []TaskStep `json:"steps"`
}

// RequestConfirmationRequest moves a planned task to WAITING_CONFIRMATION.
type RequestConfirmationRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// ConfirmRequest answers a confirmation request; Reject cancels the task instead.
type ConfirmRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	Reject bool   `json:"reject"`
}

// RunStepRequest runs the named step, or the next one when Step is empty.
type RunStepRequest struct {
	Actor string `json:"actor"`
	Step  string `json:"step"`
}

// CompleteRequest finishes a task whose steps are all done.
type CompleteRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// CancelRequest cancels a task that has no step in flight.
type CancelRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}
