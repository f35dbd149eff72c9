// Package config reads Engram's settings from the environment (ENGRAM_*, TEMPORAL_*,
// OTEL_EXPORTER_OTLP_*), with defaults that work on a developer machine after
// `scripts/stack up`. It is the only package that reads the environment (cmd/
// aside): everything else takes a Config or a value from one. It imports only
// memory (the default schema), governance (thresholds) and privacy (the keyring).
package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/privacy"
)

// Config is every setting the engine reads.
type Config struct {
	DatabaseURL       string
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string
	// TemporalGzip compresses the gRPC requests to Temporal
	// (ENGRAM_TEMPORAL_COMPRESSION: auto, gzip or none). auto, the default, is gzip
	// except for a server on this machine (a loopback address or localhost), where
	// compressing costs both processes CPU and saves nothing.
	TemporalGzip bool

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

	// WorkflowCache bounds the workflows a worker keeps in memory between their
	// tasks (ENGRAM_WORKFLOW_CACHE, default 1000; the SDK's own default is 10,000).
	// A write waiting days for review is one of them; one that falls out of the
	// cache is replayed from its history when its next task comes.
	WorkflowCache int
	// RecallMaxStatements bounds the recall statements running on Postgres at
	// once (recall.Options.MaxStatements; 0: the engine's default, -1: none).
	RecallMaxStatements int
	// RecallTimeout bounds every recall (ENGRAM_RECALL_TIMEOUT, default 2s;
	// recall.Options.Timeout) and every other read the API serves (the read
	// store, storage.Store.Reader): Postgres cancels a statement past it, and the
	// caller gets deadline_exceeded naming the operation and the limit.
	RecallTimeout time.Duration

	// Tasks.
	ActionURL           string        // the action endpoint side-effecting steps call
	ActionTimeout       time.Duration // one call
	ConfirmationTimeout time.Duration // WAITING_CONFIRMATION before the default applies

	// Privacy: the encryption keyring (nil: content stored in clear) and the raw
	// redaction settings storage.ParseProtection checks.
	Keyring        *privacy.Keyring
	Redact         string // ENGRAM_REDACT
	RedactOriginal string // ENGRAM_REDACT_ORIGINAL

	// Typesense: an empty URL keeps Postgres full-text as the keyword index.
	TypesenseURL        string
	TypesenseAPIKey     string
	TypesenseCollection string

	// Maintenance schedules (lifecycle.ConfigFrom turns them into policies).
	Maintenance Maintenance

	// API rate limits (0 disables): calls per second per API key
	// (ENGRAM_RATE_LIMIT, default 200) and failed authentications per second per
	// client address (ENGRAM_AUTH_FAIL_LIMIT, default 2).
	RateLimitPerKey   float64
	AuthFailuresPerIP float64

	// Tracing is on when an OTLP endpoint is configured (the exporter reads the
	// other OTEL_EXPORTER_OTLP_* variables itself).
	Tracing bool
}

// Maintenance is how often each maintenance workflow runs (0 disables it) and
// its policy; see the README's configuration table.
type Maintenance struct {
	Prefix            string // ENGRAM_MAINT_PREFIX: names the schedules ("" = engram-maintenance)
	Disabled          bool   // ENGRAM_MAINT_SCHEDULES=off: never touch the server's schedules
	ExpiryEvery       time.Duration
	DecayEvery        time.Duration
	ConsolidateEvery  time.Duration
	SchemaReportEvery time.Duration
	SweepEvery        time.Duration // marks writes that can never finish FAILED
	SweepAfter        time.Duration // … once received this long ago

	DecayIdle   time.Duration // facts unused this long lose importance
	DecayFactor float64       // by this factor per run, in (0, 1)
	DecayFloor  float64       // never below this

	PruneEnabled       bool
	PruneAfter         time.Duration
	PruneMaxImportance float64

	ConsolidateMin    int
	ConsolidateMinAge time.Duration
}

