package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/internal/testenv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type devRun struct {
	*testenv.Daemon
	stdout string
	api    string
	key    string
}

// startDev runs `engram dev --no-stack` on the given environment and reads its
// banner.
func startDev(t *testing.T, bin string, env []string, stateDir string) *devRun {
	t.Helper()
	proc := exec.Command(bin, "dev", "--no-stack", "--addr", "127.0.0.1:0", "--state-dir", stateDir)
	proc.Env = env
	var b strings.Builder
	banner := func(line string) (string, bool) {
		b.WriteString(line + "\n")
		return b.String(), strings.HasPrefix(line, "Ctrl-C stops engram")
	}
	d := &devRun{}
	d.Daemon, d.stdout = testenv.StartDaemon(t, proc, 90*time.Second, banner)
	if m := regexp.MustCompile(`(?m)^  API\s+(http://\S+)`).FindStringSubmatch(d.stdout); m != nil {
		d.api = m[1]
	}
	if m := regexp.MustCompile(`(?m)^  API key\s+(egk_\S+)`).FindStringSubmatch(d.stdout); m != nil {
		d.key = m[1]
	}
	return d
}

// stop sends Ctrl-C and waits for a clean exit.
func (d *devRun) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, d.Cmd.Process.Signal(os.Interrupt))
	select {
	case <-d.Done():
		require.NoError(t, d.Err(), "engram dev exits 0 on Ctrl-C\n%s", d.Logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("engram dev did not stop within 30s of Ctrl-C")
	}
}

// TestDev runs `engram dev` (with the stack's environment given, --no-stack): it
// migrates, creates a dev key, serves with the worker, prints the banner, answers
// with that key, stops on Ctrl-C, and reuses its key on the next start.
func TestDev(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	env := append(freshEnv(t), "ENGRAM_TEMPORAL_UI_URL="+envOr("ENGRAM_TEMPORAL_UI_URL", "http://127.0.0.1:8233"))
	state := t.TempDir()

	d := startDev(t, bin, env, state)
	t.Logf("engram dev printed:\n%s", d.stdout)
	require.NotEmpty(t, d.api, "API address in the banner")
	require.NotEmpty(t, d.key, "API key in the banner")
	assert.Contains(t, d.stdout, "Temporal Web UI  "+envOr("ENGRAM_TEMPORAL_UI_URL", "http://127.0.0.1:8233"))
	assert.Contains(t, d.stdout, "EngramReview%3D%22PENDING%22", "a link to the pending reviews")
	assert.Contains(t, d.stdout, "export ENGRAM_ADDR="+d.api+" ENGRAM_API_KEY="+d.key)
	for _, ex := range []string{" ingest --user u1", " recall --user u1", " review list", " review confirm CANDIDATE_ID"} {
		assert.Contains(t, d.stdout, ex)
	}
	assert.Contains(t, d.Logs.String(), "created a dev API key")
	saved, err := os.ReadFile(state + "/dev-key")
	require.NoError(t, err)
	assert.Equal(t, d.key, strings.TrimSpace(string(saved)))

	// The key works for every role: ingest (agent), review list (reviewer), schema put is admin.
	cli := func(args ...string) result {
		return run(t, bin, append(append([]string{}, cleanEnv()...), "ENGRAM_ADDR="+d.api, "ENGRAM_API_KEY="+d.key), "", args...)
	}
	out := cli("ingest", "--user", "u1", "--schema", "travel", "--text", "预算不超过8000元", "--wait").ok(t, "ingest through dev")
	assert.Contains(t, out, "COMMITTED")
	out = cli("recall", "--user", "u1", "--schema", "travel", "--query", "预算是多少").ok(t, "recall through dev")
	assert.Contains(t, out, "8000 CNY")
	cli("review", "list").ok(t, "review list through dev")

	// The banner's env line and MCP configs are what this dev runs with, and they work.
	checkBannerEnvLine(t, d.stdout, env)
	checkBannerMCP(t, d, bin, env)
	d.stop(t)
	assert.Contains(t, d.Logs.String(), "stopped engram (the stack keeps running")

	// Second start: the same key is reused.
	d2 := startDev(t, bin, env, state)
	assert.Equal(t, d.key, d2.key)
	assert.Contains(t, d2.Logs.String(), "reusing the dev API key")
	d2.stop(t)

	// Without the stack's environment and --no-stack, dev says what is missing.
	bare := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	r := run(t, bin, bare, "", "dev", "--no-stack", "--state-dir", state)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "set ENGRAM_DATABASE_URL and TEMPORAL_ADDRESS")
}

