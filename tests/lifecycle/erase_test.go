package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// seeded is what a subject has in every table before the erasure.
type seeded struct {
	writeIDs []string // MemoryWrite workflow ids
}

// seedUser writes a user's memories through the write path and adds the rows
// other components write (session buffer, task, access log, API key).
func (e *env) seedUser(tenant, user string, shared bool) seeded {
	ctx := context.Background()
	var s seeded
	for i, text := range []struct{ schema, text string }{
		{"customer_service", "我的订单12345没收到"},
		{"customer_service", "我那个没到的订单怎么样了"},
		{"travel", "预算不超过8000元"},
		{"travel", "我以后尽量都坐直飞"},
	} {
		ev := writetest.Event(tenant, user, text.schema, text.text, base.Add(time.Duration(i)*time.Hour))
		r := e.write(ev)
		require.Equal(e.t, write.WriteCommitted, r.Status, "seed write %d: %+v", i, r)
		s.writeIDs = append(s.writeIDs, write.MemoryWriteWorkflowID(tenant, ev.IdempotencyKey))
	}
	_, err := e.st.DB().NewRaw(`INSERT INTO sessions (tenant_id, id, user_id, recent, summary, turn_count) VALUES (?, ?, ?, '["我的订单12345没收到"]', 'asked about order 12345', 1)
		ON CONFLICT (tenant_id, id) DO UPDATE SET user_id = EXCLUDED.user_id`, tenant, "s-"+user, user).Exec(ctx)
	require.NoError(e.t, err)
	require.NoError(e.t, e.st.RecordTaskTransition(ctx, tenant,
		&storage.Task{ID: "task-" + user, UserID: user, Goal: "refund order 12345", State: memory.TaskCreated},
		&storage.TaskTransition{Seq: 1, ToState: memory.TaskCreated, Actor: "agent:a1"}))
	facts := e.ids("SELECT id::text FROM facts WHERE tenant_id = ? AND user_id = ?", tenant, user)
	evs := e.ids("SELECT id::text FROM evidence WHERE tenant_id = ? AND user_id = ?", tenant, user)
	require.NotEmpty(e.t, facts)
	require.NoError(e.t, e.st.LogAccess(ctx, tenant, "agent:support-bot", "support", user, "订单", facts, evs))
	_, err = e.st.DB().NewRaw(`INSERT INTO api_keys (tenant_id, principal, roles, user_id, prefix, key_hash) VALUES (?, ?, ARRAY['agent'], ?, ?, ?)`, tenant, "key-of-"+user, user, "ek_"+testenv.RandomID(12), "hash-"+user+"-"+testenv.RandomID(6)).Exec(ctx)
	require.NoError(e.t, err)
	if shared {
		// A tenant-wide fact only this user stated: nobody else supports it.
		f, err := e.st.WriteFact(ctx, tenant, &storage.Fact{MemoryKey: "shared/only/" + user, Scope: memory.ScopeTenant, MemoryType: memory.TypeFact,
			Subject: "team", Predicate: "uses_tool", Object: "Flink", Content: "the team uses Flink (said by one user)", Confidence: 0.9, ValidFrom: base}, storage.WriteCurrent, "flink")
		require.NoError(e.t, err)
		require.NoError(e.t, storage.LinkFactEvidence(ctx, e.st.DB(), tenant, f.ID, evs[0], memory.RelSupport))
	}
	return s
}

// linkShared adds a tenant-wide fact supported by both users: it stays when one of
// them is erased, without that user's link.
func (e *env) linkShared(tenant, u1, u2 string) string {
	ctx := context.Background()
	f, err := e.st.WriteFact(ctx, tenant, &storage.Fact{MemoryKey: "shared/both", Scope: memory.ScopeTenant, MemoryType: memory.TypeFact,
		Subject: "team", Predicate: "uses_tool", Object: "Kafka", Content: "the team uses Kafka", Confidence: 0.9, ValidFrom: base}, storage.WriteCurrent, "kafka")
	require.NoError(e.t, err)
	for _, u := range []string{u1, u2} {
		ev := e.ids("SELECT id::text FROM evidence WHERE tenant_id = ? AND user_id = ? LIMIT 1", tenant, u)
		require.NoError(e.t, storage.LinkFactEvidence(ctx, e.st.DB(), tenant, f.ID, ev[0], memory.RelSupport))
	}
	return f.ID
}

