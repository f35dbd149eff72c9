package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/schema"
)

// eraseCmd is `engram erase`: the right to be forgotten for a user (or a tenant).
func eraseCmd() *cobra.Command {
	var in lifecycle.EraseSubjectInput
	var wait, wholeTenant bool
	cmd := &cobra.Command{
		Use:   "erase --tenant T --user U --requested-by WHO [--reason WHY]",
		Short: "Erase every memory of a user (or, with --whole-tenant, of a tenant) and leave a tombstone",
		Long: `Starts the EraseSubject workflow: new writes of the subject are refused while it runs; its
events, evidence, candidates, facts (every revision), embeddings, entities and edges, session
buffers, tasks, outbox and access-log rows, API keys bound to the user, keyword-index documents
and Temporal write/task histories are deleted; a tombstone records who asked, when and the
counts ('engram audit --tenant T --erasures'). Asking again while it runs attaches to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(in.TenantID) == "" {
				return fmt.Errorf("--tenant is required")
			}
			if in.UserID == "" && !wholeTenant {
				return fmt.Errorf("--user is required (or --whole-tenant to erase the whole tenant)")
			}
			if in.UserID != "" && wholeTenant {
				return fmt.Errorf("--user and --whole-tenant exclude each other")
			}
			if strings.TrimSpace(in.RequestedBy) == "" {
				return fmt.Errorf("--requested-by is required: the tombstone records who asked")
			}
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			c, err := dialTemporal(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := lifecycle.EraseSubjectStartOptions(cfg.TaskQueue, in)
			run, err := c.ExecuteWorkflow(cmd.Context(), opts, lifecycle.EraseSubjectWorkflowName, in)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "erasure running: workflow %s\n", run.GetID())
			if !wait {
				return nil
			}
			var res lifecycle.EraseSubjectResult
			if err := run.Get(context.WithoutCancel(cmd.Context()), &res); err != nil {
				return err
			}
			b, _ := json.Marshal(res.Counts)
			fmt.Fprintf(cmd.OutOrStdout(), "erased (tombstone %d): %s\n", res.TombstoneID, b)
			return nil
		},
	}
	cmd.Flags().StringVar(&in.TenantID, "tenant", "", "tenant (required)")
	cmd.Flags().StringVar(&in.UserID, "user", "", "user to erase")
	cmd.Flags().BoolVar(&wholeTenant, "whole-tenant", false, "erase the whole tenant")
	cmd.Flags().StringVar(&in.RequestedBy, "requested-by", "", "who asked (recorded on the tombstone)")
	cmd.Flags().StringVar(&in.Reason, "reason", "", "why (e.g. the request's reference)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the erasure to finish")
	return cmd
}

// schemaSuggestCmd is `engram schema suggest`: attributes and predicates the
// extractor keeps producing that the schema lacks.
func schemaSuggestCmd() *cobra.Command {
	var tenant, window string
	var minCount int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "suggest [--tenant T]",
		Short: "Suggest schema changes: attributes and predicates the extractor produces that the schema lacks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := time.ParseDuration(window)
			if err != nil {
				return fmt.Errorf("--window: %q is not a duration such as 720h", window)
			}
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			out, err := lifecycle.SuggestSchemaChanges(cmd.Context(), st, schema.Builtins, tenant, time.Now().Add(-d), minCount)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCHEMA\tKIND\tPREDICATE\tATTRIBUTE\tCOUNT\tEXAMPLES")
			for _, s := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Schema, s.Kind, s.Predicate, s.Attribute, s.Count, strings.Join(s.Examples, " | "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "one tenant (default: every tenant)")
	cmd.Flags().StringVar(&window, "window", "720h", "look back this far")
	cmd.Flags().IntVar(&minCount, "min-count", 2, "only suggestions seen at least this often")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// schemaCmd groups schema commands (`engram schema suggest`).
func schemaCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "schema", Short: "Domain schemas: suggestions from extracted data"}
	cmd.AddCommand(schemaSuggestCmd())
	return cmd
}

// maintenanceClient reads the maintenance configuration and dials Temporal.
func maintenanceClient() (lifecycle.Config, client.Client, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return lifecycle.Config{}, nil, err
	}
	mc := lifecycle.ConfigFrom(cfg.TaskQueue, cfg.Maintenance)
	c, err := dialTemporal(cfg)
	return mc, c, err
}

// maintenanceCmd is `engram maintenance`: create the schedules or run one now.
func maintenanceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "Memory maintenance schedules (expiry, decay, consolidation, schema report)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "schedules",
		Short: "Create or update the maintenance schedules from ENGRAM_MAINT_* (workers do this at start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mc, c, err := maintenanceClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if err := lifecycle.EnsureSchedules(cmd.Context(), c, mc); err != nil {
				return err
			}
			for _, n := range lifecycle.ScheduleNames {
				fmt.Fprintln(cmd.OutOrStdout(), mc.ScheduleID(n))
			}
			return nil
		},
	}, &cobra.Command{
		Use:       "run expiry|decay|consolidate|schema-report|sweep",
		Short:     "Trigger one maintenance schedule now",
		Args:      cobra.ExactArgs(1),
		ValidArgs: lifecycle.ScheduleNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			mc, c, err := maintenanceClient()
			if err != nil {
				return err
			}
			defer c.Close()
			id := mc.ScheduleID(args[0])
			if err := c.ScheduleClient().GetHandle(cmd.Context(), id).Trigger(cmd.Context(), client.ScheduleTriggerOptions{}); err != nil {
				return fmt.Errorf("trigger %s (run `engram maintenance schedules` first?): %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "triggered %s\n", id)
			return nil
		},
	})
	return cmd
}
