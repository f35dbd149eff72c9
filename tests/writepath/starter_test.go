package writepath

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/write"
)

// The background starter of acknowledged writes drops nothing, on the real dev
// server: with one starter and room for one start in its queue, 20 writes handed
// over at once all get their workflow (a full queue starts the write in the
// caller); after Close, a handed-over write is started in the caller too.
func TestStarterDropsNothing(t *testing.T) {
	c := testenv.Temporal(t)
	queue := "nobody-" + testenv.RandomID(6) // no worker: the workflows just wait
	st := write.NewStarter(c, queue, nil, write.StarterOptions{Workers: 1, Queue: 1})
	tenant := "starter-" + testenv.RandomID(6)
	ctx := context.Background()
	in := func(i int) write.MemoryWriteInput {
		return write.MemoryWriteInput{Event: memory.IngestEvent{TenantID: tenant, IdempotencyKey: fmt.Sprintf("k%d", i), UserID: "u1",
			Content: "hello", OccurredAt: time.Now().UTC()}}
	}
	const n = 20
	for i := range n {
		require.NoError(t, st.Enqueue(ctx, in(i)))
	}
	st.Close(30 * time.Second)
	require.NoError(t, st.Enqueue(ctx, in(n)), "after Close the caller starts it")
	for i := range n + 1 {
		id := write.MemoryWriteWorkflowID(tenant, fmt.Sprintf("k%d", i))
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err, "write %d has its workflow", i)
		t.Cleanup(func() {
			_ = c.TerminateWorkflow(context.Background(), id, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "test done")
		})
	}
}
