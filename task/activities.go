package task

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Error types raised by the task activities. The workflow branches on them; see
// TASK_ACTIONS.md for what each means for the step.
const (
	// ErrTypeActionNotSent: the request never left this process (connection refused,
	// DNS failure, dial timeout). Nothing can have been applied; sending again is safe.
	ErrTypeActionNotSent = "ActionNotSent"
	// ErrTypeActionOutcomeUnknown: the request may have reached the endpoint (the
	// connection was established) but no usable answer came back. The step must be
	// reconciled by its idempotency key, never sent again blindly.
	ErrTypeActionOutcomeUnknown = "ActionOutcomeUnknown"
	// ErrTypeActionRejected: the endpoint refused the request with a 4xx; by contract
	// nothing was applied and sending it again would be refused again.
	ErrTypeActionRejected = "ActionRejected"
	// ErrTypeTaskBadInput: the activity input is malformed; retrying cannot fix it.
	ErrTypeTaskBadInput = "TaskBadInput"
	// ErrTypeOutcomeStillUnknown: a reconcile attempt ended without a final status.
	ErrTypeOutcomeStillUnknown = "OutcomeStillUnknown"
)

// Action statuses of the endpoint contract.
const (
	ActionApplied    = "APPLIED"
	ActionFailed     = "FAILED"
	ActionNotApplied = "NOT_APPLIED"
	ActionPending    = "PENDING"
)

// TaskStore persists task transitions so recall can read task state without
// Temporal. *storage.Store implements it.
type TaskStore interface {
	RecordTaskTransition(ctx context.Context, tenantID string, t *storage.Task, tr *storage.TaskTransition) error
}

// TaskActivities are the side-effecting parts of a task workflow.
type TaskActivities struct {
	// HTTP calls the action endpoint. Prefer NewActionHTTPClient: it never reuses
	// connections, so a failure is always attributable to this request.
	HTTP *http.Client
	// ActionEndpoint is the base URL actions are POSTed to; status lookups go to
	// ActionEndpoint + "/status/<idempotency key>".
	ActionEndpoint string
	Store          TaskStore
	Log            *slog.Logger
}

// NewActionHTTPClient is an HTTP client for action calls. Keep-alives are off: on a
// reused connection Go's transport may replay a request that carries an
// Idempotency-Key, and the engine wants to decide about every resend itself.
func NewActionHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr}
}

// IdempotencyKey is the key of one step of one task: hex sha256 of
// "<tenant>/<task>/<step>". The workflow forbids "/" in the three parts, so the key
// is unambiguous, and it is the same on every send and after continue-as-new.
func IdempotencyKey(tenantID, taskID, step string) string {
	sum := sha256.Sum256([]byte(tenantID + "/" + taskID + "/" + step))
	return hex.EncodeToString(sum[:])
}

