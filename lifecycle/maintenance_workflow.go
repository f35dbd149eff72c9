package lifecycle

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Registered names of the maintenance workflows (the schedules start them by name).
const (
	MaintenanceExpireName       = "MaintenanceExpire"
	MaintenanceDecayName        = "MaintenanceDecay"
	MaintenanceConsolidateName  = "MaintenanceConsolidate"
	MaintenanceSchemaReportName = "MaintenanceSchemaReport"
	RotateDataKeysName          = "RotateDataKeys"
)

func maintenanceActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10, NonRetryableErrorTypes: memory.NonRetryable},
	})
}

// MaintenanceExpireInput configures an expiry run.
type MaintenanceExpireInput struct {
	Batch int `json:"batch,omitempty"`
}

// MaintenanceExpire marks facts whose valid_until passed (by the workflow's clock)
// EXPIRED.
func MaintenanceExpire(ctx workflow.Context, in MaintenanceExpireInput) (int, error) {
	var a *MaintenanceActivities
	var n int
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.ExpireFacts, ExpireInput{Now: workflow.Now(ctx).UTC(), Batch: in.Batch}).Get(ctx, &n)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("expired %d facts", n))
	return n, err
}

// MaintenanceDecayInput configures decay and pruning.
type MaintenanceDecayInput struct {
	Decay        storage.DecayPolicy `json:"decay"`
	Prune        storage.PrunePolicy `json:"prune"`
	PruneEnabled bool                `json:"prune_enabled"`
}

// MaintenanceDecay lowers idle facts' importance and prunes low-value episodes.
func MaintenanceDecay(ctx workflow.Context, in MaintenanceDecayInput) (DecayResult, error) {
	var a *MaintenanceActivities
	var r DecayResult
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.DecayAndPrune, DecayInput{Now: workflow.Now(ctx).UTC(), Decay: in.Decay, Prune: in.Prune, PruneEnabled: in.PruneEnabled}).Get(ctx, &r)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("decayed %d facts, pruned %d evidence rows and %d events", r.Decayed, r.PrunedEvidence, r.PrunedEvents))
	return r, err
}

// MaintenanceConsolidateInput configures consolidation.
type MaintenanceConsolidateInput struct {
	MinFacts     int                 `json:"min_facts,omitempty"`
	MinAge       time.Duration       `json:"min_age,omitempty"`
	Types        []memory.MemoryType `json:"types,omitempty"`
	MaxGroups    int                 `json:"max_groups,omitempty"`
	SummaryRunes int                 `json:"summary_runes,omitempty"`
}

// MaintenanceConsolidate folds many fine-grained episodic facts into summaries.
func MaintenanceConsolidate(ctx workflow.Context, in MaintenanceConsolidateInput) (ConsolidateResult, error) {
	var a *MaintenanceActivities
	var r ConsolidateResult
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.Consolidate, ConsolidateInput{
		Now: workflow.Now(ctx).UTC(), MinFacts: in.MinFacts, MinAge: in.MinAge, Types: in.Types, MaxGroups: in.MaxGroups, SummaryRunes: in.SummaryRunes,
	}).Get(ctx, &r)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("folded %d facts into %d summaries", r.Sources, r.Groups))
	return r, err
}

// MaintenanceSchemaReportInput configures the schema report.
type MaintenanceSchemaReportInput struct {
	TenantID string        `json:"tenant_id,omitempty"`
	Window   time.Duration `json:"window,omitempty"` // look back this far (default 30 days)
	MinCount int           `json:"min_count,omitempty"`
}

// MaintenanceSchemaReport lists schema changes the extractor's output suggests; the
// result (and the workflow's details in the Web UI) is the report.
func MaintenanceSchemaReport(ctx workflow.Context, in MaintenanceSchemaReportInput) ([]SchemaSuggestion, error) {
	if in.Window <= 0 {
		in.Window = 30 * 24 * time.Hour
	}
	var a *MaintenanceActivities
	var out []SchemaSuggestion
	err := workflow.ExecuteActivity(maintenanceActivity(ctx), a.SchemaReport, SchemaReportInput{TenantID: in.TenantID, Since: workflow.Now(ctx).Add(-in.Window).UTC(), MinCount: in.MinCount}).Get(ctx, &out)
	details := fmt.Sprintf("## %d schema suggestion(s)\n\n", len(out))
	for _, s := range out {
		if s.Kind == "attribute" {
			details += fmt.Sprintf("- %s: predicate `%s` lacks attribute `%s` (%d×, e.g. %v)\n", s.Schema, s.Predicate, s.Attribute, s.Count, s.Examples)
		} else {
			details += fmt.Sprintf("- %s: unknown predicate `%s` proposed %d×\n", s.Schema, s.Predicate, s.Count)
		}
	}
	workflow.SetCurrentDetails(ctx, details)
	return out, err
}

// RotateDataKeysWorkflowID is one rotation at a time.
const RotateDataKeysWorkflowID = "keys/rotate-data"

// RotateDataKeys re-seals every row under the current encryption key.
func RotateDataKeys(ctx workflow.Context, in RotateInput) (map[string]int, error) {
	var a *MaintenanceActivities
	var out map[string]int
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour, HeartbeatTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 20},
	})
	err := workflow.ExecuteActivity(ctx, a.RotateKeys, in).Get(ctx, &out)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("re-sealed %v", out))
	return out, err
}
