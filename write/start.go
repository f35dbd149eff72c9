package write

import (
	"context"
	"errors"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/governance"
)

// UpdateOutcome is the update that answers once a write's outcome is known: it
// finished, or its candidates await review. Start… helpers send it with the start
// (Update-with-Start), so a caller that waits is answered at once, without polling.
const UpdateOutcome = "outcome"

// Outcome is what UpdateOutcome returns: the result when the workflow finished, or
// PendingReview while candidates wait for a human, with the result so far: each
// event's own status (WritePendingReview for those waiting) and what was committed.
// A write that began waiting before the result so far was kept answers none.
type Outcome[R any] struct {
	PendingReview bool `json:"pending_review,omitempty"`
	Result        R    `json:"result"`
}

// MemoryWriteBatchWorkflowID is the workflow id of a batch: tenant and batch key,
// beside (never equal to) the ids of single writes.
func MemoryWriteBatchWorkflowID(tenantID, batchKey string) string {
	return "write-batch/" + strings.TrimPrefix(MemoryWriteWorkflowID(tenantID, batchKey), "write/")
}

// StartOptions are the options every write workflow is started with: a retried
// request joins the running workflow (USE_EXISTING) and never starts a finished one
// again (REJECT_DUPLICATE), so one idempotency key is one write.
func StartOptions(taskQueue, workflowID string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
}

// Prepare is how a new single write is started: its options (StartOptions) and its
// input at the current WriteRevision. A write starts with no search attributes:
// each one costs the dev server's SQLite visibility store about 3 ms of CPU per
// write (engram bench write's bare-Temporal row with and without them), while
// erasure finds a user's single writes by the workflow ids on their events in
// Postgres. The write sets EngramTenant and EngramSubject itself when Postgres may
// not name it (refused during an erasure, so the erasure's last sweep finds it) and
// when a candidate waits for review (with EngramReview, for the Web UI).
func Prepare(taskQueue string, in MemoryWriteInput) (client.StartWorkflowOptions, MemoryWriteInput) {
	o := StartOptions(taskQueue, MemoryWriteWorkflowID(in.Event.TenantID, in.Event.IdempotencyKey))
	if in.Revision == 0 {
		in.Revision = WriteRevision
	}
	return o, in
}

// eager asks for eager start: when a worker of the task queue runs in this
// process (engram serve with its worker), the server hands the first workflow
// task back with the start's answer, and the worker runs it without a poll. With
// no such worker the start is an ordinary one.
func eager(o client.StartWorkflowOptions) client.StartWorkflowOptions {
	o.EnableEagerStart = true
	return o
}

// Start starts, or joins, the MemoryWrite of in.Event; the returned run is the one
// workflow of its idempotency key, finished or not.
func Start(ctx context.Context, c client.Client, taskQueue string, in MemoryWriteInput) (client.WorkflowRun, error) {
	opts, in := Prepare(taskQueue, in)
	return c.ExecuteWorkflow(ctx, eager(opts), MemoryWriteWorkflowName, in)
}

// StartBatch starts, or joins, the MemoryWriteBatch of batchKey.
func StartBatch(ctx context.Context, c client.Client, taskQueue, tenantID, batchKey string, in MemoryWriteBatchInput) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, eager(StartOptions(taskQueue, MemoryWriteBatchWorkflowID(tenantID, batchKey))), MemoryWriteBatchName, batchAtRevision(in))
}

// batchAtRevision is in at the current WriteRevision, unless its starter chose one.
func batchAtRevision(in MemoryWriteBatchInput) MemoryWriteBatchInput {
	if in.Revision == 0 {
		in.Revision = WriteRevision
	}
	return in
}

// Waited is what a caller of StartAndWait learns.
type Waited[R any] struct {
	RunID string
	// Running: the wait ended before the outcome was known; the workflow runs on
	// (start it again with the same input to wait again).
	Running bool
	Outcome[R]
}

// StartAndWait starts, or joins, the MemoryWrite of in.Event and returns as soon as
// its outcome is known (Update-with-Start: no polling), or Running after wait. An
// error is the workflow's failure, or the service's, or ctx's. With n, the
// Notices of c's connection and of this process's worker, a write started eagerly
// here is answered by its own Write step (see notice.go); nil waits for the
// workflow's result.
func StartAndWait(ctx context.Context, c client.Client, n *Notices, taskQueue string, in MemoryWriteInput, wait time.Duration) (Waited[MemoryWriteResult], error) {
	opts, in := Prepare(taskQueue, in)
	// Registered before the start: an eager start's Write can finish before
	// the start's answer is back (see notice.go).
	notices, done := n.wait(opts.ID)
	defer done()
	early := func(ctx context.Context, runID string) (MemoryWriteResult, bool) {
		if !n.isEager(opts.ID, runID) {
			return MemoryWriteResult{}, false
		}
		return awaitNotice(ctx, notices, runID)
	}
	return startAndWait(ctx, c, opts, MemoryWriteWorkflowName, in, wait, early)
}

// StartBatchAndWait is StartAndWait for the MemoryWriteBatch of batchKey.
func StartBatchAndWait(ctx context.Context, c client.Client, taskQueue, tenantID, batchKey string, in MemoryWriteBatchInput, wait time.Duration) (Waited[MemoryWriteBatchResult], error) {
	opts := StartOptions(taskQueue, MemoryWriteBatchWorkflowID(tenantID, batchKey))
	return startAndWait[MemoryWriteBatchResult](ctx, c, opts, MemoryWriteBatchName, batchAtRevision(in), wait, nil)
}

// startTimeout bounds the start of a write that a caller waits on. The start has
// its own bound rather than the caller's wait: a start cut short by a short wait
// (a wait_timeout of 1 ms) left the caller not knowing whether the write started
// (the gRPC stream reset, answered as internal), where a start that ends tells
// one it did, with its run.
const startTimeout = 10 * time.Second

