package write

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Starter starts the workflows of acknowledged writes in the background. An
// acknowledgement (Ingest without wait) returns once its event is stored in
// Postgres, which is what makes the write durable; the workflow start, a round
// trip to the Temporal server that costs more than the rest of the call, follows
// here. Nothing is dropped:
//   - a full queue starts the write in the caller, as if there were no Starter;
//   - a start that fails is retried with backoff for up to RetryFor;
//   - a start that never happens (the process died first, or Temporal stayed down)
//     leaves the event RECEIVED/PROCESSING with no workflow, and the maintenance
//     sweep (lifecycle.SweepStuckEvents) starts it from the stored event.
type Starter struct {
	c        client.Client
	queue    string
	log      *slog.Logger
	retryFor time.Duration

	mu     sync.Mutex
	closed bool
	jobs   chan MemoryWriteInput
	wg     sync.WaitGroup
	stop   chan struct{} // closed by Close once its drain deadline passes
}

// StarterOptions size a Starter; zero values take the defaults.
type StarterOptions struct {
	Workers  int           // concurrent starts (default 4)
	Queue    int           // starts waiting (default 4096)
	RetryFor time.Duration // how long one start is retried (default 10 minutes)
}

// NewStarter returns a running Starter of writes on taskQueue.
func NewStarter(c client.Client, taskQueue string, log *slog.Logger, o StarterOptions) *Starter {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.RetryFor <= 0 {
		o.RetryFor = 10 * time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Starter{c: c, queue: taskQueue, log: log, retryFor: o.RetryFor, jobs: make(chan MemoryWriteInput, o.Queue), stop: make(chan struct{})}
	for range o.Workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for in := range s.jobs {
				s.startRetrying(in)
			}
		}()
	}
	return s
}

// Enqueue hands the start of in's write to the background. When the queue is
// full, or the Starter is closed, it starts the write itself and returns the
// start's error.
func (s *Starter) Enqueue(ctx context.Context, in MemoryWriteInput) error {
	s.mu.Lock()
	if !s.closed {
		select {
		case s.jobs <- in:
			s.mu.Unlock()
			return nil
		default:
		}
	}
	s.mu.Unlock()
	_, err := Start(ctx, s.c, s.queue, in)
	return err
}

// startRetrying starts in's write, retrying what may pass (not a refusal of the
// start itself) until it starts, RetryFor passes, or Close gives up waiting.
func (s *Starter) startRetrying(in MemoryWriteInput) {
	deadline := time.Now().Add(s.retryFor)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := Start(ctx, s.c, s.queue, in)
		cancel()
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err == nil || errors.As(err, &started) {
			return
		}
		if time.Now().After(deadline) {
			s.log.Error("memory write not started; the maintenance sweep will start it", "workflow_id", MemoryWriteWorkflowID(in.Event.TenantID, in.Event.IdempotencyKey), "error", err)
			return
		}
		s.log.Warn("memory write start failed; retrying", "workflow_id", MemoryWriteWorkflowID(in.Event.TenantID, in.Event.IdempotencyKey), "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-s.stop:
			s.log.Error("shutting down before a memory write started; the maintenance sweep will start it", "workflow_id", MemoryWriteWorkflowID(in.Event.TenantID, in.Event.IdempotencyKey))
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Close stops taking starts and waits up to timeout for the queued ones; what is
// still queued then is left to the maintenance sweep (its events are stored).
func (s *Starter) Close(timeout time.Duration) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.jobs)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		close(s.stop)
		s.log.Error("shutdown: memory write starts still queued; the maintenance sweep will start them", "queued", len(s.jobs))
	}
}
