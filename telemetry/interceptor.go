package telemetry

import (
	"context"

	"github.com/engramhq/engram/write"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// Interceptor counts write outcomes (MemoryWrite results) and extraction attempts
// and failures (Extract and Validate activities) on the workers created from a
// client that carries it (client.Options.Interceptors), without touching the
// workflows' code.
func (m *Metrics) Interceptor() interceptor.Interceptor { return &countingInterceptor{m: m} }

type countingInterceptor struct {
	interceptor.InterceptorBase
	m *Metrics
}

func (c *countingInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityCounter{m: c.m}
	i.Next = next
	return i
}

func (c *countingInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowCounter{m: c.m}
	i.Next = next
	return i
}

type activityCounter struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

func (a *activityCounter) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	switch activity.GetInfo(ctx).ActivityType.Name {
	case "Extract":
		a.m.ExtractAttempts.Inc()
		if err != nil {
			a.m.ExtractFailures.WithLabelValues("error").Inc()
		}
	case "Validate":
		if v, ok := res.(write.ValidateResult); ok && err == nil && len(v.Errors) > 0 {
			a.m.ExtractFailures.WithLabelValues("invalid").Inc()
		}
	case "Write":
		// An in-process extractor runs inside the write's one step: its attempts,
		// and those that did not validate, count as the steps' would.
		if r, ok := res.(write.WriteStep); ok && err == nil && r.Result.Attempts > 0 && r.Extract == nil {
			a.countInProcess(r.Result.Attempts, r.Result.Status != write.WriteUnparsed)
		}
	case "FastWrite":
		// Revision 2's one step (write/legacy.go).
		if r, ok := res.(write.FastWriteResult); ok && err == nil && r.Done {
			a.countInProcess(r.Attempts, r.Status != write.WriteUnparsed)
		}
	}
	return res, err
}

// countInProcess counts an in-process extraction's attempts, each but a last
// that validated as one that did not.
func (a *activityCounter) countInProcess(attempts int, lastValid bool) {
	a.m.ExtractAttempts.Add(float64(attempts))
	invalid := attempts
	if lastValid {
		invalid--
	}
	if invalid > 0 {
		a.m.ExtractFailures.WithLabelValues("invalid").Add(float64(invalid))
	}
}

type workflowCounter struct {
	interceptor.WorkflowInboundInterceptorBase
	m *Metrics
}

func (w *workflowCounter) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := w.Next.ExecuteWorkflow(ctx, in)
	if workflow.GetInfo(ctx).WorkflowType.Name != write.MemoryWriteWorkflowName || workflow.IsReplaying(ctx) {
		return res, err
	}
	status := "FAILED"
	if err == nil {
		switch r := res.(type) {
		case write.MemoryWriteResult:
			status = r.Status
		case *write.MemoryWriteResult:
			status = r.Status
		}
	}
	if status == "" {
		status = "UNKNOWN"
	}
	w.m.Writes.WithLabelValues(status).Inc()
	return res, err
}
