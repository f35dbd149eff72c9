package lifecycle

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// Deps are what the life-cycle activities need.
type Deps struct {
	Store *storage.Store
	// Temporal deletes erased subjects' workflow histories; nil skips that step.
	Temporal  client.Client
	Namespace string
	// Keyword is the external keyword index erasure removes documents from (the
	// Typesense adapter); nil when only Postgres full-text is used.
	Keyword KeywordEraser
	// Summariser writes consolidated summaries; nil means the extractive one.
	Summariser llm.Summariser
	// Embedder indexes summary facts; nil leaves them without vectors.
	Embedder embedding.Embedder
	// Schemas resolves schemas for the schema report; nil means the built-ins.
	Schemas schema.Source
	// TaskQueue is where the sweep starts writes that never started; Write carries
	// their write-path settings (extract attempts, review timeout).
	TaskQueue string
	Write     write.MemoryWriteInput
}

// Register registers the erasure, key rotation and maintenance workflows and
// their activities on w.
func Register(w worker.Registry, d Deps) {
	RegisterWorkflows(w)
	w.RegisterActivity(&EraseActivities{Store: d.Store, Temporal: d.Temporal, Namespace: d.Namespace, Keyword: d.Keyword})
	registerMaintenance(w, d)
}

// RegisterWorkflows registers the erasure, key rotation and maintenance workflows
// alone, under the names clients and schedules start them by; a
// worker.WorkflowReplayer takes them this way.
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(EraseSubject, workflow.RegisterOptions{Name: EraseSubjectWorkflowName})
	registerMaintenanceWorkflows(w)
}
