package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/storage"
)

func dialTemporal(cfg config.Config) (client.Client, error) {
	c, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: tlog.NewStructuredLogger(logger())})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (TEMPORAL_ADDRESS): %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

func workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the Temporal worker: memory writes, tasks, maintenance",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			log := logger()
			st, err := openProtectedStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.CheckEmbeddingDim(cmd.Context(), storage.EmbeddingDim); err != nil {
				return fmt.Errorf("%w (did you run `engram migrate`?)", err)
			}
			c, err := dialTemporal(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			w, err := app.New(c, cfg, st, log)
			if err != nil {
				return err
			}
			log.Info("worker starting", "task_queue", cfg.TaskQueue, "temporal", cfg.TemporalAddress, "llm", cfg.LLMBaseURL != "")
			if err := w.Start(); err != nil {
				return err
			}
			if err := app.StartBackground(cmd.Context(), c, cfg); err != nil {
				w.Stop()
				return err
			}
			<-cmd.Context().Done()
			w.Stop()
			return nil
		},
	}
}

// openProtectedStore opens Postgres and applies the configured redaction and
// encryption (ENGRAM_REDACT, ENGRAM_REDACT_ORIGINAL, ENGRAM_ENCRYPTION_KEY).
func openProtectedStore(ctx context.Context, cfg config.Config) (*storage.Store, error) {
	p, err := storage.ProtectionFromEnv()
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := st.SetProtection(p); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