// startAndWait starts or joins the workflow and waits for its outcome. early,
// when not nil, may answer a run this call started before the workflow's result
// is asked for (a write's own Write step, see notice.go).
//
// The wait bounds only the waiting: the start runs to its end (at most
// startTimeout) even when the wait or the caller ends first, so a started write
// is always answered as started (Running, with its run), and a write that did
// not start is an error the caller retries.
func startAndWait[R any](ctx context.Context, c client.Client, opts client.StartWorkflowOptions, name string, in any, wait time.Duration, early func(context.Context, string) (R, bool)) (Waited[R], error) {
	var out Waited[R]
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// An eager start, then the outcome update, rather than Update-with-Start: the
	// server hands an eager start's first workflow task straight back to this
	// process's worker, where an ordinary start (Update-with-Start is one) waits for
	// the server's task dispatch, about 45 ms on the dev server (engram bench write's
	// "bare temporal" rows measure both).
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	run, err := c.ExecuteWorkflow(sctx, eager(opts), name, in)
	scancel()
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		// The workflow of this key finished before (REJECT_DUPLICATE): its result is
		// the answer.
		out.RunID = started.RunId
		err = c.GetWorkflow(wctx, opts.ID, started.RunId).Get(wctx, &out.Result)
	case err != nil:
		return out, err
	default:
		out.RunID = run.GetRunID()
		if early != nil {
			if r, ok := early(wctx, out.RunID); ok {
				out.Outcome = Outcome[R]{Result: r}
				return out, nil
			}
		}
		err = awaitOutcome(wctx, c, run, &out.Outcome)
	}
	if err == nil || ctx.Err() != nil || !waitOver(wctx) {
		return out, err
	}
	// The wait is over, the workflow runs on.
	out.Running = true
	return out, nil
}

// waitOver reports whether the wait of wctx has ended: its deadline passed, by
// the clock too (the server may end a call at the deadline a moment before the
// context's own timer fires, and the call's error then arrives first).
func waitOver(wctx context.Context) bool {
	d, ok := wctx.Deadline()
	return wctx.Err() != nil || ok && !time.Now().Before(d)
}

// noticeWait bounds how long a caller waits for the notice of a write started
// eagerly here. Every such write posts one (Write, FastWrite, or Record as a step of its
// own) unless its worker dies, which is this process; the bound only keeps an
// unforeseen path from holding the caller longer than that.
const noticeWait = 5 * time.Second

// awaitNotice waits for what this process's Write of run runID says: its
// final result, or that the workflow's must be waited for (false, as after
// noticeWait or ctx's end).
func awaitNotice(ctx context.Context, notices <-chan notice, runID string) (MemoryWriteResult, bool) {
	t := time.NewTimer(noticeWait)
	defer t.Stop()
	for {
		select {
		case n := <-notices:
			if n.runID != runID {
				continue // another run of the id (an earlier one's late retry)
			}
			return n.res, n.final
		case <-t.C:
			return MemoryWriteResult{}, false
		case <-ctx.Done():
			return MemoryWriteResult{}, false
		}
	}
}

// outcomeGrace is how long awaitOutcome waits for a write's result before it asks
// with the outcome update. Almost every write finishes within it (one workflow
// task on the fast path); one that waits for review is answered after it.
const outcomeGrace = 500 * time.Millisecond

// awaitOutcome waits for run's outcome: its result when it finishes within
// outcomeGrace (no update is sent: an update costs the server more than the
// result's long poll), else the answer of the outcome update, which says when the
// run waits for review. A run that finishes before the update reaches it, or whose
// update fails, answers with its result (or its failure).
func awaitOutcome[R any](ctx context.Context, c client.Client, run client.WorkflowRun, o *Outcome[R]) error {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var result R
	finished := make(chan error, 1)
	go func() { finished <- run.Get(gctx, &result) }()
	grace := time.NewTimer(outcomeGrace)
	defer grace.Stop()
	select {
	case err := <-finished:
		*o = Outcome[R]{Result: result}
		return err
	case <-grace.C:
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: UpdateOutcome, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		if err = h.Get(ctx, o); err == nil {
			return nil
		}
	}
	if ctx.Err() != nil {
		return err
	}
	err = <-finished
	*o = Outcome[R]{Result: result}
	return err
}

// outcome answers UpdateOutcome for one workflow run.
type outcome[R any] struct {
	done   bool
	result R
	err    error
	rv     *reviewState
}

// answering runs a write workflow's body with the UpdateOutcome handler installed
// before anything else (so an update sent with the start is never refused as
// unknown), and answers it with what the body returns before the run closes.
func answering[I, R any](ctx workflow.Context, in I, body func(workflow.Context, I, *reviewState) (R, error)) (R, error) {
	o := &outcome[R]{rv: &reviewState{verdicts: map[string]governance.Verdict{}}}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateOutcome, func(ctx workflow.Context) (Outcome[R], error) {
		if err := workflow.Await(ctx, func() bool { return o.done || o.rv.waiting }); err != nil {
			return Outcome[R]{}, err
		}
		if !o.done {
			// What the write did so far (each event of a batch its own status), when
			// the body said (reviewState.soFar).
			partial, _ := o.rv.soFar.(R)
			return Outcome[R]{PendingReview: true, Result: partial}, nil
		}
		return Outcome[R]{Result: o.result}, o.err
	}, workflow.UpdateHandlerOptions{Description: "returns when the write finished or its candidates await review"}); err != nil {
		return o.result, err
	}
	res, err := body(ctx, in, o.rv)
	o.done, o.result, o.err = true, res, err
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return res, err
}
