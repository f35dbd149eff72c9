package writepath

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/write"
)

// An event stored by Ingest whose workflow never started is marked FAILED with
// the reason; one whose workflow exists (here: started, no worker to run it) and a
// finished one are left alone.
func TestSweepOrphansFailsEventsWithoutAWorkflow(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	queue := testenv.TaskQueue(t) // no worker polls it
	tenant := "sweep-" + testenv.RandomID(6)
	orphan := storeEvent(t, st, tenant, "orphan")
	running := storeEvent(t, st, tenant, "running")
	done := storeEvent(t, st, tenant, "done")
	require.NoError(t, st.SetEventStatus(ctx, tenant, done, memory.EventCommitted, ""))
	ev := event(tenant, "u1", "general", "hello running", base)
	ev.IdempotencyKey = "running"
	run, err := write.Start(ctx, c, queue, write.MemoryWriteInput{Event: ev})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over") })

	n, err := write.SweepOrphans(ctx, c, st, -time.Second, 500)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	got, err := st.GetEvent(ctx, tenant, orphan)
	require.NoError(t, err)
	assert.Equal(t, memory.EventFailed, got.Status)
	assert.Contains(t, got.StatusReason, "never started")
	for id, want := range map[string]memory.EventStatus{running: memory.EventProcessing, done: memory.EventCommitted} {
		got, err := st.GetEvent(ctx, tenant, id)
		require.NoError(t, err)
		assert.Equal(t, want, got.Status)
	}
}
