package writepath

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/write"
)

// Ingest with wait from a process that runs the worker, its Temporal connection
// and its write activities sharing one write.Notices (as app.Build sets them): a fast write is
// answered by its own Write step, with exactly the result the workflow returns and
// no GetWorkflowExecutionHistory call; a write whose candidate waits for review
// is still answered pending; the same key again gets the stored result.
func TestEagerWriteAnsweredInProcess(t *testing.T) {
	var polls atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/GetWorkflowExecutionHistory") {
			polls.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	n := write.NewNotices()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalAddress(t), Namespace: testenv.Namespace(),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count, n.Interceptor())}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	q := testenv.TaskQueue(t)
	acts := writetest.Activities(testenv.Store(t))
	acts.Notices = n
	writetest.Worker(t, c, q, acts)
	ctx := context.Background()
	user := "u-" + testenv.RandomID(6)
	asJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	ev := writetest.Event("t1", user, "travel", "预算不超过8000元", base)
	got, err := write.StartAndWait(ctx, c, n, q, write.MemoryWriteInput{Event: ev}, 30*time.Second)
	require.NoError(t, err)
	require.False(t, got.Running)
	require.False(t, got.PendingReview)
	require.Equal(t, write.WriteCommitted, got.Result.Status)
	require.Len(t, got.Result.Results, 1)
	require.NotEmpty(t, got.Result.Results[0].FactID)
	assert.Zero(t, polls.Load(), "answered without polling for the result")

	var wf write.MemoryWriteResult
	require.NoError(t, c.GetWorkflow(ctx, write.MemoryWriteWorkflowID(ev.TenantID, ev.IdempotencyKey), got.RunID).Get(ctx, &wf))
	assert.Equal(t, asJSON(wf), asJSON(got.Result), "the answer is the workflow's result")

	again, err := write.StartAndWait(ctx, c, n, q, write.MemoryWriteInput{Event: ev}, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, got.RunID, again.RunID)
	assert.Equal(t, asJSON(wf), asJSON(again.Result), "the same key again: the stored result")

	pending, err := write.StartAndWait(ctx, c, n, q, write.MemoryWriteInput{Event: writetest.Event("t1", user, "travel", "我上次坐了靠窗的位置，挺好", base.Add(time.Minute))}, 30*time.Second)
	require.NoError(t, err)
	assert.True(t, pending.PendingReview, "a candidate waiting for review: %+v", pending)
	assert.False(t, pending.Running)
}
