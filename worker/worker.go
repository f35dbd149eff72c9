// Package worker wires Engram's workflows and activities to a Temporal worker: it
// builds the extractor and embedder the configuration asks for and registers
// everything on one task queue.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/activities"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/workflows"
)

// RegisterMemory registers the write path's workflows and activities.
func RegisterMemory(w worker.Registry, acts *activities.MemoryActivities) {
	w.RegisterWorkflowWithOptions(workflows.MemoryWrite, workflow.RegisterOptions{Name: workflows.MemoryWriteWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.MemoryWriteBatch, workflow.RegisterOptions{Name: workflows.MemoryWriteBatchName})
	w.RegisterActivity(acts)
}

// Ping is the smallest workflow: it proves a worker, the server and the activity
// path are wired. `engram doctor` and the foundation test run it.
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

// Embedder builds the configured embedder: an OpenAI-compatible endpoint when
// ENGRAM_EMBED_BASE_URL is set, otherwise the offline n-gram embedder.
func Embedder(cfg config.Config) (llm.Embedder, error) {
	if cfg.EmbedBaseURL == "" {
		return llm.NewNGramEmbedder(storage.EmbeddingDim), nil
	}
	return llm.NewOpenAIEmbedder(llm.OpenAIEmbedderConfig{BaseURL: cfg.EmbedBaseURL, APIKey: cfg.EmbedAPIKey, Model: cfg.EmbedModel, Dim: storage.EmbeddingDim})
}

// New builds a worker on cfg.TaskQueue with every workflow and activity registered.
func New(c client.Client, cfg config.Config, st *storage.Store, log *slog.Logger) (worker.Worker, error) {
	ex, err := Extractor(cfg)
	if err != nil {
		return nil, fmt.Errorf("extractor: %w", err)
	}
	em, err := Embedder(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{})
	w.RegisterWorkflow(Ping)
	w.RegisterActivity(PingActivity)
	RegisterMemory(w, &activities.MemoryActivities{
		Store: st, Extractor: ex, Embedder: em, Schemas: activities.BuiltinSchemas, Gov: cfg.Governance, Logger: log,
	})
	RegisterTasks(w, &activities.TaskActivities{
		HTTP: activities.NewActionHTTPClient(), ActionEndpoint: cfg.ActionURL, Store: st, Log: log,
	})
	return w, nil
}
