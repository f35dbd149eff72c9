package writebench

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The bare-Temporal comparator of `engram bench write`: what the same Temporal
// server costs a write that does nothing. It is the floor under every write figure
// (the write path is a workflow, as Engram's design says), printed beside them the
// way `engram bench recall` prints bare pgvector beside recall.

// bareWriteWorkflow is an empty write: it returns at once. Its worker runs in this
// process with the SDK's default options.
func bareWriteWorkflow(workflow.Context) error { return nil }

const bareWriteWorkflowName = "BenchBareWrite"

// bareTemporal runs empty writes on a task queue of their own.
type bareTemporal struct {
	c     client.Client
	queue string
	w     worker.Worker
	seq   atomic.Int64
}

func startBareTemporal(c client.Client) (*bareTemporal, error) {
	b := &bareTemporal{c: c, queue: "bench-bare-" + uuid.NewString()[:8]}
	b.w = worker.New(c, b.queue, worker.Options{})
	b.w.RegisterWorkflowWithOptions(bareWriteWorkflow, workflow.RegisterOptions{Name: bareWriteWorkflowName})
	if err := b.w.Start(); err != nil {
		return nil, fmt.Errorf("bare temporal worker: %w", err)
	}
	return b, nil
}

func (b *bareTemporal) stop() { b.w.Stop() }

func (b *bareTemporal) options() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: fmt.Sprintf("bench-bare/%s/%d", b.queue, b.seq.Add(1)), TaskQueue: b.queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
}

// waited is the empty write started as Ingest with wait starts a write (an eager
// start), answered by its result, as a write that needs no review is answered.
func (b *bareTemporal) waited(ctx context.Context, _ int) error {
	o := b.options()
	o.EnableEagerStart = true
	run, err := b.c.ExecuteWorkflow(ctx, o, bareWriteWorkflowName)
	if err != nil {
		return err
	}
	return run.Get(ctx, nil)
}

// started is the empty write's start alone, as Ingest without wait starts a write
// (eager start: this process runs a worker of the queue).
func (b *bareTemporal) started(ctx context.Context, _ int) error {
	o := b.options()
	o.EnableEagerStart = true
	_, err := b.c.ExecuteWorkflow(ctx, o, bareWriteWorkflowName)
	return err
}
