package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/engramhq/engram/internal/actionserver"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newActionServer(t *testing.T) *actionserver.Server {
	t.Helper()
	srv, err := actionserver.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

func activityEnv(t *testing.T, a *TaskActivities) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet()))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return env
}

func callInput(step string) CallActionInput {
	return CallActionInput{
		TenantID: "acme", TaskID: "t1", Step: step, Action: "book_hotel",
		Input: json.RawMessage(`{"city":"Lisbon"}`), IdempotencyKey: IdempotencyKey("acme", "t1", step),
		Timeout: 2 * time.Second,
	}
}

func call(t *testing.T, a *TaskActivities, in CallActionInput) (*CallActionResult, error) {
	t.Helper()
	v, err := activityEnv(t, a).ExecuteActivity(a.CallAction, in)
	if err != nil {
		return nil, err
	}
	var res CallActionResult
	require.NoError(t, v.Get(&res))
	return &res, nil
}

func reconcileIn(step string) ReconcileInput {
	return ReconcileInput{
		TenantID: "acme", TaskID: "t1", Step: step, IdempotencyKey: IdempotencyKey("acme", "t1", step),
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond, LookupTimeout: time.Second,
	}
}

func reconcile(t *testing.T, env *testsuite.TestActivityEnvironment, a *TaskActivities, in ReconcileInput) *ReconcileResult {
	t.Helper()
	v, err := env.ExecuteActivity(a.Reconcile, in)
	require.NoError(t, err)
	var res ReconcileResult
	require.NoError(t, v.Get(&res))
	return &res
}

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func TestIdempotencyKey(t *testing.T) {
	sum := sha256.Sum256([]byte("acme/t1/hotel"))
	require.Equal(t, hex.EncodeToString(sum[:]), IdempotencyKey("acme", "t1", "hotel"))
	require.NotEqual(t, IdempotencyKey("acme", "t1", "hotel"), IdempotencyKey("acme", "t2", "hotel"))
}

func TestCallActionApplied(t *testing.T) {
	srv := newActionServer(t)
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	in := callInput("hotel")
	res, err := call(t, a, in)
	require.NoError(t, err)
	require.Equal(t, ActionApplied, res.Status)
	require.Contains(t, string(res.Result), "hotel-1")
	reqs := srv.RequestsFor(in.IdempotencyKey)
	require.Len(t, reqs, 1)
	require.Equal(t, "acme", reqs[0].TenantID)
	require.Equal(t, "t1", reqs[0].TaskID)
	require.Equal(t, "hotel", reqs[0].Step)
	require.Equal(t, "book_hotel", reqs[0].Action)
	require.JSONEq(t, `{"city":"Lisbon"}`, string(reqs[0].Input))
	require.Equal(t, 1, srv.Applied(in.IdempotencyKey))
}

func TestCallActionFailed(t *testing.T) {
	srv := newActionServer(t)
	srv.Script(actionserver.Fail("card declined"))
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	res, err := call(t, a, callInput("pay"))
	require.NoError(t, err)
	require.Equal(t, ActionFailed, res.Status)
	require.Equal(t, "card declined", res.Error)
	require.Equal(t, 0, srv.TotalApplied())
	// The status lookup reports it too.
	rec := reconcile(t, activityEnv(t, a), a, reconcileIn("pay"))
	require.Equal(t, ActionFailed, rec.Status)
	require.Equal(t, "card declined", rec.Error)
}

// The endpoint applies the effect and then stalls past the client's timeout: the
// caller cannot know it was applied, so it must not resend; the status lookup finds
// it APPLIED, and the effect happened once.
func TestCallActionStallThenReconcileApplied(t *testing.T) {
	srv := newActionServer(t)
	srv.Dedup = false // any resend would show up as a second effect
	srv.Script(actionserver.ApplyThenStall(5 * time.Second))
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	in := callInput("hotel")
	in.Timeout = 300 * time.Millisecond

	_, err := call(t, a, in)
	require.Error(t, err)
	require.Equal(t, ErrTypeActionOutcomeUnknown, errType(err), "got %v", err)
	require.Contains(t, err.Error(), "request sent, no answer")

	rec := reconcile(t, activityEnv(t, a), a, reconcileIn("hotel"))
	require.Equal(t, ActionApplied, rec.Status)
	require.Contains(t, string(rec.Result), "hotel-1")
	require.Equal(t, 1, srv.Applied(in.IdempotencyKey))
	require.Len(t, srv.RequestsFor(in.IdempotencyKey), 1)
}

