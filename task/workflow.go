package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
)

const systemActor = "system"

// TaskWorkflow is one task: CREATED → PLANNING → WAITING_CONFIRMATION → EXECUTING →
// COMPLETED, plus FAILED, CANCELLED and OUTCOME_UNKNOWN. Agents drive it with the
// Task* updates and read it with the state query; each transition is written to
// Postgres before the update that caused it returns. See activities/TASK_ACTIONS.md
// for how a step reaches the outside world.
func TaskWorkflow(ctx workflow.Context, in TaskInput) (*TaskResult, error) {
	if err := validateTaskInput(in); err != nil {
		return nil, err
	}
	t := newTaskRun(ctx, in)
	// The first transition comes before the handlers: an update that arrived with the
	// start is dispatched as soon as its handler is registered.
	if in.Carry == nil {
		t.transition(ctx, memory.TaskCreated, actorOr(in.Actor), "task created", "")
	} else {
		t.publish(ctx)
	}
	if err := t.register(ctx); err != nil {
		return nil, err
	}
	workflow.Go(ctx, t.writer)
	workflow.Go(ctx, t.confirmSignals)

	if t.state == memory.TaskWaitingConfirmation {
		t.armConfirmTimer(ctx)
	}

	for {
		if err := workflow.Await(ctx, func() bool {
			return t.state.Terminal() || (t.wantContinueAsNew(ctx) && t.idle(ctx))
		}); err != nil {
			return nil, err
		}
		if t.state.Terminal() {
			// Let running handlers return and the last transitions reach Postgres.
			if err := workflow.Await(ctx, func() bool { return t.idle(ctx) }); err != nil {
				return nil, err
			}
			if err := workflow.Sleep(ctx, t.cfg.Linger); err != nil {
				return nil, err
			}
			if err := workflow.Await(ctx, func() bool { return t.idle(ctx) }); err != nil {
				return nil, err
			}
			return &TaskResult{State: t.state, Done: t.done(), LastError: t.lastError, Seq: t.seq}, nil
		}
		next := in
		next.Carry = t.carry()
		next.Carry.Runs++
		workflow.GetLogger(ctx).Info("continuing task as new", "seq", t.seq, "history_length", workflow.GetInfo(ctx).GetCurrentHistoryLength())
		return nil, workflow.NewContinueAsNewError(ctx, TaskWorkflow, next)
	}
}

func validateTaskInput(in TaskInput) error {
	// A slice, not a map: workflow code must not depend on map order, and the first
	// field named is always the same.
	for _, f := range []struct{ name, v string }{{"tenant_id", in.TenantID}, {"task_id", in.TaskID}} {
		name, v := f.name, f.v
		if strings.TrimSpace(v) == "" {
			return temporal.NewNonRetryableApplicationError(name+" is empty", ErrTypeInvalidTaskRequest, nil)
		}
		// "/" would make the workflow id and the idempotency key ambiguous.
		if strings.Contains(v, "/") {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %q contains '/'", name, v), ErrTypeInvalidTaskRequest, nil)
		}
	}
	if d := in.Config.ConfirmationDefault; d != "" && d != ConfirmDefaultCancel && d != ConfirmDefaultConfirm {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("confirmation default %q is neither %q nor %q", d, ConfirmDefaultConfirm, ConfirmDefaultCancel), ErrTypeInvalidTaskRequest, nil)
	}
	return nil
}

func actorOr(a string) string {
	if strings.TrimSpace(a) == "" {
		return systemActor
	}
	return a
}

// taskRun is the in-memory state of one run of the workflow.
type taskRun struct {
	in  TaskInput
	cfg TaskConfig

	state           memory.TaskState
	goal            string
	steps           []TaskStepState
	lastError       string
	seq             int64
	createdAt       time.Time
	confirmDeadline time.Time
	transitions     []TaskTransition
	runs            int

	// inFlight is the step a run_step handler is sending or reconciling.
	inFlight string
	// confirmEpoch changes whenever a confirmation request starts or ends, so a
	// stale timer does nothing.
	confirmEpoch int
	// busy counts transitions being made outside update handlers (signal, timer).
	busy int
	// pending are transitions not yet written to Postgres, oldest first.
	pending []RecordTransitionInput
	written int64
	signals workflow.ReceiveChannel
}

