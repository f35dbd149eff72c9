package replay

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/actionserver"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/task"
	"github.com/engramhq/engram/write"
)

var record = flag.Bool("record", false, "run the workflows of TestRecord on the real stack and overwrite testdata/*.json with their histories")

// recorder runs every workflow kind in this process on the real stack.
type recorder struct {
	t      *testing.T
	c      client.Client
	st     *storage.Store
	srv    *actionserver.Server
	queue  string
	tenant string
}

func newRecorder(t *testing.T) *recorder {
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	srv, err := actionserver.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	// A tenant of its own: the workflow ids derive from it, and the dev server keeps
	// closed workflows, whose ids a start joins (it would save an old run).
	r := &recorder{t: t, c: c, st: st, srv: srv, queue: testenv.TaskQueue(t), tenant: "replay-" + testenv.RandomID(6)}
	w := tworker.New(c, r.queue, tworker.Options{})
	write.Register(w, &write.MemoryActivities{
		Store: st, Extractor: llm.NewRuleExtractor(), Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim),
		Schemas: schema.Builtins, Gov: governance.DefaultConfig(),
	})
	task.Register(w, &task.TaskActivities{HTTP: task.NewActionHTTPClient(), ActionEndpoint: srv.URL(), Store: st})
	lifecycle.Register(w, lifecycle.Deps{Store: st, Temporal: c, Namespace: testenv.Namespace(), Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim)})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return r
}

// save writes the closed workflow's full history to testdata/name.
func (r *recorder) save(name string, run client.WorkflowRun) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(r.t, run.Get(ctx, nil), "the recorded workflow must finish")
	h := &historypb.History{}
	it := r.c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(r.t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	require.NoError(r.t, err)
	require.NoError(r.t, os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644))
	r.t.Logf("recorded %s: %d events", name, len(h.Events))
}

func (r *recorder) update(id, name string, arg, out any) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(r.t, err, name)
	require.NoError(r.t, h.Get(ctx, out), name)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRecord records the histories TestReplay replays. It runs only with -record.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("records histories only with -record (see the package comment)")
	}
	r := newRecorder(t)
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

	// A write whose inferred preference waits for review, confirmed by the update.
	ev := memory.IngestEvent{TenantID: r.tenant, IdempotencyKey: "k-review", UserID: "u1", Schema: "travel", Content: "我上次坐了靠窗的位置，挺好", OccurredAt: at, SessionID: "s1"}
	in := write.MemoryWriteInput{Event: ev}
	run, err := write.Start(context.Background(), r.c, r.queue, in)
	require.NoError(t, err)
	var pending []write.PendingCandidate
	eventually(t, "a candidate pending review", func() bool {
		v, err := r.c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.QueryPending)
		return err == nil && v.Get(&pending) == nil && len(pending) > 0
	})
	var ack string
	r.update(run.GetID(), write.UpdateReview, write.ReviewRequest{CandidateID: pending[0].CandidateID, Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}}, &ack)
	r.save("memorywrite_review.json", run)

	// A write with nothing to review (the fast path: one workflow task of local
	// activities), and a batch of two users' turns.
	fin := write.MemoryWriteInput{Event: memory.IngestEvent{TenantID: r.tenant, IdempotencyKey: "k-fast", UserID: "u1", Schema: "travel", Content: "预算不超过8000元", OccurredAt: at.Add(time.Minute), SessionID: "s1"}}
	frun, err := write.Start(context.Background(), r.c, r.queue, fin)
	require.NoError(t, err)
	r.save("memorywrite_fast.json", frun)
	bin := write.MemoryWriteBatchInput{Events: []memory.IngestEvent{
		{TenantID: r.tenant, IdempotencyKey: "k-b1", UserID: "u1", Schema: "travel", Content: "I prefer an aisle seat", OccurredAt: at.Add(2 * time.Minute), SessionID: "s1"},
		{TenantID: r.tenant, IdempotencyKey: "k-b2", UserID: "u2", Schema: "customer_service", Content: "我的订单12345没收到", OccurredAt: at.Add(2 * time.Minute)},
		{TenantID: r.tenant, IdempotencyKey: "k-b3", UserID: "u1", Schema: "general", Content: "thanks, that helps", OccurredAt: at.Add(3 * time.Minute), SessionID: "s1"},
		{TenantID: r.tenant, IdempotencyKey: "k-b4", UserID: "u2", Schema: "travel", Content: "I don't want layovers", OccurredAt: at.Add(3 * time.Minute)},
		{TenantID: r.tenant, IdempotencyKey: "k-b5", UserID: "u1", Schema: "travel", Content: "预算不超过9000元", OccurredAt: at.Add(4 * time.Minute), SessionID: "s1"},
	}, SliceEvents: 2} // three slices, each embedded by regular Index steps, each ending its workflow task
	brun, err := write.StartBatch(context.Background(), r.c, r.queue, r.tenant, "replay-batch", bin)
	require.NoError(t, err)
	r.save("memorywritebatch_fast.json", brun)

	// A task whose step stalls past the call timeout (OUTCOME_UNKNOWN), is reconciled
	// as applied, then completed.
	cfg := task.TaskConfig{
		CallTimeout: 500 * time.Millisecond, SendRetryInterval: 200 * time.Millisecond, MaxSends: 3,
		ReconcilePollInterval: 200 * time.Millisecond, ReconcileMaxPollInterval: 500 * time.Millisecond,
		ReconcileHeartbeatTimeout: 3 * time.Second, Linger: time.Second,
	}
	tin := task.TaskInput{TenantID: r.tenant, TaskID: "trip", UserID: "u1", SessionID: "s1", AgentID: "a1", Actor: "agent:a1", Config: cfg}
	trun, err := r.c.ExecuteWorkflow(context.Background(), task.TaskStartOptions(r.queue, tin), task.TaskWorkflow, tin)
	require.NoError(t, err)
	id := trun.GetID()
	var v task.TaskView
	r.update(id, task.TaskUpdatePlan, task.PlanRequest{Actor: "agent:a1", Goal: "book a hotel in Lisbon", Steps: []task.TaskStep{
		{Name: "hotel", Action: "book_hotel", Input: json.RawMessage(`{"city":"Lisbon","nights":2}`)},
	}}, &v)
	r.update(id, task.TaskUpdateRequestConfirmation, task.RequestConfirmationRequest{Actor: "agent:a1"}, &v)
	r.update(id, task.TaskUpdateConfirm, task.ConfirmRequest{Actor: "user:u1"}, &v)
	r.srv.Script(actionserver.ApplyThenStall(3 * time.Second))
	r.srv.HoldStatus(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: task.TaskUpdateRunStep, Args: []any{task.RunStepRequest{Actor: "agent:a1"}}, WaitForStage: client.WorkflowUpdateStageAccepted})
	require.NoError(t, err)
	eventually(t, "OUTCOME_UNKNOWN", func() bool {
		q, err := r.c.QueryWorkflow(context.Background(), id, "", task.TaskQueryState)
		return err == nil && q.Get(&v) == nil && v.State == memory.TaskOutcomeUnknown
	})
	r.srv.HoldStatus(false)
	require.NoError(t, h.Get(ctx, &v))
	require.Equal(t, memory.TaskExecuting, v.State, v.LastError)
	r.update(id, task.TaskUpdateComplete, task.CompleteRequest{Actor: "agent:a1"}, &v)
	r.save("task_outcome_unknown.json", trun)

	// The user is erased: every table, the write's workflow history, the tombstone.
	ein := lifecycle.EraseSubjectInput{TenantID: r.tenant, UserID: "u1", RequestedBy: "admin", Reason: "replay recording"}
	erun, err := r.c.ExecuteWorkflow(context.Background(), lifecycle.EraseSubjectStartOptions(r.queue, ein), lifecycle.EraseSubjectWorkflowName, ein)
	require.NoError(t, err)
	r.save("erase_subject.json", erun)
}

