package writepath

// Crash safety: the worker is the real `engram worker` binary in a child process. It
// is SIGKILLed while a write is in flight, a new worker process is started, and the
// write completes with exactly one fact revision.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/engramhq/engram/internal/fakeopenai"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/write"
)

func timerStarted(h []*historypb.HistoryEvent) bool {
	for _, ev := range h {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			return true
		}
	}
	return false
}

// workflowTaskIdentities lists the workers that completed workflow tasks of a run.
func workflowTaskIdentities(h []*historypb.HistoryEvent) map[string]bool {
	out := map[string]bool{}
	for _, ev := range h {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			out[ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity()] = true
		}
	}
	return out
}

// checkOneWrite asserts that a crashed and resumed write left exactly one event, one
// candidate row, one fact revision and one evidence link.
func (e *env) checkOneWrite(tenant string, res write.MemoryWriteResult) {
	t := e.t
	t.Helper()
	require.Equal(t, write.WriteCommitted, res.Status, res.Reason)
	require.Len(t, res.Results, 1)
	assert.Equal(t, memory.CandidateAccepted, res.Results[0].Status)
	key := res.Results[0].MemoryKey
	require.NotEmpty(t, key)
	h, err := e.st.FactHistory(context.Background(), tenant, key)
	require.NoError(t, err)
	require.Len(t, h, 1, "exactly one fact revision for %s", key)
	assert.Equal(t, memory.FactActive, h[0].Status)
	assert.Equal(t, 1, h[0].Revision)
	assert.Equal(t, 1, e.count("facts", "tenant_id = ?", tenant))
	assert.Equal(t, 1, e.count("events", "tenant_id = ?", tenant))
	assert.Equal(t, 1, e.count("evidence", "tenant_id = ?", tenant))
	assert.Equal(t, 1, e.count("candidates", "tenant_id = ? AND event_id = ?", tenant, res.EventID), "candidate rows are not duplicated")
	assert.Equal(t, 1, e.count("fact_evidence", "fact_id = ?", h[0].ID))
	assert.Equal(t, 1, e.count("outbox", "tenant_id = ? AND ref_id = ?", tenant, h[0].ID), "one outbox row for the revision")
	stored, err := e.st.GetEvent(context.Background(), tenant, res.EventID)
	require.NoError(t, err)
	assert.Equal(t, memory.EventCommitted, stored.Status)
}

// The worker dies between govern and commit (during the durable pause); a new worker
// replays the history, finishes the timer and commits once.
func TestCrashBetweenGovernAndCommit(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	st, dbURL := testenv.StoreURL(t)
	e := &env{t: t, st: st, c: testenv.Temporal(t), queue: testenv.TaskQueue(t)}
	w1 := testenv.StartProcess(t, testenv.WorkerEnv(t, dbURL, e.queue), bin, "worker")

	run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", "u1", "travel", textDirect, base), PauseBeforeCommit: 5 * time.Second})
	testenv.Eventually(t, 30*time.Second, "Govern completed and the pause timer started", func() bool {
		h := history(t, e.c, run.GetID(), run.GetRunID())
		return activitySummary(h, "Govern").completed == 1 && timerStarted(h)
	})
	// At the kill the candidate is governed and stored, and nothing is committed.
	assert.Equal(t, 1, e.count("candidates", "tenant_id = 't1' AND status = 'PENDING'"))
	assert.Equal(t, 0, e.count("facts", "TRUE"))
	w1.Kill()
	assert.Equal(t, 0, e.count("facts", "TRUE"), "the killed worker committed nothing")

	testenv.StartProcess(t, testenv.WorkerEnv(t, dbURL, e.queue), bin, "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var res write.MemoryWriteResult
	require.NoError(t, run.Get(ctx, &res))
	e.checkOneWrite("t1", res)

	h := history(t, e.c, run.GetID(), run.GetRunID())
	assert.Equal(t, 1, activitySummary(h, "Write").scheduled)
	assert.Equal(t, 0, activitySummary(h, "Extract").scheduled, "Write ran the in-process extractor")
	assert.Equal(t, 1, activitySummary(h, "Govern").scheduled)
	assert.Equal(t, 1, activitySummary(h, "Commit").scheduled)
	assert.Len(t, workflowTaskIdentities(h), 2, "the second worker process finished the run")
}

// The worker dies while the LLM call of the Extract activity is in flight. The server
// only learns of it when the activity's start-to-close timeout (90s) expires; then
// the activity is retried on the new worker and the write completes once.
func TestCrashDuringExtract(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Extract activity's 90s start-to-close timeout")
	}
	bin := testenv.Build(t, "./cmd/engram")
	good := answer(t, "travel", directFlights())
	fake := fakeopenai.New(fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.Delayed(3*time.Second, good)}, Default: good})
	t.Cleanup(fake.Close)
	llmEnvVars := []string{"ENGRAM_LLM_BASE_URL=" + fake.BaseURL(), "ENGRAM_LLM_MODEL=fake-model", "ENGRAM_LLM_API_KEY=test-key", "ENGRAM_LLM_TIMEOUT=10s"}
	st, dbURL := testenv.StoreURL(t)
	e := &env{t: t, st: st, c: testenv.Temporal(t), queue: testenv.TaskQueue(t)}
	w1 := testenv.StartProcess(t, testenv.WorkerEnv(t, dbURL, e.queue, llmEnvVars...), bin, "worker")

	run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", "u1", "travel", textDirect, base)})
	testenv.Eventually(t, 30*time.Second, "the first worker's LLM call", func() bool { return fake.ChatCalls() >= 1 })
	w1.Kill()
	killedAt := time.Now()
	assert.Equal(t, 1, fake.ChatCalls())
	assert.Equal(t, 0, e.count("candidates", "TRUE"))

	testenv.StartProcess(t, testenv.WorkerEnv(t, dbURL, e.queue, llmEnvVars...), bin, "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var res write.MemoryWriteResult
	require.NoError(t, run.Get(ctx, &res))
	t.Logf("write completed %s after the kill", time.Since(killedAt).Round(time.Second))
	e.checkOneWrite("t1", res)
	assert.Equal(t, 1, res.Attempts, "one extraction attempt of the workflow; its activity was retried")
	assert.Equal(t, 2, fake.ChatCalls(), "the call is made again by the new worker")

	h := history(t, e.c, run.GetID(), run.GetRunID())
	ex := activitySummary(h, "Extract")
	assert.Equal(t, 1, ex.scheduled)
	assert.Equal(t, []int32{2}, ex.attempts, "attempt 1 died with the worker")
	assert.Len(t, workflowTaskIdentities(h), 2)
}
