package write

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the write path's workflows (MemoryWrite, MemoryWriteBatch)
// and their activities on w.
func Register(w worker.Registry, acts *MemoryActivities) {
	RegisterWorkflows(w)
	w.RegisterActivity(acts)
}

// RegisterWorkflows registers the write path's workflows alone, under the names
// clients start them by; a worker.WorkflowReplayer takes them this way.
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(MemoryWrite, workflow.RegisterOptions{Name: MemoryWriteWorkflowName})
	w.RegisterWorkflowWithOptions(MemoryWriteBatch, workflow.RegisterOptions{Name: MemoryWriteBatchName})
}