// TestSecondDevOnTheSameAddress: while one `engram dev` serves, a second on its address
// stops before it starts anything and says once who serves there, how to use it, how to
// stop it and which flag picks another port, exiting 5 (conflict). The same for an
// `engram serve` there (no pid to name), and for a program that is not an engram.
func TestSecondDevOnTheSameAddress(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	env := freshEnv(t)
	state := t.TempDir()
	d := startDev(t, bin, env, state)
	addr := strings.TrimPrefix(d.api, "http://")

	second := run(t, bin, env, "", "dev", "--no-stack", "--addr", addr, "--state-dir", state)
	t.Logf("second dev (exit %d):\n%s", second.code, second.stderr)
	assert.Equal(t, 5, second.code, "a conflict exits 5")
	assert.Empty(t, second.stdout)
	msg := second.stderr
	assert.Equal(t, 1, strings.Count(msg, "is in use"), "said once")
	assert.NotContains(t, msg, "bind: address already in use")
	assert.Contains(t, msg, fmt.Sprintf("engram: %s is in use: engram dev (pid %d) already serves %s", addr, d.Cmd.Process.Pid, d.api))
	assert.Contains(t, msg, "export ENGRAM_ADDR="+d.api+" ENGRAM_API_KEY=$(cat '"+state+"/dev-key')")
	assert.Contains(t, msg, fmt.Sprintf("kill %d", d.Cmd.Process.Pid))
	assert.Regexp(t, `--addr 127\.0\.0\.1:\d+ \(scripts/dev --addr 127\.0\.0\.1:\d+, or ENGRAM_ADDR=127\.0\.0\.1:\d+ make dev\)`, msg)
	assert.NotContains(t, msg, "migrated", "nothing was started")
	d.stop(t)
	_, err := os.Stat(state + "/dev.pid")
	assert.True(t, os.IsNotExist(err), "dev removes its pid note when it stops")

	// An `engram serve` on the address: an engram, without a pid to name.
	s := startServe(t)
	r := run(t, bin, env, "", "dev", "--no-stack", "--addr", strings.TrimPrefix(s.url, "http://"), "--state-dir", t.TempDir())
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, "already serves "+s.url)
	assert.Contains(t, r.stderr, "stop it:  Ctrl-C in its terminal\n")

	// Not an engram.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	r = run(t, bin, env, "", "dev", "--no-stack", "--addr", ln.Addr().String(), "--state-dir", t.TempDir())
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, ln.Addr().String()+" is in use by another program (not an engram)")
	assert.Equal(t, 1, strings.Count(r.stderr, "engram: "), "one message: %s", r.stderr)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// checkBannerEnvLine runs the banner's env line (dev ran --no-stack: the values
// themselves) in a shell: it sets the database, Temporal and task queue dev runs with.
func checkBannerEnvLine(t *testing.T, banner string, env []string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  (export .*TEMPORAL_ADDRESS=.*)$`).FindStringSubmatch(banner)
	require.NotNil(t, m, "an env line for another shell in the banner:\n%s", banner)
	out, err := exec.Command("sh", "-c", m[1]+`; printf '%s\n%s\n%s\n' "$ENGRAM_DATABASE_URL" "$TEMPORAL_ADDRESS" "$ENGRAM_TASK_QUEUE"`).Output()
	require.NoError(t, err, "sh -c %q", m[1])
	assert.Equal(t, envValue(env, "ENGRAM_DATABASE_URL")+"\n"+envValue(env, "TEMPORAL_ADDRESS")+"\n"+envValue(env, "ENGRAM_TASK_QUEUE")+"\n", string(out))
}

// mcpServer is one entry of an MCP client's "mcpServers".
type mcpServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// checkBannerMCP reads the banner's two MCP client configs (stdio, then HTTP): each is
// valid JSON naming this binary, dev's database, Temporal, task queue and key, or dev's
// /mcp. A client then connects with each, as pasted, and lists u1's budget.
func checkBannerMCP(t *testing.T, d *devRun, bin string, env []string) {
	t.Helper()
	var configs []mcpServer
	for _, line := range strings.Split(d.stdout, "\n") {
		if strings.HasPrefix(line, `  {"mcpServers"`) {
			var c struct{ MCPServers map[string]mcpServer }
			require.NoError(t, json.Unmarshal([]byte(line), &c), "MCP config is JSON: %s", line)
			configs = append(configs, c.MCPServers["engram"])
		}
	}
	require.Len(t, configs, 2, "stdio and HTTP MCP configs in the banner:\n%s", d.stdout)
	stdio, web := configs[0], configs[1]

	assert.Equal(t, bin, stdio.Command)
	assert.Equal(t, []string{"mcp"}, stdio.Args)
	assert.Equal(t, d.key, stdio.Env["ENGRAM_API_KEY"])
	for _, name := range []string{"ENGRAM_DATABASE_URL", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "ENGRAM_TASK_QUEUE"} {
		assert.Equal(t, envValue(env, name), stdio.Env[name], name)
	}
	assert.Equal(t, "http", web.Type)
	assert.Equal(t, d.api+"/mcp", web.URL)
	assert.Equal(t, "Bearer "+d.key, web.Headers["Authorization"])

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// stdio, as an MCP client starts it: the config's command, args and env only.
	proc := exec.Command(stdio.Command, stdio.Args...)
	proc.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range stdio.Env {
		proc.Env = append(proc.Env, k+"="+v)
	}
	var mcpLog testenv.LockedBuffer
	proc.Stderr = &mcpLog
	listBudget(ctx, t, "stdio", &sdk.CommandTransport{Command: proc}, &mcpLog)
	// HTTP, with the config's headers.
	listBudget(ctx, t, "HTTP", &sdk.StreamableClientTransport{Endpoint: web.URL, HTTPClient: &http.Client{Transport: headers(web.Headers)}}, nil)
}

// listBudget connects an MCP client and finds u1's budget of 8000 CNY with list_facts.
func listBudget(ctx context.Context, t *testing.T, what string, tr sdk.Transport, log *testenv.LockedBuffer) {
	t.Helper()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "banner-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil && log != nil {
		t.Logf("engram mcp log:\n%s", log.String())
	}
	require.NoError(t, err, "MCP over %s with the banner's config", what)
	defer s.Close()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "list_facts", Arguments: map[string]any{"user_id": "u1", "predicate": "budget"}})
	require.NoError(t, err, what)
	out, _ := json.Marshal(res)
	assert.False(t, res.IsError, "%s list_facts: %s", what, out)
	assert.Contains(t, string(out), "8000", "%s list_facts finds the budget ingested through dev", what)
}

// headers is an http.RoundTripper that sets the given headers.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// envValue is the value of name in env (the last one set), or "".
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
