package mcp

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
)

func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// installMu serialises npm within this test binary.
var installMu sync.Mutex

// npmCI installs dir's locked node packages when node_modules lacks probe.
func npmCI(t *testing.T, dir, probe string) {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", probe, "package.json")); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s: %s", dir, out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is one `engram serve` process (with its worker) over a fresh database.
type served struct {
	bin, url string
	env      []string
}

// serve builds engram, migrates a fresh database and runs `engram serve` on a free
// port until the test ends.
func serve(t *testing.T) *served {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "engram")
	build := exec.Command("go", "build", "-o", bin, "./cmd/engram")
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build engram: %s", out)
	_, dsn := testenv.StoreURL(t)
	env := append(os.Environ(),
		"ENGRAM_DATABASE_URL="+dsn,
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+testenv.Namespace(),
		"ENGRAM_TASK_QUEUE="+testenv.TaskQueue(t),
		"ENGRAM_EMBEDDER=ngram",
	)
	mig := exec.Command(bin, "migrate")
	mig.Env = env
	out, err = mig.CombinedOutput()
	require.NoError(t, err, "migrate: %s", out)

	proc := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	proc.Env = env
	stdout, err := proc.StdoutPipe()
	require.NoError(t, err)
	logs := &lockedBuffer{}
	proc.Stderr = logs
	require.NoError(t, proc.Start())
	done := make(chan error, 1)
	go func() { done <- proc.Wait() }()
	t.Cleanup(func() {
		_ = proc.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = proc.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("engram serve log (tail):\n%s", tail(logs.String(), 4000))
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return &served{bin: bin, url: u, env: env}
	case err := <-done:
		t.Fatalf("engram serve exited: %v\n%s", err, logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("engram serve did not listen within 90s\n%s", logs.String())
	}
	return nil
}

func (s *served) createKey(t *testing.T, tenant, principal, role string, extra ...string) string {
	t.Helper()
	args := append([]string{"keys", "create", "--tenant", tenant, "--principal", principal, "--role", role}, extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.env
	out, err := cmd.Output()
	require.NoError(t, err, "keys create")
	k := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(k, "egk_"), "key %q", k)
	return k
}
