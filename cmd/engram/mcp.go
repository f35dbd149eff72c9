package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/mcp"
)

func mcpCmd() *cobra.Command {
	var noWorker bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio for a desktop agent (the key from ENGRAM_API_KEY)",
		Long: `Run Engram's MCP server over stdin/stdout, for MCP clients that start a process
(desktop agents, IDEs). It acts with the API key in ENGRAM_API_KEY: the tenant and the
user come from the key, as in the API. It connects to Postgres (ENGRAM_DATABASE_URL) and
Temporal (TEMPORAL_ADDRESS) and, unless --no-worker, runs the Temporal worker in-process
so that remember commits without another process. Logs go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := os.Getenv("ENGRAM_API_KEY")
			if key == "" {
				return &exitError{code: exitAuth, err: errors.New("ENGRAM_API_KEY is not set: the MCP server acts with an API key (create one with `engram keys create`)")}
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			log := logger()
			ctx := cmd.Context()
			a, err := app.Build(ctx, cfg, log, app.Options{API: true, Worker: !noWorker})
			if err != nil {
				return err
			}
			defer a.Close()
			err = mcp.ServeStdio(ctx, a.MCPOptions(), key, os.Stdin, os.Stdout)
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "do not run the Temporal worker in this process (an 'engram serve' or 'engram worker' runs it)")
	return cmd
}