// DefaultMaintenance: expiry every 10 minutes, decay hourly (facts idle 30 days
// lose 5% per run, never below 0.05), pruning off, consolidation hourly (≥ 5
// episodic facts older than a day), schema report daily.
func DefaultMaintenance() Maintenance {
	return Maintenance{
		ExpiryEvery: 10 * time.Minute, DecayEvery: time.Hour, ConsolidateEvery: time.Hour, SchemaReportEvery: 24 * time.Hour,
		SweepEvery: 10 * time.Minute, SweepAfter: 15 * time.Minute,
		DecayIdle: 30 * 24 * time.Hour, DecayFactor: 0.95, DecayFloor: 0.05,
		PruneAfter: 180 * 24 * time.Hour, PruneMaxImportance: 0.2,
		ConsolidateMin: 5, ConsolidateMinAge: 24 * time.Hour,
	}
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
		DefaultSchema:       env("ENGRAM_SCHEMA", memory.DefaultSchema),
		ActionURL:           env("ENGRAM_ACTION_URL", ""),
		Governance:          governance.DefaultConfig(),
		LLMTimeout:          30 * time.Second,
		ExtractAttempts:     3,
		ReviewTimeout:       72 * time.Hour,
		ActionTimeout:       10 * time.Second,
		ConfirmationTimeout: 24 * time.Hour,
		RateLimitPerKey:     200,
		WorkflowCache:       1000,
		AuthFailuresPerIP:   2,
		Redact:              env("ENGRAM_REDACT", ""),
		RedactOriginal:      env("ENGRAM_REDACT_ORIGINAL", ""),
		TypesenseURL:        env("ENGRAM_TYPESENSE_URL", ""),
		TypesenseAPIKey:     env("ENGRAM_TYPESENSE_API_KEY", ""),
		TypesenseCollection: env("ENGRAM_TYPESENSE_COLLECTION", ""),
		Tracing:             env("OTEL_EXPORTER_OTLP_ENDPOINT", "") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") != "",
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
	switch v := env("ENGRAM_TEMPORAL_COMPRESSION", "auto"); v {
	case "auto":
		c.TemporalGzip = !loopback(c.TemporalAddress)
	case "gzip", "none":
		c.TemporalGzip = v == "gzip"
	default:
		return c, fmt.Errorf("ENGRAM_TEMPORAL_COMPRESSION: %q must be auto, gzip or none", v)
	}
	if v := os.Getenv("ENGRAM_WORKFLOW_CACHE"); v != "" {
		if c.WorkflowCache, err = strconv.Atoi(v); err != nil || c.WorkflowCache < 1 {
			return c, fmt.Errorf("ENGRAM_WORKFLOW_CACHE: %q must be a positive integer", v)
		}
	}
	if v := os.Getenv("ENGRAM_RECALL_MAX_STATEMENTS"); v != "" {
		if c.RecallMaxStatements, err = strconv.Atoi(v); err != nil || (c.RecallMaxStatements < 1 && c.RecallMaxStatements != -1) {
			return c, fmt.Errorf("ENGRAM_RECALL_MAX_STATEMENTS: %q must be a positive integer, or -1 for no bound", v)
		}
	}
	if v := os.Getenv("ENGRAM_RECALL_TIMEOUT"); v != "" {
		if c.RecallTimeout, err = time.ParseDuration(v); err != nil || c.RecallTimeout < time.Millisecond || c.RecallTimeout > time.Hour {
			return c, fmt.Errorf("ENGRAM_RECALL_TIMEOUT: %q must be a duration from 1ms to 1h, such as 2s", v)
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
		{"ENGRAM_RATE_LIMIT", &c.RateLimitPerKey},
		{"ENGRAM_AUTH_FAIL_LIMIT", &c.AuthFailuresPerIP},
	}
	for _, f := range floats {
		if v := os.Getenv(f.name); v != "" {
			if *f.dst, err = strconv.ParseFloat(v, 64); err != nil {
				return c, fmt.Errorf("%s: %q is not a number", f.name, v)
			}
		}
	}
	if c.RateLimitPerKey < 0 || c.AuthFailuresPerIP < 0 {
		return c, fmt.Errorf("ENGRAM_RATE_LIMIT, ENGRAM_AUTH_FAIL_LIMIT: %v, %v: a rate is ≥ 0 (0 turns the limit off)", c.RateLimitPerKey, c.AuthFailuresPerIP)
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
	if c.Keyring, err = privacy.ParseKeyring(os.Getenv("ENGRAM_ENCRYPTION_KEY"), os.Getenv("ENGRAM_ENCRYPTION_KEY_ID"), os.Getenv("ENGRAM_ENCRYPTION_OLD_KEYS")); err != nil {
		return c, err
	}
	if c.Maintenance, err = maintenanceFromEnv(); err != nil {
		return c, err
	}
	return c, nil
}

// maintenanceFromEnv reads ENGRAM_MAINT_* over the defaults:
//
//	ENGRAM_MAINT_EXPIRY_EVERY, _DECAY_EVERY, _CONSOLIDATE_EVERY, _SCHEMA_REPORT_EVERY   durations; 0 disables
//	ENGRAM_MAINT_DECAY_IDLE (720h), _DECAY_FACTOR (0.95), _DECAY_FLOOR (0.05)
//	ENGRAM_MAINT_PRUNE (false), _PRUNE_AFTER (4320h), _PRUNE_MAX_IMPORTANCE (0.2)
//	ENGRAM_MAINT_CONSOLIDATE_MIN (5), _CONSOLIDATE_MIN_AGE (24h)
//	ENGRAM_MAINT_SWEEP_EVERY (10m), _SWEEP_AFTER (15m): stuck writes marked FAILED
//	ENGRAM_MAINT_PREFIX (engram-maintenance) names the schedules; ENGRAM_MAINT_SCHEDULES=off skips them
func maintenanceFromEnv() (Maintenance, error) {
	c := DefaultMaintenance()
	durs := []struct {
		name string
		dst  *time.Duration
	}{
		{"ENGRAM_MAINT_EXPIRY_EVERY", &c.ExpiryEvery}, {"ENGRAM_MAINT_DECAY_EVERY", &c.DecayEvery},
		{"ENGRAM_MAINT_CONSOLIDATE_EVERY", &c.ConsolidateEvery}, {"ENGRAM_MAINT_SCHEMA_REPORT_EVERY", &c.SchemaReportEvery},
		{"ENGRAM_MAINT_DECAY_IDLE", &c.DecayIdle}, {"ENGRAM_MAINT_PRUNE_AFTER", &c.PruneAfter},
		{"ENGRAM_MAINT_CONSOLIDATE_MIN_AGE", &c.ConsolidateMinAge},
		{"ENGRAM_MAINT_SWEEP_EVERY", &c.SweepEvery}, {"ENGRAM_MAINT_SWEEP_AFTER", &c.SweepAfter},
	}
	for _, d := range durs {
		if v := env(d.name, ""); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return c, fmt.Errorf("%s: %q is not a duration (e.g. 10m, 24h; 0 disables)", d.name, v)
			}
			*d.dst = x
		}
	}
	floats := []struct {
		name string
		dst  *float64
	}{{"ENGRAM_MAINT_DECAY_FACTOR", &c.DecayFactor}, {"ENGRAM_MAINT_DECAY_FLOOR", &c.DecayFloor}, {"ENGRAM_MAINT_PRUNE_MAX_IMPORTANCE", &c.PruneMaxImportance}}
	for _, f := range floats {
		if v := env(f.name, ""); v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 1 {
				return c, fmt.Errorf("%s: %q must be a number from 0 to 1", f.name, v)
			}
			*f.dst = x
		}
	}
	c.Prefix = env("ENGRAM_MAINT_PREFIX", "")
	switch v := env("ENGRAM_MAINT_SCHEDULES", ""); strings.ToLower(v) {
	case "", "on", "true":
	case "off", "false":
		c.Disabled = true
	default:
		return c, fmt.Errorf("ENGRAM_MAINT_SCHEDULES: %q must be on or off", v)
	}
	if v := env("ENGRAM_MAINT_PRUNE", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("ENGRAM_MAINT_PRUNE: %q is not true or false", v)
		}
		c.PruneEnabled = b
	}
	if v := env("ENGRAM_MAINT_CONSOLIDATE_MIN", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			return c, fmt.Errorf("ENGRAM_MAINT_CONSOLIDATE_MIN: %q must be an integer ≥ 2", v)
		}
		c.ConsolidateMin = n
	}
	if c.DecayFactor <= 0 || c.DecayFactor >= 1 {
		return c, fmt.Errorf("ENGRAM_MAINT_DECAY_FACTOR: %.3f must be between 0 and 1 (exclusive)", c.DecayFactor)
	}
	return c, nil
}

// loopback says whether a host:port names this machine.
func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
