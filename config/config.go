// Package config reads Engram's settings from the environment (ENGRAM_*), with
// defaults that work on a developer machine after `scripts/stack up`.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/governance"
)

// Config is every setting the engine reads.
type Config struct {
	DatabaseURL       string
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string

	// LLM: any OpenAI-compatible endpoint. Empty BaseURL means the offline rule
	// extractor.
	LLMBaseURL string
	LLMAPIKey  string
	LLMModel   string
	LLMTimeout time.Duration

	// Embeddings: an OpenAI-compatible /embeddings endpoint, or offline: "composite"
	// (the neural USE-lite model blended with character n-grams by CJK share; the
	// default) or "ngram" (n-grams only, no model needed).
	Embedder     string
	ModelDir     string
	EmbedBaseURL string
	EmbedAPIKey  string
	EmbedModel   string

	// Write path.
	ExtractAttempts int           // extraction attempts before UNPARSED
	ReviewTimeout   time.Duration // how long a write waits for a human review
	Governance      governance.Config
	DefaultSchema   string

	// Tasks.
	ActionURL           string        // the action endpoint side-effecting steps call
	ActionTimeout       time.Duration // one call
	ConfirmationTimeout time.Duration // WAITING_CONFIRMATION before the default applies
}

// FromEnv reads the configuration. It returns an error naming the variable that
// cannot be parsed.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:         env("ENGRAM_DATABASE_URL", ""),
		TemporalAddress:     env("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		TemporalNamespace:   env("TEMPORAL_NAMESPACE", "default"),
		TaskQueue:           env("ENGRAM_TASK_QUEUE", "engram"),
		LLMBaseURL:          env("ENGRAM_LLM_BASE_URL", ""),
		LLMAPIKey:           env("ENGRAM_LLM_API_KEY", ""),
		LLMModel:            env("ENGRAM_LLM_MODEL", "gpt-4o-mini"),
		EmbedBaseURL:        env("ENGRAM_EMBED_BASE_URL", ""),
		Embedder:            env("ENGRAM_EMBEDDER", "composite"),
		ModelDir:            env("ENGRAM_MODEL_DIR", defaultModelDir()),
		EmbedAPIKey:         env("ENGRAM_EMBED_API_KEY", ""),
		EmbedModel:          env("ENGRAM_EMBED_MODEL", "text-embedding-3-small"),
		DefaultSchema:       env("ENGRAM_SCHEMA", "general"),
		ActionURL:           env("ENGRAM_ACTION_URL", ""),
		Governance:          governance.DefaultConfig(),
		LLMTimeout:          30 * time.Second,
		ExtractAttempts:     3,
		ReviewTimeout:       72 * time.Hour,
		ActionTimeout:       10 * time.Second,
		ConfirmationTimeout: 24 * time.Hour,
	}
	var err error
	durations := []struct {
		name string
		dst  *time.Duration
	}{
		{"ENGRAM_LLM_TIMEOUT", &c.LLMTimeout},
		{"ENGRAM_REVIEW_TIMEOUT", &c.ReviewTimeout},
		{"ENGRAM_ACTION_TIMEOUT", &c.ActionTimeout},
		{"ENGRAM_CONFIRMATION_TIMEOUT", &c.ConfirmationTimeout},
	}
	for _, d := range durations {
		if v := os.Getenv(d.name); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst <= 0 {
				return c, fmt.Errorf("%s: %q is not a positive duration (e.g. 30s, 72h)", d.name, v)
			}
		}
	}
	if v := os.Getenv("ENGRAM_EXTRACT_ATTEMPTS"); v != "" {
		if c.ExtractAttempts, err = strconv.Atoi(v); err != nil || c.ExtractAttempts < 1 || c.ExtractAttempts > 10 {
			return c, fmt.Errorf("ENGRAM_EXTRACT_ATTEMPTS: %q must be an integer from 1 to 10", v)
		}
	}
	floats := []struct {
		name string
		dst  *float64
	}{
		{"ENGRAM_REJECT_BELOW", &c.Governance.RejectBelow},
		{"ENGRAM_CONFIRM_BELOW", &c.Governance.ConfirmBelow},
		{"ENGRAM_DUPLICATE_SIMILARITY", &c.Governance.DuplicateSimilarity},
	}
	for _, f := range floats {
		if v := os.Getenv(f.name); v != "" {
			if *f.dst, err = strconv.ParseFloat(v, 64); err != nil {
				return c, fmt.Errorf("%s: %q is not a number", f.name, v)
			}
		}
	}
	if v := os.Getenv("ENGRAM_CONFIRM_INFERRED"); v != "" {
		if c.Governance.ConfirmInferred, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("ENGRAM_CONFIRM_INFERRED: %q is not true or false", v)
		}
	}
	if c.Embedder != "composite" && c.Embedder != "ngram" {
		return c, fmt.Errorf("ENGRAM_EMBEDDER: %q is not composite or ngram", c.Embedder)
	}
	if err := c.Governance.Validate(); err != nil {
		return c, fmt.Errorf("governance thresholds: %w", err)
	}
	return c, nil
}

func env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// defaultModelDir is where scripts/fetch-model puts the USE-lite model.
func defaultModelDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".cache/engram/models/use-lite"
	}
	return home + "/.cache/engram/models/use-lite"
}
