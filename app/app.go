// Package app is Engram's composition root: from a config.Config it builds the
// store (with the configured protection), the Temporal client with its metrics
// and tracing, the embedder, extractor and keyword index, the recall engine, the
// API's handlers, the HTTP handler `engram serve` answers on, and the worker.
// `engram serve`, `mcp`, `dev` (which runs serve), `worker`, `eval` and `bench`
// build what they run here, so a setting means the same in every command.
//
// app may import every Engram package; only cmd/ and tests import it.
package app

import (
	"context"
	"fmt"
	"google.golang.org/grpc"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/mcp"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/telemetry"
	"github.com/engramhq/engram/write"
)

// Options say what Build starts beside the store and the Temporal client.
type Options struct {
	// API builds the recall engine and the API's handlers (serve, mcp).
	API bool
	// Worker starts a worker on cfg.TaskQueue and what a long-running worker
	// keeps going (maintenance schedules, the outbox indexer).
	Worker bool
	// Embedder, when set, is used instead of the one cfg configures (a benchmark
	// passes the configured one wrapped to time it).
	Embedder embedding.Embedder
	// WorkerInterceptors are added to the worker's (a benchmark times each step).
	WorkerInterceptors []interceptor.WorkerInterceptor
}

// App is everything a command runs, built once. Close releases it in reverse
// order of construction.
type App struct {
	Config   config.Config
	Log      *slog.Logger
	Store    *storage.Store
	Temporal client.Client
	Metrics  *telemetry.Metrics
	Embedder embedding.Embedder
	Recall   *recall.Engine  // nil unless Options.API
	Handlers server.Handlers // zero unless Options.API
	Deps     server.Deps     // zero unless Options.API
	// Ingestor takes writes in (the API's Ingest); nil unless Options.API.
	Ingestor *write.Ingestor
	// Notices tell a caller of Ingestor waiting on a write this process's worker
	// runs its outcome from its Write step (write.Notices): the Temporal connection, the
	// worker and the Ingestor share them.
	Notices *write.Notices
	closers []func()
}

// Close stops the worker, flushes recall's access log, closes the Temporal
// client and the store, and flushes traces.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// Build opens what cfg configures and checks the database is migrated to this
// binary's schema (the embedding dimension too) before anything runs.
func Build(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (_ *App, err error) {
	if log == nil {
		log = slog.Default()
	}
	a := &App{Config: cfg, Log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	shutdown, tracing, err := telemetry.SetupTracing(ctx, "engram", cfg.Tracing)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	})
	if tracing {
		log.Info("tracing: exporting spans over OTLP")
	}
	if a.Store, err = OpenStore(ctx, cfg); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() { a.Store.Close() })
	if err := a.Store.CheckMigrated(ctx); err != nil {
		return nil, err
	}
	if err := a.Store.CheckEmbeddingDim(ctx, storage.EmbeddingDim); err != nil {
		return nil, err
	}
	if a.Metrics, err = telemetry.NewMetrics(a.Store.DB().DB); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	a.Notices = write.NewNotices()
	if a.Temporal, err = DialTemporal(cfg, log, a.Metrics, a.Notices); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Temporal.Close)
	a.Embedder = opts.Embedder
	if a.Embedder == nil {
		if a.Embedder, err = Embedder(cfg); err != nil {
			return nil, fmt.Errorf("embedder: %w", err)
		}
	}
	if opts.API {
		if a.Recall, err = RecallEngine(cfg, a.Store, a.Embedder, log, recall.Options{}); err != nil {
			return nil, err
		}
		a.closers = append(a.closers, func() { a.Recall.Close() })
		// Acknowledged writes are started in the background: the ack returns once the
		// event is stored (the sweep starts any the process did not).
		starter := write.NewStarter(a.Temporal, cfg.TaskQueue, log, write.StarterOptions{})
		a.closers = append(a.closers, func() { starter.Close(10 * time.Second) })
		// The API's other reads (facts, candidates, tasks, schemas) end on time as a
		// recall does: on a read pool of their own whose statements Postgres cancels
		// past the same limit (ENGRAM_RECALL_TIMEOUT).
		reader := a.Store.Reader(readTimeout(cfg), readPoolSize)
		a.closers = append(a.closers, func() { reader.Close() })
		a.Ingestor = NewIngestor(cfg, a.Store, a.Temporal, starter, a.Notices)
		a.Deps = server.Deps{Store: a.Store, ReadStore: reader, Temporal: a.Temporal, Config: cfg, Recaller: meteredRecaller{a.Recall, a.Metrics}, Ingestor: a.Ingestor, Logger: log}
		if a.Handlers, err = server.NewHandlers(a.Deps); err != nil {
			return nil, err
		}
	}
	if opts.Worker {
		w, err := newWorker(a.Temporal, cfg, a.Store, a.Embedder, nil, log, a.Notices, opts.WorkerInterceptors...)
		if err != nil {
			return nil, err
		}
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("start worker: %w", err)
		}
		a.closers = append(a.closers, w.Stop)
		if err := StartBackground(ctx, a.Temporal, cfg); err != nil {
			return nil, err
		}
		log.Info("worker started", "task_queue", cfg.TaskQueue, "temporal", cfg.TemporalAddress, "llm", cfg.LLMBaseURL != "")
	}
	return a, nil
}

