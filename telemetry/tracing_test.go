package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/engramhq/engram/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Off without OTEL_EXPORTER_OTLP_ENDPOINT; with it, a traced request's span is
// exported over OTLP/HTTP to the collector it names.
func TestTracingExportsOverOTLPOnlyWhenConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	_, enabled, err := SetupTracing(context.Background(), "engram-test", cfg.Tracing)
	require.NoError(t, err)
	assert.False(t, enabled)

	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	cfg, err = config.FromEnv()
	require.NoError(t, err)
	shutdown, enabled, err := SetupTracing(context.Background(), "engram-test", cfg.Tracing)
	require.NoError(t, err)
	require.True(t, enabled)
	h := TraceHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	assert.Equal(t, http.StatusTeapot, rec.Code)
	require.NoError(t, shutdown(context.Background()), "flush")
	assert.Positive(t, posts.Load(), "spans were exported to the collector")
}
