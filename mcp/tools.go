package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/server"
)

// The tools' inputs. Their JSON Schemas are derived from these structs: a field
// without omitempty is required, unknown fields are refused, and the jsonschema tag
// is the description an LLM reads.

type rememberIn struct {
	Content        string `json:"content" jsonschema:"What happened, in the speaker's own words (a message, a tool result, a note). Engram extracts the memories itself."`
	UserID         string `json:"user_id,omitempty" jsonschema:"The user this is about. Optional when the API key is bound to one user."`
	Schema         string `json:"schema,omitempty" jsonschema:"Domain schema that drives extraction: general (default), customer_service, travel, or one the tenant stored."`
	SessionID      string `json:"session_id,omitempty" jsonschema:"Current conversation, for session-scoped memory."`
	TaskID         string `json:"task_id,omitempty" jsonschema:"Current task, for task-scoped memory (e.g. a budget for this trip only)."`
	Actor          string `json:"actor,omitempty" jsonschema:"Who said it: user (default), agent, system or tool."`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"A key unique to this event; a retry with the same key never writes twice. Default: a new key."`
	OccurredAt     string `json:"occurred_at,omitempty" jsonschema:"When it happened, RFC 3339 (default now)."`
	Wait           *bool  `json:"wait,omitempty" jsonschema:"Wait for the write to commit (default true) and return the memories it produced."`
	WaitSeconds    int    `json:"wait_seconds,omitempty" jsonschema:"How long to wait, in seconds (default 30, at most 300)."`
}

type recallIn struct {
	Query       string `json:"query" jsonschema:"The question or the current turn, in any language."`
	UserID      string `json:"user_id,omitempty" jsonschema:"The user whose memory to read. Optional when the API key is bound to one user."`
	SessionID   string `json:"session_id,omitempty" jsonschema:"Current conversation, for session memory and recent turns."`
	TaskID      string `json:"task_id,omitempty" jsonschema:"Current task, for its state and task-scoped memory."`
	Schema      string `json:"schema,omitempty" jsonschema:"Schema used to parse the query: general (default), customer_service or travel."`
	K           int    `json:"k,omitempty" jsonschema:"Ranked items to return (default 10, at most 100)."`
	TokenBudget int    `json:"token_budget,omitempty" jsonschema:"Token budget of the context text (default 1000, at most 8000)."`
	AsOf        string `json:"as_of,omitempty" jsonschema:"Answer as of this time, RFC 3339 (valid time: what was true then; default now, or known_at)."`
	KnownAt     string `json:"known_at,omitempty" jsonschema:"Answer as the memory knew it at this time, RFC 3339 (transaction time: only what it had learned by then, as it held it then). Default now."`
}

type listFactsIn struct {
	UserID    string   `json:"user_id,omitempty" jsonschema:"Only facts of this user."`
	TaskID    string   `json:"task_id,omitempty" jsonschema:"Only facts of this task."`
	MemoryKey string   `json:"memory_key,omitempty" jsonschema:"Only revisions of this memory key (e.g. USER:u1|user|budget)."`
	Predicate string   `json:"predicate,omitempty" jsonschema:"Only this predicate (e.g. budget, seat)."`
	Statuses  []string `json:"statuses,omitempty" jsonschema:"Only these statuses: active, superseded, expired, invalidated (default any)."`
	Limit     int      `json:"limit,omitempty" jsonschema:"At most this many (default 100, at most 1000)."`
	AsOf      string   `json:"as_of,omitempty" jsonschema:"Only revisions valid at this time, RFC 3339 (valid time: when the value was true)."`
	KnownAt   string   `json:"known_at,omitempty" jsonschema:"Answer as the memory knew it at this time, RFC 3339 (transaction time: only what it had learned by then, as it held it then). Default now."`
}

type factIDIn struct {
	FactID string `json:"fact_id" jsonschema:"The fact's id (a UUID, as returned by recall or list_facts)."`
}

type factHistoryIn struct {
	MemoryKey string `json:"memory_key" jsonschema:"The memory key whose revisions to list, oldest first (e.g. USER:u1|user|budget)."`
	KnownAt   string `json:"known_at,omitempty" jsonschema:"Answer as the memory knew it at this time, RFC 3339 (transaction time: only what it had learned by then, as it held it then). Default now."`
}

type forgetFactIn struct {
	FactID string `json:"fact_id" jsonschema:"The fact to invalidate (a UUID). Its history is kept; it is no longer recalled."`
	Reason string `json:"reason" jsonschema:"Why the fact is invalid (recorded with the revision)."`
}

type taskStepIn struct {
	Name   string         `json:"name" jsonschema:"Step name, unique within the task."`
	Action string         `json:"action" jsonschema:"The action the step calls at the task action endpoint (e.g. search_flights, book_hotel)."`
	Input  map[string]any `json:"input,omitempty" jsonschema:"The action's input."`
}

type taskStartIn struct {
	TaskID    string       `json:"task_id" jsonschema:"Your id for the task (letters, digits, - _ . :)."`
	UserID    string       `json:"user_id,omitempty" jsonschema:"The user the task is for. Optional when the API key is bound to one user."`
	SessionID string       `json:"session_id,omitempty" jsonschema:"Current conversation."`
	Goal      string       `json:"goal,omitempty" jsonschema:"What the task should achieve; with steps, the task is planned at once."`
	Steps     []taskStepIn `json:"steps,omitempty" jsonschema:"The plan's steps, in order."`
}

type taskIDIn struct {
	TaskID string `json:"task_id" jsonschema:"The task's id."`
}

type taskRunStepIn struct {
	TaskID string `json:"task_id" jsonschema:"The task's id."`
	Step   string `json:"step,omitempty" jsonschema:"The step to run (default: the next one). A step whose outcome is unknown is reconciled, never sent twice."`
}

type pendingIn struct {
	UserID string `json:"user_id,omitempty" jsonschema:"Only candidates about this user."`
	Limit  int    `json:"limit,omitempty" jsonschema:"At most this many (default 100, at most 1000)."`
}

// addTools registers Engram's tools on s; each calls the API's handler with the
// caller's principal, so validation, roles and the tenant filter are the API's own.
func (e *engine) addTools(s *sdk.Server) {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	f := false
	tool(e, s, &sdk.Tool{Name: "remember", Title: "Remember",
		Description: "Record something that happened (a user message, an agent reply, a tool result) as memory. " +
			"Engram extracts facts, preferences and constraints under the schema, supersedes outdated ones, and holds guesses for human review. " +
			"Returns the write's status (COMMITTED, PENDING_REVIEW, NO_MEMORY, UNPARSED, RUNNING) with the facts it produced.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &f, IdempotentHint: true}}, e.remember)
	tool(e, s, &sdk.Tool{Name: "recall", Title: "Recall",
		Description: "Recall what is known that matters for a question or the current turn: returns `context` (text to put in the prompt) " +
			"and `items`, the ranked facts and evidence with their ids (`id`, `evidenceIds`), scores and why they matched.",
		Annotations: readOnly}, e.recall)
	tool(e, s, &sdk.Tool{Name: "list_facts", Title: "List facts",
		Description: "List stored facts, newest first, filtered by user, task, memory key, predicate or status.", Annotations: readOnly}, e.listFacts)
	tool(e, s, &sdk.Tool{Name: "get_fact", Title: "Get a fact",
		Description: "Get one fact by id, with its validity window, confidence and evidence ids.", Annotations: readOnly}, e.getFact)
	tool(e, s, &sdk.Tool{Name: "fact_history", Title: "Fact history",
		Description: "List every revision of a memory key, oldest first: what was believed when, and what superseded it.", Annotations: readOnly}, e.factHistory)
	tool(e, s, &sdk.Tool{Name: "forget_fact", Title: "Forget a fact",
		Description: "Invalidate a fact that is wrong or no longer wanted: it stops being recalled; its history is kept for audit. Needs a reviewer or admin key.",
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true}}, e.forgetFact)
	tool(e, s, &sdk.Tool{Name: "task_start", Title: "Start a task",
		Description: "Start a durable task (state kept apart from memory). With goal and steps the task is planned at once; " +
			"states: CREATED, PLANNING, WAITING_CONFIRMATION, EXECUTING, COMPLETED, FAILED, CANCELLED, OUTCOME_UNKNOWN."}, e.taskStart)
	tool(e, s, &sdk.Tool{Name: "task_get", Title: "Get a task",
		Description: "Get a task's state: goal, steps done and to do, the next step, the last error and its transitions.", Annotations: readOnly}, e.taskGet)
	tool(e, s, &sdk.Tool{Name: "task_step", Title: "Run a task step",
		Description: "Run the next (or the named) step of an executing task. A side effect whose outcome was lost is reconciled (OUTCOME_UNKNOWN), never repeated blindly."}, e.taskStep)
	tool(e, s, &sdk.Tool{Name: "pending_reviews", Title: "Pending reviews",
		Description: "List candidate memories waiting for a human decision (inferred, low confidence or sensitive), oldest first. Needs a reviewer key.",
		Annotations: readOnly}, e.pendingReviews)
}

// tool adds a typed tool whose handler gets the caller's principal in its context.
func tool[In any](e *engine, s *sdk.Server, t *sdk.Tool, h func(context.Context, In) (*sdk.CallToolResult, error)) {
	if e.args == nil {
		e.args = map[string]reflect.Type{}
	}
	e.args[t.Name] = reflect.TypeFor[In]()
	sdk.AddTool(s, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		p, err := e.principal(ctx, req)
		if err != nil {
			return nil, nil, toolErr(err)
		}
		started := time.Now()
		res, err := h(server.WithPrincipal(ctx, p), in)
		if e.observe != nil {
			e.observe(t.Name, err, time.Since(started))
		}
		if err != nil {
			return nil, nil, toolErr(err)
		}
		return res, nil, nil
	})
}

// toolErr turns an API error into the text of an MCP tool error: the code, the
// message (which names the field for bad input) and the BadRequest fields.
func toolErr(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	msg := fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); derr == nil && ok {
			var fields []string
			for _, fv := range br.FieldViolations {
				fields = append(fields, fv.Field)
			}
			if len(fields) > 0 {
				msg += " (field: " + strings.Join(fields, ", ") + ")"
			}
		}
	}
	return errors.New(msg)
}

var pj = protojson.MarshalOptions{}

// result is a tool result holding m as structured content (the Connect JSON of
// the API's response) and as text; lead, when set, is a first text block.
func result(m proto.Message, lead string) (*sdk.CallToolResult, error) {
	b, err := pj.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	var structured map[string]any
	if err := json.Unmarshal(b, &structured); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	res := &sdk.CallToolResult{StructuredContent: structured}
	if lead != "" {
		res.Content = append(res.Content, &sdk.TextContent{Text: lead})
	}
	res.Content = append(res.Content, &sdk.TextContent{Text: string(b)})
	return res, nil
}

func badArg(field, problem string) error {
	return fmt.Errorf("invalid_argument: %s: %s (field: %s)", field, problem, field)
}

func timeArg(field, v string) (*timestamppb.Timestamp, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return nil, badArg(field, fmt.Sprintf("%q is not an RFC 3339 time (e.g. 2026-05-01T09:00:00Z)", v))
	}
	return timestamppb.New(t), nil
}

func (e *engine) remember(ctx context.Context, in rememberIn) (*sdk.CallToolResult, error) {
	ev := &engramv1.Event{
		UserId: in.UserID, Schema: in.Schema, SessionId: in.SessionID, TaskId: in.TaskID, Content: in.Content,
		IdempotencyKey: in.IdempotencyKey, Source: "mcp",
	}
	switch strings.ToLower(strings.TrimSpace(in.Actor)) {
	case "", "user":
		ev.ActorType = engramv1.ActorType_ACTOR_TYPE_USER
	case "agent":
		ev.ActorType = engramv1.ActorType_ACTOR_TYPE_AGENT
	case "system":
		ev.ActorType = engramv1.ActorType_ACTOR_TYPE_SYSTEM
	case "tool":
		ev.ActorType = engramv1.ActorType_ACTOR_TYPE_TOOL
	default:
		return nil, badArg("actor", fmt.Sprintf("%q is not one of user, agent, system, tool", in.Actor))
	}
	var err error
	if ev.OccurredAt, err = timeArg("occurred_at", in.OccurredAt); err != nil {
		return nil, err
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > 300 {
		return nil, badArg("wait_seconds", fmt.Sprintf("%d is outside [0, 300]", in.WaitSeconds))
	}
	req := &engramv1.IngestRequest{Event: ev, Wait: in.Wait == nil || *in.Wait}
	if in.WaitSeconds > 0 {
		req.WaitTimeout = durationpb.New(time.Duration(in.WaitSeconds) * time.Second)
	}
	res, err := call(ctx, req, e.h.Memory.Ingest)
	if err != nil {
		return nil, fieldRename(err, "event.", "")
	}
	r := res.Msg.Results[0]
	return result(r, fmt.Sprintf("write %s: %s", r.IdempotencyKey, strings.TrimPrefix(r.Status.String(), "WRITE_STATUS_")))
}

// fieldRename maps the API's field paths (event.user_id) to the tool's (user_id).
func fieldRename(err error, from, to string) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	msg := strings.ReplaceAll(ce.Message(), from, to)
	out := connect.NewError(ce.Code(), errors.New(msg))
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); derr == nil && ok {
			for _, fv := range br.FieldViolations {
				fv.Field = strings.ReplaceAll(fv.Field, from, to)
			}
			if nd, err := connect.NewErrorDetail(br); err == nil {
				out.AddDetail(nd)
			}
		}
	}
	return out
}

func (e *engine) recall(ctx context.Context, in recallIn) (*sdk.CallToolResult, error) {
	req := &engramv1.RecallRequest{
		UserId: in.UserID, Query: in.Query, SessionId: in.SessionID, TaskId: in.TaskID, Schema: in.Schema,
		K: int32(in.K), TokenBudget: int32(in.TokenBudget), Purpose: "mcp recall",
	}
	if in.K < 0 || in.K > 100 {
		return nil, badArg("k", fmt.Sprintf("%d is outside [0, 100]", in.K))
	}
	var err error
	if req.AsOf, err = timeArg("as_of", in.AsOf); err != nil {
		return nil, err
	}
	if req.KnownAt, err = timeArg("known_at", in.KnownAt); err != nil {
		return nil, err
	}
	res, err := call(ctx, req, e.h.Memory.Recall)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, res.Msg.Context)
}

var statusNames = map[string]engramv1.FactStatus{
	"active": engramv1.FactStatus_FACT_STATUS_ACTIVE, "superseded": engramv1.FactStatus_FACT_STATUS_SUPERSEDED,
	"expired": engramv1.FactStatus_FACT_STATUS_EXPIRED, "invalidated": engramv1.FactStatus_FACT_STATUS_INVALIDATED,
}

func (e *engine) listFacts(ctx context.Context, in listFactsIn) (*sdk.CallToolResult, error) {
	req := &engramv1.ListFactsRequest{UserId: in.UserID, TaskId: in.TaskID, MemoryKey: in.MemoryKey, Predicate: in.Predicate, Limit: int32(in.Limit)}
	for i, s := range in.Statuses {
		st, ok := statusNames[strings.ToLower(strings.TrimSpace(s))]
		if !ok {
			return nil, badArg(fmt.Sprintf("statuses[%d]", i), fmt.Sprintf("%q is not one of active, superseded, expired, invalidated", s))
		}
		req.Statuses = append(req.Statuses, st)
	}
	var err error
	if req.AsOf, err = timeArg("as_of", in.AsOf); err != nil {
		return nil, err
	}
	if req.KnownAt, err = timeArg("known_at", in.KnownAt); err != nil {
		return nil, err
	}
	res, err := call(ctx, req, e.h.Memory.ListFacts)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, fmt.Sprintf("%d fact(s)", len(res.Msg.Facts)))
}

func (e *engine) getFact(ctx context.Context, in factIDIn) (*sdk.CallToolResult, error) {
	res, err := call(ctx, &engramv1.GetFactRequest{FactId: in.FactID}, e.h.Memory.GetFact)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, "")
}

func (e *engine) factHistory(ctx context.Context, in factHistoryIn) (*sdk.CallToolResult, error) {
	knownAt, err := timeArg("known_at", in.KnownAt)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, &engramv1.FactHistoryRequest{MemoryKey: in.MemoryKey, KnownAt: knownAt}, e.h.Memory.FactHistory)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, fmt.Sprintf("%d revision(s)", len(res.Msg.Revisions)))
}

func (e *engine) forgetFact(ctx context.Context, in forgetFactIn) (*sdk.CallToolResult, error) {
	res, err := call(ctx, &engramv1.InvalidateFactRequest{FactId: in.FactID, Reason: in.Reason}, e.h.Memory.InvalidateFact)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, "")
}

func (e *engine) taskStart(ctx context.Context, in taskStartIn) (*sdk.CallToolResult, error) {
	var steps []*engramv1.TaskStep
	for i, st := range in.Steps {
		step := &engramv1.TaskStep{Name: st.Name, Action: st.Action}
		if st.Input != nil {
			v, err := structpb.NewStruct(st.Input)
			if err != nil {
				return nil, badArg(fmt.Sprintf("steps[%d].input", i), err.Error())
			}
			step.Input = v
		}
		steps = append(steps, step)
	}
	if len(steps) > 0 && strings.TrimSpace(in.Goal) == "" {
		return nil, badArg("goal", "is empty: a task with steps needs its goal")
	}
	res, err := call(ctx, &engramv1.StartTaskRequest{TaskId: in.TaskID, UserId: in.UserID, SessionId: in.SessionID}, e.h.Task.StartTask)
	if err != nil {
		return nil, err
	}
	task := res.Msg.Task
	if strings.TrimSpace(in.Goal) != "" {
		up, err := call(ctx, &engramv1.UpdateTaskRequest{TaskId: in.TaskID,
			Op: &engramv1.UpdateTaskRequest_Plan{Plan: &engramv1.PlanOp{Goal: in.Goal, Steps: steps}}}, e.h.Task.UpdateTask)
		if err != nil {
			return nil, fieldRename(err, "plan.", "")
		}
		task = up.Msg.Task
	}
	return result(task, "task "+task.TaskId+": "+strings.TrimPrefix(task.State.String(), "TASK_STATE_"))
}

func (e *engine) taskGet(ctx context.Context, in taskIDIn) (*sdk.CallToolResult, error) {
	res, err := call(ctx, &engramv1.GetTaskRequest{TaskId: in.TaskID}, e.h.Task.GetTask)
	if err != nil {
		return nil, err
	}
	return result(res.Msg.Task, "task "+res.Msg.Task.TaskId+": "+strings.TrimPrefix(res.Msg.Task.State.String(), "TASK_STATE_"))
}

func (e *engine) taskStep(ctx context.Context, in taskRunStepIn) (*sdk.CallToolResult, error) {
	res, err := call(ctx, &engramv1.RunStepRequest{TaskId: in.TaskID, Step: in.Step}, e.h.Task.RunStep)
	if err != nil {
		return nil, err
	}
	return result(res.Msg.Task, "task "+res.Msg.Task.TaskId+": "+strings.TrimPrefix(res.Msg.Task.State.String(), "TASK_STATE_"))
}

func (e *engine) pendingReviews(ctx context.Context, in pendingIn) (*sdk.CallToolResult, error) {
	res, err := call(ctx, &engramv1.ListPendingRequest{UserId: in.UserID, Limit: int32(in.Limit)}, e.h.Review.ListPending)
	if err != nil {
		return nil, err
	}
	return result(res.Msg, fmt.Sprintf("%d pending review(s)", len(res.Msg.Pending)))
}

// call is a handler call with the API's request checks (server.CheckRequest: the
// interceptors do not run for in-process calls).
func call[Req, Res any](ctx context.Context, req *Req, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (*connect.Response[Res], error) {
	if m, ok := any(req).(proto.Message); ok {
		if err := server.CheckRequest(m); err != nil {
			return nil, err
		}
	}
	return fn(ctx, connect.NewRequest(req))
}
