package testenv

import (
	"bufio"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu    sync.Mutex
	builtPaths = map[string]string{}
)

// Build builds the module's main package pkg ("./cmd/engram") once per test
// process (Go's build cache makes it cheap across processes) and returns the
// binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := builtPaths[pkg]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "engram-bin-")
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := osexec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	builtPaths[pkg] = bin
	return bin
}

// WorkerEnv is the environment of a child worker: the test's own environment
// without any Engram or Temporal setting, then the database, the Temporal server,
// namespace and task queue, then extra ("ENGRAM_ACTION_URL=…").
func WorkerEnv(t testing.TB, dbURL, queue string, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ENGRAM_") || strings.HasPrefix(kv, "TEMPORAL_ADDRESS=") || strings.HasPrefix(kv, "TEMPORAL_NAMESPACE=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"ENGRAM_DATABASE_URL="+dbURL,
		"TEMPORAL_ADDRESS="+TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+Namespace(),
		"ENGRAM_TASK_QUEUE="+queue,
	)
	return append(env, extra...)
}

// Process is a child process of a test, typically a worker the test SIGKILLs.
type Process struct {
	cmd  *osexec.Cmd
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	tail []string
}

// Kill SIGKILLs the process and waits until it is gone.
func (p *Process) Kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
}

func (p *Process) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// StartProcess runs bin with args in env until the test ends, then kills it. The
// last lines of its output are logged when the test fails, and the test fails at
// once when the process exits within half a second (bad configuration).
func StartProcess(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	cmd := osexec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.tail = append(p.tail, sc.Text())
			if len(p.tail) > 60 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	name := strings.TrimSpace(filepath.Base(bin) + " " + strings.Join(args, " "))
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (pid %d) log tail:\n%s", name, cmd.Process.Pid, p.logTail())
		}
	})
	select {
	case <-p.done:
		t.Fatalf("%s exited at once:\n%s", name, p.logTail())
	case <-time.After(500 * time.Millisecond):
	}
	return p
}
