package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

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
			return withStore(cmd, func(st *storage.Store) error {
				out, err := lifecycle.SuggestSchemaChanges(cmd.Context(), st, schema.Builtins, tenant, time.Now().Add(-d), minCount)
				if err != nil {
					return err
				}
				return printRecords(cmd.OutOrStdout(), asJSON, out, "SCHEMA\tKIND\tPREDICATE\tATTRIBUTE\tCOUNT\tEXAMPLES", func(tw io.Writer) {
					for _, s := range out {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Schema, s.Kind, s.Predicate, s.Attribute, s.Count, strings.Join(s.Examples, " | "))
					}
				})
			})
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
	cfg, c, err := temporalClient()
	return lifecycle.ConfigFrom(cfg.TaskQueue, cfg.Maintenance), c, err
}

// maintenanceCmd is `engram maintenance`: create the schedules or run one now.
func maintenanceCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "maintenance", Short: "Memory maintenance schedules (expiry, decay, consolidation, schema report)"}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the schedule ids as JSON")
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
			ids := make([]string, len(lifecycle.ScheduleNames))
			for i, n := range lifecycle.ScheduleNames {
				ids[i] = mc.ScheduleID(n)
			}
			if asJSON {
				return printValue(cmd.OutOrStdout(), struct{ Schedules []string }{ids})
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(ids, "\n"))
			return nil
		},
	}, &cobra.Command{
		Use:       "run expiry|decay|consolidate|schema-report|sweep",
		Short:     "Trigger one maintenance schedule now",
		Args:      positional(cobra.ExactArgs(1)),
		ValidArgs: lifecycle.ScheduleNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(lifecycle.ScheduleNames, args[0]) {
				return badArg("%q is not a maintenance schedule (one of %s)", args[0], strings.Join(lifecycle.ScheduleNames, ", "))
			}
			mc, c, err := maintenanceClient()
			if err != nil {
				return err
			}
			defer c.Close()
			id := mc.ScheduleID(args[0])
			if err := c.ScheduleClient().GetHandle(cmd.Context(), id).Trigger(cmd.Context(), client.ScheduleTriggerOptions{}); err != nil {
				return fmt.Errorf("trigger %s (run `engram maintenance schedules` first?): %w", id, err)
			}
			if asJSON {
				return printValue(cmd.OutOrStdout(), struct{ Triggered string }{id})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "triggered %s\n", id)
			return nil
		},
	})
	return cmd
}
