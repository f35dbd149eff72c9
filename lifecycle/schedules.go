package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

func registerMaintenance(w worker.Registry, d Deps) {
	w.RegisterActivity(&MaintenanceActivities{Store: d.Store, Summariser: d.Summariser, Embedder: d.Embedder, Schemas: d.Schemas})
	w.RegisterWorkflowWithOptions(MaintenanceSweep, workflow.RegisterOptions{Name: MaintenanceSweepName})
	w.RegisterActivity(&SweepActivities{Store: d.Store, Temporal: d.Temporal, TaskQueue: d.TaskQueue, Write: d.Write})
}

func registerMaintenanceWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(MaintenanceExpire, workflow.RegisterOptions{Name: MaintenanceExpireName})
	w.RegisterWorkflowWithOptions(MaintenanceDecay, workflow.RegisterOptions{Name: MaintenanceDecayName})
	w.RegisterWorkflowWithOptions(MaintenanceConsolidate, workflow.RegisterOptions{Name: MaintenanceConsolidateName})
	w.RegisterWorkflowWithOptions(MaintenanceSchemaReport, workflow.RegisterOptions{Name: MaintenanceSchemaReportName})
	w.RegisterWorkflowWithOptions(RotateDataKeys, workflow.RegisterOptions{Name: RotateDataKeysName})
}

// Config is the maintenance schedule: how often each workflow runs (0 disables it)
// and its policy.
type Config struct {
	TaskQueue string
	// Prefix names the schedules (default "engram-maintenance"): one set per prefix.
	Prefix string
	// Disabled makes EnsureSchedules do nothing (ENGRAM_MAINT_SCHEDULES=off), for
	// workers that must not touch a shared server's schedules (tests).
	Disabled bool

	ExpiryEvery       time.Duration
	DecayEvery        time.Duration
	ConsolidateEvery  time.Duration
	SchemaReportEvery time.Duration
	SweepEvery        time.Duration // writes that can never finish marked FAILED
	SweepAfter        time.Duration // … once received this long ago

	Decay        storage.DecayPolicy
	Prune        storage.PrunePolicy
	PruneEnabled bool
	Consolidate  MaintenanceConsolidateInput
}

// ConfigFrom turns the configured maintenance settings into the schedule.
func ConfigFrom(taskQueue string, m config.Maintenance) Config {
	return Config{
		TaskQueue: taskQueue, Prefix: m.Prefix, Disabled: m.Disabled,
		ExpiryEvery: m.ExpiryEvery, DecayEvery: m.DecayEvery, ConsolidateEvery: m.ConsolidateEvery, SchemaReportEvery: m.SchemaReportEvery,
		SweepEvery: m.SweepEvery, SweepAfter: m.SweepAfter,
		Decay:        storage.DecayPolicy{IdleFor: m.DecayIdle, Factor: m.DecayFactor, Floor: m.DecayFloor},
		Prune:        storage.PrunePolicy{OlderThan: m.PruneAfter, MaxImportance: m.PruneMaxImportance},
		PruneEnabled: m.PruneEnabled,
		Consolidate:  MaintenanceConsolidateInput{MinFacts: m.ConsolidateMin, MinAge: m.ConsolidateMinAge},
	}
}

// DefaultConfig is the schedule with config.DefaultMaintenance's settings.
func DefaultConfig(taskQueue string) Config {
	return ConfigFrom(taskQueue, config.DefaultMaintenance())
}

// ScheduleID names a maintenance schedule in the Temporal Web UI (Schedules).
func (c Config) ScheduleID(name string) string {
	p := c.Prefix
	if p == "" {
		p = "engram-maintenance"
	}
	return p + "-" + name
}

// ScheduleNames are the maintenance schedules EnsureSchedules manages.
var ScheduleNames = []string{"expiry", "decay", "consolidate", "schema-report", "sweep"}

type scheduled struct {
	name     string
	every    time.Duration
	workflow string
	arg      any
}

func (c Config) schedules() []scheduled {
	return []scheduled{
		{"expiry", c.ExpiryEvery, MaintenanceExpireName, MaintenanceExpireInput{}},
		{"decay", c.DecayEvery, MaintenanceDecayName, MaintenanceDecayInput{Decay: c.Decay, Prune: c.Prune, PruneEnabled: c.PruneEnabled}},
		{"consolidate", c.ConsolidateEvery, MaintenanceConsolidateName, c.Consolidate},
		{"schema-report", c.SchemaReportEvery, MaintenanceSchemaReportName, MaintenanceSchemaReportInput{MinCount: 2}},
		{"sweep", c.SweepEvery, MaintenanceSweepName, MaintenanceSweepInput{OlderThan: c.SweepAfter}},
	}
}

// EnsureSchedules creates the maintenance schedules, or updates them to the
// configured interval, policy and task queue; a schedule whose interval is 0 is
// deleted. Every worker calls it at start: it is idempotent, and concurrent
// callers converge on the same schedules.
func EnsureSchedules(ctx context.Context, c client.Client, cfg Config) error {
	if cfg.Disabled {
		return nil
	}
	if cfg.TaskQueue == "" {
		return errors.New("maintenance schedules: task queue is empty")
	}
	sc := c.ScheduleClient()
	for _, s := range cfg.schedules() {
		id := cfg.ScheduleID(s.name)
		if s.every <= 0 {
			if err := sc.GetHandle(ctx, id).Delete(ctx); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete schedule %s: %w", id, err)
			}
			continue
		}
		action := &client.ScheduleWorkflowAction{
			ID: id, Workflow: s.workflow, Args: []any{s.arg}, TaskQueue: cfg.TaskQueue,
			WorkflowExecutionTimeout: 6 * time.Hour,
			TypedSearchAttributes:    temporal.NewSearchAttributes(memory.SearchAttrKind.ValueSet("maintenance")),
		}
		spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
		_, err := sc.Create(ctx, client.ScheduleOptions{
			ID: id, Spec: spec, Action: action, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Note: "Engram maintenance (" + s.name + "), managed by the worker: edit ENGRAM_MAINT_* instead",
		})
		if err == nil {
			continue
		}
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return fmt.Errorf("create schedule %s: %w", id, err)
		}
		err = sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				sch := in.Description.Schedule
				sch.Spec = &spec
				sch.Action = action
				if sch.Policy == nil {
					sch.Policy = &client.SchedulePolicies{}
				}
				sch.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
				return &client.ScheduleUpdate{Schedule: &sch}, nil
			},
		})
		if err != nil {
			return fmt.Errorf("update schedule %s: %w", id, err)
		}
	}
	return nil
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "not found")
}