// CallActionInput is one send of one step.
type CallActionInput struct {
	TenantID       string          `json:"tenant_id"`
	TaskID         string          `json:"task_id"`
	Step           string          `json:"step"`
	Action         string          `json:"action"`
	Input          json.RawMessage `json:"input,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	// Timeout bounds the whole HTTP exchange; zero means the activity deadline.
	Timeout time.Duration `json:"timeout"`
}

// CallActionResult is the endpoint's answer: APPLIED or FAILED.
type CallActionResult struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// actionRequest is the JSON body sent to the endpoint.
type actionRequest struct {
	TenantID string          `json:"tenant_id"`
	TaskID   string          `json:"task_id"`
	Step     string          `json:"step"`
	Action   string          `json:"action"`
	Input    json.RawMessage `json:"input"`
}

func badInput(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeTaskBadInput, nil)
}

func (a *TaskActivities) logger() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

func (a *TaskActivities) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return NewActionHTTPClient()
}

func (a *TaskActivities) endpoint() (string, error) {
	ep := strings.TrimRight(a.ActionEndpoint, "/")
	if ep == "" {
		return "", badInput("no action endpoint is configured (ENGRAM_ACTION_URL)")
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", badInput("action endpoint %q is not an http(s) URL", a.ActionEndpoint)
	}
	return ep, nil
}

func checkStepInput(tenantID, taskID, step, key string) error {
	for name, v := range map[string]string{"tenant_id": tenantID, "task_id": taskID, "step": step} {
		if strings.TrimSpace(v) == "" {
			return badInput("%s is empty", name)
		}
	}
	if want := IdempotencyKey(tenantID, taskID, step); key != want {
		return badInput("idempotency key %q does not belong to step %s/%s/%s", key, tenantID, taskID, step)
	}
	return nil
}

// CallAction sends one step to the action endpoint.
//
// The distinction that matters is whether the request may have reached the endpoint.
// It is decided by httptrace.GotConn: before a connection exists (refused, DNS, dial
// timeout) nothing was sent and the error is ErrTypeActionNotSent, safe to send again.
// Once a connection exists, any failure to get a clear answer (timeout, dropped
// connection, unreadable or unexpected body, 5xx, 408/409/425/429, PENDING) is
// ErrTypeActionOutcomeUnknown: the effect may have happened, so the workflow must
// reconcile by key. Treating "connected but failed while writing" as unknown is
// deliberately conservative: it costs one status lookup, never a double effect.
//
// This activity is scheduled with a single attempt: Temporal would retry a
// start-to-close timeout (a worker killed mid-call), which would be a blind resend.
func (a *TaskActivities) CallAction(ctx context.Context, in CallActionInput) (*CallActionResult, error) {
	ep, err := a.endpoint()
	if err != nil {
		return nil, err
	}
	if err := checkStepInput(in.TenantID, in.TaskID, in.Step, in.IdempotencyKey); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Action) == "" {
		return nil, badInput("step %q has no action", in.Step)
	}
	input := in.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if !json.Valid(input) {
		return nil, badInput("input of step %q is not valid JSON", in.Step)
	}
	body, err := json.Marshal(actionRequest{TenantID: in.TenantID, TaskID: in.TaskID, Step: in.Step, Action: in.Action, Input: input})
	if err != nil {
		return nil, badInput("encode request: %v", err)
	}

	if in.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, in.Timeout)
		defer cancel()
	}
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, ep, bytes.NewReader(body))
	if err != nil {
		return nil, badInput("build request: %v", err)
	}
	// Without GetBody the transport cannot replay a request whose body was already
	// written; it returns an error instead, which lands in "outcome unknown".
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.IdempotencyKey)

	log := a.logger().With("tenant_id", in.TenantID, "task_id", in.TaskID, "step", in.Step, "idempotency_key", in.IdempotencyKey)
	unknown := func(why string, cause error) error {
		log.Warn("action outcome unknown", "reason", why, "error", cause)
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("outcome of step %q unknown: %s", in.Step, why), ErrTypeActionOutcomeUnknown,
			temporal.ApplicationErrorOptions{NonRetryable: true, Cause: cause})
	}

	resp, err := a.client().Do(req)
	if err != nil {
		if !connected.Load() {
			log.Info("action not sent", "error", err)
			return nil, temporal.NewApplicationErrorWithOptions(
				fmt.Sprintf("action endpoint unreachable, step %q not sent: %v", in.Step, err), ErrTypeActionNotSent,
				temporal.ApplicationErrorOptions{Cause: err})
		}
		return nil, unknown(fmt.Sprintf("request sent, no answer: %v", err), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, unknown(fmt.Sprintf("answer could not be read: %v", err), err)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusRequestTimeout || c == http.StatusConflict || c == http.StatusTooEarly || c == http.StatusTooManyRequests || c >= 500:
		return nil, unknown(fmt.Sprintf("endpoint answered %s", resp.Status), nil)
	case c >= 400:
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("action endpoint rejected step %q: %s: %s", in.Step, resp.Status, snippet(raw)), ErrTypeActionRejected, nil)
	case c < 200 || c >= 300:
		return nil, unknown(fmt.Sprintf("endpoint answered %s", resp.Status), nil)
	}
	var out CallActionResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, unknown(fmt.Sprintf("answer is not JSON: %v", err), err)
	}
	switch out.Status {
	case ActionApplied, ActionFailed:
		log.Info("action answered", "status", out.Status)
		return &out, nil
	default:
		return nil, unknown(fmt.Sprintf("endpoint answered status %q", out.Status), nil)
	}
}

// ReconcileInput names the step whose outcome is unknown.
type ReconcileInput struct {
	TenantID       string `json:"tenant_id"`
	TaskID         string `json:"task_id"`
	Step           string `json:"step"`
	IdempotencyKey string `json:"idempotency_key"`
	// PollInterval is the first wait between lookups; it doubles up to MaxPollInterval.
	PollInterval    time.Duration `json:"poll_interval"`
	MaxPollInterval time.Duration `json:"max_poll_interval"`
	// LookupTimeout bounds one status lookup.
	LookupTimeout time.Duration `json:"lookup_timeout"`
}

// ReconcileResult is the final outcome of the step: APPLIED, NOT_APPLIED or FAILED.
type ReconcileResult struct {
	Status  string          `json:"status"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
	Lookups int             `json:"lookups"`
}

