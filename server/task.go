package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/outage"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/task"
)

type taskServer struct{ Deps }

var taskIDRe = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,100}$`)

func checkTaskID(id string) error {
	if strings.TrimSpace(id) == "" {
		return fieldErr("task_id", "is empty")
	}
	if !taskIDRe.MatchString(id) {
		return fieldErr("task_id", fmt.Sprintf("%q must be 1-100 letters, digits or . _ : @ -", id))
	}
	return nil
}

// ownTask loads the caller's task row: NOT_FOUND for another tenant's or a missing
// task, PERMISSION_DENIED when an agent key may not act for the task's user. A
// read call (GetTask) reads it on the read store (Deps.read, op "get task"); a
// write call on the main store.
func (s *taskServer) ownTask(ctx context.Context, p *Principal, id string, readOnly bool) (*storage.Task, error) {
	if err := checkTaskID(id); err != nil {
		return nil, err
	}
	var t *storage.Task
	load := func(ctx context.Context, st *storage.Store) (err error) {
		t, err = st.GetTask(ctx, p.TenantID, id)
		return err
	}
	var err error
	if readOnly {
		err = s.read(ctx, "get task", load)
	} else {
		err = load(ctx, s.Store)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("task_id: no task %q", id))
	}
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("load task: %w", err))
	}
	if t.UserID != "" && !p.MayActFor(t.UserID) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("task_id: the key of %q may not act for the user of task %q", p.Name, id))
	}
	return t, nil
}

func (s *taskServer) StartTask(ctx context.Context, req *connect.Request[engramv1.StartTaskRequest]) (*connect.Response[engramv1.StartTaskResponse], error) {
	p, err := require(ctx, "StartTask", "agent")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkTaskID(m.TaskId); err != nil {
		return nil, err
	}
	user, err := userFor(p, "user_id", m.UserId)
	if err != nil {
		return nil, err
	}
	agent, err := bound(p, "agent_id", p.AgentID, m.AgentId)
	if err != nil {
		return nil, err
	}
	cfg := task.TaskConfig{ConfirmationTimeout: s.Config.ConfirmationTimeout, CallTimeout: s.Config.ActionTimeout}
	if m.ConfirmationTimeout != nil {
		d := m.ConfirmationTimeout.AsDuration()
		if d < 0 || !m.ConfirmationTimeout.IsValid() {
			return nil, fieldErr("confirmation_timeout", "is negative or invalid")
		}
		if d > 0 {
			cfg.ConfirmationTimeout = d
		}
	}
	switch d := task.ConfirmDefault(strings.TrimSpace(m.ConfirmationDefault)); d {
	case "", task.ConfirmDefaultCancel, task.ConfirmDefaultConfirm:
		cfg.ConfirmationDefault = d
	default:
		return nil, fieldErr("confirmation_default", fmt.Sprintf("%q is neither %q nor %q", d, task.ConfirmDefaultCancel, task.ConfirmDefaultConfirm))
	}
	if _, err := s.Store.GetTask(ctx, p.TenantID, m.TaskId); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("task_id: task %q exists already", m.TaskId))
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, toConnect(ctx, fmt.Errorf("check task: %w", err))
	}
	in := task.TaskInput{TenantID: p.TenantID, TaskID: m.TaskId, UserID: user, SessionID: strings.TrimSpace(m.SessionId), AgentID: agent, Actor: p.Name, Config: cfg}
	// The answer comes when the CREATED transition is in Postgres, so the caller's
	// next call finds the task; without a worker it never comes.
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	view, err := task.Start(sctx, s.Temporal, s.Config.TaskQueue, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case errors.As(err, &started):
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("task_id: task %q exists already", m.TaskId))
		case ctx.Err() == nil && sctx.Err() != nil:
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("the task was started but no worker has recorded it yet: is a worker running on the task queue?"))
		}
		return nil, toConnect(ctx, fmt.Errorf("start task: %w", err))
	}
	row, err := s.ownTask(ctx, p, m.TaskId, false)
	if err != nil {
		return nil, err
	}
	t := taskOut(view, row)
	return connect.NewResponse(&engramv1.StartTaskResponse{Task: t}), nil
}

func stepsIn(field string, steps []*engramv1.TaskStep) ([]task.TaskStep, error) {
	if len(steps) == 0 {
		return nil, fieldErr(field, "is empty: plan at least one step")
	}
	seen := map[string]int{}
	out := make([]task.TaskStep, len(steps))
	for i, st := range steps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if st == nil {
			return nil, fieldErr(f, "is missing")
		}
		name := strings.TrimSpace(st.Name)
		switch {
		case name == "":
			return nil, fieldErr(f+".name", "is empty")
		case strings.Contains(name, "/"):
			return nil, fieldErr(f+".name", fmt.Sprintf("%q contains '/'", name))
		case strings.TrimSpace(st.Action) == "":
			return nil, fieldErr(f+".action", "is empty")
		}
		if j, dup := seen[name]; dup {
			return nil, fieldErr(f+".name", fmt.Sprintf("%q repeats step %d", name, j))
		}
		seen[name] = i
		out[i] = task.TaskStep{Name: name, Action: strings.TrimSpace(st.Action)}
		if st.Input != nil {
			b, err := json.Marshal(st.Input.AsMap())
			if err != nil {
				return nil, fieldErr(f+".input", "cannot be encoded as JSON")
			}
			out[i].Input = b
		}
	}
	return out, nil
}

func (s *taskServer) UpdateTask(ctx context.Context, req *connect.Request[engramv1.UpdateTaskRequest]) (*connect.Response[engramv1.UpdateTaskResponse], error) {
	p, err := require(ctx, "UpdateTask", "agent")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkTaskID(m.TaskId); err != nil {
		return nil, err
	}
	var name string
	var arg any
	switch op := m.Op.(type) {
	case *engramv1.UpdateTaskRequest_Plan:
		if op.Plan == nil || strings.TrimSpace(op.Plan.Goal) == "" {
			return nil, fieldErr("plan.goal", "is empty")
		}
		steps, err := stepsIn("plan.steps", op.Plan.Steps)
		if err != nil {
			return nil, err
		}
		name, arg = task.TaskUpdatePlan, task.PlanRequest{Actor: p.Name, Goal: strings.TrimSpace(op.Plan.Goal), Steps: steps}
	case *engramv1.UpdateTaskRequest_RequestConfirmation:
		name, arg = task.TaskUpdateRequestConfirmation, task.RequestConfirmationRequest{Actor: p.Name, Reason: op.RequestConfirmation.GetReason()}
	case *engramv1.UpdateTaskRequest_Confirm:
		name, arg = task.TaskUpdateConfirm, task.ConfirmRequest{Actor: p.Name, Reason: op.Confirm.GetReason(), Reject: op.Confirm.GetReject()}
	case *engramv1.UpdateTaskRequest_Complete:
		name, arg = task.TaskUpdateComplete, task.CompleteRequest{Actor: p.Name, Reason: op.Complete.GetReason()}
	case *engramv1.UpdateTaskRequest_Cancel:
		name, arg = task.TaskUpdateCancel, task.CancelRequest{Actor: p.Name, Reason: op.Cancel.GetReason()}
	default:
		return nil, fieldErr("op", "is missing: set one of plan, request_confirmation, confirm, complete, cancel")
	}
	t, err := s.update(ctx, p, m.TaskId, name, arg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&engramv1.UpdateTaskResponse{Task: t}), nil
}

func (s *taskServer) RunStep(ctx context.Context, req *connect.Request[engramv1.RunStepRequest]) (*connect.Response[engramv1.RunStepResponse], error) {
	p, err := require(ctx, "RunStep", "agent")
	if err != nil {
		return nil, err
	}
	t, err := s.update(ctx, p, req.Msg.TaskId, task.TaskUpdateRunStep, task.RunStepRequest{Actor: p.Name, Step: strings.TrimSpace(req.Msg.Step)})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&engramv1.RunStepResponse{Task: t}), nil
}

func (s *taskServer) GetTask(ctx context.Context, req *connect.Request[engramv1.GetTaskRequest]) (*connect.Response[engramv1.GetTaskResponse], error) {
	p, err := require(ctx, "GetTask", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	t, err := s.view(ctx, p, req.Msg.TaskId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&engramv1.GetTaskResponse{Task: t}), nil
}

// update sends one update to the caller's task workflow and returns the task after it.
func (s *taskServer) update(ctx context.Context, p *Principal, taskID, name string, arg any) (*engramv1.Task, error) {
	row, err := s.ownTask(ctx, p, taskID, false)
	if err != nil {
		return nil, err
	}
	h, err := s.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: task.TaskWorkflowID(p.TenantID, taskID), UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var view task.TaskView
	if err == nil {
		err = h.Get(ctx, &view)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cannot %s: task %q is %s and closed", name, taskID, row.State))
		}
		return nil, toConnect(ctx, fmt.Errorf("%s task: %w", name, err))
	}
	return taskOut(view, row), nil
}

// view reads the task from its workflow, or from Postgres once the workflow is gone.
func (s *taskServer) view(ctx context.Context, p *Principal, taskID string) (*engramv1.Task, error) {
	row, err := s.ownTask(ctx, p, taskID, true)
	if err != nil {
		return nil, err
	}
	v, err := s.Temporal.QueryWorkflow(ctx, task.TaskWorkflowID(p.TenantID, taskID), "", task.TaskQueryState)
	if err != nil {
		if outage.Is(err) {
			return nil, toConnect(ctx, err)
		}
		return rowOut(row), nil
	}
	var view task.TaskView
	if err := v.Get(&view); err != nil {
		return nil, toConnect(ctx, fmt.Errorf("decode task state: %w", err))
	}
	return taskOut(view, row), nil
}

func taskOut(v task.TaskView, row *storage.Task) *engramv1.Task {
	t := &engramv1.Task{
		TaskId: v.TaskID, UserId: row.UserID, SessionId: row.SessionID, Goal: v.Goal, State: taskStateOut(v.State),
		Done: v.Done, Todo: v.Todo, NextStep: v.NextStep, LastError: v.LastError, Seq: v.Seq,
		ConfirmDeadline: ts(v.ConfirmDeadline), InFlight: v.InFlight,
	}
	for _, st := range v.Steps {
		ps := &engramv1.TaskStepState{
			Step:   &engramv1.TaskStep{Name: st.Name, Action: st.Action, Input: structOf(st.Input)},
			Status: string(st.Status), IdempotencyKey: st.IdempotencyKey, Sends: int32(st.Sends), Result: valueOf(st.Result), Error: st.Error,
		}
		t.Steps = append(t.Steps, ps)
	}
	for _, tr := range v.Transitions {
		t.Transitions = append(t.Transitions, &engramv1.TaskTransition{
			Seq: tr.Seq, From: taskStateOut(tr.From), To: taskStateOut(tr.To), Actor: tr.Actor, Reason: tr.Reason, Step: tr.Step, At: ts(tr.At),
		})
	}
	return t
}

func rowOut(r *storage.Task) *engramv1.Task {
	return &engramv1.Task{
		TaskId: r.ID, UserId: r.UserID, SessionId: r.SessionID, Goal: r.Goal, State: taskStateOut(r.State),
		Done: r.Done, Todo: r.Todo, NextStep: r.NextStep, LastError: r.LastError, Seq: r.Seq,
	}
}
