// Package python tests the Python client (clients/python) the way a user installs
// it: into a fresh virtual environment of Debian's /usr/bin/python3, offline
// (pip install --no-build-isolation --no-index, with Debian's setuptools and
// wheel), then its unittest suite against a real `engram serve` (real Postgres,
// real Temporal, a local action endpoint for task steps). The Go client then asks
// the suite's recall question again and must get the same answer, and the example
// agent loop (examples/python) must run to completion.
//
// scripts/test installs python3, python3-venv, python3-setuptools and
// python3-wheel with apt when they are missing.
package python

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/actionserver"
	"github.com/engramhq/engram/internal/testenv"
)

// python is Debian's interpreter: the first python3 on PATH may be another one
// (pyenv's) without setuptools or wheel.
const python = "/usr/bin/python3"

// recallRecord is what the suite writes about its recall (test_recall_for_go).
type recallRecord struct {
	UserID  string    `json:"user_id"`
	Query   string    `json:"query"`
	Schema  string    `json:"schema"`
	K       int32     `json:"k"`
	AsOf    string    `json:"as_of"`
	Context string    `json:"context"`
	Tokens  int32     `json:"tokens"`
	IDs     []string  `json:"ids"`
	Scores  []float64 `json:"scores"`
}

func TestPythonClient(t *testing.T) {
	root := repoRootOf(t)
	venv := installVenv(t, root)

	actions, err := actionserver.Start()
	require.NoError(t, err)
	t.Cleanup(actions.Close)
	s := testenv.Serve(t, "ENGRAM_EMBEDDER=ngram", "ENGRAM_ACTION_URL="+actions.URL())
	tenant := "pyA-" + testenv.RandomID(8)
	agent := s.CreateKey(t, tenant, "py-agent", "agent", "--user", "u1", "--allow-user", "u2", "--allow-user", "u3", "--allow-user", "u-erase")
	env := []string{
		"ENGRAM_URL=" + s.URL,
		"ENGRAM_API_KEY=" + agent,
		"ENGRAM_REVIEWER_KEY=" + s.CreateKey(t, tenant, "py-reviewer", "reviewer"),
		"ENGRAM_ADMIN_KEY=" + s.CreateKey(t, tenant, "py-admin", "admin"),
		"ENGRAM_OTHER_TENANT_KEY=" + s.CreateKey(t, "pyB-"+testenv.RandomID(8), "py-other", "agent", "--user", "u1"),
		"ENGRAM_RECALL_OUT=" + filepath.Join(t.TempDir(), "recall.json"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("unittest", func(t *testing.T) {
		start := time.Now()
		out, err := runPython(ctx, venv, env, "-m", "unittest", "discover", "-v", "-s", filepath.Join(root, "clients", "python", "tests"))
		if err != nil {
			t.Fatalf("python -m unittest failed (%v):\n%s", err, out)
		}
		t.Logf("python -m unittest (%.1fs):\n%s", time.Since(start).Seconds(), out)
		assert.Contains(t, out, "OK")
	})

	t.Run("RecallEqualsGoClient", func(t *testing.T) {
		raw, err := os.ReadFile(strings.TrimPrefix(env[len(env)-1], "ENGRAM_RECALL_OUT="))
		require.NoError(t, err, "the suite's test_recall_for_go writes the recall")
		var py recallRecord
		require.NoError(t, json.Unmarshal(raw, &py))
		asOf, err := time.Parse(time.RFC3339Nano, py.AsOf)
		require.NoError(t, err)
		rc, err := client.New(s.URL, agent).Recall(ctx, &engramv1.RecallRequest{
			UserId: py.UserID, Query: py.Query, Schema: py.Schema, K: py.K, AsOf: timestamppb.New(asOf),
		})
		require.NoError(t, err)
		var ids []string
		var scores []float64
		for _, it := range rc.Items {
			ids, scores = append(ids, it.Id), append(scores, it.Score)
		}
		require.NotEmpty(t, ids)
		assert.Equal(t, py.IDs, ids, "the same items in the same order")
		assert.InDeltaSlice(t, py.Scores, scores, 1e-9)
		assert.Equal(t, py.Context, rc.Context)
		assert.Equal(t, py.Tokens, rc.Tokens)
	})

	t.Run("ExampleAgentLoop", func(t *testing.T) {
		key := s.CreateKey(t, "pyex-"+testenv.RandomID(8), "dev", "agent,reviewer,admin")
		out, err := runPython(ctx, venv, []string{"ENGRAM_ADDR=" + s.URL, "ENGRAM_API_KEY=" + key},
			filepath.Join(root, "examples", "python", "agent_loop.py"))
		require.NoError(t, err, "agent_loop.py:\n%s", out)
		t.Logf("agent_loop.py:\n%s", out)
		_, search, ok := strings.Cut(out, "Searching flights with what I remember: ")
		require.True(t, ok, "the agent searched flights")
		search, _, _ = strings.Cut(search, "\n")
		for _, known := range []string{"budget = 10000 CNY (task scope)", "budget = 8000 CNY (user scope)", "flight_type = direct (user scope)", "destination = 里斯本 (task scope)"} {
			assert.Contains(t, search, known, "the agent recalled it")
		}
		assert.Contains(t, out, "CREATE TASK:lisbon-")
		assert.Contains(t, out, "## recent turns")
		assert.Contains(t, out, "agent: Searching flights with what I remember:", "the agent's reply is kept as a turn and recalled")
		assert.Contains(t, out, "2 of its claims refused as the user's facts", "the agent's last reply restated both budgets")

		// The user's history, as the example prints it and as the API holds it: the
		// user's statements alone (issue 50: the agent's "budget = 10000 CNY" was
		// the user's budget), each in its scope.
		_, listed, ok := strings.Cut(out, "the user's memory, every revision, with the turn it came from:\n")
		require.True(t, ok)
		lines := strings.Split(strings.TrimSpace(listed), "\n")
		assert.Len(t, lines, 4, listed)
		for _, l := range lines {
			assert.Contains(t, l, "rev 1 ACTIVE", l)
			assert.Contains(t, l, " <- user: ", "every memory comes from the user's words: %s", l)
			assert.NotContains(t, l, "agent:", l)
		}
		api := client.New(s.URL, key)
		facts, err := api.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u-python-demo"})
		require.NoError(t, err)
		got := map[string]string{}
		for _, f := range facts {
			got[f.Scope.Scope.String()+" "+f.Predicate] = f.Object
			assert.Equal(t, int32(1), f.Revision, f.MemoryKey)
			assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status, f.MemoryKey)
			assert.NotContains(t, f.Content, "remember", "no fact quotes the agent: %s", f.Content)
			full, err := api.GetFact(ctx, f.Id)
			require.NoError(t, err)
			assert.Len(t, full.EvidenceIds, 1, "one statement, the user's: %s", f.MemoryKey)
		}
		assert.Equal(t, map[string]string{
			"SCOPE_USER budget": "8000 CNY", "SCOPE_USER flight_type": "direct",
			"SCOPE_TASK budget": "10000 CNY", "SCOPE_TASK destination": "里斯本",
		}, got)
		now, err := api.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u-python-demo", Predicate: "budget", Scope: engramv1.Scope_SCOPE_USER, AsOf: timestamppb.Now()})
		require.NoError(t, err)
		require.Len(t, now, 1, "as of now the user's budget is one value")
		assert.Equal(t, "8000 CNY", now[0].Object)
	})
}

// installVenv copies clients/python to a temporary folder (pip builds in the
// source tree) and installs it into a fresh venv the offline way the README gives.
func installVenv(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, copyTree(filepath.Join(root, "clients", "python"), src))
	venv := filepath.Join(dir, "venv")
	for _, args := range [][]string{
		{python, "-m", "venv", "--system-site-packages", venv},
		{filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--no-build-isolation", "--no-index", src},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = pythonEnv(nil)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", strings.Join(args, " "), out)
	}
	out, err := runPython(context.Background(), venv, nil, "-c",
		"import engram, os; print(engram.__file__); print(os.path.exists(os.path.join(os.path.dirname(engram.__file__), 'py.typed')))")
	require.NoError(t, err, out)
	lines := strings.Fields(out)
	require.Len(t, lines, 2, out)
	assert.True(t, strings.HasPrefix(lines[0], venv), "engram is imported from the venv, not the source tree: %s", lines[0])
	assert.Equal(t, "True", lines[1], "py.typed is installed")
	return venv
}

// repoRootOf is the repository's root, with Debian's python3 checked first.
func repoRootOf(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run the tests through `make test` (scripts/test installs python3, python3-venv, python3-setuptools and python3-wheel)", python)
	}
	return testenv.RepoRoot(t)
}

func runPython(ctx context.Context, venv string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), args...)
	cmd.Dir = filepath.Dir(venv)
	cmd.Env = pythonEnv(env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pythonEnv is the environment without anything that would make Python import the
// package from elsewhere, or write bytecode into the repository.
func pythonEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "PYTHONPATH" || k == "PYTHONHOME" || k == "VIRTUAL_ENV" || k == "PIP_INDEX_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"), extra...)
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() && (d.Name() == "build" || d.Name() == "__pycache__" || strings.HasSuffix(d.Name(), ".egg-info")) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}
