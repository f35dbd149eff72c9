package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/internal/testenv"
)

// TestPingThroughRealDevServer proves the wiring: a workflow started on the real
// Temporal dev server runs an activity on a worker of this process.
func TestPingThroughRealDevServer(t *testing.T) {
	c := testenv.Temporal(t)
	q := testenv.TaskQueue(t)
	w := tworker.New(c, q, tworker.Options{})
	w.RegisterWorkflow(app.Ping)
	w.RegisterActivity(app.PingActivity)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "ping-" + testenv.RandomID(8), TaskQueue: q}, app.Ping, "hello")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Contains(t, out, "pong: hello")
}