var recordLate = flag.Bool("record-late", false, "run TestRecordLate on the real stack and write testdata/memorywrite_review_late.json")

// TestRecordLate records a write whose late statement waits for review with a
// decision that splits a revision (issue 28: Trim and Reopen travel in the
// history beside the pending item): 8000 stated at 09:10 and 09:20, then 9000 at
// 09:15 through a worker whose governance sends every new value to review. Run
// with -record-late; it writes only its own file.
func TestRecordLate(t *testing.T) {
	if !*recordLate {
		t.Skip("records only with -record-late")
	}
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	gov := governance.DefaultConfig()
	gov.ConfirmBelow = 1
	w := tworker.New(c, queue, tworker.Options{})
	write.Register(w, &write.MemoryActivities{Store: st, Extractor: llm.NewRuleExtractor(), Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim), Schemas: schema.Builtins, Gov: gov})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	r := &recorder{t: t, c: c, st: st, queue: queue, tenant: "replay"}
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	ev := func(key, text string, m int) write.MemoryWriteInput {
		return write.MemoryWriteInput{Event: memory.IngestEvent{TenantID: r.tenant, IdempotencyKey: key, UserID: "u1", Schema: "travel", Content: text, OccurredAt: at.Add(time.Duration(m) * time.Minute), SessionID: "s1"}}
	}
	for i, in := range []write.MemoryWriteInput{ev("k-late-1", "预算不超过8000元", 10), ev("k-late-2", "预算不超过8000元", 20)} {
		run, err := write.Start(context.Background(), c, queue, in)
		require.NoError(t, err)
		var pending []write.PendingCandidate
		if i == 0 { // the first value waits for review too
			eventually(t, "the first value pending review", func() bool {
				v, err := c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.QueryPending)
				return err == nil && v.Get(&pending) == nil && len(pending) > 0
			})
			var ack string
			r.update(run.GetID(), write.UpdateReview, write.ReviewRequest{CandidateID: pending[0].CandidateID, Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}}, &ack)
		}
		require.NoError(t, run.Get(context.Background(), nil))
	}
	run, err := write.Start(context.Background(), c, queue, ev("k-late-3", "预算不超过9000元", 15))
	require.NoError(t, err)
	var pending []write.PendingCandidate
	eventually(t, "the late statement pending review", func() bool {
		v, err := c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.QueryPending)
		return err == nil && v.Get(&pending) == nil && len(pending) > 0
	})
	var ack string
	r.update(run.GetID(), write.UpdateReview, write.ReviewRequest{CandidateID: pending[0].CandidateID, Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}}, &ack)
	r.save("memorywrite_review_late.json", run)
	h, err := st.FactHistory(context.Background(), r.tenant, "USER:u1|user|budget")
	require.NoError(t, err)
	var got []string
	for _, f := range h {
		got = append(got, f.Object+" "+string(f.Status))
	}
	require.Equal(t, []string{"8000 CNY SUPERSEDED", "9000 CNY SUPERSEDED", "8000 CNY ACTIVE"}, got, "the late statement split the revision")
}
