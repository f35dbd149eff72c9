package worker

import (
	"go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/activities"
	"github.com/engramhq/engram/workflows"
)

// RegisterTasks registers the task workflow and its activities (CallAction,
// Reconcile, RecordTransition) on w.
func RegisterTasks(w worker.Registry, acts *activities.TaskActivities) {
	w.RegisterWorkflow(workflows.TaskWorkflow)
	w.RegisterActivity(acts)
}
