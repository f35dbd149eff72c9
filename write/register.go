package write

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the write path's workflows (MemoryWrite, MemoryWriteBatch)
// and their activities on w.
func Register(w worker.Registry, acts *MemoryActivities) {
	w.RegisterWorkflowWithOptions(MemoryWrite, workflow.RegisterOptions{Name: MemoryWriteWorkflowName})
	w.RegisterWorkflowWithOptions(MemoryWriteBatch, workflow.RegisterOptions{Name: MemoryWriteBatchName})
	w.RegisterActivity(acts)
}