func newTaskRun(ctx workflow.Context, in TaskInput) *taskRun {
	t := &taskRun{in: in, cfg: in.Config.withDefaults(), state: memory.TaskCreated, createdAt: workflow.GetInfo(ctx).WorkflowStartTime}
	if c := in.Carry; c != nil {
		t.state, t.goal, t.steps, t.lastError, t.seq = c.State, c.Goal, c.Steps, c.LastError, c.Seq
		t.createdAt, t.confirmDeadline, t.transitions, t.runs = c.CreatedAt, c.ConfirmDeadline, c.Transitions, c.Runs
		t.written = c.Seq
		// A step cannot be mid-send across continue-as-new (we only continue when
		// idle), but a step left OUTCOME_UNKNOWN stays so: run_step reconciles it.
	}
	t.signals = workflow.GetSignalChannel(ctx, TaskSignalConfirm)
	return t
}

func (t *taskRun) carry() *TaskCarry {
	return &TaskCarry{
		State: t.state, Goal: t.goal, Steps: t.steps, LastError: t.lastError, Seq: t.seq,
		CreatedAt: t.createdAt, ConfirmDeadline: t.confirmDeadline, Transitions: t.transitions, Runs: t.runs,
	}
}

func (t *taskRun) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, TaskQueryState, func() (TaskView, error) { return t.view(), nil },
		workflow.QueryHandlerOptions{Description: "goal, done, todo, next step, state, last error and per-step status"}); err != nil {
		return err
	}
	type upd struct {
		name, desc string
		handler    any
		validator  any
	}
	for _, u := range []upd{
		{TaskUpdatePlan, "set goal and steps (CREATED or PLANNING)", t.plan, func(r PlanRequest) error { return t.checkPlan(r) }},
		{TaskUpdateRequestConfirmation, "ask for confirmation of the plan (PLANNING)", t.requestConfirmation, func(RequestConfirmationRequest) error { return t.check(TaskUpdateRequestConfirmation) }},
		{TaskUpdateConfirm, "confirm or reject the plan (WAITING_CONFIRMATION)", t.confirm, func(ConfirmRequest) error { return t.check(TaskUpdateConfirm) }},
		{TaskUpdateRunStep, "run the next or the named step (EXECUTING)", t.runStep, func(r RunStepRequest) error { _, err := t.checkRunStep(r); return err }},
		{TaskUpdateComplete, "finish a task whose steps are done (EXECUTING)", t.complete, func(CompleteRequest) error { return t.check(TaskUpdateComplete) }},
		{TaskUpdateCancel, "cancel a task with no step in flight", t.cancel, func(CancelRequest) error { return t.check(TaskUpdateCancel) }},
		{TaskUpdateRecorded, "return the task once its transitions are in Postgres", t.wait, nil},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler,
			workflow.UpdateHandlerOptions{Validator: u.validator, Description: u.desc}); err != nil {
			return err
		}
	}
	return nil
}

// ---- the state machine ----

func illegal(op string, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError("cannot "+op+": "+fmt.Sprintf(format, args...), ErrTypeIllegalTransition, nil)
}

func invalid(op string, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError("invalid "+op+": "+fmt.Sprintf(format, args...), ErrTypeInvalidTaskRequest, nil)
}

