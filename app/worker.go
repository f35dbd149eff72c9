package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/embedding/use"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/search/outbox"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/task"
	"github.com/engramhq/engram/write"
)

// Ping is the smallest workflow: it proves a worker, the server and the activity
// path are wired. The foundation test runs it.
func Ping(ctx workflow.Context, msg string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, PingActivity, msg).Get(ctx, &out)
	return out, err
}

// PingActivity answers from the worker process.
func PingActivity(ctx context.Context, msg string) (string, error) {
	return "pong: " + msg + " (from " + activity.GetInfo(ctx).WorkflowExecution.ID + ")", nil
}

// Extractor builds the configured extractor: an OpenAI-compatible LLM when
// ENGRAM_LLM_BASE_URL is set, otherwise the offline rule extractor.
func Extractor(cfg config.Config) (llm.Extractor, error) {
	if cfg.LLMBaseURL == "" {
		return llm.NewRuleExtractor(), nil
	}
	return llm.NewOpenAIExtractor(llm.OpenAIConfig{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel, Timeout: cfg.LLMTimeout})
}

var (
	modelMu    sync.Mutex
	modelCache = map[string]*use.Model{}
)

// loadModel loads the USE-lite model once per process and directory.
func loadModel(dir string) (*use.Model, error) {
	modelMu.Lock()
	defer modelMu.Unlock()
	if m, ok := modelCache[dir]; ok {
		return m, nil
	}
	m, err := use.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("the offline embedder needs the USE-lite model in %s (ENGRAM_MODEL_DIR): %w; run scripts/fetch-model, or set ENGRAM_EMBEDDER=ngram to use character n-grams only", dir, err)
	}
	modelCache[dir] = m
	return m, nil
}

// Embedder builds the configured embedder: an OpenAI-compatible endpoint when
// ENGRAM_EMBED_BASE_URL is set; otherwise offline, the neural USE-lite model
// blended with character n-grams (ENGRAM_EMBEDDER=composite, the default) or the
// n-grams alone (ENGRAM_EMBEDDER=ngram). A missing or corrupt model is an error,
// never a silent fall back.
func Embedder(cfg config.Config) (embedding.Embedder, error) {
	if cfg.EmbedBaseURL != "" {
		return llm.NewOpenAIEmbedder(llm.OpenAIEmbedderConfig{BaseURL: cfg.EmbedBaseURL, APIKey: cfg.EmbedAPIKey, Model: cfg.EmbedModel, Dim: storage.EmbeddingDim})
	}
	ngram := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	if cfg.Embedder == "ngram" {
		return ngram, nil
	}
	m, err := loadModel(cfg.ModelDir)
	if err != nil {
		return nil, err
	}
	return embedding.NewCompositeEmbedder(m, ngram)
}

// KeywordIndex is the keyword retriever recall uses: Typesense when
// ENGRAM_TYPESENSE_URL is set, otherwise Postgres full-text in the same database.
func KeywordIndex(cfg config.Config, st *storage.Store) (recall.KeywordIndex, *typesense.Index, error) {
	if cfg.TypesenseURL == "" {
		return recall.NewPostgresKeyword(st), nil, nil
	}
	ix, err := typesense.New(typesense.Config{URL: cfg.TypesenseURL, APIKey: cfg.TypesenseAPIKey, Collection: cfg.TypesenseCollection})
	if err != nil {
		return nil, nil, fmt.Errorf("typesense: %w", err)
	}
	return ix, ix, nil
}

// cacheOnce sets the process's workflow cache size (one cache for all its
// workers) before the first worker starts.
var cacheOnce sync.Once

// New builds a worker on cfg.TaskQueue with every workflow and activity
// registered, with the extractor and embedder cfg asks for.
func New(c client.Client, cfg config.Config, st *storage.Store, log *slog.Logger) (worker.Worker, error) {
	em, err := Embedder(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	return NewWorkerWith(c, cfg, st, em, nil, log)
}

// NewWorkerWith is New with the embedder given and, unless ex is nil, the
// extractor (a benchmark's or an evaluation's own), and interceptors (the write
// benchmark's step timings).
func NewWorkerWith(c client.Client, cfg config.Config, st *storage.Store, em embedding.Embedder, ex llm.Extractor, log *slog.Logger, icpt ...interceptor.WorkerInterceptor) (worker.Worker, error) {
	return newWorker(c, cfg, st, em, ex, log, nil, icpt...)
}

// newWorker is NewWorkerWith whose write activities tell n (Build's Notices) each
// Write step's outcome; nil tells nobody.
func newWorker(c client.Client, cfg config.Config, st *storage.Store, em embedding.Embedder, ex llm.Extractor, log *slog.Logger, n *write.Notices, icpt ...interceptor.WorkerInterceptor) (worker.Worker, error) {
	if ex == nil {
		var err error
		if ex, err = Extractor(cfg); err != nil {
			return nil, fmt.Errorf("extractor: %w", err)
		}
	}
	schemas := schema.Stored(st.LookupSchema)
	cacheOnce.Do(func() {
		if cfg.WorkflowCache > 0 {
			worker.SetStickyWorkflowCacheSize(cfg.WorkflowCache)
		}
	})
	w := worker.New(c, cfg.TaskQueue, worker.Options{Interceptors: icpt})
	w.RegisterWorkflow(Ping)
	w.RegisterActivity(PingActivity)
	write.Register(w, &write.MemoryActivities{
		Store: st, Extractor: ex, Embedder: em, Schemas: schemas, Gov: cfg.Governance, Logger: log, Notices: n,
	})
	task.Register(w, &task.TaskActivities{
		HTTP: task.NewActionHTTPClient(), ActionEndpoint: cfg.ActionURL, Store: st, Log: log,
	})
	_, ts, err := KeywordIndex(cfg, st)
	if err != nil {
		return nil, err
	}
	deps := lifecycle.Deps{Store: st, Temporal: c, Namespace: cfg.TemporalNamespace, Embedder: em, Schemas: schemas,
		TaskQueue: cfg.TaskQueue, Write: write.MemoryWriteInput{ExtractAttempts: cfg.ExtractAttempts, ReviewTimeout: cfg.ReviewTimeout}}
	if ts != nil {
		// Typesense is fed from the outbox; erasure removes its documents too.
		deps.Keyword = ts
		w.RegisterWorkflowWithOptions(outbox.OutboxIndexer, workflow.RegisterOptions{Name: outbox.OutboxIndexerWorkflowName})
		w.RegisterWorkflowWithOptions(outbox.TypesenseReindex, workflow.RegisterOptions{Name: outbox.TypesenseReindexName})
		w.RegisterActivity(&outbox.OutboxActivities{Store: st, Index: ts, Logger: log})
	}
	lifecycle.Register(w, deps)
	return w, nil
}

// StartBackground creates what a long-running worker keeps going: the
// maintenance schedules (idempotent) and, with Typesense, the outbox indexer.
// Tests that build workers with New do not call it.
func StartBackground(ctx context.Context, c client.Client, cfg config.Config) error {
	if err := lifecycle.EnsureSchedules(ctx, c, lifecycle.ConfigFrom(cfg.TaskQueue, cfg.Maintenance)); err != nil {
		return fmt.Errorf("maintenance schedules: %w", err)
	}
	if cfg.TypesenseURL != "" {
		if _, err := outbox.StartOutboxIndexer(ctx, c, cfg.TaskQueue, outbox.OutboxIndexerInput{}); err != nil {
			return fmt.Errorf("outbox indexer: %w", err)
		}
	}
	return nil
}
