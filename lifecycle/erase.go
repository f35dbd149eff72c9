package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// KeywordEraser removes a subject's documents from an external keyword index
// (Typesense). The Postgres full-text index lives in the rows and goes with them.
// userID empty means the whole tenant. It must be idempotent.
type KeywordEraser interface {
	EraseSubject(ctx context.Context, tenantID, userID string) (int64, error)
}

// EraseActivities are the steps of the EraseSubject workflow.
type EraseActivities struct {
	Store *storage.Store
	// Temporal, when set, is used to delete the subject's workflow histories.
	Temporal  client.Client
	Namespace string
	// Keyword, when set, is the external keyword index to erase from.
	Keyword KeywordEraser
}

// EraseBeginInput opens an erasure.
type EraseBeginInput struct {
	Subject     storage.ErasureSubject `json:"subject"`
	RequestedBy string                 `json:"requested_by"`
	Reason      string                 `json:"reason"`
	WorkflowID  string                 `json:"workflow_id"`
}

// BeginErasure records the RUNNING tombstone; from then on writes are refused.
func (a *EraseActivities) BeginErasure(ctx context.Context, in EraseBeginInput) (storage.Tombstone, error) {
	t, err := a.Store.BeginErasure(ctx, in.Subject, in.RequestedBy, in.Reason, in.WorkflowID, runID(ctx))
	if err != nil {
		return storage.Tombstone{}, err
	}
	return *t, nil
}

// EraseStepInput names one step of an erasure.
type EraseStepInput struct {
	Subject   storage.ErasureSubject `json:"subject"`
	Step      string                 `json:"step"`
	BatchSize int                    `json:"batch_size,omitempty"`
	// Throttle sleeps between batches. It exists for crash tests (kill the worker
	// in the middle of a step); leave it zero.
	Throttle time.Duration `json:"throttle,omitempty"`
}

// EraseStep deletes one step's rows in batches, heartbeating the running count, and
// records the count on the tombstone. After a crash the retry continues from the
// last heartbeat's count; the rows already deleted are simply not found again.
func (a *EraseActivities) EraseStep(ctx context.Context, in EraseStepInput) (int64, error) {
	var total int64
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &total)
	}
	for {
		n, err := a.Store.EraseBatch(ctx, in.Subject, in.Step, in.BatchSize)
		if err != nil {
			return total, err
		}
		total += n
		activity.RecordHeartbeat(ctx, total)
		if n == 0 {
			break
		}
		if in.Throttle > 0 {
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(in.Throttle):
			}
		}
	}
	return total, a.Store.RecordErasureStep(ctx, in.Subject, in.Step, total)
}

// EraseKeywordIndex removes the subject's documents from the external keyword index.
func (a *EraseActivities) EraseKeywordIndex(ctx context.Context, in EraseStepInput) (int64, error) {
	var n int64
	if a.Keyword != nil {
		var err error
		if n, err = a.Keyword.EraseSubject(ctx, in.Subject.TenantID, in.Subject.UserID); err != nil {
			return 0, fmt.Errorf("erase keyword index: %w", err)
		}
	}
	return n, a.Store.RecordErasureStep(ctx, in.Subject, in.Step, n)
}

// EraseTemporalInput names the subject whose workflow histories are deleted.
type EraseTemporalInput struct {
	Subject storage.ErasureSubject `json:"subject"`
	Step    string                 `json:"step"`
	// Skip is the erasure's own workflow id (never deleted by itself).
	Skip string `json:"skip"`
}

// visibilityValue quotes a value for a visibility query.
func visibilityValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// SubjectVisibilityQuery is the visibility query that finds a subject's workflows:
// the write workflows of a user (EngramSubject), or everything of a tenant.
func SubjectVisibilityQuery(subj storage.ErasureSubject) string {
	if subj.UserID == "" {
		return "EngramTenant = " + visibilityValue(subj.TenantID)
	}
	return "EngramSubject = " + visibilityValue(subj.UserID) + " AND EngramTenant = " + visibilityValue(subj.TenantID)
}

// EraseTemporal deletes the subject's workflow executions (running ones are
// terminated by the server first): those the visibility query finds, the write
// workflows named on their events and their task workflows. Deleting is
// idempotent: an execution already gone is counted once and skipped. It returns
// only once every execution it deleted is gone (see waitGone), so a DONE
// tombstone is never said of histories that still exist.
func (a *EraseActivities) EraseTemporal(ctx context.Context, in EraseTemporalInput) (int64, error) {
	if a.Temporal == nil {
		return 0, a.Store.RecordErasureStep(ctx, in.Subject, in.Step, 0)
	}
	d := &temporalDeleter{a: a, in: in, ns: a.Namespace, seen: map[string]bool{}, began: activity.GetInfo(ctx).StartedTime}
	if d.ns == "" {
		d.ns = "default"
	}
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &d.total)
	}
	if _, err := d.deleteListed(ctx); err != nil {
		return d.total, err
	}
	// Postgres knows workflow ids visibility may not show yet.
	wfs, err := a.Store.SubjectWorkflowIDs(ctx, in.Subject)
	if err != nil {
		return d.total, err
	}
	tasks, err := a.Store.SubjectTaskIDs(ctx, in.Subject)
	if err != nil {
		return d.total, err
	}
	tp := memory.TemporalIDPart(in.Subject.TenantID)
	for _, t := range tasks {
		wfs = append(wfs, "task/"+tp+"/"+memory.TemporalIDPart(t))
	}
	for _, id := range wfs {
		// Only single-event writes and tasks belong to one subject; a batch
		// (MemoryWriteBatch, any id) mixes users and is left to the namespace's
		// retention (see privacy/README.md).
		if !strings.HasPrefix(id, "write/"+tp+"/") && !strings.HasPrefix(id, "task/"+tp+"/") {
			continue
		}
		if err := d.del(ctx, id, "", true); err != nil {
			return d.total, err
		}
	}
	if err := d.waitGone(ctx); err != nil {
		return d.total, err
	}
	return d.total, a.Store.RecordErasureStep(ctx, in.Subject, in.Step, d.total)
}