// The endpoint drops the request without applying it: NOT_APPLIED, and the resend
// with the same key applies it once.
func TestCallActionDroppedThenReconcileNotApplied(t *testing.T) {
	srv := newActionServer(t)
	srv.Dedup = false
	srv.Script(actionserver.Drop)
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	in := callInput("hotel")

	_, err := call(t, a, in)
	require.Equal(t, ErrTypeActionOutcomeUnknown, errType(err), "got %v", err)
	require.Equal(t, 0, srv.Applied(in.IdempotencyKey))

	rec := reconcile(t, activityEnv(t, a), a, reconcileIn("hotel"))
	require.Equal(t, ActionNotApplied, rec.Status)

	res, err := call(t, a, in)
	require.NoError(t, err)
	require.Equal(t, ActionApplied, res.Status)
	require.Equal(t, 1, srv.Applied(in.IdempotencyKey))
	reqs := srv.RequestsFor(in.IdempotencyKey)
	require.Len(t, reqs, 2)
	require.Equal(t, "DROPPED", reqs[0].Outcome)
	require.Equal(t, "APPLIED", reqs[1].Outcome)
}

// Connection refused (the dial fails): the request never left, so it is a plain
// retryable error and nothing reaches the endpoint.
func TestCallActionEndpointDownIsNotSent(t *testing.T) {
	srv := newActionServer(t)
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	in := callInput("hotel")
	srv.Down()
	_, err := call(t, a, in)
	require.Equal(t, ErrTypeActionNotSent, errType(err), "got %v", err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.False(t, appErr.NonRetryable())
	// The dial failed: refused (the server holds its port while down, so no other
	// test's listener can answer there); nothing was sent.
	require.Contains(t, err.Error(), "dial tcp")
	require.Empty(t, srv.Requests())

	require.NoError(t, srv.Up())
	res, err := call(t, a, in)
	require.NoError(t, err)
	require.Equal(t, ActionApplied, res.Status)
	require.Equal(t, 1, srv.Applied(in.IdempotencyKey))
}

func TestCallActionAnswerClassification(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string // error type, or "" for a result
	}{
		{"applied", 200, `{"status":"APPLIED","result":{"id":1}}`, ""},
		{"failed", 200, `{"status":"FAILED","error":"no"}`, ""},
		{"pending", 202, `{"status":"PENDING"}`, ErrTypeActionOutcomeUnknown},
		{"not json", 200, `<html>`, ErrTypeActionOutcomeUnknown},
		{"unknown status", 200, `{"status":"MAYBE"}`, ErrTypeActionOutcomeUnknown},
		{"server error", 500, `boom`, ErrTypeActionOutcomeUnknown},
		{"bad gateway", 502, `upstream`, ErrTypeActionOutcomeUnknown},
		{"conflict (key in use)", 409, `busy`, ErrTypeActionOutcomeUnknown},
		{"too many requests", 429, `slow down`, ErrTypeActionOutcomeUnknown},
		{"bad request", 400, `missing field`, ErrTypeActionRejected},
		{"unprocessable", 422, `bad city`, ErrTypeActionRejected},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL, Log: quiet()}
			res, err := call(t, a, callInput("hotel"))
			if c.want == "" {
				require.NoError(t, err)
				require.NotEmpty(t, res.Status)
				return
			}
			require.Equal(t, c.want, errType(err), "got %v", err)
		})
	}
}

func TestCallActionBadInput(t *testing.T) {
	srv := newActionServer(t)
	good := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	wrongKey := callInput("hotel")
	wrongKey.IdempotencyKey = IdempotencyKey("acme", "t1", "pay")
	noAction := callInput("hotel")
	noAction.Action = ""
	noTenant := callInput("hotel")
	noTenant.TenantID = ""
	for name, c := range map[string]struct {
		a  *TaskActivities
		in CallActionInput
	}{
		"wrong key":    {good, wrongKey},
		"no action":    {good, noAction},
		"no tenant":    {good, noTenant},
		"no endpoint":  {&TaskActivities{Log: quiet()}, callInput("hotel")},
		"bad endpoint": {&TaskActivities{ActionEndpoint: "ftp://x", Log: quiet()}, callInput("hotel")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := call(t, c.a, c.in)
			require.Equal(t, ErrTypeTaskBadInput, errType(err), "got %v", err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr))
			require.True(t, appErr.NonRetryable())
		})
	}
	require.Empty(t, srv.Requests())
}

