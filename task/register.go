package task

import (
	"go.temporal.io/sdk/worker"
)

// Register registers the task workflow and its activities (CallAction,
// Reconcile, RecordTransition) on w.
func Register(w worker.Registry, acts *TaskActivities) {
	RegisterWorkflows(w)
	w.RegisterActivity(acts)
}

// RegisterWorkflows registers the task workflow alone; a worker.WorkflowReplayer
// takes it this way.
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflow(TaskWorkflow)
}
