// Package browser tests reviewing a memory from the Temporal Web UI in a real
// browser: `engram serve` runs as a process against the real stack, an inferred
// preference waits for review in its write workflow, and headless Chromium (Debian's
// chromium, driven by npm's playwright-core through review.mjs) finds the workflow by
// its search attributes, reads the candidate in its current details, checks that the
// JSON payload to send is inside the details frame's visible area at a 1280×720 page
// (the frame cuts the end of its content), and sends the `review` signal through the
// UI's signal form. The fact is then ACTIVE through the API.
//
// Needs ENGRAM_TEMPORAL_UI_URL (eval "$(scripts/stack env)"). The test installs what is
// missing, idempotently: the chromium and fonts-wqy-zenhei packages (apt-get, as root
// or with sudo -n) and playwright-core (npm install in this folder). Screenshots are
// kept in tests/browser/artifacts/.
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
)

const chromiumPath = "/usr/bin/chromium"

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func installed(pkg string) bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", pkg).Output()
	return err == nil && string(out) == "installed"
}

// installMu serialises apt-get and npm within this test binary.
var installMu sync.Mutex

// ensureBrowser installs Debian's chromium (and a CJK font, so screenshots show the
// Chinese text) when missing, and playwright-core in dir.
func ensureBrowser(t *testing.T, dir string) {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	var missing []string
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, "chromium")
	}
	if !installed("fonts-wqy-zenhei") {
		missing = append(missing, "fonts-wqy-zenhei")
	}
	if len(missing) > 0 {
		var sudo []string
		if os.Geteuid() != 0 {
			sudo = []string{"sudo", "-n"}
		}
		apt := func(args ...string) error {
			full := append(append(append([]string{}, sudo...), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "DPkg::Lock::Timeout=600"), args...)
			out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
			if err != nil {
				t.Logf("%s: %v\n%s", strings.Join(full, " "), err, tail(string(out), 2000))
			}
			return err
		}
		t.Logf("installing %s with apt-get", strings.Join(missing, " "))
		install := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)
		if apt(install...) != nil {
			_ = apt("update", "-qq")
			if err := apt(install...); err != nil {
				if _, serr := os.Stat(chromiumPath); serr != nil {
					t.Fatalf("could not install %s: run `apt-get install -y chromium fonts-wqy-zenhei` as root", strings.Join(missing, " "))
				}
				t.Logf("no CJK font: the screenshots show boxes for Chinese text")
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		npm := []string{"ci", "--no-audit", "--no-fund"}
		if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
			npm[0] = "install"
		}
		cmd := exec.Command("npm", npm...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm %s in %s: %s", strings.Join(npm, " "), dir, out)
	}
}

func tail(s string, n int) string { return testenv.Tail(s, n) }

type scriptResult struct {
	OK    bool     `json:"ok"`
	Steps []string `json:"steps"`
	Error string   `json:"error"`
}

func TestReviewFromTemporalWebUI(t *testing.T) {
	ui := os.Getenv("ENGRAM_TEMPORAL_UI_URL")
	if ui == "" {
		t.Fatal(`ENGRAM_TEMPORAL_UI_URL is not set: eval "$(scripts/stack env)"`)
	}
	dir := filepath.Join(repoRoot(t), "tests", "browser")
	ensureBrowser(t, dir)
	artifacts := filepath.Join(dir, "artifacts")
	require.NoError(t, os.MkdirAll(artifacts, 0o755))
	shot := filepath.Join(artifacts, "review.png")
	_ = os.Remove(shot)
	_ = os.Remove(filepath.Join(artifacts, "review-payload.png"))
	began := time.Now()

	srv := testenv.Serve(t)
	url := srv.URL
	tenant := "ui-" + testenv.RandomID(8)
	agent := client.New(url, srv.CreateKey(t, tenant, "travel-agent", "agent"))
	reviewer := client.New(url, srv.CreateKey(t, tenant, "alice", "reviewer"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// An inferred preference: governance wants a reviewer.
	const text = "我上次坐了靠窗的位置，挺好"
	res, err := agent.Ingest(ctx, &engramv1.Event{UserId: "u1", Content: text, Schema: "travel"}, client.WaitFor(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, res.Status, res.Reason)
	require.Len(t, res.Pending, 1)
	candidate := res.Pending[0].CandidateId
	t.Logf("write workflow %s awaits review of candidate %s", res.WorkflowId, candidate)
	facts, err := reviewer.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "seat"})
	require.NoError(t, err)
	require.Empty(t, facts, "nothing is remembered before the review")

	// The reviewer works in the browser.
	node := exec.CommandContext(ctx, "node", "review.mjs")
	node.Dir = dir
	node.Env = append(os.Environ(),
		"UI_URL="+ui, "NAMESPACE="+testenv.Namespace(), "TENANT="+tenant, "WORKFLOW_ID="+res.WorkflowId,
		"CANDIDATE_ID="+candidate, "TEXT="+text, "ARTIFACTS="+artifacts, "CHROMIUM="+chromiumPath)
	var stderr bytes.Buffer
	node.Stderr = &stderr
	out, err := node.Output()
	t.Logf("review.mjs:\n%s%s", stderr.String(), out)
	var sr scriptResult
	if jerr := json.Unmarshal(bytes.TrimSpace(out), &sr); jerr != nil {
		t.Fatalf("review.mjs printed no result (%v, exit %v)", jerr, err)
	}
	require.True(t, sr.OK, "review.mjs failed after %v: %s (see %s)", sr.Steps, sr.Error, filepath.Join(artifacts, "failure.png"))
	require.NoError(t, err)
	assert.Contains(t, sr.Steps, "read the pending candidate in the current details")
	assert.Contains(t, sr.Steps, "sent the review signal")
	// The payload to send was inside the details frame's visible area, not cut.
	payloadSeen := false
	for _, s := range sr.Steps {
		payloadSeen = payloadSeen || strings.HasPrefix(s, "the payload is inside the visible details area")
	}
	assert.True(t, payloadSeen, "review.mjs checked the payload's place: %v", sr.Steps)
	payloadShot := filepath.Join(artifacts, "review-payload.png")
	if fi, err := os.Stat(payloadShot); assert.NoError(t, err) {
		assert.False(t, fi.ModTime().Before(began), "written by this run")
		t.Logf("screenshot of the details with the payload: %s", payloadShot)
	}

	// The API sees the fact ACTIVE: the signal from the UI was the reviewer's decision.
	var seat *engramv1.Fact
	require.Eventually(t, func() bool {
		facts, err := reviewer.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "seat"})
		if err != nil || len(facts) == 0 {
			return false
		}
		seat = facts[0]
		return seat.Status == engramv1.FactStatus_FACT_STATUS_ACTIVE
	}, 60*time.Second, 500*time.Millisecond, "the seat preference becomes ACTIVE after the signal")
	assert.Equal(t, "window", seat.Object)
	assert.Equal(t, candidate, seat.SourceCandidateId)
	pending, err := reviewer.ListPending(ctx, "u1", 0)
	require.NoError(t, err)
	assert.Empty(t, pending, "nothing awaits review any more")

	// The screenshot is kept as an artifact.
	fi, err := os.Stat(shot)
	require.NoError(t, err, "screenshot %s", shot)
	assert.Greater(t, fi.Size(), int64(10_000))
	assert.False(t, fi.ModTime().Before(began), "written by this run")
	t.Logf("screenshot: %s (%d bytes)", shot, fi.Size())
}
