package mcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
)

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

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func tail(s string, n int) string { return testenv.Tail(s, n) }

// serve runs `engram serve` over a fresh database (n-gram embeddings) until the test
// ends.
func serve(t *testing.T) *testenv.Served { return testenv.Serve(t, "ENGRAM_EMBEDDER=ngram") }
