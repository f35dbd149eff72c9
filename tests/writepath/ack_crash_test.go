package writepath

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// An acknowledgement (Ingest without wait) means the write is durable: `engram
// serve` is SIGKILLed right after the last of 120 acknowledgements, while the
// background starts of their workflows are still queued. After a restart and one
// maintenance sweep (which starts, from the stored event, every acknowledged write
// whose workflow never started), every acknowledged write has finished: none lost,
// none FAILED, one event per key.
func TestAcknowledgedWritesSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engram serve twice")
	}
	const writes, callers = 120, 8
	bin := testenv.Build(t, "./cmd/engram")
	st, dbURL := testenv.StoreURL(t)
	queue := testenv.TaskQueue(t)
	tenant := "ack-" + testenv.RandomID(6)
	key, err := st.CreateAPIKey(context.Background(), &storage.APIKey{TenantID: tenant, Principal: "agent", Roles: []string{storage.RoleAgent}})
	require.NoError(t, err)
	addr := freeAddr(t)
	env := testenv.WorkerEnv(t, dbURL, queue, "ENGRAM_EMBEDDER=ngram")
	serve := func() *testenv.Process { return testenv.StartProcess(t, env, bin, "serve", "--addr", addr) }
	api := client.New("http://"+addr, key, client.WithRetry(1, 0))
	ctx := context.Background()

	srv := serve()
	waitServing(t, api)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < writes; i += callers {
				k := fmt.Sprintf("ack-%d", i)
				_, err := api.Ingest(ctx, &engramv1.Event{IdempotencyKey: k, UserId: fmt.Sprintf("u%d", i%6), Schema: "travel",
					Content: fmt.Sprintf("预算不超过%d元", 5000+i*10)})
				if err == nil {
					mu.Lock()
					acked[k] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	srv.Kill()
	require.Len(t, acked, writes, "every acknowledgement before the kill succeeded")

	counts, err := st.EventStatusCounts(ctx, tenant)
	require.NoError(t, err)
	total := 0
	for _, n := range counts {
		total += n
	}
	require.Equal(t, writes, total, "every acknowledged event is stored, once")
	t.Logf("after the kill: %v", counts)

	serve()
	waitServing(t, api)
	var ts testsuite.WorkflowTestSuite
	aenv := ts.NewTestActivityEnvironment()
	sweep := &lifecycle.SweepActivities{Store: st, Temporal: testenv.Temporal(t), TaskQueue: queue}
	aenv.RegisterActivity(sweep)
	val, err := aenv.ExecuteActivity(sweep.SweepStuckEvents, lifecycle.SweepInput{Before: time.Now().Add(time.Second), Limit: 1000})
	require.NoError(t, err)
	var res lifecycle.SweepResult
	require.NoError(t, val.Get(&res))
	t.Logf("sweep: %+v", res)
	assert.Zero(t, res.Failed)

	deadline := time.Now().Add(2 * time.Minute)
	for {
		counts, err = st.EventStatusCounts(ctx, tenant)
		require.NoError(t, err)
		if counts[memory.EventReceived]+counts[memory.EventProcessing] == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	assert.Equal(t, writes, counts[memory.EventCommitted], "every acknowledged write committed: %v", counts)
	assert.Zero(t, counts[memory.EventFailed])
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// waitServing waits until the API answers an authenticated call.
func waitServing(t *testing.T, api *client.Client) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := api.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u0"})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engram serve did not answer within 90s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
