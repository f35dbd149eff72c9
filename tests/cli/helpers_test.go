// Package cli tests the engram command line as a user runs it: the binary is
// built, `engram serve` runs as a separate process against the real stack (a fresh
// database, a task queue of its own), and every command is run as a process whose
// exit code, stdout and stderr are checked.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	"github.com/engramhq/engram/internal/testenv"
)

// env is the environment of a fresh database and task queue on the real stack.
func freshEnv(t *testing.T) []string {
	_, dsn := testenv.StoreURL(t)
	return append(cleanEnv(),
		"ENGRAM_DATABASE_URL="+dsn,
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+testenv.Namespace(),
		"ENGRAM_TASK_QUEUE="+testenv.TaskQueue(t),
	)
}

// cleanEnv is the test's environment without the variables the CLI reads, so a
// developer's ENGRAM_API_KEY or ENGRAM_ADDR cannot leak into a test.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "ENGRAM_API_KEY", "ENGRAM_ADDR", "ENGRAM_ACTION_URL", "ENGRAM_ACTION_TIMEOUT", "ENGRAM_STATE_DIR":
			continue
		}
		out = append(out, kv)
	}
	return out
}

type server struct {
	t   *testing.T
	bin string
	env []string
	url string
}

// startServe migrates a fresh database and starts `engram serve` on a free port.
func startServe(t *testing.T, extraEnv ...string) *server {
	t.Helper()
	s := &server{t: t, bin: testenv.Build(t, "./cmd/engram")}
	s.env = append(freshEnv(t), extraEnv...)
	res := s.engram(nil, "migrate")
	require.Equal(t, 0, res.code, "migrate: %s", res.stderr)
	proc := exec.Command(s.bin, "serve", "--addr", "127.0.0.1:0")
	proc.Env = s.env
	_, s.url = testenv.StartDaemon(t, proc, 90*time.Second, testenv.Listening)
	return s
}

// key creates an API key with `engram keys create` and returns it.
func (s *server) key(tenant, principal, roles string, extra ...string) string {
	s.t.Helper()
	args := append([]string{"keys", "create", "--tenant", tenant, "--principal", principal, "--role", roles}, extra...)
	res := s.engram(nil, args...)
	require.Equal(s.t, 0, res.code, "keys create: %s", res.stderr)
	k := strings.TrimSpace(res.stdout)
	require.True(s.t, strings.HasPrefix(k, "egk_"), "key %q", k)
	return k
}

// client is a Go client of the server with key.
func (s *server) client(key string) *client.Client { return client.New(s.url, key) }

type result struct {
	code           int
	stdout, stderr string
}

// engram runs the binary with the server's environment plus env (e.g.
// ENGRAM_API_KEY=…, ENGRAM_ADDR=…) and returns its exit code and output.
func (s *server) engram(env []string, args ...string) result {
	s.t.Helper()
	return run(s.t, s.bin, append(append(append([]string{}, s.env...), "ENGRAM_ADDR="+s.url), env...), "", args...)
}

// as runs the binary with an API key.
func (s *server) as(key string, args ...string) result {
	s.t.Helper()
	return s.engram([]string{"ENGRAM_API_KEY=" + key}, args...)
}

func run(t *testing.T, bin string, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "run %s %v: %v", bin, args, err)
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok asserts a zero exit and returns stdout.
func (r result) ok(t *testing.T, what string) string {
	t.Helper()
	require.Equal(t, 0, r.code, "%s: exit %d\nstderr: %s\nstdout: %s", what, r.code, r.stderr, r.stdout)
	return r.stdout
}

// decode parses --json output.
func decode(t *testing.T, r result, what string) map[string]any {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, what)), &m), "%s: %s", what, r.stdout)
	return m
}

func str(m any, path ...any) string {
	v, _ := testenv.Dig(m, path...).(string)
	return v
}

// freePort returns a loopback address nobody listens on right now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
