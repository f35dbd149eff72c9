package write

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// A batch writes each user's events in runs (batchRunsChange): one local activity,
// WriteRun, writes a run of up to MaxRunEvents consecutive events of one user, each
// as FastWrite would (Record, the in-process extractor, the outcome), in one
// Postgres transaction. Per event the write path runs about ten statements, six of
// them writes; each committed on its own waits for the WAL to reach the disk, and
// each was a local activity of the batch's workflow of its own (with the session
// and the event's status, three): 18 ms an event on this machine (engram bench
// recall --history, 2,000 turns, 36 turns/s). A run commits once.
const MaxRunEvents = 32

// WriteRunInput is a run of one user's events in time order, as Record takes each
// (without embedding: the batch embeds its turns in Index activities).
type WriteRunInput struct {
	Records         []RecordInput `json:"records"`
	ExtractAttempts int           `json:"extract_attempts"`
}

// WriteRunResult is what WriteRun did with the run's first len(Results) events, in
// order: each Done, or (the last only) recorded and left to the write's own steps
// (an extractor out of process). The events after those are left to the batch's
// per-event write (writeEvent): the first of them failed in a way that must fail
// the batch, which that write reports with the event's index.
type WriteRunResult struct {
	Results []FastWriteResult `json:"results"`
}

// WriteRun writes the run. Statements run in transactions of the run, committed
// before a governance step (which runs in its own, as GovernCommit does) and at the
// end; every part is idempotent, so a run again after a lost result (a killed
// worker, a failed commit) returns what the first committed.
func (a *MemoryActivities) WriteRun(ctx context.Context, in WriteRunInput) (WriteRunResult, error) {
	return writeRun(ctx, in, a.runSteps())
}

// runSteps are what a run is made of: FastWrite's steps, and its transactions.
type runSteps struct {
	record       func(context.Context, RecordInput) (RecordResult, error)
	governCommit func(context.Context, GovernInput) (GovernCommitResult, error)
	mark         func(context.Context, MarkEventInput) error
	// begin starts a transaction: ctx with it, and its end (commit, or else roll back).
	begin func(ctx context.Context) (context.Context, func(commit bool) error, error)
}

func (a *MemoryActivities) runSteps() runSteps {
	return runSteps{record: a.Record, governCommit: a.GovernCommit, mark: a.MarkEvent,
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

// writeRun is WriteRun over its steps.
func writeRun(ctx context.Context, in WriteRunInput, st runSteps) (WriteRunResult, error) {
	out, stop, err := writeRunOnce(ctx, in, st)
	if err != nil || stop == len(in.Records) || stop == len(out.Results) {
		return out, err
	}
	// Event stop failed for good after events of its transaction: those are written
	// again (the same outcome, in a transaction of their own), event stop is left.
	in.Records = in.Records[:stop]
	out, _, err = writeRunOnce(ctx, in, st)
	return out, err
}

// writeRunOnce writes in's events until one fails for good (stop: its index) or
// needs steps out of process. Results holds the events written and committed: on a
// failure for good, those committed before the transaction it failed in (rolled
// back), so fewer than stop when that transaction held earlier events.
func writeRunOnce(ctx context.Context, in WriteRunInput, st runSteps) (out WriteRunResult, stop int, err error) {
	var end func(bool) error // the open transaction's, or nil
	begin := func() (context.Context, error) {
		tctx, e, err := st.begin(ctx)
		end = e
		return tctx, err
	}
	commit := func() error {
		e := end
		end = nil
		return e(true)
	}
	defer func() {
		if end != nil {
			_ = end(false)
		}
	}()
	tctx, err := begin()
	if err != nil {
		return out, 0, err
	}
	committed := 0 // of out.Results, those committed
	for i, r := range in.Records {
		r.Embed, r.UpdateSession, r.ExtractAttempts = false, true, in.ExtractAttempts
		governed := false
		fw, err := fastWrite(tctx, FastWriteInput{Record: r, ExtractAttempts: in.ExtractAttempts}, st.record,
			func(_ context.Context, g GovernInput) (GovernCommitResult, error) {
				// Governance reads what the run wrote: commit it first. GovernCommit runs
				// in transactions of its own.
				if err := commit(); err != nil {
					return GovernCommitResult{}, err
				}
				committed, governed = len(out.Results), true
				gc, err := st.governCommit(ctx, g)
				if err != nil {
					return gc, err
				}
				tctx, err = begin()
				return gc, err
			}, st.mark)
		var ae *temporal.ApplicationError
		switch {
		case err != nil && errors.As(err, &ae) && ae.NonRetryable():
			// Left to the per-event write, which fails the batch naming the event.
			return WriteRunResult{Results: out.Results[:committed]}, i, nil
		case err != nil:
			return WriteRunResult{}, i, err // the whole run again
		}
		out.Results = append(out.Results, fw)
		if governed {
			committed = len(out.Results) // GovernCommit committed the outcome
		}
		if !fw.Done {
			// The extractor runs out of process: the write's own steps go on from Record.
			break
		}
	}
	if err := commit(); err != nil {
		return WriteRunResult{}, len(out.Results), err
	}
	return out, len(out.Results), nil
}
