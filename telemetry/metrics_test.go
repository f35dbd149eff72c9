package telemetry

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The registry exports Engram's series under the documented names, recall
// observations land in the histograms, and errors are counted by code.
func TestMetricsNamesAndRecallObservations(t *testing.T) {
	m, err := NewMetrics(nil)
	require.NoError(t, err)
	m.ObserveRecall(12*time.Millisecond, map[string]time.Duration{"embed": time.Millisecond, "retrieve": 5 * time.Millisecond, "total": 12 * time.Millisecond},
		[][]string{{"semantic", "keyword"}, {"graph"}}, nil)
	m.ObserveRecall(0, nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("k: bad")))
	m.ObserveTool("recall", nil, 0)
	m.Writes.WithLabelValues("COMMITTED").Inc()
	m.ExtractAttempts.Inc()

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		MetricRecallSeconds + "_count 1",
		MetricStageSeconds + `_count{stage="retrieve"} 1`,
		MetricRetrieverHits + `{retriever="semantic"} 1`,
		MetricRetrieverHits + `{retriever="graph"} 1`,
		MetricRecalls + `{code="ok"} 1`,
		MetricRecalls + `{code="invalid_argument"} 1`,
		MetricWrites + `{status="COMMITTED"} 1`,
		MetricExtractAttempts + " 1",
		MetricExtractFailures + `{reason="invalid"} 0`,
		MetricToolCalls + `{outcome="ok",tool="recall"} 1`,
	} {
		assert.Contains(t, body, want)
	}
	assert.False(t, strings.Contains(body, `stage="total"`), "the total is the overall histogram, not a stage")
}
