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
)

// MaintenanceSweepName is the registered name of the sweep of stuck writes.
const MaintenanceSweepName = "MaintenanceSweep"

// SweepActivities find writes that can never finish on their own: an event the
// API stored whose workflow never started (Temporal was down and the client did
// not retry), or whose workflow ended without settling it.
type SweepActivities struct {
	Store    *storage.Store
	Temporal client.Client
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
	Failed  int `json:"failed"`  // marked FAILED with the reason
}

// SweepStuckEvents marks FAILED, with the reason, every stuck event that names
// its workflow (a batch's events are the batch's) when that workflow does not
// exist or is closed; when Temporal cannot answer, the activity fails and retries,
// never marking on a guess. A retry of the same request (same idempotency key and
// body) starts the write again.
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
		n, err := a.Store.FailEvents(ctx, ev.TenantID, []string{ev.ID}, nil, reason)
		if err != nil {
			return res, err
		}
		res.Failed += n
		activity.RecordHeartbeat(ctx, res)
	}
	return res, nil
}

// why says whether the workflow of a stuck event will never settle it, and why.
func (a *SweepActivities) why(ctx context.Context, workflowID string) (string, bool, error) {
	d, err := a.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Sprintf("the write was accepted but its workflow %s never started (Temporal was unavailable?); send it again (same idempotency key) to retry", workflowID), true, nil
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

// MaintenanceSweep marks the writes that can never finish FAILED with the reason,
// so no event stays PROCESSING forever.
func MaintenanceSweep(ctx workflow.Context, in MaintenanceSweepInput) (SweepResult, error) {
	if in.OlderThan <= 0 {
		in.OlderThan = 15 * time.Minute
	}
	var a *SweepActivities
	var r SweepResult
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.SweepStuckEvents, SweepInput{Before: workflow.Now(ctx).UTC().Add(-in.OlderThan)}).Get(ctx, &r)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("checked %d stuck writes: %d still running, %d marked FAILED", r.Checked, r.Running, r.Failed))
	return r, err
}
