package write

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// A batch writes each user's events in runs (batchRunsChange): one local activity,
// WriteEvents (WriteRun before revision 3), writes a run of up to MaxRunEvents consecutive events of one user, each
// as Write would (Record, the session, the in-process extractor, the outcome), in one
// Postgres transaction. Per event the write path runs about ten statements, six of
// them writes; each committed on its own waits for the WAL to reach the disk, and
// each was a local activity of the batch's workflow of its own (with the session
// and the event's status, three): 18 ms an event on this machine (engram bench
// recall --history, 2,000 turns, 36 turns/s). A run commits once.
const MaxRunEvents = 32

// WriteEventsInput is a run of one user's events in time order, each as Write
// takes it (without embedding: the batch embeds its turns in Index activities).
type WriteEventsInput struct {
	Events []WriteInput `json:"events"`
}

// WriteEventsResult is what WriteEvents did with the run's first len(Steps)
// events, in order: each settled, or (the last only) left to the workflow's steps
// (an extractor out of process). The events after those are left to the batch's
// write of the event alone: the first of them failed in a way that must fail the
// batch, which that write reports with the event's index.
type WriteEventsResult struct {
	Steps []WriteStep `json:"steps"`
}

// WriteEvents writes the run (a batch of revision 3). Statements run in
// transactions of the run, committed before a governance step (which runs in its
// own, as GovernCommit does) and at the end; every part is idempotent, so a run
// again after a lost result (a killed worker, a failed commit) returns what the
// first committed.
func (a *MemoryActivities) WriteEvents(ctx context.Context, in WriteEventsInput) (WriteEventsResult, error) {
	return runEvents(ctx, in, a.runSteps())
}

// WriteRunInput is the run of a batch that began before revision 3 (legacy.go).
type WriteRunInput struct {
	Records         []RecordInput `json:"records"`
	ExtractAttempts int           `json:"extract_attempts"`
}

// WriteRunResult is WriteEventsResult in the shape that batch reads.
type WriteRunResult struct {
	Results []FastWriteResult `json:"results"`
}

// WriteRun is WriteEvents for a batch that began before revision 3.
func (a *MemoryActivities) WriteRun(ctx context.Context, in WriteRunInput) (WriteRunResult, error) {
	return writeRun(ctx, in, a.runSteps())
}

func writeRun(ctx context.Context, in WriteRunInput, st runSteps) (WriteRunResult, error) {
	var ein WriteEventsInput
	for _, r := range in.Records {
		ein.Events = append(ein.Events, WriteInput{Event: r.Event, WorkflowID: r.WorkflowID, ExtractAttempts: in.ExtractAttempts})
	}
	out, err := runEvents(ctx, ein, st)
	var res WriteRunResult
	for _, step := range out.Steps {
		res.Results = append(res.Results, asFastWrite(step))
	}
	return res, err
}

// runMemo holds, for one attempt of a run, what every event of it would look up
// again: the schema version a name pins and the users found not being erased
// (one statement each per event otherwise). An erasure that begins during the run
// is as one that begins after an event's own check: its last sweep finds the run's
// events (see lifecycle).
type runMemo struct {
	pinned map[[2]string]string // (tenant, schema name) → the pinned reference
	clear  map[[2]string]bool   // (tenant, user) → not being erased
}

type runMemoKey struct{}

func withRunMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, runMemoKey{}, &runMemo{pinned: map[[2]string]string{}, clear: map[[2]string]bool{}})
}

// memoOf is ctx's run memo, or nil outside a run.
func memoOf(ctx context.Context) *runMemo {
	m, _ := ctx.Value(runMemoKey{}).(*runMemo)
	return m
}

// runSteps are what a run is made of: Write's parts, and its transactions.
type runSteps struct {
	parts
	// refuse fails for good when the user is being erased (RefuseDuringErasure).
	refuse func(ctx context.Context, tenantID, userID string) error
	// begin starts a transaction: ctx with it, and its end (commit, or else roll back).
	begin func(ctx context.Context) (context.Context, func(commit bool) error, error)
}

