package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/storage"
)

// keysRotateDataCmd is `engram keys rotate-data`: re-seal stored content under the
// current ENGRAM_ENCRYPTION_KEY, in the background (the RotateDataKeys workflow on
// the workers, which must hold the new key and the old ones in
// ENGRAM_ENCRYPTION_OLD_KEYS).
func keysRotateDataCmd() *cobra.Command {
	var includeClear, wait bool
	var batch int
	cmd := &cobra.Command{
		Use:   "rotate-data",
		Short: "Re-encrypt stored content with the current ENGRAM_ENCRYPTION_KEY (a background workflow)",
		Long: `Rotation: give the workers the new key as ENGRAM_ENCRYPTION_KEY (with its ENGRAM_ENCRYPTION_KEY_ID)
and the previous keys as ENGRAM_ENCRYPTION_OLD_KEYS=id:base64,…; restart them; run this. The
RotateDataKeys workflow re-seals evidence, sealed originals, facts and events in batches (visible
in the Temporal Web UI); when 'engram keys data-status' shows only the new key id, drop the old
keys. --include-clear also seals rows written before encryption was turned on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			c, err := dialTemporal(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: lifecycle.RotateDataKeysWorkflowID, TaskQueue: cfg.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, lifecycle.RotateDataKeysName, lifecycle.RotateInput{IncludeClear: includeClear, Batch: batch})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rotation running: workflow %s run %s\n", run.GetID(), run.GetRunID())
			if !wait {
				return nil
			}
			var res map[string]int
			if err := run.Get(context.WithoutCancel(cmd.Context()), &res); err != nil {
				return err
			}
			b, _ := json.Marshal(res)
			fmt.Fprintf(cmd.OutOrStdout(), "re-sealed rows: %s\n", b)
			return nil
		},
	}
	cmd.Flags().BoolVar(&includeClear, "include-clear", false, "also encrypt rows stored before encryption was enabled")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the rotation to finish")
	cmd.Flags().IntVar(&batch, "batch", 200, "rows per transaction")
	return cmd
}

// keysDataStatusCmd is `engram keys data-status`: rows per encryption key id.
func keysDataStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "data-status",
		Short: "Count stored rows per encryption key id ('' = clear text)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			u, err := st.KeyUsage(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tKEY ID\tROWS")
			for _, t := range []string{"evidence", "facts", "events"} {
				var ids []string
				for id := range u[t] {
					ids = append(ids, id)
				}
				sort.Strings(ids)
				for _, id := range ids {
					label := id
					if label == "" {
						label = "(clear)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\n", t, label, u[t][id])
				}
			}
			return tw.Flush()
		},
	}
}

var _ = storage.RotationTables