// Reconcile waits out an endpoint that is down and then PENDING, without ever
// sending the step.
func TestReconcileWaitsUntilKnown(t *testing.T) {
	srv := newActionServer(t)
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	srv.DownFor(400 * time.Millisecond)
	start := time.Now()
	rec := reconcile(t, activityEnv(t, a), a, reconcileIn("hotel"))
	require.Equal(t, ActionNotApplied, rec.Status)
	require.GreaterOrEqual(t, time.Since(start), 350*time.Millisecond)
	require.Greater(t, rec.Lookups, 1)
	require.Empty(t, srv.Requests(), "reconcile never sends the step")
}

func TestReconcilePendingAndBare404(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/actions/status/"+IdempotencyKey("acme", "t1", "hotel"), r.URL.Path)
		switch n.Add(1) {
		case 1:
			http.NotFound(w, r) // a wrong route must not read as NOT_APPLIED
		case 2, 3:
			_, _ = w.Write([]byte(`{"status":"PENDING"}`))
		default:
			_, _ = w.Write([]byte(`{"status":"APPLIED","result":{"id":7}}`))
		}
	}))
	defer srv.Close()
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL + "/actions", Log: quiet()}
	rec := reconcile(t, activityEnv(t, a), a, reconcileIn("hotel"))
	require.Equal(t, ActionApplied, rec.Status)
	require.Equal(t, 4, rec.Lookups)
	require.JSONEq(t, `{"id":7}`, string(rec.Result))
}

func TestReconcileResumesFromHeartbeat(t *testing.T) {
	srv := newActionServer(t)
	a := &TaskActivities{HTTP: NewActionHTTPClient(), ActionEndpoint: srv.URL(), Log: quiet()}
	env := activityEnv(t, a)
	env.SetHeartbeatDetails(reconcileProgress{Lookups: 7, LastStatus: ActionPending})
	rec := reconcile(t, env, a, reconcileIn("hotel"))
	require.Equal(t, ActionNotApplied, rec.Status)
	require.Equal(t, 8, rec.Lookups)
}

type fakeStore struct {
	tasks       []storage.Task
	transitions []storage.TaskTransition
	err         error
}

func (f *fakeStore) RecordTaskTransition(_ context.Context, tenantID string, t *storage.Task, tr *storage.TaskTransition) error {
	if f.err != nil {
		return f.err
	}
	if tenantID != t.TenantID {
		return errors.New("tenant mismatch")
	}
	f.tasks = append(f.tasks, *t)
	f.transitions = append(f.transitions, *tr)
	return nil
}

func TestRecordTransition(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	in := RecordTransitionInput{
		Task: TaskRecord{TenantID: "acme", TaskID: "t1", UserID: "u1", SessionID: "s1", AgentID: "a1", Goal: "trip",
			State: memory.TaskExecuting, Done: []string{"hotel"}, Todo: []string{"pay"}, NextStep: "pay",
			WorkflowID: "task/acme/t1", CreatedAt: at.Add(-time.Hour)},
		Transition: TransitionRecord{Seq: 5, From: memory.TaskExecuting, To: memory.TaskExecuting, Actor: "agent:a1", Reason: "step applied", Step: "hotel", At: at},
	}
	f := &fakeStore{}
	a := &TaskActivities{Store: f, Log: quiet()}
	_, err := activityEnv(t, a).ExecuteActivity(a.RecordTransition, in)
	require.NoError(t, err)
	require.Len(t, f.tasks, 1)
	got := f.tasks[0]
	require.Equal(t, "t1", got.ID)
	require.Equal(t, int64(5), got.Seq)
	require.Equal(t, memory.TaskExecuting, got.State)
	require.Equal(t, []string{"hotel"}, got.Done)
	require.Equal(t, "pay", got.NextStep)
	require.Equal(t, "task/acme/t1", got.WorkflowID)
	tr := f.transitions[0]
	require.Equal(t, int64(5), tr.Seq)
	require.Equal(t, "hotel", tr.Step)
	require.Equal(t, "agent:a1", tr.Actor)
	require.True(t, at.Equal(tr.At))

	f.err = memory.FieldError{Field: "state", Problem: "unknown"}
	_, err = activityEnv(t, a).ExecuteActivity(a.RecordTransition, in)
	require.Equal(t, ErrTypeTaskBadInput, errType(err))

	f.err = errors.New("connection reset")
	_, err = activityEnv(t, a).ExecuteActivity(a.RecordTransition, in)
	require.Error(t, err)
	require.NotEqual(t, ErrTypeTaskBadInput, errType(err))
}
