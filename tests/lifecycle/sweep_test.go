package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// The sweep on the real dev server, with a worker: an acknowledged write whose
// workflow never started (the process that stored its event died before the
// background start) is started from the stored event and commits its fact, with
// the client's locator; a batch's event that never started and an event whose
// stored payload cannot be replayed exactly are marked FAILED with the reason; a
// write whose workflow runs (e.g. waits for review) is left alone, and so is a
// settled one.
func TestSweepStartsOrFailsWritesThatCannotFinish(t *testing.T) {
	e := newEnv(t)
	e.inProcessWorker(lifecycle.Deps{})
	st, tc := e.st, e.c
	ctx := context.Background()
	tenant := "sweep-" + testenv.RandomID(6)
	insert := func(key, wfID, payload string) *storage.Event {
		ev := memory.IngestEvent{TenantID: tenant, IdempotencyKey: key, UserID: "u1", Content: "预算不超过8000元", Schema: "travel",
			ActorType: "USER", EventType: "MESSAGE", Locator: "msg-" + key, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
		if payload != "" {
			ev.Payload = []byte(payload)
		}
		if wfID == "" {
			wfID = write.MemoryWriteWorkflowID(tenant, key)
		}
		prot, err := st.ProtectContent(ev.Content)
		require.NoError(t, err)
		stored, _, err := st.InsertEvent(ctx, tenant, storage.NewEvent(ev, wfID, prot))
		require.NoError(t, err)
		return stored
	}
	orphan := insert("orphan", "", "")
	batched := insert("batched", write.MemoryWriteBatchWorkflowID(tenant, "b1"), "")
	// jsonb stores {"b":1,"a":2} as {"a": 2, "b": 1}: the row no longer hashes the same.
	reordered := insert("reordered", "", `{"b":1,"a":2}`)
	waiting, settled := insert("waiting", "", ""), insert("settled", "", "")
	require.NoError(t, st.SetEventStatus(ctx, tenant, settled.ID, memory.EventCommitted, ""))
	// A running workflow of the "waiting" key, on a queue no worker polls.
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: waiting.WorkflowID, TaskQueue: "nobody-" + testenv.RandomID(6)}, write.MemoryWriteWorkflowName)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test done") })

	var ts testsuite.WorkflowTestSuite
	aenv := ts.NewTestActivityEnvironment()
	acts := &lifecycle.SweepActivities{Store: st, Temporal: tc, TaskQueue: e.queue}
	aenv.RegisterActivity(acts)
	val, err := aenv.ExecuteActivity(acts.SweepStuckEvents, lifecycle.SweepInput{Before: time.Now().Add(time.Second)})
	require.NoError(t, err)
	var res lifecycle.SweepResult
	require.NoError(t, val.Get(&res))
	assert.GreaterOrEqual(t, res.Checked, 4)
	assert.GreaterOrEqual(t, res.Started, 1)
	assert.GreaterOrEqual(t, res.Failed, 2)

	got := func(id string) *storage.Event {
		e, err := st.GetEvent(ctx, tenant, id)
		require.NoError(t, err)
		return e
	}
	// The started write runs on the worker and commits.
	var out write.MemoryWriteResult
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, tc.GetWorkflow(wctx, orphan.WorkflowID, "").Get(wctx, &out))
	assert.Equal(t, write.WriteCommitted, out.Status)
	assert.Equal(t, memory.EventCommitted, got(orphan.ID).Status)
	ev, err := st.EvidenceForEvent(ctx, tenant, orphan.ID)
	require.NoError(t, err)
	require.Len(t, ev, 1)
	assert.Equal(t, "msg-orphan", ev[0].Locator, "the client's locator, from the stored event")
	facts, err := st.ListFacts(ctx, tenant, storage.FactFilter{UserID: "u1"})
	require.NoError(t, err)
	require.NotEmpty(t, facts)

	for _, id := range []string{batched.ID, reordered.ID} {
		f := got(id)
		assert.Equal(t, memory.EventFailed, f.Status)
		assert.Contains(t, f.StatusReason, "never started")
	}
	assert.Contains(t, got(batched.ID).StatusReason, "batch")
	assert.Equal(t, memory.EventProcessing, got(waiting.ID).Status, "a running write is left alone")
	assert.Equal(t, memory.EventCommitted, got(settled.ID).Status)
}