// reconcileProgress is the heartbeat detail; a retried attempt resumes its backoff.
type reconcileProgress struct {
	Lookups    int    `json:"lookups"`
	LastStatus string `json:"last_status"`
	LastError  string `json:"last_error"`
}

type statusAnswer struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Reconcile asks the endpoint for the outcome of a step by its idempotency key until
// it is APPLIED, NOT_APPLIED or FAILED. PENDING, errors and unexpected answers are
// waited out with exponential backoff; it heartbeats all the while, so a killed
// worker's attempt times out on the heartbeat and the retry resumes from the
// recorded lookup count. It never sends the step.
func (a *TaskActivities) Reconcile(ctx context.Context, in ReconcileInput) (*ReconcileResult, error) {
	ep, err := a.endpoint()
	if err != nil {
		return nil, err
	}
	if err := checkStepInput(in.TenantID, in.TaskID, in.Step, in.IdempotencyKey); err != nil {
		return nil, err
	}
	first, maxWait := in.PollInterval, in.MaxPollInterval
	if first <= 0 {
		first = time.Second
	}
	if maxWait < first {
		maxWait = max(first, 30*time.Second)
	}
	lookupTimeout := in.LookupTimeout
	if lookupTimeout <= 0 {
		lookupTimeout = 10 * time.Second
	}
	var p reconcileProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p)
	}
	log := a.logger().With("tenant_id", in.TenantID, "task_id", in.TaskID, "step", in.Step, "idempotency_key", in.IdempotencyKey)
	statusURL := ep + "/status/" + url.PathEscape(in.IdempotencyKey)
	for {
		ans, err := a.lookup(ctx, statusURL, lookupTimeout)
		p.Lookups++
		if err == nil {
			p.LastStatus, p.LastError = ans.Status, ""
			switch ans.Status {
			case ActionApplied, ActionNotApplied, ActionFailed:
				log.Info("outcome reconciled", "status", ans.Status, "lookups", p.Lookups)
				return &ReconcileResult{Status: ans.Status, Result: ans.Result, Error: ans.Error, Lookups: p.Lookups}, nil
			case ActionPending:
			default:
				p.LastError = fmt.Sprintf("unexpected status %q", ans.Status)
			}
		} else {
			p.LastError = err.Error()
		}
		log.Info("outcome still unknown", "lookups", p.Lookups, "last_status", p.LastStatus, "last_error", p.LastError)
		activity.RecordHeartbeat(ctx, p)

		wait := first
		for i := 1; i < p.Lookups && wait < maxWait; i++ {
			wait *= 2
		}
		wait = min(wait, maxWait)
		if err := sleepHeartbeating(ctx, wait, p); err != nil {
			return nil, temporal.NewApplicationErrorWithOptions(
				fmt.Sprintf("outcome of step %q still unknown after %d lookups (last: %s %s)", in.Step, p.Lookups, p.LastStatus, p.LastError),
				ErrTypeOutcomeStillUnknown, temporal.ApplicationErrorOptions{Cause: err})
		}
	}
}

