// Package servertest runs the API in the test's process over the real stack, for the
// server and MCP tests: a fresh database, the Temporal dev server, the app's
// worker on a task queue of its own and a recall engine (the n-gram embedder),
// served over real HTTP as `engram serve` serves it.
package servertest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/storage"
)

// Stack is a fresh database, the Temporal dev server, a started worker of the
// app and a recall engine, until the test ends.
type Stack struct {
	Store    *storage.Store
	Temporal client.Client
	Config   config.Config
	Recaller *recall.Engine
	Log      *slog.Logger
}

// Start starts the stack with the configuration of the environment (a task
// queue of the test's own), after adjust (when not nil) has changed it.
func Start(t *testing.T, adjust func(*config.Config)) *Stack {
	t.Helper()
	s := &Stack{Store: testenv.Store(t), Temporal: testenv.Temporal(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.TaskQueue = testenv.TaskQueue(t)
	if adjust != nil {
		adjust(&cfg)
	}
	s.Config = cfg
	w, err := app.New(s.Temporal, cfg, s.Store, s.Log)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s.Recaller = recall.New(s.Store, embedding.NewNGramEmbedder(storage.EmbeddingDim), nil, nil, recall.Options{Logger: s.Log})
	t.Cleanup(func() { s.Recaller.Close() })
	return s
}

// Deps are the API's dependencies on the stack.
func (s *Stack) Deps() server.Deps {
	return server.Deps{Store: s.Store, Temporal: s.Temporal, Config: s.Config, Recaller: s.Recaller, Logger: s.Log}
}

// Serve serves h over HTTP, configured as `engram serve` configures its server,
// until the test ends, and returns its base URL.
func Serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config = server.HTTPServer("", h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
