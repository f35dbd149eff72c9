package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/storage"
)

func migrateCmd() *cobra.Command {
	var status, asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations (ENGRAM_DATABASE_URL)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			st, err := storage.Open(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if status {
				applied, pending, err := st.MigrationStatus(cmd.Context())
				if err != nil {
					return err
				}
				return printRecords(out, asJSON, struct{ Applied, Pending []string }{nonNil(applied), nonNil(pending)}, "MIGRATION\tSTATE", func(tw io.Writer) {
					for _, m := range applied {
						fmt.Fprintf(tw, "%s\tapplied\n", m)
					}
					for _, m := range pending {
						fmt.Fprintf(tw, "%s\tpending\n", m)
					}
				})
			}
			names, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printValue(out, struct{ Applied []string }{nonNil(names)})
			}
			if len(names) == 0 {
				fmt.Fprintln(out, "database is up to date")
			}
			for _, n := range names {
				fmt.Fprintf(out, "applied %s\n", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&status, "status", false, "list applied and pending migrations instead of applying")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"applied": […]} (the ones applied now), with --status also "pending"`)
	return cmd
}