func (a *TaskActivities) lookup(ctx context.Context, statusURL string, timeout time.Duration) (*statusAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statusURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read status answer: %w", err)
	}
	// A bare 404 is not NOT_APPLIED: a wrong URL must not cause a resend. Only a
	// JSON body with a status counts.
	var ans statusAnswer
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Status == "" {
		return nil, fmt.Errorf("status lookup answered %s: %s", resp.Status, snippet(raw))
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return nil, fmt.Errorf("status lookup answered %s: %s", resp.Status, snippet(raw))
	}
	return &ans, nil
}

// sleepHeartbeating waits d, heartbeating every second so a long backoff does not
// trip the heartbeat timeout.
func sleepHeartbeating(ctx context.Context, d time.Duration, details any) error {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		activity.RecordHeartbeat(ctx, details)
	}
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// TaskRecord is the task row as of one transition.
type TaskRecord struct {
	TenantID   string           `json:"tenant_id"`
	TaskID     string           `json:"task_id"`
	UserID     string           `json:"user_id"`
	SessionID  string           `json:"session_id"`
	AgentID    string           `json:"agent_id"`
	Goal       string           `json:"goal"`
	State      memory.TaskState `json:"state"`
	Done       []string         `json:"done"`
	Todo       []string         `json:"todo"`
	NextStep   string           `json:"next_step"`
	LastError  string           `json:"last_error"`
	WorkflowID string           `json:"workflow_id"`
	CreatedAt  time.Time        `json:"created_at"`
}

// TransitionRecord is one change of state.
type TransitionRecord struct {
	Seq    int64            `json:"seq"`
	From   memory.TaskState `json:"from"`
	To     memory.TaskState `json:"to"`
	Actor  string           `json:"actor"`
	Reason string           `json:"reason"`
	Step   string           `json:"step"`
	At     time.Time        `json:"at"`
}

// RecordTransitionInput is the task as it is after the transition, and the transition.
type RecordTransitionInput struct {
	Task       TaskRecord       `json:"task"`
	Transition TransitionRecord `json:"transition"`
}

// RecordTransition writes a transition and the task row it leads to. The store is
// idempotent on (tenant, task, seq), so Temporal may retry it freely.
func (a *TaskActivities) RecordTransition(ctx context.Context, in RecordTransitionInput) error {
	if a.Store == nil {
		return badInput("no task store is configured")
	}
	t, tr := in.Task, in.Transition
	err := a.Store.RecordTaskTransition(ctx, t.TenantID, &storage.Task{
		TenantID: t.TenantID, ID: t.TaskID, UserID: t.UserID, SessionID: t.SessionID, AgentID: t.AgentID,
		Goal: t.Goal, State: t.State, Done: t.Done, Todo: t.Todo, NextStep: t.NextStep, LastError: t.LastError,
		WorkflowID: t.WorkflowID, Seq: tr.Seq, CreatedAt: t.CreatedAt, UpdatedAt: tr.At,
	}, &storage.TaskTransition{
		TenantID: t.TenantID, TaskID: t.TaskID, Seq: tr.Seq, FromState: tr.From, ToState: tr.To,
		Actor: tr.Actor, Reason: tr.Reason, Step: tr.Step, At: tr.At,
	})
	var fe memory.FieldError
	if errors.As(err, &fe) || storage.Permanent(err) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("record transition %d of task %s: %v", tr.Seq, t.TaskID, err), ErrTypeTaskBadInput, err)
	}
	if err != nil {
		return fmt.Errorf("record transition %d of task %s: %w", tr.Seq, t.TaskID, err)
	}
	return nil
}