// needles are the strings that identify a subject's rows: the user id and the ids
// of their facts, evidence, candidates and events (link tables carry only ids).
func (e *env) needles(tenant, user string) []string {
	n := []string{user}
	for _, q := range []string{
		"SELECT id::text FROM facts WHERE tenant_id = ? AND user_id = ?",
		"SELECT id::text FROM evidence WHERE tenant_id = ? AND user_id = ?",
		"SELECT id::text FROM candidates WHERE tenant_id = ? AND user_id = ?",
		"SELECT id::text FROM events WHERE tenant_id = ? AND user_id = ?",
	} {
		n = append(n, e.ids(q, tenant, user)...)
	}
	return n
}

func (e *env) subjectWorkflows(subj storage.ErasureSubject) int {
	return len(e.subjectExecutions(subj))
}

func (e *env) subjectExecutions(subj storage.ErasureSubject) []*workflowpb.WorkflowExecutionInfo {
	resp, err := e.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: testenv.Namespace(), Query: lifecycle.SubjectVisibilityQuery(subj)})
	require.NoError(e.t, err)
	return resp.Executions
}

// subjectWorkflowsLeft names the subject's workflows visibility still lists (id,
// type, status, start and close): what a wait for none of them says when it runs
// out.
func (e *env) subjectWorkflowsLeft(subj storage.ErasureSubject) string {
	var out []string
	for _, x := range e.subjectExecutions(subj) {
		closed := "-"
		if x.CloseTime != nil {
			closed = x.CloseTime.AsTime().UTC().Format(time.RFC3339Nano)
		}
		out = append(out, fmt.Sprintf("%s (%s, %s, started %s, closed %s)", x.Execution.GetWorkflowId(), x.Type.GetName(), x.Status,
			x.StartTime.AsTime().UTC().Format(time.RFC3339Nano), closed))
	}
	return strings.Join(out, "; ")
}

