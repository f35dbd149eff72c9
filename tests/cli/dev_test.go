package cli

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type devRun struct {
	stdout string
	stderr *bytes.Buffer
	api    string
	key    string
	proc   *exec.Cmd
	done   chan error
}

// startDev runs `engram dev --no-stack` on the given environment and reads its
// banner.
func startDev(t *testing.T, bin string, env []string, stateDir string) *devRun {
	t.Helper()
	d := &devRun{stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	d.proc = exec.Command(bin, "dev", "--no-stack", "--addr", "127.0.0.1:0", "--state-dir", stateDir)
	d.proc.Env = env
	out, err := d.proc.StdoutPipe()
	require.NoError(t, err)
	d.proc.Stderr = &lockedBuffer{b: d.stderr}
	require.NoError(t, d.proc.Start())
	go func() { d.done <- d.proc.Wait() }()
	t.Cleanup(func() {
		if d.proc.ProcessState == nil {
			_ = d.proc.Process.Kill()
			<-d.done
		}
	})
	banner := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops engram") {
				banner <- b.String()
			}
		}
	}()
	select {
	case d.stdout = <-banner:
	case err := <-d.done:
		t.Fatalf("engram dev exited: %v\n%s", err, d.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("engram dev printed no banner within 90s\n%s", d.stderr.String())
	}
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
	require.NoError(t, d.proc.Process.Signal(os.Interrupt))
	select {
	case err := <-d.done:
		require.NoError(t, err, "engram dev exits 0 on Ctrl-C\n%s", d.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("engram dev did not stop within 30s of Ctrl-C")
	}
}

// TestDev runs `engram dev` (with the stack's environment given, --no-stack): it
// migrates, creates a dev key, serves with the worker, prints the banner, answers
// with that key, stops on Ctrl-C, and reuses its key on the next start.
func TestDev(t *testing.T) {
	bin := build(t, "./cmd/engram")
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
	assert.Contains(t, d.stderr.String(), "created a dev API key")
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
	d.stop(t)
	assert.Contains(t, d.stderr.String(), "stopped engram (the stack keeps running")

	// Second start: the same key is reused.
	d2 := startDev(t, bin, env, state)
	assert.Equal(t, d.key, d2.key)
	assert.Contains(t, d2.stderr.String(), "reusing the dev API key")
	d2.stop(t)

	// Without the stack's environment and --no-stack, dev says what is missing.
	bare := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	r := run(t, bin, bare, "", "dev", "--no-stack", "--state-dir", state)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "set ENGRAM_DATABASE_URL and TEMPORAL_ADDRESS")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
