package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/server"
)

func serveCmd() *cobra.Command {
	var addr string
	var noWorker bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API (Connect, gRPC, gRPC-Web), MCP at /mcp and /metrics on one port and, unless --no-worker, the Temporal worker",
		Long: `Serve the Engram API on --addr (ENGRAM_ADDR, default 127.0.0.1:8080): Connect, gRPC and
gRPC-Web over HTTP/1.1 and h2c, gRPC health and reflection; the MCP server over
Streamable HTTP at /mcp; Prometheus metrics at /metrics; /healthz and /readyz. Every API
and MCP call needs an API key (engram keys create). By default the Temporal worker runs in the same process; run
'engram serve --no-worker' and 'engram worker' to split them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			log := logger()
			slog.SetDefault(log)
			ctx := cmd.Context()
			a, err := app.Build(ctx, cfg, log, app.Options{API: true, Worker: !noWorker})
			if err != nil {
				return err
			}
			defer a.Close()
			h, err := a.HTTPHandler()
			if err != nil {
				return err
			}
			err = server.Serve(ctx, addr, h, grace, func(at net.Addr) {
				log.Info("engram API listening", "addr", at.String(), "worker", !noWorker, "task_queue", cfg.TaskQueue)
				// One line on stdout for scripts and tests that start serve on port 0.
				fmt.Fprintf(cmd.OutOrStdout(), "listening on http://%s\n", at.String())
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			log.Info("engram API stopped")
			return nil
		},
	}
	// ENGRAM_ADDR is also the CLI's base URL (http://host:port): listen on its host:port.
	def := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(os.Getenv("ENGRAM_ADDR"), "http://"), "https://"), "/")
	if def == "" {
		def = "127.0.0.1:8080"
	}
	cmd.Flags().StringVar(&addr, "addr", def, "address to listen on (ENGRAM_ADDR)")
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "do not run the Temporal worker in this process (run 'engram worker' separately)")
	cmd.Flags().DurationVar(&grace, "shutdown-grace", 20*time.Second, "how long running calls may finish on shutdown")
	return cmd
}
