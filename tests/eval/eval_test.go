// Package evaltest runs the shipped eval suites through the real pipeline (a
// Temporal dev server, Postgres, a worker in this process, the recall engine) and
// fails when a figure falls below its suite's threshold. It also proves the
// hallucination suite catches a broken governance rule, and runs the LoCoMo loader
// on a small file end to end.
package evaltest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/eval"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
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
	rep, _ := runWith(t, ss, mode, gov, nil)
	return rep
}

// serveConfig is the configuration serve would run with here: the eval's worker
// and recall engine are built from it, as serve builds its own.
func serveConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	return cfg
}

// runWith runs the suites with an embedder (nil: n-grams) and returns the report
// and the store the run wrote.
func runWith(t *testing.T, ss []*eval.Suite, mode string, gov *governance.Config, em embedding.Embedder) (*eval.Report, *storage.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st := testenv.Store(t)
	rep, err := eval.Run(ctx, ss, eval.Options{
		Mode: mode, K: 10, Store: st, Temporal: testenv.Temporal(t), TaskQueue: testenv.TaskQueue(t),
		Gov: gov, Parallel: 16, Embedder: em, Serve: serveConfig(t),
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
	return rep, st
}

// probeErrors names the first probes of a suite whose recall failed, and why.
func probeErrors(s eval.SuiteReport) string {
	var b strings.Builder
	n := 0
	for _, p := range s.Probes {
		if p.Err == "" {
			continue
		}
		if n++; n <= 5 {
			fmt.Fprintf(&b, "%s/%s (%s): %s\n", p.Scenario, p.Probe, p.Question, p.Err)
		}
	}
	if n > 5 {
		fmt.Fprintf(&b, "… and %d more\n", n-5)
	}
	return b.String()
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
				assert.Zero(t, s.Overall.Errors, "%s: recall errors:\n%s", s.Suite, probeErrors(s))
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
// conversation as its own user, evidence recall per category and for 1–4. Told
// as chat (--bursts), its turns of several sentences arrive as several messages,
// and an evidence turn is found through any of its messages.
func TestLoCoMoSmallFile(t *testing.T) {
	for _, bursts := range []bool{false, true} {
		t.Run(fmt.Sprintf("bursts=%v", bursts), func(t *testing.T) {
			t.Parallel()
			s, st, err := eval.LoadLoCoMoAs("../../eval/testdata/locomo_small.json", eval.LoCoMoOptions{Bursts: bursts})
			require.NoError(t, err)
			rep := run(t, []*eval.Suite{s}, eval.ModeRules, nil)
			require.Len(t, rep.Suites, 1)
			sr := &rep.Suites[0]
			eval.LoCoMoExtra(sr, st)
			assert.Equal(t, 11, sr.Overall.Probes)
			if bursts {
				assert.Greater(t, sr.Turns, 12, "more messages than LoCoMo turns")
			} else {
				assert.Equal(t, 12, sr.Turns)
			}
			for _, c := range []string{"1-multi-hop", "2-temporal", "3-open-domain", "4-single-hop", "5-adversarial"} {
				assert.Contains(t, sr.Categories, c)
			}
			assert.Contains(t, sr.Extra, "evidence_recall@10 (categories 1-4)")
			assert.Greater(t, sr.Extra["evidence_recall@10 (categories 1-4)"], 0.5, "a small conversation's evidence is found")
			assert.Zero(t, sr.Overall.TenantLeaks)
			assert.Zero(t, sr.Overall.ScopeLeakRate)
			assert.Zero(t, sr.Overall.Errors)
			assert.Contains(t, strings.Join(sr.Notes, " "), "2 naming no turn")
		})
	}
}

// The development suite of open conversation (eval/open), through the real
// pipeline with the embedder users get (composite, when the model is fetched, as
// scripts/test does): the engine beats plain BM25 over the raw turns by the suite's
// margins (evidence recall@1 +0.05, @10 +0.10), the rule extractor's facts are
// right (precision ≥ 0.95) and about whoever said them, and nothing leaks. In gold
// mode the same turns go through the LLM code path (prompt with the speaker, strict
// JSON, validation) and a local fake server (internal/fakeopenai) that answers each
// turn's gold: the chit-chat turns, whose gold is empty, yield no fact.
func TestOpenConversationBeatsBaseline(t *testing.T) {
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	em, err := app.Embedder(cfg)
	require.NoError(t, err, "embedder (ENGRAM_MODEL_DIR: scripts/fetch-model)")
	for _, mode := range []string{eval.ModeRules, eval.ModeGold} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			oc := suites(t, eval.OpenConversationSuite)
			rep, st := runWith(t, oc, mode, nil, em)
			s := rep.Suite(eval.OpenConversationSuite)
			require.NotNil(t, s)
			require.NotNil(t, s.Baseline, "the baseline ran beside the engine")
			assert.Zero(t, s.Overall.TenantLeaks)
			assert.Zero(t, s.Overall.ScopeLeakRate)
			assert.Zero(t, s.Overall.Errors, "recall errors:\n%s", probeErrors(*s))
			require.NotNil(t, s.Extraction)
			assert.GreaterOrEqual(t, s.Extraction.Precision, 0.95)
			if mode == eval.ModeGold {
				assert.InDelta(t, 1.0, s.Extraction.Precision, 1e-9, "gold mode proposes exactly the gold: nothing from chit-chat")
			}
			assert.Empty(t, rep.Failures(), "thresholds and baseline margins")
			// Facts are about the person who said them, never a blended "user".
			var subjects []string
			require.NoError(t, st.DB().NewSelect().Table("facts").ColumnExpr("DISTINCT subject").Scan(context.Background(), &subjects))
			for _, sub := range subjects {
				assert.NotEqual(t, "user", sub, "a fact of a two-person conversation about \"user\"")
			}
		})
	}
}