// check says whether op is legal in the current state; the message always names
// the state and, where there is one, the way forward.
func (t *taskRun) check(op string) error {
	s := t.state
	if s.Terminal() {
		return illegal(op, "task is %s, which is final", s)
	}
	if s == memory.TaskOutcomeUnknown {
		return illegal(op, "task is %s, the outcome of step %q must be reconciled first", s, t.unknownStep())
	}
	if t.inFlight != "" && op != TaskUpdateRunStep {
		return illegal(op, "task is %s and step %q is running", s, t.inFlight)
	}
	switch op {
	case TaskUpdatePlan:
		if s != memory.TaskCreated && s != memory.TaskPlanning {
			return illegal(op, "task is %s, the plan can only change before confirmation is requested", s)
		}
	case TaskUpdateRequestConfirmation:
		switch s {
		case memory.TaskCreated:
			return illegal(op, "task is %s, plan it first", s)
		case memory.TaskWaitingConfirmation:
			return illegal(op, "task is %s already", s)
		case memory.TaskExecuting:
			return illegal(op, "task is %s, it was confirmed already", s)
		}
	case TaskUpdateConfirm:
		switch s {
		case memory.TaskCreated:
			return illegal(op, "task is %s, plan it and request confirmation first", s)
		case memory.TaskPlanning:
			return illegal(op, "task is %s, request confirmation first", s)
		case memory.TaskExecuting:
			return illegal(op, "task is %s, it was confirmed already", s)
		}
	case TaskUpdateRunStep:
		switch s {
		case memory.TaskCreated:
			return illegal(op, "task is %s, plan it and have it confirmed first", s)
		case memory.TaskPlanning:
			return illegal(op, "task is %s, request confirmation and have it confirmed first", s)
		case memory.TaskWaitingConfirmation:
			return illegal(op, "task is %s, confirm it first", s)
		}
	case TaskUpdateComplete:
		switch s {
		case memory.TaskCreated:
			return illegal(op, "task is %s, plan it, have it confirmed and run its steps first", s)
		case memory.TaskPlanning:
			return illegal(op, "task is %s, request confirmation and confirm it first", s)
		case memory.TaskWaitingConfirmation:
			return illegal(op, "task is %s, confirm it first", s)
		case memory.TaskExecuting:
			if todo := t.todo(); len(todo) > 0 {
				return illegal(op, "task is %s with %d step(s) not done (next: %s)", s, len(todo), todo[0])
			}
		}
	case TaskUpdateCancel:
		// Legal in every non-final state without a step in flight (checked above).
	default:
		return illegal(op, "unknown operation")
	}
	return nil
}

