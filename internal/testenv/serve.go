package testenv

import (
	"bytes"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// RepoRoot is the module's root folder.
func RepoRoot(t testing.TB) string {
	t.Helper()
	out, err := osexec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// Tail is the last n bytes of s, for logs in failure messages.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// LockedBuffer is a bytes.Buffer safe for a process's output and a reader.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Served is one `engram serve` process (with its worker) over a fresh database.
type Served struct {
	Bin, URL string
	Env      []string // the process's environment, for other engram commands
}

// Serve builds engram, migrates a fresh database and runs `engram serve` (with its
// worker, on a task queue of its own) on a free port until the test ends; extraEnv
// is added to the environment ("ENGRAM_EMBEDDER=ngram").
func Serve(t *testing.T, extraEnv ...string) *Served {
	t.Helper()
	bin := Build(t, "./cmd/engram")
	_, dsn := StoreURL(t)
	env := append(os.Environ(),
		"ENGRAM_DATABASE_URL="+dsn,
		"TEMPORAL_ADDRESS="+TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+Namespace(),
		"ENGRAM_TASK_QUEUE="+TaskQueue(t),
	)
	env = append(env, extraEnv...)
	mig := osexec.Command(bin, "migrate")
	mig.Env = env
	if out, err := mig.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	proc := osexec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	proc.Env = env
	_, url := StartDaemon(t, proc, 90*time.Second, Listening)
	return &Served{Bin: bin, URL: url, Env: env}
}

// CreateKey runs `engram keys create` against the served database and returns the
// printed key.
func (s *Served) CreateKey(t *testing.T, tenant, principal, role string, extra ...string) string {
	t.Helper()
	args := append([]string{"keys", "create", "--tenant", tenant, "--principal", principal, "--role", role}, extra...)
	cmd := osexec.Command(s.Bin, args...)
	cmd.Env = s.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	k := strings.TrimSpace(string(out))
	if !strings.HasPrefix(k, "egk_") {
		t.Fatalf("keys create printed %q, not a key", k)
	}
	return k
}