// The worker is SIGKILLed in the middle of an erasure (a step deleting in small,
// throttled batches); a new worker resumes it and nothing of the user is left in
// any table or in Temporal, while the other user of the tenant and the same user id
// in another tenant are untouched. New writes of the user are refused while it runs.
func TestEraseUserSurvivesWorkerKill(t *testing.T) {
	e := newEnv(t)
	bin := testenv.Build(t, "./tests/lifecycle/lifecycleworker")
	w1 := testenv.StartProcess(t, testenv.WorkerEnv(t, e.dsn, e.queue), bin)

	tA, tB := "ta-"+testenv.RandomID(6), "tb-"+testenv.RandomID(6)
	victim, other := "victim-"+testenv.RandomID(8), "other-"+testenv.RandomID(8)
	sv := e.seedUser(tA, victim, true)
	e.seedUser(tA, other, false)
	e.seedUser(tB, victim, false) // the same user id in another tenant is another person
	sharedBoth := e.linkShared(tA, victim, other)

	victimNeedles := e.needles(tA, victim)
	otherBefore := e.rowsMentioning(tA, e.needles(tA, other))
	tBBefore := e.rowsMentioning(tB, e.needles(tB, victim))
	require.NotEmpty(t, e.rowsMentioning(tA, victimNeedles))
	// Single writes start with no search attributes: the erasure finds them by the
	// workflow ids on their events in Postgres.
	assert.Zero(t, e.subjectWorkflows(storage.ErasureSubject{TenantID: tA, UserID: victim}))

	in := lifecycle.EraseSubjectInput{TenantID: tA, UserID: victim, RequestedBy: "dpo@example.com", Reason: "GDPR art. 17 request #42",
		BatchSize: 1, Throttle: 400 * time.Millisecond, HeartbeatTimeout: 3 * time.Second}
	subj := in.Subject()
	run := e.erase(in)

	// While it runs, the write path refuses the user.
	testenv.Eventually(t, 20*time.Second, "tombstone RUNNING", func() bool {
		busy, err := e.st.ErasureInProgress(context.Background(), tA, victim)
		return err == nil && busy
	})
	// (Before the first Temporal step is done, a new write may instead be
	// terminated by it; wait so the refusal comes from the write path itself.)
	testenv.Eventually(t, 30*time.Second, "first Temporal step done", func() bool {
		ts, err := e.st.GetTombstone(context.Background(), subj)
		return err == nil && contains(ts.StepsDone, lifecycle.EraseStepTemporal)
	})
	refused := e.startWrite(write.MemoryWriteInput{Event: writetest.Event(tA, victim, "travel", "预算不超过9000元", base.Add(48*time.Hour))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := refused.Get(ctx, nil)
	cancel()
	require.Error(t, err)
	assert.Contains(t, err.Error(), write.ErrTypeErasureInProgress)
	// Its history holds the event's content and its event may be deleted before the
	// last sweep: the refused write names its subject for that sweep.
	testenv.Eventually(t, 30*time.Second, "the refused write visible by its subject", func() bool { return e.subjectWorkflows(subj) >= 1 })
	sv.writeIDs = append(sv.writeIDs, refused.GetID())
	// Others still write.
	assert.Equal(t, write.WriteCommitted, e.write(writetest.Event(tA, other, "travel", "我以后尽量都坐直飞", base.Add(50*time.Hour))).Status)
	otherBefore = e.rowsMentioning(tA, e.needles(tA, other))

	// Kill the worker in the middle of a step: facts are done, evidence links are
	// being deleted one per batch.
	testenv.Eventually(t, 60*time.Second, "erasure in the middle of its steps", func() bool {
		ts, err := e.st.GetTombstone(context.Background(), subj)
		return err == nil && contains(ts.StepsDone, "facts")
	})
	w1.Kill()
	ts, err := e.st.GetTombstone(context.Background(), subj)
	require.NoError(t, err)
	require.Equal(t, storage.ErasureRunning, ts.Status)
	t.Logf("killed the worker after steps %v", ts.StepsDone)
	require.NotEmpty(t, e.rowsMentioning(tA, victimNeedles), "the kill came before the end")

	testenv.StartProcess(t, testenv.WorkerEnv(t, e.dsn, e.queue), bin)
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res lifecycle.EraseSubjectResult
	require.NoError(t, run.Get(ctx, &res))
	assert.Equal(t, storage.ErasureDone, res.Status)
	t.Logf("tombstone counts: %s", storage.MarshalCounts(res.Counts))
	for _, step := range []string{"facts", "evidence", "events", "candidates", "entities", "sessions", "tasks", "access_log", "api_keys", "temporal"} {
		assert.Greater(t, res.Counts[step], int64(0), "count of %s", step)
	}

	// Nothing of theirs in any table but the tombstone.
	left := e.rowsMentioning(tA, victimNeedles)
	assert.Equal(t, map[string]int{"tombstones": 1, "erasure_requests": 1}, left)
	for _, step := range storage.ErasureSteps {
		n, err := e.st.CountSubjectRows(context.Background(), subj, step)
		require.NoError(t, err)
		assert.Zero(t, n, step)
	}
	// The other user and the other tenant are untouched; the shared fact both
	// supported stays, with the other user's evidence only.
	otherAfter := e.rowsMentioning(tA, e.needles(tA, other))
	for tb, n := range otherBefore {
		if tb == "entities" {
			// Order 12345 was created by the victim and is referenced by the other
			// user's edges: it passed to the other user.
			assert.GreaterOrEqual(t, otherAfter[tb], n, tb)
			continue
		}
		assert.Equal(t, n, otherAfter[tb], tb)
	}
	assert.Equal(t, tBBefore, e.rowsMentioning(tB, e.needles(tB, victim)))
	f, err := e.st.GetFact(context.Background(), tA, sharedBoth)
	require.NoError(t, err)
	assert.Equal(t, memory.FactActive, f.Status)
	links, err := e.st.FactEvidenceIDs(context.Background(), tA, sharedBoth)
	require.NoError(t, err)
	assert.Len(t, links, 1)
	// The shared fact only the victim supported is gone.
	assert.Empty(t, e.ids("SELECT id::text FROM facts WHERE tenant_id = ? AND memory_key = ?", tA, "shared/only/"+victim))

	// Temporal histories of their writes are gone once the erasure is DONE: its
	// Temporal steps wait for Temporal's asynchronous deletion.
	assert.Empty(t, e.subjectWorkflowsLeft(subj), "workflows of the subject in visibility")
	for _, id := range sv.writeIDs {
		_, err := e.c.DescribeWorkflowExecution(context.Background(), id, "")
		var nf *serviceerror.NotFound
		assert.ErrorAs(t, err, &nf, "history of %s", id)
	}
	// Once done, the user can start again from nothing.
	assert.Equal(t, write.WriteCommitted, e.write(writetest.Event(tA, victim, "travel", "我以后尽量都坐直飞", base.Add(72*time.Hour))).Status)
}

type fakeKeyword struct{ calls atomic.Int64 }

func (f *fakeKeyword) EraseSubject(_ context.Context, tenantID, userID string) (int64, error) {
	f.calls.Add(1)
	return 3, nil
}

// An erasure that starts the moment a user's writes have closed ends DONE only once
// Temporal has deleted their histories. Temporal deletes a workflow that closed
// moments ago only after its queues have checkpointed past the close (then retries
// 3 s x 1.5^n apart); the erasure's Temporal steps wait for that rather than report
// DONE over histories that are still there (which failed 2 of 4 CI runs).
func TestErasureDoneMeansHistoriesGone(t *testing.T) {
	e := newEnv(t)
	e.inProcessWorker(lifecycle.Deps{Keyword: &fakeKeyword{}})
	tenant := "tg-" + testenv.RandomID(6)
	sv := e.seedUser(tenant, "u1", false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res lifecycle.EraseSubjectResult
	require.NoError(t, e.erase(lifecycle.EraseSubjectInput{TenantID: tenant, UserID: "u1", RequestedBy: "admin"}).Get(ctx, &res))
	require.Equal(t, storage.ErasureDone, res.Status)
	assert.Equal(t, int64(len(sv.writeIDs)), res.Counts[lifecycle.EraseStepTemporal])
	for _, id := range sv.writeIDs {
		_, err := e.c.DescribeWorkflowExecution(context.Background(), id, "")
		var nf *serviceerror.NotFound
		assert.ErrorAs(t, err, &nf, "history of %s once the erasure is DONE", id)
	}
}

// A whole tenant is erased; another tenant is untouched; running it again is a no-op
// that still ends DONE; the external keyword index is asked to erase the tenant.
func TestEraseTenant(t *testing.T) {
	e := newEnv(t)
	kw := &fakeKeyword{}
	e.inProcessWorker(lifecycle.Deps{Keyword: kw})
	tA, tB := "ta-"+testenv.RandomID(6), "tb-"+testenv.RandomID(6)
	e.seedUser(tA, "u1", true)
	e.seedUser(tA, "u2", false)
	e.seedUser(tB, "u1", false)
	tBBefore := e.rowsMentioning(tB, []string{"u1"})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res lifecycle.EraseSubjectResult
	require.NoError(t, e.erase(lifecycle.EraseSubjectInput{TenantID: tA, RequestedBy: "admin"}).Get(ctx, &res))
	assert.Equal(t, storage.ErasureDone, res.Status)
	assert.Equal(t, int64(3), res.Counts[lifecycle.EraseStepKeywordIndex])
	assert.Equal(t, int64(1), kw.calls.Load())
	for _, tb := range e.tables() {
		if !e.hasColumn(tb, "tenant_id") {
			continue
		}
		var n int
		require.NoError(t, e.st.DB().NewRaw("SELECT count(*) FROM "+tb+" WHERE tenant_id = ?", tA).Scan(ctx, &n))
		if tb == "tombstones" || tb == "erasure_requests" {
			assert.Equal(t, 1, n, tb)
		} else {
			assert.Zero(t, n, tb)
		}
	}
	assert.Equal(t, tBBefore, e.rowsMentioning(tB, []string{"u1"}))
	assert.Empty(t, e.subjectWorkflowsLeft(storage.ErasureSubject{TenantID: tA}), "workflows of the tenant in visibility once DONE")

	// Asking again (a retried request) finishes at once with nothing to delete.
	var again lifecycle.EraseSubjectResult
	require.NoError(t, e.erase(lifecycle.EraseSubjectInput{TenantID: tA, RequestedBy: "admin"}).Get(ctx, &again))
	assert.Equal(t, storage.ErasureDone, again.Status)
	assert.Zero(t, again.Counts["facts"])
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// A user named 张三 (an id Temporal's headers cannot carry as it is) and a user
// with a 1,000-character id are erased like any other: the erasure's workflow id
// is built from a hash of such ids, and nothing of theirs is left but the
// tombstone.
func TestEraseNonASCIIAndLongUserIDs(t *testing.T) {
	e := newEnv(t)
	e.inProcessWorker(lifecycle.Deps{Keyword: &fakeKeyword{}})
	tenant := "tu-" + testenv.RandomID(6)
	long := strings.Repeat("x", 1000)
	for _, user := range []string{"张三", "José 🙂", long} {
		e.seedUser(tenant, user, false)
		needles := e.needles(tenant, user)
		require.NotEmpty(t, e.rowsMentioning(tenant, needles))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var res lifecycle.EraseSubjectResult
		require.NoError(t, e.erase(lifecycle.EraseSubjectInput{TenantID: tenant, UserID: user, RequestedBy: "admin"}).Get(ctx, &res), "erase %.20q", user)
		cancel()
		assert.Equal(t, storage.ErasureDone, res.Status)
		assert.Equal(t, map[string]int{"tombstones": 1, "erasure_requests": 1}, e.rowsMentioning(tenant, needles), "%.20q", user)
		for _, step := range storage.ErasureSteps {
			n, err := e.st.CountSubjectRows(context.Background(), storage.ErasureSubject{TenantID: tenant, UserID: user}, step)
			require.NoError(t, err)
			assert.Zero(t, n, "%.20q: %s", user, step)
		}
	}
	assert.Equal(t, "erase/t/h-", lifecycle.EraseSubjectWorkflowID("t", "张三")[:len("erase/t/h-")])
	assert.Equal(t, "erase/t/u1", lifecycle.EraseSubjectWorkflowID("t", "u1"), "ids that worked keep their workflow")
}

// Erasing a user twice keeps both requests (issue 50: the second overwrote the
// first's who and why): two erasure_requests rows, each with its requester, reason
// and counts, newest first; the tombstone is the subject's state, DONE.
func TestEraseKeepsEveryRequest(t *testing.T) {
	e := newEnv(t)
	e.inProcessWorker(lifecycle.Deps{Keyword: &fakeKeyword{}})
	tenant, user := "tr-"+testenv.RandomID(6), "u-twice"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, who := range []struct{ by, reason string }{{"dpo@example.com", "GDPR art. 17 request #42"}, {"support-lead", "the user asked again (#43)"}} {
		e.seedUser(tenant, user, false)
		var res lifecycle.EraseSubjectResult
		require.NoError(t, e.erase(lifecycle.EraseSubjectInput{TenantID: tenant, UserID: user, RequestedBy: who.by, Reason: who.reason}).Get(ctx, &res))
		require.Equal(t, storage.ErasureDone, res.Status)
	}
	reqs, err := e.st.ListErasureRequests(ctx, tenant)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	for i, want := range []struct{ by, reason string }{{"support-lead", "the user asked again (#43)"}, {"dpo@example.com", "GDPR art. 17 request #42"}} {
		r := reqs[i]
		assert.Equal(t, want.by, r.RequestedBy, "request %d", i)
		assert.Equal(t, want.reason, r.Reason, "request %d", i)
		assert.Equal(t, storage.SubjectUser, r.SubjectType)
		assert.Equal(t, user, r.SubjectID)
		assert.Equal(t, storage.ErasureDone, r.Status, "request %d", i)
		assert.NotNil(t, r.FinishedAt, "request %d", i)
		assert.Greater(t, r.Counts["facts"], int64(0), "request %d removed the facts seeded before it", i)
		assert.NotEmpty(t, r.RunID)
	}
	assert.NotEqual(t, reqs[0].RunID, reqs[1].RunID)
	assert.True(t, reqs[1].RequestedAt.Before(reqs[0].RequestedAt))
	ts, err := e.st.GetTombstone(ctx, storage.ErasureSubject{TenantID: tenant, UserID: user})
	require.NoError(t, err)
	assert.Equal(t, storage.ErasureDone, ts.Status)
	assert.Equal(t, "support-lead", ts.RequestedBy)
	assert.Equal(t, map[string]int{"tombstones": 1, "erasure_requests": 2}, e.rowsMentioning(tenant, e.needles(tenant, user)))
}
