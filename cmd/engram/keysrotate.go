package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/storage"
)

// keysRotateDataCmd is `engram keys rotate-data`: re-seal stored content under the
// current ENGRAM_ENCRYPTION_KEY, in the background (the RotateDataKeys workflow on
// the workers, which must hold the new key and the old ones in
// ENGRAM_ENCRYPTION_OLD_KEYS).
func keysRotateDataCmd() *cobra.Command {
	var includeClear, wait, asJSON bool
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
			if err := checkRange(cmd, "batch", batch, 1, 10000, " rows"); err != nil {
				return err
			}
			cfg, c, err := temporalClient()
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
			out := struct {
				WorkflowID, RunID string
				Resealed          map[string]int `json:",omitempty"`
			}{WorkflowID: run.GetID(), RunID: run.GetRunID()}
			if !asJSON {
				fmt.Fprintf(cmd.OutOrStdout(), "rotation running: workflow %s run %s\n", run.GetID(), run.GetRunID())
			}
			if wait {
				if err := run.Get(context.WithoutCancel(cmd.Context()), &out.Resealed); err != nil {
					return err
				}
			}
			if asJSON {
				return printValue(cmd.OutOrStdout(), out)
			}
			if wait {
				b, _ := json.Marshal(out.Resealed)
				fmt.Fprintf(cmd.OutOrStdout(), "re-sealed rows: %s\n", b)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&includeClear, "include-clear", false, "also encrypt rows stored before encryption was enabled")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the rotation to finish")
	cmd.Flags().IntVar(&batch, "batch", 200, "rows per transaction, 1 to 10000")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workflow (and, with --wait, the re-sealed rows per table) as JSON")
	return cmd
}

// keysDataStatusCmd is `engram keys data-status`: rows per encryption key id.
func keysDataStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "data-status",
		Short: "Count stored rows per encryption key id ('' = clear text)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(st *storage.Store) error {
				u, err := st.KeyUsage(cmd.Context())
				if err != nil {
					return err
				}
				// JSON: {"rows": {"facts": {"": 3, "k2": 40}, …}}: table, key id ('' = clear text), rows
				return printRecords(cmd.OutOrStdout(), asJSON, struct{ Rows any }{u}, "TABLE\tKEY ID\tROWS", func(tw io.Writer) {
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
				})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the row counts per table and key id as JSON")
	return cmd
}

var _ = storage.RotationTables
