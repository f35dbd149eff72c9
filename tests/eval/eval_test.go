// Package evaltest runs the shipped eval suites through the real pipeline (a
// Temporal dev server, Postgres, a worker in this process, the recall engine) and
// fails when a figure falls below its suite's threshold. It also proves the
// hallucination suite catches a broken governance rule, and runs the LoCoMo loader
// on a small file end to end.
package evaltest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/eval"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
)

func suites(t *testing.T, names ...string) []*eval.Suite {
	t.Helper()
	all, err := eval.Shipped()
	require.NoError(t, err)
	out, err := eval.Select(all, names)
	require.NoError(t, err)
	return out
}

func run(t *testing.T, ss []*eval.Suite, mode string, gov *governance.Config) *eval.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rep, err := eval.Run(ctx, ss, eval.Options{
		Mode: mode, K: 10, Store: testenv.Store(t), Temporal: testenv.Temporal(t), TaskQueue: testenv.TaskQueue(t),
		Gov: gov, Parallel: 16,
	})
	require.NoError(t, err)
	rep.Check()
	var b strings.Builder
	rep.WriteTable(&b)
	t.Logf("mode %s:\n%s", mode, b.String())
	if dir := os.Getenv("ENGRAM_EVAL_OUT"); dir != "" {
		_, err := rep.WriteFiles(dir)
		require.NoError(t, err)
	}
	return rep
}

// The recall suites (seed stories in both languages, temporal) and the
// hallucination suite meet their thresholds in rules and gold modes, with no
// cross-tenant leak and no scope leak anywhere.
func TestShippedSuitesMeetThresholds(t *testing.T) {
	for _, mode := range []string{eval.ModeRules, eval.ModeGold} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			rep := run(t, suites(t, "seed_zh", "seed_en", "temporal", "hallucination"), mode, nil)
			require.Len(t, rep.Suites, 4)
			for _, s := range rep.Suites {
				assert.Zero(t, s.Overall.TenantLeaks, "%s: cross-tenant leaks", s.Suite)
				assert.Zero(t, s.Overall.ScopeLeakRate, "%s: scope leaks", s.Suite)
				assert.Zero(t, s.Overall.Errors, "%s: recall errors", s.Suite)
				require.NotNil(t, s.Extraction, "%s: extraction is compared with gold", s.Suite)
			}
			assert.Empty(t, rep.Failures(), "thresholds")
			if mode == eval.ModeGold {
				for _, s := range rep.Suites {
					assert.InDelta(t, 1.0, s.Extraction.Recall, 1e-9, "%s: gold mode extracts exactly the gold", s.Suite)
				}
				h := rep.Suite("hallucination")
				assert.Contains(t, h.Categories, "expired", "validity windows are measured in gold mode")
			}
		})
	}
}

// Breaking one governance rule (a new value never supersedes the current one)
// makes the hallucination suite fail: the old value comes back as current.
func TestBrokenGovernanceFailsHallucinationSuite(t *testing.T) {
	t.Parallel()
	broken := governance.DefaultConfig()
	broken.NeverSupersede = true
	rep := run(t, suites(t, "hallucination"), eval.ModeRules, &broken)
	h := rep.Suite("hallucination")
	require.NotNil(t, h)
	assert.Greater(t, h.Categories["superseded"].FalseRecallRate, 0.5, "superseded values come back")
	assert.Greater(t, h.Overall.StaleRate, 0.0)
	f := strings.Join(rep.Failures(), "\n")
	assert.Contains(t, f, "false_recall_rate")
	assert.Contains(t, f, "stale_fact_rate")
}

// The LoCoMo loader runs a small file in the public format end to end: every
// conversation as its own user, evidence recall per category and for 1–4.
func TestLoCoMoSmallFile(t *testing.T) {
	t.Parallel()
	s, st, err := eval.LoadLoCoMo("../../eval/testdata/locomo_small.json")
	require.NoError(t, err)
	rep := run(t, []*eval.Suite{s}, eval.ModeRules, nil)
	require.Len(t, rep.Suites, 1)
	sr := &rep.Suites[0]
	eval.LoCoMoExtra(sr, st)
	assert.Equal(t, 11, sr.Overall.Probes)
	assert.Equal(t, 12, sr.Turns)
	for _, c := range []string{"1-multi-hop", "2-temporal", "3-open-domain", "4-single-hop", "5-adversarial"} {
		assert.Contains(t, sr.Categories, c)
	}
	assert.Contains(t, sr.Extra, "evidence_recall@10 (categories 1-4)")
	assert.Greater(t, sr.Extra["evidence_recall@10 (categories 1-4)"], 0.5, "a small conversation's evidence is found")
	assert.Zero(t, sr.Overall.TenantLeaks)
	assert.Zero(t, sr.Overall.ScopeLeakRate)
	assert.Contains(t, strings.Join(sr.Notes, " "), "2 naming no turn")
}
