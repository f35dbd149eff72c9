package write

import (
	"context"
	"strings"
	"sync"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"google.golang.org/grpc"
)

// In-process answers to Ingest with wait. When this process's worker runs a write
// it started itself (an eager start: the server handed the first workflow task
// back with the start's answer), Write tells the waiting caller its outcome the
// moment it is known, and the caller is answered without the result's long poll,
// a round trip that cost the Temporal server about 1 ms of CPU per write (a start
// with its result against a start alone, engram bench write's bare rows). What
// Write tells is what the workflow returns: its step's Result, which the workflow
// returns as it is (WriteStep.Final), and the workflow tests check the two agree on
// every final Write they run. The write is committed in Postgres by then, and a
// Write run again after a lost result (a killed worker) returns the same. A write
// that is not final at Write (one waiting for review, one an LLM extracts, one
// whose Write failed) is answered as before, by the workflow's result or its
// outcome update.

// notice is what Write tells the caller waiting on its workflow.
type notice struct {
	runID string
	final bool // res is the workflow's result
	res   MemoryWriteResult
}

// Notices connects the callers waiting on writes to the Write runs of one
// process, by workflow id; it also remembers which runs started eagerly there.
// app.Build makes one and gives it to the Temporal connection (Interceptor), the
// worker's MemoryActivities and the Ingestor. A nil *Notices tells nobody: every
// caller is answered by the workflow's result.
type Notices struct {
	mu      sync.Mutex
	waiters map[string][]chan notice
	eager   map[string]string // workflow id → run id of an eager start by this process
}

// NewNotices returns an empty board of notices.
func NewNotices() *Notices {
	return &Notices{waiters: map[string][]chan notice{}, eager: map[string]string{}}
}

// wait registers a waiter for workflow id's notices; done unregisters it.
func (b *Notices) wait(id string) (ch chan notice, done func()) {
	if b == nil {
		return nil, func() {}
	}
	ch = make(chan notice, 1)
	b.mu.Lock()
	b.waiters[id] = append(b.waiters[id], ch)
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		ws := b.waiters[id]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(b.waiters, id)
			delete(b.eager, id)
		} else {
			b.waiters[id] = ws
		}
	}
}

// post tells every waiter of workflow id; nobody waiting (a write started
// elsewhere, or without wait) is the common case and costs a map lookup.
func (b *Notices) post(id string, n notice) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.waiters[id] {
		select {
		case ch <- n:
		default: // a waiter takes one notice; a second run's is of no use to it
		}
	}
}

// startedEagerly records that workflow id's run runID was started by this process
// with its first task handed to this process's worker, if someone waits on it.
func (b *Notices) startedEagerly(id, runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.waiters[id]; ok {
		b.eager[id] = runID
	}
}

func (b *Notices) isEager(id, runID string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return runID != "" && b.eager[id] == runID
}

// Interceptor is a gRPC client interceptor for the Temporal connection of a
// process that runs its own worker: it notes which write starts the server
// answered with their first workflow task (an eager start), whose Write
// therefore runs in this process and answers the caller itself. Without it every
// Ingest with wait is answered by the workflow's result, as before.
func (b *Notices) Interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil || !strings.HasSuffix(method, "/StartWorkflowExecution") {
			return err
		}
		rq, ok1 := req.(*workflowservice.StartWorkflowExecutionRequest)
		rs, ok2 := reply.(*workflowservice.StartWorkflowExecutionResponse)
		if ok1 && ok2 && rs.GetEagerWorkflowTask() != nil {
			b.startedEagerly(rq.GetWorkflowId(), rs.GetRunId())
		}
		return nil
	}
}

// postNotFinal tells a caller of this process waiting on the write that it must
// wait for the workflow's outcome, when ctx is the activity step named step.
func (b *Notices) postNotFinal(ctx context.Context, step string) {
	if b == nil || !activity.IsActivity(ctx) {
		return
	}
	if info := activity.GetInfo(ctx); info.ActivityType.Name == step && info.WorkflowExecution.ID != "" {
		b.post(info.WorkflowExecution.ID, notice{runID: info.WorkflowExecution.RunID})
	}
}
