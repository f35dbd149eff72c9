package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// MaintenanceSweepName is the registered name of the sweep of stuck writes.
const MaintenanceSweepName = "MaintenanceSweep"

// SweepActivities find writes that cannot finish on their own: an event the API
// stored whose workflow never started (an acknowledged write whose background
// start the process did not live to make, or Temporal was down), or whose
// workflow ended without settling it.
type SweepActivities struct {
	Store    *storage.Store
	Temporal client.Client
	// TaskQueue is where a write that never started is started; empty marks such
	// writes FAILED instead.
	TaskQueue string
	// Write carries the write-path settings (extract attempts, review timeout) a
	// started write gets, as the API would have given it.
	Write write.MemoryWriteInput
}

// SweepInput sweeps events received before Before.
type SweepInput struct {
	Before time.Time `json:"before"`
	Limit  int       `json:"limit,omitempty"`
}

// SweepResult counts what a sweep saw.
type SweepResult struct {
	Checked int `json:"checked"`
	Running int `json:"running"` // their workflow runs (e.g. waits for review): left alone
	Started int `json:"started"` // never started: their write is started now, from the stored event
	Failed  int `json:"failed"`  // marked FAILED with the reason
}

// SweepStuckEvents settles every stuck event that names its workflow (a batch's
// events are the batch's):
//   - a single write whose workflow does not exist is started now, from the stored
//     event (the API acknowledged it: it is durable, so it is done, not dropped);
//   - a batch's event whose workflow does not exist, an event whose stored row
//     cannot be replayed exactly, and an event whose workflow is closed are marked
//     FAILED with the reason (a retry of the same request starts the write again).
//
// When Temporal cannot answer, the activity fails and retries, never acting on a
// guess.
func (a *SweepActivities) SweepStuckEvents(ctx context.Context, in SweepInput) (SweepResult, error) {
	var res SweepResult
	if in.Limit <= 0 {
		in.Limit = 500
	}
	evs, err := a.Store.OrphanCandidates(ctx, in.Before, in.Limit)
	if err != nil {
		return res, err
	}
	for _, ev := range evs {
		res.Checked++
		reason, stuck, err := a.why(ctx, ev.WorkflowID)
		if err != nil {
			return res, err
		}
		if !stuck {
			res.Running++
			continue
		}
		if reason == "" {
			started, why, err := a.startStored(ctx, ev)
			if err != nil {
				return res, err
			}
			if started {
				res.Started++
				activity.RecordHeartbeat(ctx, res)
				continue
			}
			reason = why
		}
		n, err := a.Store.FailEvents(ctx, ev.TenantID, []string{ev.ID}, nil, reason)
		if err != nil {
			return res, err
		}
		res.Failed += n
		activity.RecordHeartbeat(ctx, res)
	}
	return res, nil
}

// neverStarted is the FAILED reason of a write whose workflow never started and
// cannot be started from its stored event.
func neverStarted(workflowID, why string) string {
	return fmt.Sprintf("the write was accepted but its workflow %s never started (%s); send it again (same idempotency key) to retry", workflowID, why)
}

// startStored starts the write of a stored event whose workflow never started,
// or says why it cannot.
func (a *SweepActivities) startStored(ctx context.Context, orphan storage.Event) (bool, string, error) {
	if a.TaskQueue == "" {
		return false, neverStarted(orphan.WorkflowID, "Temporal was unavailable?"), nil
	}
	if orphan.WorkflowID != write.MemoryWriteWorkflowID(orphan.TenantID, orphan.IdempotencyKey) {
		return false, neverStarted(orphan.WorkflowID, "a batch's events are started by their batch"), nil
	}
	ev, err := a.Store.GetEvent(ctx, orphan.TenantID, orphan.ID)
	if err != nil {
		return false, "", err
	}
	if err := a.Store.DecryptEvent(ev); err != nil {
		return false, neverStarted(orphan.WorkflowID, err.Error()), nil
	}
	in := a.Write
	in.Event = ev.Ingest()
	if same, err := a.Store.SameEvent(ev, in.Event); err != nil || !same {
		return false, neverStarted(orphan.WorkflowID, "the stored event cannot be replayed exactly"), nil
	}
	if _, err := write.Start(ctx, a.Temporal, a.TaskQueue, in); err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return true, "", nil // started meanwhile (a retried request)
		}
		return false, "", fmt.Errorf("start %s: %w", orphan.WorkflowID, err)
	}
	return true, "", nil
}

// why says whether the workflow of a stuck event will never settle it and why;
// an empty reason with stuck set means the workflow does not exist.
func (a *SweepActivities) why(ctx context.Context, workflowID string) (string, bool, error) {
	d, err := a.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Sprintf("the write's workflow %s ended %s without settling the event", workflowID, st), true, nil
	}
	return "", false, nil
}

// MaintenanceSweepInput configures a sweep: events received more than OlderThan
// ago (default 15 minutes) and still not settled.
type MaintenanceSweepInput struct {
	OlderThan time.Duration `json:"older_than,omitempty"`
}

// MaintenanceSweep settles the writes that cannot finish on their own: it starts
// the acknowledged ones that never started and marks the rest FAILED with the
// reason, so no event stays PROCESSING forever.
func MaintenanceSweep(ctx workflow.Context, in MaintenanceSweepInput) (SweepResult, error) {
	if in.OlderThan <= 0 {
		in.OlderThan = 15 * time.Minute
	}
	var a *SweepActivities
	var r SweepResult
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.SweepStuckEvents, SweepInput{Before: workflow.Now(ctx).UTC().Add(-in.OlderThan)}).Get(ctx, &r)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("checked %d stuck writes: %d still running, %d started, %d marked FAILED", r.Checked, r.Running, r.Started, r.Failed))
	return r, err
}
