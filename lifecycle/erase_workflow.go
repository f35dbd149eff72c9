package lifecycle

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// EraseSubjectWorkflowName is the registered name of the erasure workflow.
const EraseSubjectWorkflowName = "EraseSubject"

// EraseKind is the EngramKind of erasure workflows. They carry neither EngramTenant
// nor EngramSubject, so the visibility query that finds a subject's workflows never
// finds the erasure itself.
const EraseKind = "erase"

// Steps of an erasure that are not Postgres tables.
const (
	EraseStepTemporal      = "temporal"
	EraseStepKeywordIndex  = "keyword_index"
	EraseStepTemporalSweep = "temporal_sweep"
)

// EraseSubjectInput asks to erase a user of a tenant (or the whole tenant when
// UserID is empty).
type EraseSubjectInput struct {
	TenantID    string `json:"tenant_id"`
	UserID      string `json:"user_id,omitempty"`
	RequestedBy string `json:"requested_by"`
	Reason      string `json:"reason,omitempty"`
	// BatchSize is the rows deleted per transaction (default 500).
	BatchSize int `json:"batch_size,omitempty"`
	// HeartbeatTimeout is how soon a step is retried on another worker after its
	// worker died (default 30s).
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// PauseAfterStep and Pause add a durable pause after a step; Throttle sleeps
	// between batches. Both exist for crash tests; leave them zero.
	PauseAfterStep string        `json:"pause_after_step,omitempty"`
	Pause          time.Duration `json:"pause,omitempty"`
	Throttle       time.Duration `json:"throttle,omitempty"`
}

// Subject is the erasure's subject.
func (in EraseSubjectInput) Subject() storage.ErasureSubject {
	return storage.ErasureSubject{TenantID: in.TenantID, UserID: in.UserID}
}

// EraseSubjectResult is the finished tombstone.
type EraseSubjectResult struct {
	TombstoneID int64            `json:"tombstone_id"`
	Status      string           `json:"status"`
	Counts      map[string]int64 `json:"counts"`
	RequestedAt time.Time        `json:"requested_at"`
	FinishedAt  *time.Time       `json:"finished_at,omitempty"`
}

// EraseSubjectWorkflowID is one id per subject: asking twice while an erasure runs
// attaches to it instead of starting a second.
// Ids that Temporal could not carry (not printable ASCII, e.g. 张三, or longer than
// 200 bytes) are hashed (see TemporalIDPart), so every user can be erased.
func EraseSubjectWorkflowID(tenantID, userID string) string {
	if userID == "" {
		return "erase/" + memory.TemporalIDPart(tenantID)
	}
	return "erase/" + memory.TemporalIDPart(tenantID) + "/" + memory.TemporalIDPart(userID)
}

// EraseSubjectStartOptions are the options to start an erasure with.
func EraseSubjectStartOptions(taskQueue string, in EraseSubjectInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                    EraseSubjectWorkflowID(in.TenantID, in.UserID),
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(memory.SearchAttrKind.ValueSet(EraseKind)),
		StaticSummary:         fmt.Sprintf("erase %s of tenant %s", in.Subject().Type(), in.TenantID),
	}
}

// EraseSubject is the right to be forgotten: it records a RUNNING tombstone (the
// write path refuses the subject from then on), deletes the subject's Temporal
// histories (terminating writes and tasks in flight), deletes their rows table by
// table in batches, erases the external keyword index, sweeps Temporal once more for
// workflows started meanwhile, and marks the tombstone DONE with the counts. Every
// step is idempotent, so after a crash the workflow resumes where it was.
func EraseSubject(ctx workflow.Context, in EraseSubjectInput) (EraseSubjectResult, error) {
	subj := in.Subject()
	if subj.TenantID == "" {
		return EraseSubjectResult{}, temporal.NewNonRetryableApplicationError("tenant_id: is empty", memory.ErrTypeBadInput, nil)
	}
	if in.BatchSize <= 0 {
		in.BatchSize = 500
	}
	if in.HeartbeatTimeout <= 0 {
		in.HeartbeatTimeout = 30 * time.Second
	}
	var a *EraseActivities
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, NonRetryableErrorTypes: memory.NonRetryable},
	})
	long := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    in.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, NonRetryableErrorTypes: memory.NonRetryable},
	})
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	var ts storage.Tombstone
	if err := workflow.ExecuteActivity(short, a.BeginErasure, EraseBeginInput{Subject: subj, RequestedBy: in.RequestedBy, Reason: in.Reason, WorkflowID: wfID}).Get(ctx, &ts); err != nil {
		return EraseSubjectResult{}, err
	}
	pause := func(step string) {
		if in.PauseAfterStep == step && in.Pause > 0 {
			_ = workflow.Sleep(ctx, in.Pause)
		}
	}
	progress := func(step string) {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("erasing %s of tenant %s: step **%s**", subj.Type(), subj.TenantID, step))
	}
	progress(EraseStepTemporal)
	if err := workflow.ExecuteActivity(long, a.EraseTemporal, EraseTemporalInput{Subject: subj, Step: EraseStepTemporal, Skip: wfID}).Get(ctx, nil); err != nil {
		return EraseSubjectResult{}, err
	}
	pause(EraseStepTemporal)
	for _, step := range storage.ErasureSteps {
		progress(step)
		if err := workflow.ExecuteActivity(long, a.EraseStep, EraseStepInput{Subject: subj, Step: step, BatchSize: in.BatchSize, Throttle: in.Throttle}).Get(ctx, nil); err != nil {
			return EraseSubjectResult{}, err
		}
		pause(step)
	}
	progress(EraseStepKeywordIndex)
	if err := workflow.ExecuteActivity(long, a.EraseKeywordIndex, EraseStepInput{Subject: subj, Step: EraseStepKeywordIndex}).Get(ctx, nil); err != nil {
		return EraseSubjectResult{}, err
	}
	progress(EraseStepTemporalSweep)
	if err := workflow.ExecuteActivity(long, a.EraseTemporal, EraseTemporalInput{Subject: subj, Step: EraseStepTemporalSweep, Skip: wfID}).Get(ctx, nil); err != nil {
		return EraseSubjectResult{}, err
	}
	if err := workflow.ExecuteActivity(short, a.FinishErasure, subj).Get(ctx, &ts); err != nil {
		return EraseSubjectResult{}, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("erased %s of tenant %s: %s", subj.Type(), subj.TenantID, storage.MarshalCounts(ts.Counts)))
	return EraseSubjectResult{TombstoneID: ts.ID, Status: ts.Status, Counts: ts.Counts, RequestedAt: ts.RequestedAt, FinishedAt: ts.FinishedAt}, nil
}