func (t *taskRun) checkPlan(r PlanRequest) error {
	if err := t.check(TaskUpdatePlan); err != nil {
		return err
	}
	if strings.TrimSpace(r.Goal) == "" {
		return invalid(TaskUpdatePlan, "goal is empty")
	}
	seen := map[string]bool{}
	for i, s := range r.Steps {
		switch {
		case strings.TrimSpace(s.Name) == "":
			return invalid(TaskUpdatePlan, "step %d has no name", i+1)
		case strings.Contains(s.Name, "/"):
			return invalid(TaskUpdatePlan, "step name %q contains '/'", s.Name)
		case seen[s.Name]:
			return invalid(TaskUpdatePlan, "step name %q is used twice", s.Name)
		case strings.TrimSpace(s.Action) == "":
			return invalid(TaskUpdatePlan, "step %q has no action", s.Name)
		case len(s.Input) > 0 && !json.Valid(s.Input):
			return invalid(TaskUpdatePlan, "input of step %q is not valid JSON", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// checkRunStep returns the index of the step to run.
func (t *taskRun) checkRunStep(r RunStepRequest) (int, error) {
	op := TaskUpdateRunStep
	s := t.state
	if t.inFlight != "" {
		if s == memory.TaskOutcomeUnknown {
			return -1, illegal(op, "task is %s, the outcome of step %q is being reconciled", s, t.inFlight)
		}
		return -1, illegal(op, "task is %s and step %q is still running", s, t.inFlight)
	}
	if s == memory.TaskOutcomeUnknown {
		// Reached only when a reconcile gave up: running that step again resumes the
		// reconciliation, it does not send.
		u := t.unknownStep()
		if r.Step != "" && r.Step != u {
			return -1, illegal(op, "task is %s, the outcome of step %q must be reconciled first", s, u)
		}
		return t.stepIndex(u), nil
	}
	if err := t.check(op); err != nil {
		return -1, err
	}
	if r.Step == "" {
		todo := t.todo()
		if len(todo) == 0 {
			return -1, illegal(op, "task is %s and every step is done, complete it", s)
		}
		return t.stepIndex(todo[0]), nil
	}
	i := t.stepIndex(r.Step)
	if i < 0 {
		return -1, invalid(op, "no step %q in the plan (steps: %s)", r.Step, strings.Join(t.stepNames(), ", "))
	}
	if t.steps[i].Status == StepDone {
		return -1, illegal(op, "task is %s and step %q is done already", s, r.Step)
	}
	return i, nil
}

// ---- update handlers ----

func (t *taskRun) plan(ctx workflow.Context, r PlanRequest) (TaskView, error) {
	if err := t.checkPlan(r); err != nil {
		return t.view(), err
	}
	t.goal = r.Goal
	t.steps = make([]TaskStepState, len(r.Steps))
	for i, s := range r.Steps {
		t.steps[i] = TaskStepState{TaskStep: s, Status: StepPending}
	}
	reason := fmt.Sprintf("planned %d step(s)", len(r.Steps))
	if t.state == memory.TaskPlanning {
		reason = fmt.Sprintf("re-planned %d step(s)", len(r.Steps))
	}
	t.transition(ctx, memory.TaskPlanning, actorOr(r.Actor), reason, "")
	return t.wait(ctx)
}

func (t *taskRun) requestConfirmation(ctx workflow.Context, r RequestConfirmationRequest) (TaskView, error) {
	if err := t.check(TaskUpdateRequestConfirmation); err != nil {
		return t.view(), err
	}
	t.confirmDeadline = workflow.Now(ctx).Add(t.cfg.ConfirmationTimeout)
	reason := r.Reason
	if reason == "" {
		reason = "confirmation requested"
	}
	t.transition(ctx, memory.TaskWaitingConfirmation, actorOr(r.Actor),
		fmt.Sprintf("%s; waiting until %s, then %s", reason, t.confirmDeadline.UTC().Format(time.RFC3339), t.cfg.ConfirmationDefault), "")
	t.armConfirmTimer(ctx)
	return t.wait(ctx)
}

func (t *taskRun) confirm(ctx workflow.Context, r ConfirmRequest) (TaskView, error) {
	if err := t.check(TaskUpdateConfirm); err != nil {
		return t.view(), err
	}
	t.applyConfirm(ctx, r)
	return t.wait(ctx)
}

func (t *taskRun) applyConfirm(ctx workflow.Context, r ConfirmRequest) {
	t.confirmEpoch++
	t.confirmDeadline = time.Time{}
	if r.Reject {
		t.transition(ctx, memory.TaskCancelled, actorOr(r.Actor), orDefault(r.Reason, "confirmation rejected"), "")
		return
	}
	t.transition(ctx, memory.TaskExecuting, actorOr(r.Actor), orDefault(r.Reason, "confirmed"), "")
}

func (t *taskRun) complete(ctx workflow.Context, r CompleteRequest) (TaskView, error) {
	if err := t.check(TaskUpdateComplete); err != nil {
		return t.view(), err
	}
	t.transition(ctx, memory.TaskCompleted, actorOr(r.Actor), orDefault(r.Reason, fmt.Sprintf("all %d step(s) done", len(t.steps))), "")
	return t.wait(ctx)
}

func (t *taskRun) cancel(ctx workflow.Context, r CancelRequest) (TaskView, error) {
	if err := t.check(TaskUpdateCancel); err != nil {
		return t.view(), err
	}
	if t.state == memory.TaskWaitingConfirmation {
		t.confirmEpoch++
		t.confirmDeadline = time.Time{}
	}
	t.transition(ctx, memory.TaskCancelled, actorOr(r.Actor), orDefault(r.Reason, "cancelled"), "")
	return t.wait(ctx)
}

func orDefault(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

// confirmSignals applies confirm signals from the Web UI. An illegal one is logged
// and dropped: a signal has no caller to answer.
func (t *taskRun) confirmSignals(ctx workflow.Context) {
	for {
		var r ConfirmRequest
		t.signals.Receive(ctx, &r)
		if err := t.check(TaskUpdateConfirm); err != nil {
			workflow.GetLogger(ctx).Warn("confirm signal ignored", "error", err)
			continue
		}
		t.busy++
		t.applyConfirm(ctx, r)
		_, _ = t.wait(ctx)
		t.busy--
	}
}

// armConfirmTimer applies the configured default when nobody answers in time.
func (t *taskRun) armConfirmTimer(ctx workflow.Context) {
	epoch, deadline := t.confirmEpoch, t.confirmDeadline
	workflow.Go(ctx, func(ctx workflow.Context) {
		answered := func() bool { return t.state != memory.TaskWaitingConfirmation || t.confirmEpoch != epoch }
		if d := deadline.Sub(workflow.Now(ctx)); d > 0 {
			if ok, err := workflow.AwaitWithTimeout(ctx, d, answered); ok || err != nil {
				return
			}
		}
		if answered() {
			return
		}
		t.busy++
		defer func() { t.busy-- }()
		reason := fmt.Sprintf("no confirmation within %s, default: %s", t.cfg.ConfirmationTimeout, t.cfg.ConfirmationDefault)
		t.applyConfirm(ctx, ConfirmRequest{Actor: systemActor, Reason: reason, Reject: t.cfg.ConfirmationDefault != ConfirmDefaultConfirm})
		_, _ = t.wait(ctx)
	})
}

// ---- steps ----

func (t *taskRun) runStep(ctx workflow.Context, r RunStepRequest) (TaskView, error) {
	i, err := t.checkRunStep(r)
	if err != nil {
		return t.view(), err
	}
	st := &t.steps[i]
	actor := actorOr(r.Actor)
	t.inFlight = st.Name
	defer func() { t.inFlight = "" }()
	st.IdempotencyKey = IdempotencyKey(t.in.TenantID, t.in.TaskID, st.Name)

	reconcileFirst := st.Status == StepOutcomeUnknown
	for {
		if !reconcileFirst {
			res, err := t.send(ctx, st)
			switch {
			case err == nil && res.Status == ActionApplied:
				st.Status, st.Result, st.Error = StepDone, res.Result, ""
				t.transition(ctx, memory.TaskExecuting, actor, fmt.Sprintf("step %q applied", st.Name), st.Name)
				return t.wait(ctx)
			case err == nil:
				return t.failStep(ctx, st, actor, fmt.Sprintf("step %q failed at the action endpoint: %s", st.Name, orDefault(res.Error, "no reason given")))
			case !outcomeUnknown(err):
				return t.failStep(ctx, st, actor, err.Error())
			}
			st.Status, st.Error = StepOutcomeUnknown, errMessage(err)
			t.lastError = st.Error
			t.transition(ctx, memory.TaskOutcomeUnknown, systemActor, st.Error, st.Name)
		}
		reconcileFirst = false

		rec, err := t.reconcile(ctx, st)
		if err != nil {
			// The outcome is still unknown: stay here; run_step resumes reconciling.
			st.Error = "reconcile: " + errMessage(err)
			t.lastError = st.Error
			t.publish(ctx)
			return t.view(), nil
		}
		switch rec.Status {
		case ActionApplied:
			st.Status, st.Result, st.Error = StepDone, rec.Result, ""
			t.lastError = ""
			t.transition(ctx, memory.TaskExecuting, systemActor, fmt.Sprintf("reconciled after %d lookup(s): step %q was applied", rec.Lookups, st.Name), st.Name)
			return t.wait(ctx)
		case ActionFailed:
			return t.failStep(ctx, st, systemActor, fmt.Sprintf("reconciled: step %q failed at the action endpoint: %s", st.Name, orDefault(rec.Error, "no reason given")))
		default: // NOT_APPLIED
			if st.Sends >= t.cfg.MaxSends {
				return t.failStep(ctx, st, systemActor, fmt.Sprintf("step %q was not applied after %d send(s)", st.Name, st.Sends))
			}
			st.Status, st.Error = StepRunning, ""
			t.lastError = ""
			t.transition(ctx, memory.TaskExecuting, systemActor, fmt.Sprintf("reconciled: step %q was not applied, sending it again with the same key", st.Name), st.Name)
		}
	}
}

// send calls the action endpoint, retrying only while the request provably never
// left (ErrTypeActionNotSent), with backoff, up to MaxSends for the step.
func (t *taskRun) send(ctx workflow.Context, st *TaskStepState) (*CallActionResult, error) {
	var a *TaskActivities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: t.cfg.CallTimeout + 10*time.Second,
		// One attempt: a retry after a timeout would be a blind resend.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:     "send step " + st.Name,
	})
	wait := t.cfg.SendRetryInterval
	for {
		st.Status = StepRunning
		st.Sends++
		var res CallActionResult
		err := workflow.ExecuteActivity(actx, a.CallAction, CallActionInput{
			TenantID: t.in.TenantID, TaskID: t.in.TaskID, Step: st.Name, Action: st.Action, Input: st.Input,
			IdempotencyKey: st.IdempotencyKey, Timeout: t.cfg.CallTimeout,
		}).Get(ctx, &res)
		if err == nil {
			return &res, nil
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != ErrTypeActionNotSent {
			return nil, err
		}
		if st.Sends >= t.cfg.MaxSends {
			return nil, notSentError{fmt.Sprintf("step %q not sent after %d attempt(s): %s", st.Name, st.Sends, appErr.Message())}
		}
		st.Error = appErr.Message()
		t.lastError = fmt.Sprintf("send %d of step %q: %s; retrying in %s", st.Sends, st.Name, appErr.Message(), wait)
		t.publish(ctx)
		if err := workflow.Sleep(ctx, wait); err != nil {
			return nil, notSentError{fmt.Sprintf("step %q not sent: %v", st.Name, err)}
		}
		wait = min(wait*2, time.Minute)
	}
}

// notSentError ends the sends of a step whose requests provably never left.
type notSentError struct{ msg string }

func (e notSentError) Error() string { return e.msg }

// outcomeUnknown: the request may have reached the endpoint. Only "never sent",
// "rejected" and "bad input" are known not to have applied anything; every other
// error counts as unknown, including an activity timeout (a worker killed mid-call).
func outcomeUnknown(err error) bool {
	var ns notSentError
	if errors.As(err, &ns) {
		return false
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case ErrTypeActionRejected, ErrTypeTaskBadInput:
			return false
		}
	}
	return true
}

func errMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}

func (t *taskRun) reconcile(ctx workflow.Context, st *TaskStepState) (*ReconcileResult, error) {
	var a *TaskActivities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    t.cfg.ReconcileHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{ErrTypeTaskBadInput},
		},
		Summary: "reconcile step " + st.Name,
	})
	var res ReconcileResult
	err := workflow.ExecuteActivity(actx, a.Reconcile, ReconcileInput{
		TenantID: t.in.TenantID, TaskID: t.in.TaskID, Step: st.Name, IdempotencyKey: st.IdempotencyKey,
		PollInterval: t.cfg.ReconcilePollInterval, MaxPollInterval: t.cfg.ReconcileMaxPollInterval,
	}).Get(ctx, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func (t *taskRun) failStep(ctx workflow.Context, st *TaskStepState, actor, reason string) (TaskView, error) {
	st.Status, st.Error = StepFailed, reason
	t.lastError = reason
	t.transition(ctx, memory.TaskFailed, actor, reason, st.Name)
	return t.wait(ctx)
}

// ---- transitions and persistence ----

// transition changes state at once (validators and the query see it immediately)
// and queues the Postgres write; wait blocks until it is written.
func (t *taskRun) transition(ctx workflow.Context, to memory.TaskState, actor, reason, step string) {
	from := t.state
	t.state = to
	t.seq++
	tr := TaskTransition{Seq: t.seq, From: from, To: to, Actor: actor, Reason: reason, Step: step, At: workflow.Now(ctx).UTC()}
	if from == memory.TaskCreated && to == memory.TaskCreated {
		tr.From = ""
	}
	t.transitions = append(t.transitions, tr)
	if n := len(t.transitions); n > keptTransitions {
		t.transitions = append([]TaskTransition(nil), t.transitions[n-keptTransitions:]...)
	}
	t.pending = append(t.pending, RecordTransitionInput{
		Task: TaskRecord{
			TenantID: t.in.TenantID, TaskID: t.in.TaskID, UserID: t.in.UserID, SessionID: t.in.SessionID, AgentID: t.in.AgentID,
			Goal: t.goal, State: t.state, Done: t.done(), Todo: t.todo(), NextStep: t.nextStep(), LastError: t.lastError,
			WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, CreatedAt: t.createdAt.UTC(),
		},
		Transition: TransitionRecord{Seq: tr.Seq, From: tr.From, To: tr.To, Actor: tr.Actor, Reason: tr.Reason, Step: tr.Step, At: tr.At},
	})
	workflow.GetLogger(ctx).Info("task transition", "tenant_id", t.in.TenantID, "task_id", t.in.TaskID,
		"seq", tr.Seq, "from", from, "to", to, "actor", actor, "step", step, "reason", reason)
	t.publish(ctx)
}

// publish refreshes the search attributes and the Web UI details.
func (t *taskRun) publish(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		SearchAttrTaskState.ValueSet(string(t.state)),
		memory.SearchAttrTenant.ValueSet(t.in.TenantID),
		memory.SearchAttrKind.ValueSet(TaskKind),
	); err != nil {
		workflow.GetLogger(ctx).Warn("upsert search attributes", "error", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** — %s\n\n", t.state, orDefault(t.goal, "(no plan yet)"))
	if n := t.nextStep(); n != "" {
		fmt.Fprintf(&b, "next step: %s\n\n", n)
	}
	if t.state == memory.TaskWaitingConfirmation {
		fmt.Fprintf(&b, "waiting for confirmation until %s (then %s); send the `confirm` signal with {} to confirm or {\"reject\": true} to reject\n\n",
			t.confirmDeadline.UTC().Format(time.RFC3339), t.cfg.ConfirmationDefault)
	}
	if t.lastError != "" {
		fmt.Fprintf(&b, "last error: %s\n", t.lastError)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// writer writes queued transitions in order, one at a time, so task rows never go
// backwards even when handlers interleave.
func (t *taskRun) writer(ctx workflow.Context) {
	var a *TaskActivities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{ErrTypeTaskBadInput},
		},
	})
	for {
		if err := workflow.Await(ctx, func() bool { return len(t.pending) > 0 }); err != nil {
			return
		}
		rec := t.pending[0]
		if err := workflow.ExecuteActivity(actx, a.RecordTransition, rec).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Error("record task transition", "seq", rec.Transition.Seq, "error", err)
		}
		t.pending = t.pending[1:]
		t.written = rec.Transition.Seq
	}
}