func (a *MemoryActivities) runSteps() runSteps {
	return runSteps{parts: a.parts(),
		refuse: func(ctx context.Context, tenantID, userID string) error {
			return RefuseDuringErasure(ctx, a.Store, tenantID, userID)
		},
		begin: func(ctx context.Context) (context.Context, func(bool) error, error) {
			tx, err := a.Store.DB().BeginTx(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("begin the run's transaction: %w", err)
			}
			return a.Store.WithTx(ctx, tx), func(commit bool) error {
				if !commit {
					return tx.Rollback()
				}
				if err := tx.Commit(); err != nil {
					return fmt.Errorf("commit the run's transaction: %w", err)
				}
				return nil
			}, nil
		}}
}

// runEvents is WriteEvents over its steps.
func runEvents(ctx context.Context, in WriteEventsInput, st runSteps) (WriteEventsResult, error) {
	out, stop, err := writeRunOnce(ctx, in, st)
	if err != nil || stop == len(in.Events) || stop == len(out.Steps) {
		return out, err
	}
	// Event stop failed for good after events of its transaction: those are written
	// again (the same outcome, in a transaction of their own), event stop is left.
	in.Events = in.Events[:stop]
	out, _, err = writeRunOnce(ctx, in, st)
	return out, err
}

// writeRunOnce writes in's events until one fails for good (stop: its index) or
// needs steps out of process. Results holds the events written and committed: on a
// failure for good, those committed before the transaction it failed in (rolled
// back), so fewer than stop when that transaction held earlier events.
func writeRunOnce(ctx context.Context, in WriteEventsInput, st runSteps) (out WriteEventsResult, stop int, err error) {
	ctx = withRunMemo(ctx)
	var end func(bool) error      // the open transaction's, or nil
	var tctx context.Context      // ctx with the open transaction
	users := map[[2]string]bool{} // whose events the open transaction holds
	begin := func() (context.Context, error) {
		c, e, err := st.begin(ctx)
		tctx, end = c, e
		return c, err
	}
	// commit commits the open transaction, unless one of its users is being erased
	// now (an erasure that began after the run looked: the run's events would be
	// committed after the erasure's deletes began); it is then rolled back.
	commit := func() error {
		for u := range users {
			if err := st.refuse(tctx, u[0], u[1]); err != nil {
				return err
			}
		}
		clear(users)
		e := end
		end = nil
		return e(true)
	}
	defer func() {
		if end != nil {
			_ = end(false)
		}
	}()
	if _, err := begin(); err != nil {
		return out, 0, err
	}
	committed := 0 // of out.Steps, those committed
	for i, r := range in.Events {
		users[[2]string{r.Event.TenantID, r.Event.UserID}] = true
		governed := false
		p := st.parts
		p.governCommit = func(_ context.Context, g GovernInput) (GovernCommitResult, error) {
			// Governance reads what the run wrote: commit it first. GovernCommit runs
			// in transactions of its own.
			if err := commit(); err != nil {
				return GovernCommitResult{}, err
			}
			committed, governed = len(out.Steps), true
			gc, err := st.governCommit(ctx, g)
			if err != nil {
				return gc, err
			}
			_, err = begin()
			return gc, err
		}
		r.Embed, r.Hold = false, false
		step, err := writeInProcess(tctx, r, p)
		var ae *temporal.ApplicationError
		switch {
		case err != nil && errors.As(err, &ae) && ae.NonRetryable():
			// Left to the per-event write, which fails the batch naming the event.
			return WriteEventsResult{Steps: out.Steps[:committed]}, i, nil
		case err != nil:
			return WriteEventsResult{}, i, err // the whole run again
		}
		out.Steps = append(out.Steps, step)
		if governed {
			committed = len(out.Steps) // GovernCommit committed the outcome
		}
		if step.Result.Status == "" {
			// The extractor runs out of process: the write's own steps go on from Record.
			break
		}
	}
	if err := commit(); err != nil {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.NonRetryable() {
			// Left to the per-event writes: the first event of the transaction fails
			// the batch (being erased, it is refused).
			return WriteEventsResult{Steps: out.Steps[:committed]}, committed, nil
		}
		return WriteEventsResult{}, len(out.Steps), err
	}
	return out, len(out.Steps), nil
}
