package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/eval"
)

// evalCmd is `engram eval`: the shipped suites (or a LoCoMo file) through the real
// pipeline, with a table, Markdown, JSON and SVG reports, and thresholds.
func evalCmd() *cobra.Command {
	var (
		suites   []string
		tune     bool
		tuneGrid string
		asJSON   bool
		mode     string
		k        int
		out      string
		locomo   string
		bursts   bool
		minCheck string
		recaller string
		judge    bool
		keepDB   bool
		parallel int
		retr     []string
		embs     []string
		reuseDB  string
		runID    string
		folds    int
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure recall accuracy and hallucinations on the shipped suites or a LoCoMo file",
		Long: `Runs scenarios through the real pipeline (a worker in this process on its own task
queue, Temporal, a fresh Postgres database, the extractor of --mode and the configured
embedder), asks every probe through recall, and reports per suite and category:
recall@1/5/10, precision@k, MRR, evidence recall@k, false-recall, stale-fact and
scope-leak rates, cross-tenant leaks, unsupported facts, extraction against gold,
and write and recall latency. Exits non-zero when a suite misses a threshold.
See eval/README.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(checkRange(cmd, "k", k, 1, 100, ""), checkRange(cmd, "parallel", parallel, 1, 64, " scenarios")); err != nil {
				return err
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if cfg.DatabaseURL == "" {
				return missingSetting("ENGRAM_DATABASE_URL", "eval creates a database of its own on that server")
			}
			if minCheck != "on" && minCheck != "off" {
				return fmt.Errorf("--min-check: %q (allowed: on, off)", minCheck)
			}
			em, err := app.Embedder(cfg)
			if err != nil {
				return fmt.Errorf("embedder: %w", err)
			}
			// --embedders: the offline embedders by name, each run on its own.
			var named []eval.NamedEmbedder
			for _, name := range embs {
				name = strings.TrimSpace(name)
				if name != "ngram" && name != "composite" {
					return fmt.Errorf("--embedders: %q (allowed: ngram, composite)", name)
				}
				c := cfg
				c.EmbedBaseURL, c.Embedder = "", name
				e, err := app.Embedder(c)
				if err != nil {
					return fmt.Errorf("embedder %s: %w", name, err)
				}
				named = append(named, eval.NamedEmbedder{Name: name, Embedder: e})
			}
			gov := cfg.Governance
			// --json: the report in the CLI's one JSON casing (printValue), not the table.
			tableOut := cmd.OutOrStdout()
			if asJSON {
				tableOut = io.Discard
			}
			if bursts && locomo == "" {
				return fmt.Errorf("--bursts: only with --locomo (it re-tells a LoCoMo file's turns)")
			}
			if folds != 0 && !tune {
				return fmt.Errorf("--folds: only with --tune (the halves pick a setting of the grid on one half)")
			}
			if tune {
				grid, ok := eval.Grids[tuneGrid]
				if !ok {
					return fmt.Errorf("--tune-grid: %q (allowed: %s)", tuneGrid, strings.Join(slices.Sorted(maps.Keys(eval.Grids)), ", "))
				}
				rows, err := eval.TuneMain(cmd.Context(), eval.Config{
					Suites: suites, Mode: mode, K: k, Parallel: parallel, LoCoMo: locomo, Bursts: bursts, KeepDB: keepDB, ReuseDB: reuseDB, RunID: runID, Folds: folds,
					Serve: cfg, DatabaseURL: cfg.DatabaseURL, TemporalAddress: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
					Embedder: em, Gov: &gov, Progress: os.Stderr, Log: tlog.NewStructuredLogger(logger().WithGroup("temporal")),
				}, grid(), tableOut, false)
				if asJSON && rows != nil {
					return errors.Join(printValue(cmd.OutOrStdout(), rows), err)
				}
				return err
			}
			rep, err := eval.Main(cmd.Context(), eval.Config{
				Suites: suites, Mode: mode, K: k, Out: out, LoCoMo: locomo, Bursts: bursts, MinCheck: minCheck == "on",
				Recall: recaller, Judge: judge, KeepDB: keepDB, Parallel: parallel, ReuseDB: reuseDB, RunID: runID,
				Serve: cfg, DatabaseURL: cfg.DatabaseURL, TemporalAddress: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
				LLM:      eval.LLMConfig{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel, Timeout: cfg.LLMTimeout},
				Embedder: em, Gov: &gov, Progress: os.Stderr, Retrievers: retr, Embedders: named,
				Log: tlog.NewStructuredLogger(logger().WithGroup("temporal")),
			}, tableOut)
			if asJSON && rep != nil {
				return errors.Join(printValue(cmd.OutOrStdout(), rep), err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tuneGrid, "tune-grid", "fusion", "with --tune: fusion (the semantic, second-hop and other weights), context (the neighbour and session weights), keyword (the turn keyword score's length normalisation against the semantic weight, and the weight of a turn's questions), adjacent (the turns next to the best ones: their share of the anchor's score, from how many, how far) around (context and session above the defaults before LoCoMo, and adjacent turns on them), balance (between those defaults and LoCoMo's best), speaker (the lift of the speaker a question names), semantic-all (every turn weighed by its meaning), context-all (context and session rechecked), feedback (the feedback pass's weight and leaders), when (the lift of a turn that names a time when the question asks when), time-asked (the lift of what was said in the time the question names), lead-asking (how much less a turn that ends by asking counts for the first item), ablate (the defaults, and each technique chosen on LoCoMo switched off in turn) or adjacent-bursts (the adjacent turns counted in bursts, one speaker's messages in a row)")
	f.BoolVar(&tune, "tune", false, "measure a grid of recall fusion weights on one ingestion (default suites: open_conversation, seed_en, seed_zh) and print them best first")
	f.BoolVar(&asJSON, "json", false, "print the report (or the tuning table) as JSON instead of a table")
	f.StringArrayVar(&suites, "suite", nil, "suite to run, by name or YAML file (repeatable; default: every shipped suite)")
	f.StringVar(&mode, "mode", eval.ModeRules, "extractor: rules (offline), gold (the scenarios' gold through the LLM code path and a local fake server), llm (ENGRAM_LLM_BASE_URL)")
	f.IntVar(&k, "k", 10, "cut-off for precision@k and the leak and stale checks")
	f.StringVar(&out, "out", "eval-out", "folder for the Markdown, JSON and SVG reports (empty: none)")
	f.StringVar(&locomo, "locomo", "", "a LoCoMo JSON file to run instead of the suites")
	f.BoolVar(&bursts, "bursts", false, "with --locomo: tell each turn as real chat does, a burst of short messages (one per sentence, the photo apart), most lower-cased, some words with a typo, some with an emoji; a message of an evidence turn counts as the turn")
	f.StringVar(&minCheck, "min-check", "on", "fail (non-zero exit) when a figure misses its threshold: on or off")
	f.StringVar(&recaller, "recall", "engine", "recaller: engine (the recall engine) or baseline (a plain keyword floor)")
	f.BoolVar(&judge, "judge", false, "answer each question from recall and grade it with an LLM judge (needs ENGRAM_LLM_BASE_URL)")
	f.BoolVar(&keepDB, "keep-db", false, "keep the run's database for inspection")
	f.IntVar(&parallel, "parallel", 8, "scenarios ingested at once")
	f.StringVar(&reuseDB, "reuse-db", "", "ask the probes of a database an earlier run kept (--keep-db) instead of ingesting again; needs --run-id (the kept run's note names both)")
	f.StringVar(&runID, "run-id", "", "with --reuse-db: the run id the kept database was ingested under")
	f.IntVar(&folds, "folds", 0, "with --tune --locomo: 2 tunes on the first half of the conversations and reports on the second, and the reverse")
	f.StringSliceVar(&retr, "retrievers", nil, "recall only with these retrievers (semantic, keyword, graph, structured, recent; comma separated; default all)")
	f.StringSliceVar(&embs, "embedders", nil, "compare offline embedders (ngram, composite; comma separated): the suites once per embedder in a fresh database, "+
		"each probe asked with --retrievers (default semantic) and hybrid, one side-by-side table of recall@10 and MRR")
	return cmd
}
