// Package mcp tests Engram's MCP server, its metrics and the TypeScript client (clients/ts/)
// against a real `engram serve` process (real Postgres, real Temporal) with
// clients no one here wrote: the MCP TypeScript SDK's client over Streamable HTTP
// and over stdio (`engram mcp`), and the MCP conformance suite
// (@modelcontextprotocol/conformance), whose results are printed. It then checks
// that /metrics shows the histograms and counters with non-zero counts.
//
// node and npm must be on PATH; the node packages are installed with `npm ci` from
// the committed package-lock.json when missing (as the browser test does).
package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/telemetry"
)

type clientResult struct {
	OK             bool     `json:"ok"`
	Error          string   `json:"error"`
	Steps          []string `json:"steps"`
	NoKeyStatus    int      `json:"noKeyStatus"`
	WrongKey       bool     `json:"wrongKeyRefused"`
	HTTPTools      []string `json:"httpTools"`
	StdioTools     []string `json:"stdioTools"`
	HTTPRemember   string   `json:"httpRemember"`
	StdioRemember  string   `json:"stdioRemember"`
	HTTPRecallIDs  []string `json:"httpRecallIds"`
	StdioRecallIDs []string `json:"stdioRecallIds"`
	HTTPContext    string   `json:"httpContext"`
	FactID         string   `json:"factId"`
	OwnFact        string   `json:"ownFact"`
	OtherTenant    struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"otherTenant"`
	HTTPBadArg struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"httpBadArg"`
	StdioBadArg struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"stdioBadArg"`
}

func runNode(t *testing.T, ctx context.Context, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if stderr.Len() > 0 {
		t.Logf("node %s stderr:\n%s", strings.Join(args, " "), tail(stderr.String(), 3000))
	}
	require.NoError(t, err, "node %s: %s", strings.Join(args, " "), out)
	return out
}

func TestMCPClientsConformanceAndMetrics(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "tests", "mcp")
	npmCI(t, dir, "@modelcontextprotocol/sdk")
	s := serve(t)
	tenant, other := "mcpA-"+testenv.RandomID(8), "mcpB-"+testenv.RandomID(8)
	key := s.CreateKey(t, tenant, "desk-agent", "agent", "--user", "u1")
	keyB := s.CreateKey(t, other, "other-agent", "agent", "--user", "u1")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	t.Run("TypeScriptSDKClient", func(t *testing.T) {
		env := append(append([]string{}, s.Env...), "URL="+s.URL, "KEY="+key, "KEY_B="+keyB, "ENGRAM_BIN="+s.Bin)
		out := runNode(t, ctx, dir, env, "client.mjs")
		var r clientResult
		require.NoError(t, json.Unmarshal(bytes.TrimSpace(out), &r), "client.mjs printed %s", out)
		t.Logf("client.mjs: %s", strings.Join(r.Steps, "; "))
		require.True(t, r.OK, "client.mjs failed after %v: %s", r.Steps, r.Error)
		want := []string{"fact_history", "forget_fact", "get_fact", "list_facts", "pending_reviews", "recall", "remember", "task_get", "task_start", "task_step"}
		assert.Equal(t, want, r.HTTPTools)
		assert.Equal(t, want, r.StdioTools)
		assert.Equal(t, http.StatusUnauthorized, r.NoKeyStatus, "no key is refused")
		assert.True(t, r.WrongKey, "a wrong key is refused")
		assert.Equal(t, "WRITE_STATUS_COMMITTED", r.HTTPRemember)
		assert.Equal(t, "WRITE_STATUS_COMMITTED", r.StdioRemember)
		require.NotEmpty(t, r.FactID)
		assert.Equal(t, "FACT_STATUS_ACTIVE", r.OwnFact)
		assert.Contains(t, r.HTTPRecallIDs, r.FactID)
		assert.Contains(t, r.HTTPContext, "直飞")
		assert.True(t, r.OtherTenant.IsError)
		assert.Contains(t, r.OtherTenant.Text, "not_found")
		for _, bad := range []struct {
			IsError bool
			Text    string
		}{{r.HTTPBadArg.IsError, r.HTTPBadArg.Text}, {r.StdioBadArg.IsError, r.StdioBadArg.Text}} {
			assert.True(t, bad.IsError)
			assert.Contains(t, bad.Text, "k")
		}

		// The same recall through Connect returns the same items.
		rc, err := client.New(s.URL, key).Recall(ctx, &engramv1.RecallRequest{Query: "坐飞机有什么偏好", Schema: "travel"})
		require.NoError(t, err)
		var ids []string
		for _, it := range rc.Items {
			ids = append(ids, it.Id)
		}
		assert.Equal(t, ids, r.StdioRecallIDs, "Connect recall == MCP recall (stdio, after both writes)")
	})

	t.Run("Conformance", func(t *testing.T) { conformance(t, ctx, dir, s.URL, key) })

	// The TypeScript client (clients/ts/), with node's test runner, in a tenant of its own.
	t.Run("TypeScriptClient", func(t *testing.T) {
		tsDir := filepath.Join(repoRoot(t), "clients", "ts")
		npmCI(t, tsDir, "@connectrpc/connect-node")
		tsKey := s.CreateKey(t, "ts-"+testenv.RandomID(8), "ts-agent", "agent", "--user", "u1")
		out := runNode(t, ctx, tsDir, append(os.Environ(), "ENGRAM_URL="+s.URL, "ENGRAM_API_KEY="+tsKey), "--test", "--test-reporter=spec", "test/")
		t.Logf("node --test clients/ts/test/:\n%s", out)
	})

	t.Run("Metrics", func(t *testing.T) { checkMetrics(t, ctx, s.URL) })
}

// conformanceScenarios are the suite's server scenarios that apply to a server
// with Engram's capabilities (tools only: no resources, prompts, sampling or
// elicitation, and none of the suite's own test tools).
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}

// conformance runs the MCP conformance suite against /mcp. The suite sends no
// credentials, so it talks to Engram through a proxy that adds the agent's key, as
// any configured MCP client does. The proxy keeps a log of every exchange (HTTP
// method, JSON-RPC method, session, status, time to the first byte and to the
// end), printed for a scenario that fails, so a request that got no answer shows
// where it waited. ENGRAM_CONFORMANCE_REPEAT=N runs the scenarios N times (to
// look for a rare failure).
func conformance(t *testing.T, ctx context.Context, dir, base, key string) {
	target, err := url.Parse(base)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		r.Header.Set("Authorization", "Bearer "+key)
	}
	log := &exchangeLog{}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		log.note("proxy error on %s %s: %v", r.Method, r.URL.Path, err)
		w.WriteHeader(http.StatusBadGateway)
	}
	proxy := httptest.NewServer(log.wrap(rp))
	defer proxy.Close()

	repeat := 1
	if n, err := strconv.Atoi(os.Getenv("ENGRAM_CONFORMANCE_REPEAT")); err == nil && n > 1 {
		repeat = n
	}
	var summary []string
	failed, runs, retried := 0, 0, 0
	for i := 0; i < repeat; i++ {
		for _, sc := range conformanceScenarios {
			runs++
			line, ok, timedOut, seen := runScenario(t, ctx, dir, proxy.URL, sc, log)
			if !ok && timedOut {
				// A request the suite's client gave up on after its 60 s: seen once in
				// many CI runs, never when run alone. What passed through the proxy
				// is logged above; the scenario runs once more, and the report says so.
				again, ok2, _, _ := runScenario(t, ctx, dir, proxy.URL, sc, log)
				line += "; run again: " + strings.TrimSpace(strings.TrimPrefix(again, sc))
				ok = ok2
				retried++
				// The report (printed by scripts/test) keeps what the proxy saw of
				// the timed-out run, as a passing test's log is not shown.
				line += "\n    what passed through the proxy in the timed-out run:\n  " + strings.ReplaceAll(seen, "\n", "\n  ")
			}
			if !ok {
				failed++
				line += " ← FAILED"
			}
			if i == 0 || !ok || timedOut {
				summary = append(summary, line)
			}
		}
	}
	t.Logf("MCP conformance suite (@modelcontextprotocol/conformance) against /mcp:\n  %s", strings.Join(summary, "\n  "))
	// go test shows a passing package's output only with -v: the result is also
	// kept in artifacts/, which scripts/test prints.
	report := fmt.Sprintf("MCP conformance (@modelcontextprotocol/conformance) against /mcp: %d/%d scenario runs passed (%d run again after a client timeout)\n  %s\n",
		runs-failed, runs, retried, strings.Join(summary, "\n  "))
	fmt.Print(report)
	if err := os.MkdirAll(filepath.Join(dir, "artifacts"), 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "artifacts", "conformance.txt"), []byte(report), 0o644)
	}
	assert.Zero(t, failed, "conformance scenarios failed")
}

// runScenario runs one scenario of the suite through the proxy and returns its
// report line, whether it passed, whether its client timed out on a request and,
// for a failed run, what passed through the proxy (both also logged).
func runScenario(t *testing.T, ctx context.Context, dir, proxyURL, sc string, log *exchangeLog) (line string, ok, timedOut bool, seen string) {
	outDir := t.TempDir()
	mark := log.mark()
	started := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, filepath.Join(dir, "node_modules", ".bin", "conformance"),
		"server", "--url", proxyURL+"/mcp", "--scenario", sc, "--output-dir", outDir)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	passed, fails := countChecks(t, outDir)
	line = fmt.Sprintf("%-28s %d passed, %d failed (%.1f s)", sc, passed, fails, time.Since(started).Seconds())
	ok = err == nil && fails == 0 && passed > 0
	if !ok {
		timedOut = strings.Contains(string(out), "Request timed out")
		t.Logf("conformance %s output:\n%s", sc, tail(string(out), 3000))
		seen = log.since(mark)
		t.Logf("conformance %s: what passed through the proxy:\n%s", sc, seen)
	}
	return line, ok, timedOut, seen
}

// exchangeLog records what passes through the conformance proxy.
type exchangeLog struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (l *exchangeLog) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() {
		l.start = time.Now()
	}
	l.lines = append(l.lines, fmt.Sprintf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...))
}

func (l *exchangeLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *exchangeLog) since(mark int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "  " + strings.Join(l.lines[mark:], "\n  ")
}

// wrap logs each request as it arrives and when its response ends.
func (l *exchangeLog) wrap(h http.Handler) http.Handler {
	var seq atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := seq.Add(1)
		rpc := ""
		if r.Body != nil && r.Method == http.MethodPost {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(b))
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			if json.Unmarshal(b, &m) == nil {
				rpc = m.Method
				if len(m.ID) > 0 {
					rpc += " id=" + string(m.ID)
				}
			}
		}
		session := r.Header.Get("Mcp-Session-Id")
		if len(session) > 6 {
			session = session[:6]
		}
		l.note("#%d → %s %s session=%s", n, r.Method, rpc, session)
		rec := &recorder{ResponseWriter: w, start: time.Now()}
		h.ServeHTTP(rec, r)
		l.note("#%d ← %d %s, %d bytes, first byte after %v, ended after %v (client gone: %v)", n, rec.status,
			rec.Header().Get("Content-Type"), rec.bytes, rec.first.Round(time.Millisecond),
			time.Since(rec.start).Round(time.Millisecond), r.Context().Err() != nil)
	})
}

// recorder notes a response's status, size and time to its first byte; it passes
// flushes through, as the proxy streams server-sent events.
type recorder struct {
	http.ResponseWriter
	start  time.Time
	status int
	bytes  int
	first  time.Duration
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.first = time.Since(r.start)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// countChecks reads the checks.json files the suite writes and counts SUCCESS
// and FAILURE checks.
func countChecks(t *testing.T, dir string) (passed, failed int) {
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Base(p) != "checks.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var checks []struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(b, &checks) != nil {
			return nil
		}
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				passed++
			case "FAILURE":
				failed++
			}
		}
		return nil
	})
	return passed, failed
}

// checkMetrics reads /metrics after the writes and recalls above: the histograms
// and counters exist with non-zero counts, and so do the Temporal SDK's.
func checkMetrics(t *testing.T, ctx context.Context, base string) {
	for _, p := range []string{"/healthz", "/readyz"} {
		res, err := http.Get(base + p)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", p, body)
		t.Logf("%s: %s", p, strings.TrimSpace(string(body)))
	}
	var values map[string]float64
	// The write-outcome counter is bumped when a workflow ends, just after the
	// caller saw its result; scrape until it shows.
	require.Eventually(t, func() bool {
		values = scrape(t, base)
		return values[telemetry.MetricWrites+`{status="COMMITTED"}`] > 0
	}, 30*time.Second, 250*time.Millisecond, "write outcomes counted")
	for _, name := range []string{
		telemetry.MetricRecallSeconds + "_count",
		telemetry.MetricStageSeconds + `_count{stage="embed"}`,
		telemetry.MetricStageSeconds + `_count{stage="retrieve"}`,
		telemetry.MetricRetrieverHits + `{retriever="semantic"}`,
		telemetry.MetricRecalls + `{code="ok"}`,
		telemetry.MetricWrites + `{status="COMMITTED"}`,
		telemetry.MetricExtractAttempts,
		telemetry.MetricToolCalls + `{outcome="ok",tool="recall"}`,
		telemetry.MetricToolCalls + `{outcome="error",tool="recall"}`,
		telemetry.MetricHTTPRequests + `{code="2xx",handler="mcp"}`,
		telemetry.MetricHTTPRequests + `{code="2xx",handler="api"}`,
	} {
		assert.Greater(t, values[name], 0.0, "%s is counted", name)
	}
	for _, name := range []string{telemetry.MetricReviewQueue, telemetry.MetricOutboxPending, telemetry.MetricOutboxLag, telemetry.MetricExtractFailures + `{reason="invalid"}`} {
		_, ok := values[name]
		assert.True(t, ok, "%s is exported", name)
	}
	var temporal []string
	for name, v := range values {
		if strings.HasPrefix(name, "temporal_") && v > 0 {
			temporal = append(temporal, name)
		}
	}
	assert.NotEmpty(t, temporal, "the Temporal SDK's worker metrics are exported")
	found := func(prefix string) bool {
		for _, n := range temporal {
			if strings.HasPrefix(n, prefix) {
				return true
			}
		}
		return false
	}
	assert.True(t, found("temporal_workflow_task_execution_latency"), "workflow task latency")
	// The write path's short steps are local activities: either kind counts.
	assert.True(t, found("temporal_activity_execution_latency") || found("temporal_local_activity_execution_latency"), "activity latency")
	t.Logf("metrics: %d series, %d temporal_* with non-zero values", len(values), len(temporal))
}

// scrape reads /metrics into series → value.
func scrape(t *testing.T, base string) map[string]float64 {
	res, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
