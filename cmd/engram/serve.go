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

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/worker"
)

func serveCmd() *cobra.Command {
	var addr string
	var noWorker bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API (Connect, gRPC, gRPC-Web on one port) and, unless --no-worker, the Temporal worker",
		Long: `Serve the Engram API on --addr (ENGRAM_ADDR, default 127.0.0.1:8080): Connect, gRPC and
gRPC-Web over HTTP/1.1 and h2c, gRPC health and reflection. Every call needs an API key
(engram keys create). By default the Temporal worker runs in the same process; run
'engram serve --no-worker' and 'engram worker' to split them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			log := logger()
			slog.SetDefault(log)
			ctx := cmd.Context()
			st, err := openProtectedStore(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.CheckEmbeddingDim(ctx, storage.EmbeddingDim); err != nil {
				return fmt.Errorf("%w (did you run `engram migrate`?)", err)
			}
			if _, pending, err := st.MigrationStatus(ctx); err != nil {
				return err
			} else if len(pending) > 0 {
				return fmt.Errorf("%d migration(s) pending (%s …): run `engram migrate` first", len(pending), pending[0])
			}
			tc, err := dialTemporal(cfg)
			if err != nil {
				return err
			}
			defer tc.Close()
			emb, err := worker.Embedder(cfg)
			if err != nil {
				return fmt.Errorf("embedder: %w", err)
			}
			kw, _, err := worker.KeywordIndex(st)
			if err != nil {
				return err
			}
			engine := recall.New(st, emb, kw, nil, recall.Options{DefaultSchema: cfg.DefaultSchema, Logger: log})
			defer engine.Close()
			h, err := server.New(server.Deps{Store: st, Temporal: tc, Config: cfg, Recaller: engine, Logger: log})
			if err != nil {
				return err
			}
			if !noWorker {
				w, err := worker.New(tc, cfg, st, log)
				if err != nil {
					return err
				}
				if err := w.Start(); err != nil {
					return fmt.Errorf("start worker: %w", err)
				}
				defer w.Stop()
				if err := worker.StartBackground(ctx, tc, cfg); err != nil {
					return err
				}
				log.Info("worker started", "task_queue", cfg.TaskQueue, "temporal", cfg.TemporalAddress)
			}
			err = server.Serve(ctx, addr, h, grace, func(a net.Addr) {
				log.Info("engram API listening", "addr", a.String(), "worker", !noWorker, "task_queue", cfg.TaskQueue)
				// One line on stdout for scripts and tests that start serve on port 0.
				fmt.Fprintf(cmd.OutOrStdout(), "listening on http://%s\n", a.String())
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
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "do not run the Temporal worker in this process (run `engram worker` separately)")
	cmd.Flags().DurationVar(&grace, "shutdown-grace", 20*time.Second, "how long running calls may finish on shutdown")
	return cmd
}
