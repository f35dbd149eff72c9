package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/internal/faketypesense"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
)

// The OutboxIndexer loop with its activities mocked: no server, timers skipped.

var oa *OutboxActivities

func workflowEnv(t *testing.T, drains []DrainResult, errs map[int]error) (*testsuite.TestWorkflowEnvironment, *[]time.Duration) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(OutboxIndexer, workflow.RegisterOptions{Name: OutboxIndexerWorkflowName})
	env.RegisterActivity(oa)
	env.OnActivity(oa.EnsureTypesense, mock.Anything).Return(nil).Once()
	call := 0
	env.OnActivity(oa.DrainOutbox, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in DrainInput) (DrainResult, error) {
			defer func() { call++ }()
			if err, ok := errs[call]; ok {
				return DrainResult{}, err
			}
			if call < len(drains) {
				return drains[call], nil
			}
			return DrainResult{}, nil
		})
	var sleeps []time.Duration
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { sleeps = append(sleeps, d) })
	return env, &sleeps
}

func TestOutboxIndexerDrainsUntilEmpty(t *testing.T) {
	env, sleeps := workflowEnv(t, []DrainResult{
		{Claimed: 10, Processed: 10}, // full batch: drain again at once
		{Claimed: 4, Processed: 4},   // partial: idle
		{Claimed: 0},                 // empty: stop (test mode)
	}, nil)
	env.ExecuteWorkflow(OutboxIndexerWorkflowName, OutboxIndexerInput{Batch: 10, Idle: 3 * time.Second, StopWhenEmpty: true})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var out OutboxIndexerResult
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, OutboxIndexerResult{Drains: 3, Processed: 14}, out)
	require.Equal(t, []time.Duration{3 * time.Second}, *sleeps)
}

func TestOutboxIndexerBacksOffOnFailures(t *testing.T) {
	down := errors.New("postgres went away")
	env, sleeps := workflowEnv(t, []DrainResult{
		{Claimed: 2, Failed: 2, LastError: "status: 500"},
		{Claimed: 2, Failed: 2, LastError: "status: 500"},
		{}, {}, {}, {}, {}, // the activity fails all its 5 attempts
		{Claimed: 2, Processed: 2},
		{Claimed: 0},
	}, map[int]error{2: down, 3: down, 4: down, 5: down, 6: down})
	env.ExecuteWorkflow(OutboxIndexerWorkflowName, OutboxIndexerInput{Batch: 10, Idle: time.Second, MaxBackoff: 3 * time.Second, StopWhenEmpty: true})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "a failed drain does not end the indexer")
	var out OutboxIndexerResult
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Equal(t, OutboxIndexerResult{Drains: 5, Processed: 2, Failed: 4}, out)
	// Backoff 1s, 2s, then capped at 3s; then an idle pause after the partial batch.
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, time.Second}, *sleeps)
}

func TestOutboxIndexerContinuesAsNew(t *testing.T) {
	env, _ := workflowEnv(t, []DrainResult{{Claimed: 1, Processed: 1}, {Claimed: 1, Processed: 1}}, nil)
	env.ExecuteWorkflow(OutboxIndexerWorkflowName, OutboxIndexerInput{Iterations: 2, Failures: 0})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, OutboxIndexerWorkflowName, can.WorkflowType.Name)
}

func TestTypesenseReindexRunsTheActivity(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(oa)
	env.OnActivity(oa.ReindexTypesense, mock.Anything, ReindexInput{TenantID: "acme"}).
		Return(typesense.ReindexResult{Facts: 3, Evidence: 2}, nil).Once()
	env.ExecuteWorkflow(TypesenseReindex, TypesenseReindexInput{TenantID: "acme"})
	require.NoError(t, env.GetWorkflowError())
	var res typesense.ReindexResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, typesense.ReindexResult{Facts: 3, Evidence: 2}, res)
}

// On the real dev server, Postgres and the fake Typesense: the registered indexer
// drains what the write path queued, and the reindex workflow runs by name.
func TestOutboxIndexerOnDevServer(t *testing.T) {
	c := testenv.Temporal(t)
	st := testenv.Store(t)
	fake := faketypesense.New("k")
	t.Cleanup(fake.Close)
	ix, err := typesense.New(typesense.Config{URL: fake.URL, APIKey: "k"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := "acme-" + testenv.RandomID(6)
	f, err := st.WriteFact(ctx, tenant, &storage.Fact{
		MemoryKey: "alice:seat", Scope: memory.ScopeUser, UserID: "alice", MemoryType: memory.TypePreference,
		Content: "prefers window seats", Confidence: 0.9, ValidFrom: time.Now().Add(-time.Hour),
	}, storage.WriteCurrent, "")
	require.NoError(t, err)
	_, err = st.DB().NewRaw("INSERT INTO outbox (tenant_id, kind, ref_id, op) VALUES (?, 'FACT', ?, 'UPSERT')", tenant, f.ID).Exec(ctx)
	require.NoError(t, err)

	q := testenv.TaskQueue(t)
	w := sdkworker.New(c, q, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(OutboxIndexer, workflow.RegisterOptions{Name: OutboxIndexerWorkflowName})
	w.RegisterWorkflowWithOptions(TypesenseReindex, workflow.RegisterOptions{Name: TypesenseReindexName})
	w.RegisterActivity(&OutboxActivities{Store: st, Index: ix})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "outbox-" + testenv.RandomID(8), TaskQueue: q},
		OutboxIndexerWorkflowName, OutboxIndexerInput{StopWhenEmpty: true, Idle: 100 * time.Millisecond})
	require.NoError(t, err)
	var out OutboxIndexerResult
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, 1, out.Processed)
	hits, err := ix.Search(ctx, recall.Visibility{TenantID: tenant, UserID: "alice"}, "window", nil, 10)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, f.ID, hits[0].ID)

	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "reindex-" + testenv.RandomID(8), TaskQueue: q},
		TypesenseReindexName, TypesenseReindexInput{TenantID: tenant})
	require.NoError(t, err)
	var res typesense.ReindexResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, 1, res.Facts)
}