// NewIngestor builds the write.Ingestor `engram serve` takes writes in with:
// cfg's task queue, extraction attempts and review timeout, the Starter of its
// acknowledged writes and the Notices its worker and Temporal connection share
// (both may be nil: starts in the call, answers by the workflow's result). Build
// and the eval build theirs here.
func NewIngestor(cfg config.Config, st *storage.Store, c client.Client, starter *write.Starter, n *write.Notices) *write.Ingestor {
	return write.NewIngestor(st, c, write.IngestorOptions{
		TaskQueue: cfg.TaskQueue, ExtractAttempts: cfg.ExtractAttempts, ReviewTimeout: cfg.ReviewTimeout, Starter: starter, Notices: n,
	})
}

// RecallEngine builds the recall engine `engram serve` runs: cfg's keyword
// index (Postgres full-text, or Typesense), the tenant's stored schemas (the
// built-ins where it stored none), cfg's default schema, statement bound and time
// limit. o carries what a caller measures differently (the fusion weights a grid
// tunes, the query-embedding cache, the access log, one statement); a zero field
// of those four takes cfg's. Build, the benchmarks and the eval all build their
// engine here, so what they measure is what serve answers with.
func RecallEngine(cfg config.Config, st *storage.Store, em embedding.Embedder, log *slog.Logger, o recall.Options) (*recall.Engine, error) {
	kw, _, err := KeywordIndex(cfg, st)
	if err != nil {
		return nil, err
	}
	if o.DefaultSchema == "" {
		o.DefaultSchema = cfg.DefaultSchema
	}
	if o.MaxStatements == 0 {
		o.MaxStatements = cfg.RecallMaxStatements
	}
	if o.Timeout == 0 {
		o.Timeout = cfg.RecallTimeout
	}
	if o.Logger == nil {
		o.Logger = log
	}
	// A tenant's stored schemas drive query parsing as they drive extraction.
	return recall.New(st, em, kw, schema.Stored(st.LookupSchema), o), nil
}

// readPoolSize bounds the connections of the API's read pool (server.Deps.ReadStore).
// Its reads are indexed lookups of milliseconds; the pool is apart from the main
// pool (32) and recall's (32), within Postgres's default of 100 connections.
const readPoolSize = 16

// readTimeout is the limit of the API's reads: recall's (ENGRAM_RECALL_TIMEOUT,
// default recall.DefaultTimeout).
func readTimeout(cfg config.Config) time.Duration {
	if cfg.RecallTimeout > 0 {
		return cfg.RecallTimeout
	}
	return recall.DefaultTimeout
}

// OpenStore opens Postgres and applies the configured redaction and encryption
// (ENGRAM_REDACT, ENGRAM_REDACT_ORIGINAL, ENGRAM_ENCRYPTION_KEY…).
func OpenStore(ctx context.Context, cfg config.Config) (*storage.Store, error) {
	p, err := storage.ParseProtection(cfg.Keyring, cfg.Redact, cfg.RedactOriginal)
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

// HTTPHandler is everything `engram serve` answers on one port: the Connect,
// gRPC and gRPC-Web API at its procedure paths, MCP's Streamable HTTP at /mcp,
// /metrics, /healthz and /readyz, with a trace span for every request. It needs
// Options.API.
func (a *App) HTTPHandler() (http.Handler, error) {
	if a.Recall == nil {
		return nil, fmt.Errorf("app: HTTPHandler needs Build with Options.API")
	}
	api, err := server.New(a.Deps)
	if err != nil {
		return nil, err
	}
	mcpH, err := mcp.NewHTTPHandler(a.MCPOptions())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", a.Metrics.CountHTTP("api", api))
	limits := server.Limits{PerKey: a.Config.RateLimitPerKey, AuthFailuresPerIP: a.Config.AuthFailuresPerIP}
	mux.Handle("/mcp", a.Metrics.CountHTTP("mcp", server.LimitHTTP(mcpH, limits)))
	mux.Handle("GET /metrics", a.Metrics.Handler())
	mux.Handle("GET /healthz", telemetry.Healthz())
	mux.Handle("GET /readyz", telemetry.Readyz(a.Store.DB().DB, a.Temporal))
	return telemetry.TraceHTTP(mux), nil
}

// MCPOptions are the MCP server's tools over this app's handlers (HTTP at /mcp,
// or `engram mcp` over stdio).
func (a *App) MCPOptions() mcp.Options {
	return mcp.Options{Handlers: a.Handlers, Keys: a.Store, Logger: a.Log, Observe: a.Metrics.ObserveTool}
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

// DialTemporal connects to Temporal. With m, the SDK's metrics are reported into
// m's registry and the interceptors that count writes and extraction attempts
// and trace workflows and activities are installed (they apply to workers
// created from the client); commands that only start or query workflows pass nil.
// With n, the connection notes the writes it starts eagerly (n.Interceptor), for
// a process that runs its worker and waits on writes (Build).
func DialTemporal(cfg config.Config, log *slog.Logger, m *telemetry.Metrics, n *write.Notices) (client.Client, error) {
	opts := client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: tlog.NewStructuredLogger(log)}
	if n != nil {
		// Writes this process starts eagerly are answered by its own Write step,
		// without the result's long poll.
		opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(n.Interceptor()))
	}
	if !cfg.TemporalGzip {
		// A server on this machine: gzip would cost both sides CPU for nothing (the
		// write path's throughput on two cores rose by a third without it).
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if m != nil {
		tracing, err := telemetry.TemporalTracing()
		if err != nil {
			return nil, fmt.Errorf("temporal tracing: %w", err)
		}
		opts.MetricsHandler = m.TemporalHandler()
		opts.Interceptors = []interceptor.ClientInterceptor{tracing, m.Interceptor()}
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (TEMPORAL_ADDRESS): %w", cfg.TemporalAddress, err)
	}
	return c, nil
}
