package task

import (
	"go.temporal.io/sdk/worker"
)

// Register registers the task workflow and its activities (CallAction,
// Reconcile, RecordTransition) on w.
func Register(w worker.Registry, acts *TaskActivities) {
	w.RegisterWorkflow(TaskWorkflow)
	w.RegisterActivity(acts)
}
