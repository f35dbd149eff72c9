package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
)

// ErrThresholds is returned when a figure misses its threshold.
var ErrThresholds = errors.New("eval: thresholds not met")

// Config is a whole `engram eval` invocation.
type Config struct {
	Suites []string // names or files; empty: every shipped suite
	Mode   string
	K      int
	Out    string // folder for the Markdown, JSON and SVG reports ("" : none)
	JSON   bool   // print the report as JSON instead of the table
	LoCoMo string // a LoCoMo file to run instead of the suites
	// Bursts tells the LoCoMo file as bursts of short, hurried messages (bursts.go).
	Bursts   bool
	MinCheck bool   // fail when a threshold is missed
	Recall   string // engine (default) or baseline
	Judge    bool   // answer + LLM judge when an LLM is configured
	KeepDB   bool
	Parallel int
	// ReuseDB and RunID: ask the probes of a database a run kept (KeepDB) under
	// this run id, without ingesting again (the note of a kept run names both).
	ReuseDB string
	RunID   string
	// Folds: 2 reports the LoCoMo halves (tuned on conversations 0-4, reported on
	// 5-9, and the reverse) in --tune.
	Folds int

	// Serve is the configuration `engram serve` runs with: the run's worker and
	// recall engine are built from it (Options.Serve).
	Serve           config.Config
	DatabaseURL     string
	TemporalAddress string
	Namespace       string
	LLM             LLMConfig
	Embedder        embedding.Embedder
	// Retrievers restricts recall to these retrievers (recall.Request.Retrievers);
	// with Embedders, the comparison's first variant (the second is hybrid).
	Retrievers []string
	// Embedders, when set, runs the comparison (CompareMain): the suites once per
	// embedder, each in a fresh database.
	Embedders []NamedEmbedder
	Gov       *governance.Config
	Progress  io.Writer // progress bar; nil: none
	Log       tlog.Logger
}

// Main runs an invocation: it prints the table to out, writes the reports, and
// returns ErrThresholds when thresholds are checked and missed. In llm mode without
// an endpoint it prints why it skipped and returns nil.
func Main(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeRules
	}
	if len(cfg.Embedders) > 0 {
		_, err := CompareMain(ctx, cfg, out)
		return nil, err
	}
	if cfg.Mode == ModeLLM && cfg.LLM.BaseURL == "" {
		fmt.Fprintln(out, "eval: llm mode skipped: no LLM endpoint is configured (set ENGRAM_LLM_BASE_URL, ENGRAM_LLM_API_KEY and ENGRAM_LLM_MODEL)")
		return nil, nil
	}
	var suites []*Suite
	var lstats *LoCoMoStats
	if cfg.LoCoMo != "" {
		s, st, err := LoadLoCoMoAs(cfg.LoCoMo, LoCoMoOptions{Bursts: cfg.Bursts})
		if err != nil {
			return nil, err
		}
		suites, lstats = []*Suite{s}, &st
	} else {
		all, err := Shipped()
		if err != nil {
			return nil, err
		}
		if suites, err = Select(all, cfg.Suites); err != nil {
			return nil, err
		}
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("eval: ENGRAM_DATABASE_URL is not set (eval \"$(scripts/stack env)\")")
	}
	st, dbName, runID, reuse, drop, err := openRunDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer drop()
	opts := client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.Namespace, Logger: cfg.Log}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer c.Close()
	var factory RecallerFactory // nil: the engine, as serve builds it
	switch cfg.Recall {
	case "", "engine":
	case "baseline":
		factory = NewBaseline
	default:
		return nil, fmt.Errorf("unknown recaller %q (allowed: engine, baseline)", cfg.Recall)
	}
	var judge *Judge
	if cfg.Judge {
		judge = NewJudge(cfg.LLM)
	}
	rep, err := Run(ctx, suites, Options{
		Mode: cfg.Mode, K: cfg.K, Store: st, Temporal: c, TaskQueue: "eval-" + randomID(10), Embedder: cfg.Embedder,
		Gov: cfg.Gov, NewRecaller: factory, NoBaseline: cfg.Recall == "baseline", LLM: cfg.LLM, Parallel: cfg.Parallel, Progress: cfg.Progress, Judge: judge,
		Retrievers: cfg.Retrievers, RunID: runID, Reuse: reuse, Serve: cfg.Serve,
	})
	if err != nil {
		return nil, err
	}
	if lstats != nil && len(rep.Suites) == 1 {
		sr := &rep.Suites[0]
		LoCoMoExtra(sr, *lstats)
		sr.MissCauses = MissCauses(suites[0], sr.Probes)
		if sr.baselineProbes != nil {
			sr.BaselineMissCauses = MissCauses(suites[0], sr.baselineProbes)
		}
	}
	for _, s := range suites {
		if sr := rep.Suite(s.Name); sr != nil && s.LoCoMo != nil && lstats == nil {
			LoCoMoExtra(sr, *s.LoCoMo)
		}
	}
	addJudge(rep, cfg, judge)
	if cfg.KeepDB && !reuse {
		rep.Notes = append(rep.Notes, fmt.Sprintf("database kept: %s, run id %s (ask again with --reuse-db %s --run-id %s)", dbName, runID, dbName, runID))
	}
	if reuse {
		rep.Notes = append(rep.Notes, fmt.Sprintf("probes asked of the kept database %s (run id %s), not ingested again", dbName, runID))
	}
	if cfg.Recall == "baseline" {
		rep.Notes = append(rep.Notes, "recaller: the plain baseline, not the recall engine")
	}
	rep.Check()
	if cfg.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return rep, err
		}
	} else {
		rep.WriteTable(out)
	}
	if cfg.Out != "" && cfg.JSON {
		if _, err := rep.WriteFiles(cfg.Out); err != nil {
			return rep, err
		}
	} else if cfg.Out != "" {
		files, err := rep.WriteFiles(cfg.Out)
		if err != nil {
			return rep, err
		}
		for _, f := range files {
			fmt.Fprintln(out, "wrote", f)
		}
	}
	if cfg.MinCheck && len(rep.Failures()) > 0 {
		return rep, ErrThresholds
	}
	return rep, nil
}

func addJudge(rep *Report, cfg Config, j *Judge) {
	if j == nil {
		if cfg.Judge || cfg.LoCoMo != "" {
			rep.Notes = append(rep.Notes, "answer generation and LLM judge skipped: no LLM is configured (ENGRAM_LLM_BASE_URL)")
		}
		return
	}
	for i := range rep.Suites {
		s := &rep.Suites[i]
		n, ok := 0, 0
		for _, p := range s.Probes {
			if p.Judged {
				n++
				if p.Correct {
					ok++
				}
			}
		}
		if n > 0 {
			if s.Extra == nil {
				s.Extra = map[string]float64{}
			}
			s.Extra["llm_judge_accuracy (categories 1-4)"] = float64(ok) / float64(n)
			s.Extra["llm_judged"] = float64(n)
		}
	}
}
