package outbox

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/search/typesense"
)

// Names of the Typesense indexing workflows. They are registered only when
// Typesense is configured.
const (
	OutboxIndexerWorkflowName = "OutboxIndexer"
	TypesenseReindexName      = "TypesenseReindex"
	// OutboxIndexerID is the one indexer per namespace: a single drainer keeps the
	// order of writes to one document (SKIP LOCKED still guards overlaps).
	OutboxIndexerID = "engram-outbox-indexer"
)

// OutboxIndexerInput tunes the indexer; zero values take the defaults.
type OutboxIndexerInput struct {
	Batch       int           `json:"batch,omitempty"`        // rows per drain (default 200)
	MaxAttempts int           `json:"max_attempts,omitempty"` // per outbox row (default 10)
	Idle        time.Duration `json:"idle,omitempty"`         // pause when the outbox is empty (default 2s)
	MaxBackoff  time.Duration `json:"max_backoff,omitempty"`  // longest pause after failures (default 1m)
	// Iterations before continue-as-new (default 500), so history stays small.
	Iterations int `json:"iterations,omitempty"`
	// Failures is the current run of consecutive failed drains (carried across
	// continue-as-new so the backoff is not reset).
	Failures int `json:"failures,omitempty"`
	// Stop ends the workflow after one pass that found nothing (tests).
	StopWhenEmpty bool `json:"stop_when_empty,omitempty"`
}

// OutboxIndexerResult is returned only when StopWhenEmpty ends the workflow.
type OutboxIndexerResult struct {
	Drains    int `json:"drains"`
	Processed int `json:"processed"`
	Failed    int `json:"failed"`
}

func outboxDefaults(in *OutboxIndexerInput) {
	if in.Batch <= 0 {
		in.Batch = DefaultDrainBatch
	}
	if in.Idle <= 0 {
		in.Idle = 2 * time.Second
	}
	if in.MaxBackoff <= 0 {
		in.MaxBackoff = time.Minute
	}
	if in.Iterations <= 0 {
		in.Iterations = 500
	}
}

func outboxActivityOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 5, NonRetryableErrorTypes: memory.NonRetryable,
		},
	})
}

// OutboxIndexer drains the outbox into Typesense forever: drain, and when the
// batch was full drain again at once; when it was empty wait Idle; when index
// writes failed wait with exponential backoff (the rows keep their attempts and
// errors and are tried again). It continues as new every Iterations drains or
// when the server suggests it.
func OutboxIndexer(ctx workflow.Context, in OutboxIndexerInput) (OutboxIndexerResult, error) {
	outboxDefaults(&in)
	var out OutboxIndexerResult
	actx := outboxActivityOptions(ctx)
	var a *OutboxActivities
	if err := workflow.ExecuteActivity(actx, a.EnsureTypesense).Get(ctx, nil); err != nil {
		return out, err
	}
	for i := 0; i < in.Iterations; i++ {
		var res DrainResult
		err := workflow.ExecuteActivity(actx, a.DrainOutbox, DrainInput{Batch: in.Batch, MaxAttempts: in.MaxAttempts}).Get(ctx, &res)
		out.Drains++
		out.Processed += res.Processed
		out.Failed += res.Failed
		switch {
		case err != nil || res.Failed > 0:
			in.Failures++
			if err != nil {
				workflow.GetLogger(ctx).Warn("outbox drain failed", "error", err)
			}
			if err := workflow.Sleep(ctx, backoff(in.Failures, in.Idle, in.MaxBackoff)); err != nil {
				return out, err
			}
		case res.More(in.Batch):
			in.Failures = 0
		default:
			in.Failures = 0
			if in.StopWhenEmpty && res.Claimed == 0 {
				return out, nil
			}
			if err := workflow.Sleep(ctx, in.Idle); err != nil {
				return out, err
			}
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return out, workflow.NewContinueAsNewError(ctx, OutboxIndexerWorkflowName, in)
}

// backoff doubles from base per consecutive failure, up to max.
func backoff(failures int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// TypesenseReindexInput names the tenant whose documents are rebuilt.
type TypesenseReindexInput struct {
	TenantID string `json:"tenant_id"`
	PageSize int    `json:"page_size,omitempty"`
}

// TypesenseReindex rebuilds one tenant's keyword documents from Postgres (run it
// after enabling Typesense, after restoring a cluster, or from a schedule).
func TypesenseReindex(ctx workflow.Context, in TypesenseReindexInput) (typesense.ReindexResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 6 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			MaximumAttempts: 20, NonRetryableErrorTypes: memory.NonRetryable,
		},
	})
	var a *OutboxActivities
	var res typesense.ReindexResult
	err := workflow.ExecuteActivity(ctx, a.ReindexTypesense, ReindexInput{TenantID: in.TenantID, PageSize: in.PageSize}).Get(ctx, &res)
	return res, err
}

// StartOutboxIndexer starts the singleton indexer, or leaves the running one be.
func StartOutboxIndexer(ctx context.Context, c client.Client, taskQueue string, in OutboxIndexerInput) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       OutboxIndexerID,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, OutboxIndexerWorkflowName, in)
}
