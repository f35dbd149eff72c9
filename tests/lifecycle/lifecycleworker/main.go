// Command lifecycleworker is `engram worker` without its background start
// (app.StartBackground would point the shared dev server's maintenance
// schedules at the test's task queue): app.New registers everything, including
// the life-cycle workflows. The lifecycle crash tests run it as a separate process
// and SIGKILL it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/storage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lifecycleworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	st, err := storage.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: tlog.NewStructuredLogger(log)})
	if err != nil {
		return err
	}
	defer c.Close()
	w, err := app.New(c, cfg, st, log)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