// wait returns the view once every transition so far is in Postgres, so a caller
// that reads recall right after an update sees it.
func (t *taskRun) wait(ctx workflow.Context) (TaskView, error) {
	seq := t.seq
	if err := workflow.Await(ctx, func() bool { return t.written >= seq }); err != nil {
		return t.view(), err
	}
	return t.view(), nil
}

func (t *taskRun) idle(ctx workflow.Context) bool {
	return workflow.AllHandlersFinished(ctx) && t.busy == 0 && len(t.pending) == 0 && t.signals.Len() == 0 && t.inFlight == ""
}

func (t *taskRun) wantContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= t.cfg.MaxHistoryEvents
}

// ---- views ----

func (t *taskRun) done() []string {
	out := []string{}
	for _, s := range t.steps {
		if s.Status == StepDone {
			out = append(out, s.Name)
		}
	}
	return out
}

func (t *taskRun) todo() []string {
	out := []string{}
	for _, s := range t.steps {
		if s.Status != StepDone {
			out = append(out, s.Name)
		}
	}
	return out
}

func (t *taskRun) nextStep() string {
	if t.state.Terminal() {
		return ""
	}
	if todo := t.todo(); len(todo) > 0 {
		return todo[0]
	}
	return ""
}

func (t *taskRun) unknownStep() string {
	for _, s := range t.steps {
		if s.Status == StepOutcomeUnknown {
			return s.Name
		}
	}
	return ""
}

func (t *taskRun) stepIndex(name string) int {
	for i, s := range t.steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

func (t *taskRun) stepNames() []string {
	out := make([]string, len(t.steps))
	for i, s := range t.steps {
		out[i] = s.Name
	}
	return out
}

func (t *taskRun) view() TaskView {
	return TaskView{
		TenantID: t.in.TenantID, TaskID: t.in.TaskID, Goal: t.goal, State: t.state,
		Done: t.done(), Todo: t.todo(), NextStep: t.nextStep(), LastError: t.lastError,
		Steps: append([]TaskStepState(nil), t.steps...), Seq: t.seq, ConfirmDeadline: t.confirmDeadline,
		InFlight: t.inFlight, Transitions: append([]TaskTransition(nil), t.transitions...), Runs: t.runs,
	}
}
