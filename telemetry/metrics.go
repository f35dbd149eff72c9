// Package telemetry is what an operator watches: Prometheus metrics (/metrics),
// health and readiness (/healthz, /readyz) and OpenTelemetry traces through the
// API, the workflows and the activities, exported over OTLP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (config.Tracing). It may import write (to
// count writes and extraction attempts by workflow name and result).
package telemetry

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/engramhq/engram/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// Metrics holds Engram's collectors and the registry /metrics serves.
type Metrics struct {
	Registry *prometheus.Registry

	RecallSeconds   prometheus.Histogram
	StageSeconds    *prometheus.HistogramVec // label stage
	RetrieverHits   *prometheus.CounterVec   // label retriever
	Recalls         *prometheus.CounterVec   // label code (ok or a Connect code)
	Writes          *prometheus.CounterVec   // label status
	ExtractAttempts prometheus.Counter
	ExtractFailures *prometheus.CounterVec // label reason (error, invalid)
	ToolCalls       *prometheus.CounterVec // labels tool, outcome
	HTTPRequests    *prometheus.CounterVec // labels handler, code

	temporal client.MetricsHandler
}

// Names of Engram's own metrics (the README lists them; a test checks them).
const (
	MetricRecallSeconds   = "engram_recall_duration_seconds"
	MetricStageSeconds    = "engram_recall_stage_duration_seconds"
	MetricRetrieverHits   = "engram_recall_retriever_hits_total"
	MetricRecalls         = "engram_recalls_total"
	MetricWrites          = "engram_writes_total"
	MetricExtractAttempts = "engram_extraction_attempts_total"
	MetricExtractFailures = "engram_extraction_failures_total"
	MetricReviewQueue     = "engram_review_queue_depth"
	MetricOutboxPending   = "engram_outbox_pending"
	MetricOutboxLag       = "engram_outbox_lag_seconds"
	MetricToolCalls       = "engram_mcp_tool_calls_total"
	MetricHTTPRequests    = "engram_http_requests_total"
)

// NewMetrics returns the collectors, registered with a new registry together with
// the Go and process collectors, the database gauges (review queue depth, outbox
// lag; read at scrape time from db when not nil) and the Temporal SDK's metrics
// (TemporalHandler, for client.Options.MetricsHandler).
func NewMetrics(db *sql.DB) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		RecallSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricRecallSeconds,
			Help: "Latency of a recall, end to end.", Buckets: prometheus.ExponentialBuckets(0.002, 2, 13)}),
		StageSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricStageSeconds,
			Help:    "Latency of each recall stage: parse, embed (the semantic retriever's query vector), retrieve (the SQL statement running the semantic, keyword, structured and graph retrievers and reading the named task and session), keyword_index (an external keyword index), fuse, context, access_log.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"stage"}),
		RetrieverHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRetrieverHits,
			Help: "Recalled items each retriever found (an item found by several counts for each)."}, []string{"retriever"}),
		Recalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRecalls,
			Help: "Recalls answered, by outcome (ok or the error code)."}, []string{"code"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWrites,
			Help: "Memory writes finished, by status (COMMITTED, NO_MEMORY, UNPARSED, FAILED)."}, []string{"status"}),
		ExtractAttempts: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricExtractAttempts,
			Help: "Extraction attempts (Extract activity executions)."}),
		ExtractFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricExtractFailures,
			Help: "Extraction attempts that failed: the extractor erred (error) or its output failed the schema (invalid)."}, []string{"reason"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricToolCalls,
			Help: "MCP tool calls, by tool and outcome (ok or error)."}, []string{"tool", "outcome"}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricHTTPRequests,
			Help: "HTTP requests, by handler (api, mcp) and status class."}, []string{"handler", "code"}),
	}
	reg.MustRegister(m.RecallSeconds, m.StageSeconds, m.RetrieverHits, m.Recalls, m.Writes, m.ExtractAttempts, m.ExtractFailures, m.ToolCalls, m.HTTPRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, code := range []string{"ok"} {
		m.Recalls.WithLabelValues(code)
	}
	for _, r := range []string{"error", "invalid"} {
		m.ExtractFailures.WithLabelValues(r)
	}
	if db != nil {
		reg.MustRegister(&dbCollector{db: db})
	}
	// The Temporal SDK reports through OpenTelemetry metrics, exported into the
	// same registry (temporal_* series: workflow and activity task latencies,
	// poller counts, sticky cache, request failures).
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, err
	}
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)).Meter("temporal-sdk-go")
	m.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: meter})
	return m, nil
}

// TemporalHandler is the Temporal SDK metrics handler (client.Options.MetricsHandler).
func (m *Metrics) TemporalHandler() client.MetricsHandler { return m.temporal }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ObserveRecall records one recall: its total latency, each stage's (timings as
// recall.Response.Timings reports them), the retrievers of its items (each
// item's Retrievers) and its outcome.
func (m *Metrics) ObserveRecall(took time.Duration, timings map[string]time.Duration, retrievers [][]string, err error) {
	if m == nil {
		return
	}
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.Recalls.WithLabelValues(code).Inc()
	if err != nil {
		return
	}
	m.RecallSeconds.Observe(took.Seconds())
	for stage, d := range timings {
		if stage != "total" {
			m.StageSeconds.WithLabelValues(stage).Observe(d.Seconds())
		}
	}
	for _, rs := range retrievers {
		for _, r := range rs {
			m.RetrieverHits.WithLabelValues(r).Inc()
		}
	}
}

// ObserveTool records one MCP tool call.
func (m *Metrics) ObserveTool(tool string, err error, _ time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.ToolCalls.WithLabelValues(tool, outcome).Inc()
}

// CountHTTP wraps h, counting its responses by status class under handler name.
func (m *Metrics) CountHTTP(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.HTTPRequests.WithLabelValues(name, statusClass(sw.code)).Inc()
	})
}

func statusClass(code int) string {
	return string(rune('0'+code/100)) + "xx"
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush keeps streaming responses (gRPC, MCP's event streams) streaming.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// dbCollector reads the gauges that live in Postgres at scrape time: the review
// queue (candidates awaiting a human, all tenants) and the outbox (rows not yet
// applied to the keyword index, and the age of the oldest).
type dbCollector struct{ db *sql.DB }

var (
	descReview        = prometheus.NewDesc(MetricReviewQueue, "Candidates awaiting human review (NEEDS_CONFIRMATION), all tenants.", nil, nil)
	descOutboxPending = prometheus.NewDesc(MetricOutboxPending, "Outbox rows not yet applied to the keyword index.", nil, nil)
	descOutboxLag     = prometheus.NewDesc(MetricOutboxLag, "Age of the oldest outbox row not yet applied (0 when none).", nil, nil)
)

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descReview
	ch <- descOutboxPending
	ch <- descOutboxLag
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	review, err := storage.ReviewQueueDepth(ctx, c.db)
	if err != nil {
		slog.Warn("metrics: review queue depth", "error", err)
		ch <- prometheus.NewInvalidMetric(descReview, err)
	} else {
		ch <- prometheus.MustNewConstMetric(descReview, prometheus.GaugeValue, float64(review))
	}
	pending, lag, err := storage.OutboxBacklog(ctx, c.db)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		slog.Warn("metrics: outbox lag", "error", err)
		ch <- prometheus.NewInvalidMetric(descOutboxPending, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descOutboxPending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(descOutboxLag, prometheus.GaugeValue, lag.Float64)
}

// IsMetricName reports whether s names one of Engram's own series.
func IsMetricName(s string) bool { return strings.HasPrefix(s, "engram_") }
