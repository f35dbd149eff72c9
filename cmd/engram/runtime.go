package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/mcp"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/telemetry"
)

// runtime is the composition root shared by `engram serve` and `engram mcp`: the
// store, a Temporal client carrying the metrics and tracing interceptors, the
// recall engine, the API's handlers and, unless disabled, the worker.
type runtime struct {
	cfg      config.Config
	log      *slog.Logger
	st       *storage.Store
	tc       client.Client
	metrics  *telemetry.Metrics
	handlers server.Handlers
	deps     server.Deps
	closers  []func()
}

func (r *runtime) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

func openRuntime(ctx context.Context, cfg config.Config, log *slog.Logger, runWorker bool) (_ *runtime, err error) {
	r := &runtime{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	shutdown, tracing, err := telemetry.SetupTracing(ctx, "engram")
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	})
	if tracing {
		log.Info("tracing: exporting spans over OTLP")
	}
	r.st, err = openProtectedStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() { r.st.Close() })
	if err := r.st.CheckEmbeddingDim(ctx, storage.EmbeddingDim); err != nil {
		return nil, fmt.Errorf("%w (did you run `engram migrate`?)", err)
	}
	if _, pending, err := r.st.MigrationStatus(ctx); err != nil {
		return nil, err
	} else if len(pending) > 0 {
		return nil, fmt.Errorf("%d migration(s) pending (%s …): run `engram migrate` first", len(pending), pending[0])
	}
	if r.metrics, err = telemetry.NewMetrics(r.st.DB().DB); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if r.tc, err = dialTemporalObserved(cfg, r.metrics); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.tc.Close)
	emb, err := app.Embedder(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	kw, _, err := app.KeywordIndex(r.st)
	if err != nil {
		return nil, err
	}
	engine := recall.New(r.st, emb, kw, nil, recall.Options{DefaultSchema: cfg.DefaultSchema, Logger: log})
	r.closers = append(r.closers, func() { engine.Close() })
	r.deps = server.Deps{Store: r.st, Temporal: r.tc, Config: cfg, Recaller: meteredRecaller{engine, r.metrics}, Logger: log}
	if r.handlers, err = server.NewHandlers(r.deps); err != nil {
		return nil, err
	}
	if runWorker {
		w, err := app.New(r.tc, cfg, r.st, log)
		if err != nil {
			return nil, err
		}
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("start worker: %w", err)
		}
		r.closers = append(r.closers, w.Stop)
		if err := app.StartBackground(ctx, r.tc, cfg); err != nil {
			return nil, err
		}
		log.Info("worker started", "task_queue", cfg.TaskQueue, "temporal", cfg.TemporalAddress)
	}
	return r, nil
}

// httpHandler is everything `engram serve` answers on one port: the Connect,
// gRPC and gRPC-Web API at its procedure paths, MCP's Streamable HTTP at /mcp,
// /metrics, /healthz and /readyz, with a trace span for every request.
func (r *runtime) httpHandler() (http.Handler, error) {
	api, err := server.New(r.deps)
	if err != nil {
		return nil, err
	}
	mcpH, err := mcp.NewHTTPHandler(mcp.Options{Handlers: r.handlers, Keys: r.st, Logger: r.log, Observe: r.metrics.ObserveTool})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", r.metrics.CountHTTP("api", api))
	mux.Handle("/mcp", r.metrics.CountHTTP("mcp", mcpH))
	mux.Handle("GET /metrics", r.metrics.Handler())
	mux.Handle("GET /healthz", telemetry.Healthz())
	mux.Handle("GET /readyz", telemetry.Readyz(r.st.DB().DB, r.tc))
	return telemetry.TraceHTTP(mux), nil
}

// meteredRecaller observes every recall's latency (overall and per stage), the
// retrievers behind its items and its outcome.
type meteredRecaller struct {
	next    server.Recaller
	metrics *telemetry.Metrics
}

func (m meteredRecaller) Recall(ctx context.Context, req recall.Request) (recall.Response, error) {
	start := time.Now()
	res, err := m.next.Recall(ctx, req)
	var retrievers [][]string
	for _, it := range res.Items {
		retrievers = append(retrievers, it.Retrievers)
	}
	m.metrics.ObserveRecall(time.Since(start), res.Timings, retrievers, err)
	return res, err
}

// dialTemporalObserved connects to Temporal with the SDK's metrics reported into
// m's registry, and the interceptors that count writes and extraction attempts and
// trace workflows and activities (they apply to workers created from the client).
func dialTemporalObserved(cfg config.Config, m *telemetry.Metrics) (client.Client, error) {
	tracing, err := telemetry.TemporalTracing()
	if err != nil {
		return nil, fmt.Errorf("temporal tracing: %w", err)
	}
	c, err := client.Dial(client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: tlog.NewStructuredLogger(logger()),
		MetricsHandler: m.TemporalHandler(),
		Interceptors:   []interceptor.ClientInterceptor{tracing, m.Interceptor()},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (TEMPORAL_ADDRESS): %w", cfg.TemporalAddress, err)
	}
	return c, nil
}
