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

// An event the API stored but whose workflow never started (Temporal was down
// and the client gave up) is marked FAILED with the reason by the sweep, on the
// real dev server; an event whose workflow runs (e.g. waits for review) is left
// alone, and so is a settled one.
func TestSweepFailsWritesThatCanNeverFinish(t *testing.T) {
	st := testenv.Store(t)
	tc := testenv.Temporal(t)
	ctx := context.Background()
	tenant := "sweep-" + testenv.RandomID(6)
	insert := func(key string) *storage.Event {
		ev := memory.IngestEvent{TenantID: tenant, IdempotencyKey: key, UserID: "u1", Content: "预算不超过8000元", Schema: "travel",
			ActorType: "USER", EventType: "MESSAGE", OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
		prot, err := st.ProtectContent(ev.Content)
		require.NoError(t, err)
		stored, _, err := st.InsertEvent(ctx, tenant, storage.NewEvent(ev, write.MemoryWriteWorkflowID(tenant, key), prot))
		require.NoError(t, err)
		return stored
	}
	orphan, waiting, settled := insert("orphan"), insert("waiting"), insert("settled")
	require.NoError(t, st.SetEventStatus(ctx, tenant, settled.ID, memory.EventCommitted, ""))
	// A running workflow of the "waiting" key, on a queue no worker polls.
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: waiting.WorkflowID, TaskQueue: "nobody-" + testenv.RandomID(6)}, write.MemoryWriteWorkflowName)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test done") })

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	acts := &lifecycle.SweepActivities{Store: st, Temporal: tc}
	env.RegisterActivity(acts)
	val, err := env.ExecuteActivity(acts.SweepStuckEvents, lifecycle.SweepInput{Before: time.Now().Add(time.Second)})
	require.NoError(t, err)
	var res lifecycle.SweepResult
	require.NoError(t, val.Get(&res))
	assert.GreaterOrEqual(t, res.Checked, 2)
	assert.GreaterOrEqual(t, res.Failed, 1)

	got := func(id string) *storage.Event {
		e, err := st.GetEvent(ctx, tenant, id)
		require.NoError(t, err)
		return e
	}
	o := got(orphan.ID)
	assert.Equal(t, memory.EventFailed, o.Status)
	assert.Contains(t, o.StatusReason, "never started")
	assert.Equal(t, memory.EventProcessing, got(waiting.ID).Status, "a running write is left alone")
	assert.Equal(t, memory.EventCommitted, got(settled.ID).Status)
}
