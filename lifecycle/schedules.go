package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

func registerMaintenance(w worker.Registry, d Deps) {
	w.RegisterActivity(&MaintenanceActivities{Store: d.Store, Summariser: d.Summariser, Embedder: d.Embedder, Schemas: d.Schemas})
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

	Decay        storage.DecayPolicy
	Prune        storage.PrunePolicy
	PruneEnabled bool
	Consolidate  MaintenanceConsolidateInput
}

// DefaultConfig: expiry every 10 minutes, decay hourly (facts idle 30 days lose 5%
// per run, never below 0.05), pruning off, consolidation hourly (≥ 5 episodic facts
// older than a day), schema report daily.
func DefaultConfig(taskQueue string) Config {
	return Config{
		TaskQueue:         taskQueue,
		ExpiryEvery:       10 * time.Minute,
		DecayEvery:        time.Hour,
		ConsolidateEvery:  time.Hour,
		SchemaReportEvery: 24 * time.Hour,
		Decay:             storage.DecayPolicy{IdleFor: 30 * 24 * time.Hour, Factor: 0.95, Floor: 0.05},
		Prune:             storage.PrunePolicy{OlderThan: 180 * 24 * time.Hour, MaxImportance: 0.2},
		Consolidate:       MaintenanceConsolidateInput{MinFacts: 5, MinAge: 24 * time.Hour},
	}
}

// ConfigFromEnv reads ENGRAM_MAINT_* over the defaults:
//
//	ENGRAM_MAINT_EXPIRY_EVERY, _DECAY_EVERY, _CONSOLIDATE_EVERY, _SCHEMA_REPORT_EVERY   durations; 0 disables
//	ENGRAM_MAINT_DECAY_IDLE (720h), _DECAY_FACTOR (0.95), _DECAY_FLOOR (0.05)
//	ENGRAM_MAINT_PRUNE (false), _PRUNE_AFTER (4320h), _PRUNE_MAX_IMPORTANCE (0.2)
//	ENGRAM_MAINT_CONSOLIDATE_MIN (5), _CONSOLIDATE_MIN_AGE (24h)
//	ENGRAM_MAINT_PREFIX (engram-maintenance) names the schedules; ENGRAM_MAINT_SCHEDULES=off skips them
func ConfigFromEnv(taskQueue string) (Config, error) {
	c := DefaultConfig(taskQueue)
	durs := []struct {
		name string
		dst  *time.Duration
	}{
		{"ENGRAM_MAINT_EXPIRY_EVERY", &c.ExpiryEvery}, {"ENGRAM_MAINT_DECAY_EVERY", &c.DecayEvery},
		{"ENGRAM_MAINT_CONSOLIDATE_EVERY", &c.ConsolidateEvery}, {"ENGRAM_MAINT_SCHEMA_REPORT_EVERY", &c.SchemaReportEvery},
		{"ENGRAM_MAINT_DECAY_IDLE", &c.Decay.IdleFor}, {"ENGRAM_MAINT_PRUNE_AFTER", &c.Prune.OlderThan},
		{"ENGRAM_MAINT_CONSOLIDATE_MIN_AGE", &c.Consolidate.MinAge},
	}
	for _, d := range durs {
		if v := strings.TrimSpace(os.Getenv(d.name)); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return c, fmt.Errorf("%s: %q is not a duration (e.g. 10m, 24h; 0 disables)", d.name, v)
			}
			*d.dst = x
		}
	}
	floats := []struct {
		name string
		dst  *float64
	}{{"ENGRAM_MAINT_DECAY_FACTOR", &c.Decay.Factor}, {"ENGRAM_MAINT_DECAY_FLOOR", &c.Decay.Floor}, {"ENGRAM_MAINT_PRUNE_MAX_IMPORTANCE", &c.Prune.MaxImportance}}
	for _, f := range floats {
		if v := strings.TrimSpace(os.Getenv(f.name)); v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 1 {
				return c, fmt.Errorf("%s: %q must be a number from 0 to 1", f.name, v)
			}
			*f.dst = x
		}
	}
	if v := strings.TrimSpace(os.Getenv("ENGRAM_MAINT_PREFIX")); v != "" {
		c.Prefix = v
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv("ENGRAM_MAINT_SCHEDULES"))) {
	case "", "on", "true":
	case "off", "false":
		c.Disabled = true
	default:
		return c, fmt.Errorf("ENGRAM_MAINT_SCHEDULES: %q must be on or off", os.Getenv("ENGRAM_MAINT_SCHEDULES"))
	}
	if v := strings.TrimSpace(os.Getenv("ENGRAM_MAINT_PRUNE")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("ENGRAM_MAINT_PRUNE: %q is not true or false", v)
		}
		c.PruneEnabled = b
	}
	if v := strings.TrimSpace(os.Getenv("ENGRAM_MAINT_CONSOLIDATE_MIN")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			return c, fmt.Errorf("ENGRAM_MAINT_CONSOLIDATE_MIN: %q must be an integer ≥ 2", v)
		}
		c.Consolidate.MinFacts = n
	}
	if c.Decay.Factor <= 0 || c.Decay.Factor >= 1 {
		return c, fmt.Errorf("ENGRAM_MAINT_DECAY_FACTOR: %.3f must be between 0 and 1 (exclusive)", c.Decay.Factor)
	}
	return c, nil
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
var ScheduleNames = []string{"expiry", "decay", "consolidate", "schema-report"}

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