// goneWait bounds how long one attempt of EraseTemporal waits for the executions
// it deleted to be gone; the attempt then fails (retryably) naming them.
const goneWait = 10 * time.Minute

// temporalDeleter deletes one subject's executions and remembers what it asked to
// delete, so that it can wait for them to be gone.
type temporalDeleter struct {
	a       *EraseActivities
	in      EraseTemporalInput
	ns      string
	total   int64
	seen    map[string]bool
	pending []*commonpb.WorkflowExecution
	// began is when the step began: what started later is deleted, not waited for.
	began time.Time
}

// del asks Temporal to delete one execution (runID empty: the id's current run);
// await adds it to what waitGone waits for.
func (d *temporalDeleter) del(ctx context.Context, wfID, runID string, await bool) error {
	key := wfID + "/" + runID
	if wfID == "" || wfID == d.in.Skip || d.seen[key] {
		return nil
	}
	d.seen[key] = true
	ex := &commonpb.WorkflowExecution{WorkflowId: wfID, RunId: runID}
	_, err := d.a.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{Namespace: d.ns, WorkflowExecution: ex})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete workflow %s: %w", wfID, err)
	}
	d.total++
	if await {
		d.pending = append(d.pending, ex)
	}
	activity.RecordHeartbeat(ctx, d.total)
	return nil
}

// deleteListed deletes every execution the subject's visibility query lists and
// returns how many of them started before the step did (the erasure's own
// workflow aside). Those are what the step waits for: a write refused during the
// erasure, started after it, is deleted but not waited for, so a client that keeps
// writing cannot hold the erasure open (the next Temporal step, or the next
// attempt, deletes what it started meanwhile).
func (d *temporalDeleter) deleteListed(ctx context.Context) (int, error) {
	query := SubjectVisibilityQuery(d.in.Subject)
	listed := 0
	var token []byte
	for {
		resp, err := d.a.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: d.ns, Query: query, PageSize: 200, NextPageToken: token})
		if err != nil {
			return listed, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		for _, ex := range resp.Executions {
			if ex.GetExecution().GetWorkflowId() == d.in.Skip {
				continue
			}
			old := ex.GetStartTime().AsTime().Before(d.began)
			if old {
				listed++
			}
			if err := d.del(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), old); err != nil {
				return listed, err
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return listed, nil
		}
	}
}

// waitGone waits until every execution deleted is gone (Describe answers
// NotFound) and the subject's visibility query lists none. Temporal deletes a
// workflow that closed moments ago only once its transfer queue has acknowledged
// the close (history.transferProcessorUpdateAckInterval, 30 s by default, then
// retries 3 s × 1.5ⁿ apart): a minute or more, which a DONE tombstone must not
// hide. An execution still there after half a minute is asked again (a new run of
// the same id). Heartbeats while it waits; runs out after goneWait.
func (d *temporalDeleter) waitGone(ctx context.Context) error {
	deadline := time.Now().Add(goneWait)
	poll := func(left string) error {
		activity.RecordHeartbeat(ctx, d.total)
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s's workflows are still present %s after deleting them: %s", d.in.Subject.Type(), goneWait, left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
			return nil
		}
	}
	for {
		for len(d.pending) > 0 {
			ex := d.pending[0]
			asked := time.Now()
			for {
				_, err := d.a.Temporal.DescribeWorkflowExecution(ctx, ex.GetWorkflowId(), ex.GetRunId())
				var nf *serviceerror.NotFound
				if errors.As(err, &nf) {
					break
				}
				if err != nil {
					return fmt.Errorf("describe workflow %s: %w", ex.GetWorkflowId(), err)
				}
				if time.Since(asked) > 30*time.Second {
					if _, err := d.a.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{Namespace: d.ns, WorkflowExecution: ex}); err != nil && !errors.As(err, &nf) {
						return fmt.Errorf("delete workflow %s: %w", ex.GetWorkflowId(), err)
					}
					asked = time.Now()
				}
				if err := poll(fmt.Sprintf("%d histories (first %s)", len(d.pending), ex.GetWorkflowId())); err != nil {
					return err
				}
			}
			d.pending = d.pending[1:]
		}
		// Visibility trails the histories: wait for it too, deleting what it lists
		// that was not deleted yet.
		listed, err := d.deleteListed(ctx)
		if err != nil {
			return err
		}
		if listed == 0 {
			return nil
		}
		if len(d.pending) == 0 {
			if err := poll(fmt.Sprintf("%d in visibility (%s)", listed, SubjectVisibilityQuery(d.in.Subject))); err != nil {
				return err
			}
		}
	}
}

// FinishErasure marks the tombstone DONE and returns it.
func (a *EraseActivities) FinishErasure(ctx context.Context, subj storage.ErasureSubject) (storage.Tombstone, error) {
	t, err := a.Store.FinishErasure(ctx, subj, runID(ctx))
	if err != nil {
		return storage.Tombstone{}, err
	}
	return *t, nil
}

// runID is the erasure run an activity belongs to: the key of its request
// (storage.ErasureRequest). Read from the activity, so the workflow's inputs and
// history stay as they were.
func runID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.RunID
}
