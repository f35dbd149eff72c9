// Command engram is Engram's one binary: dev, serve, worker, migrate, keys, and the
// API-backed commands agents' operators use (ingest, recall, facts, review, task,
// schema).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		err = explainBackend(err)
		fmt.Fprintln(os.Stderr, "engram:", err)
		os.Exit(exitCodeOf(err))
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "engram",
		Short:         "Engram: a durable memory engine for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagErrorFunc)
	root.PersistentPreRunE = checkUTF8
	schema := schemaCmd()
	schema.Short = "Domain schemas: get, put (through the API), suggest"
	schema.AddCommand(schemaAPICmds()...)
	root.AddCommand(versionCmd(), migrateCmd(), workerCmd(), serveCmd(), keysCmd(), devCmd(),
		ingestCmd(), recallCmd(), factsCmd(), reviewCmd(), taskCmd(), schema,
		auditCmd(), benchCmd(), evalCmd(), eraseCmd(), maintenanceCmd(), mcpCmd())
	return root
}

func logger() *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("ENGRAM_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  positional(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return printValue(cmd.OutOrStdout(), struct{ Version string }{version})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "engram %s\n", version)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"version": …}`)
	return cmd
}
