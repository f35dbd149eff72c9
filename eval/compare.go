package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
)

// NamedEmbedder is an embedder of the comparison with the name its column shows.
type NamedEmbedder struct {
	Name     string
	Embedder embedding.Embedder
}

// Comparison is the outcome of CompareMain: per embedder, one report per variant.
type Comparison struct {
	Variants  []Variant
	Embedders []string
	// Reports[e][v] is embedder e's report for variant v.
	Reports [][]*Report
}

// CompareMain runs the chosen suites once per embedder, each in a fresh database
// (one ingestion), and asks every probe twice: with cfg.Retrievers only (default
// semantic) and with every retriever (hybrid). It prints one side-by-side table:
// suite × variant × embedder, recall@10 and MRR. Thresholds are not checked (a
// single retriever is not expected to meet them).
func CompareMain(ctx context.Context, cfg Config, out io.Writer) (*Comparison, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeRules
	}
	if cfg.Mode == ModeLLM && cfg.LLM.BaseURL == "" {
		fmt.Fprintln(out, "eval: llm mode skipped: no LLM endpoint is configured")
		return nil, nil
	}
	if cfg.ReuseDB != "" || cfg.KeepDB {
		return nil, errors.New("eval: --embedders ingests each embedder into its own database: --keep-db and --reuse-db do not apply")
	}
	if cfg.LoCoMo != "" {
		return nil, errors.New("eval: --embedders compares the shipped suites; run a LoCoMo file on its own")
	}
	if cfg.Recall != "" && cfg.Recall != "engine" {
		return nil, fmt.Errorf("eval: --embedders compares the recall engine (not --recall %s)", cfg.Recall)
	}
	if cfg.DatabaseURL == "" {
		return nil, errors.New("eval: ENGRAM_DATABASE_URL is not set (eval \"$(scripts/stack env)\")")
	}
	only := cfg.Retrievers
	if len(only) == 0 {
		only = []string{recall.RetrieverSemantic}
	}
	for i, r := range only {
		if !slices.Contains(recall.Retrievers, r) {
			return nil, fmt.Errorf("--retrievers[%d]: unknown retriever %q (allowed: %s)", i, r, strings.Join(recall.Retrievers, ", "))
		}
	}
	variants := []Variant{{Name: strings.Join(only, "+") + "-only", Retrievers: only}, {Name: "hybrid"}}
	all, err := Shipped()
	if err != nil {
		return nil, err
	}
	suites, err := Select(all, cfg.Suites)
	if err != nil {
		return nil, err
	}
	cmp := &Comparison{Variants: variants}
	for _, ne := range cfg.Embedders {
		reps, err := compareOne(ctx, cfg, suites, ne, variants)
		if err != nil {
			return nil, fmt.Errorf("embedder %s: %w", ne.Name, err)
		}
		cmp.Embedders = append(cmp.Embedders, ne.Name)
		cmp.Reports = append(cmp.Reports, reps)
	}
	cmp.WriteTable(out)
	return cmp, nil
}

func compareOne(ctx context.Context, cfg Config, suites []*Suite, ne NamedEmbedder, variants []Variant) ([]*Report, error) {
	return runFresh(ctx, cfg, suites, ne.Embedder, variants)
}

// runFresh runs the variants over the suites in a fresh database (dropped after
// unless cfg.KeepDB), or in the kept one of cfg.ReuseDB
// with a worker of its own.
func runFresh(ctx context.Context, cfg Config, suites []*Suite, em embedding.Embedder, variants []Variant) ([]*Report, error) {
	st, name, runID, reuse, drop, err := openRunDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer drop()
	if cfg.KeepDB && !reuse && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "database kept: %s, run id %s (ask again with --reuse-db %s --run-id %s)\n", name, runID, name, runID)
	}
	c, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.Namespace, Logger: cfg.Log})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer c.Close()
	return RunVariants(ctx, suites, Options{
		Mode: cfg.Mode, K: cfg.K, Store: st, Temporal: c, TaskQueue: "eval-" + randomID(10), Embedder: em,
		Gov: cfg.Gov, LLM: cfg.LLM, Parallel: cfg.Parallel, Progress: cfg.Progress, RunID: runID, Reuse: reuse, Serve: cfg.Serve,
	}, variants)
}

// WriteTable prints suite × variant rows with recall@10 and MRR per embedder.
func (c *Comparison) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	head := "suite\tretrievers\tprobes"
	for _, e := range c.Embedders {
		head += "\t" + e + " R@10\t" + e + " MRR"
	}
	fmt.Fprintln(tw, head+"\t")
	if len(c.Reports) == 0 {
		_ = tw.Flush()
		return
	}
	for si := range c.Reports[0][0].Suites {
		name := c.Reports[0][0].Suites[si].Suite
		for vi, v := range c.Variants {
			row := fmt.Sprintf("%s\t%s\t%d", name, v.Name, c.Reports[0][vi].Suites[si].Overall.RecallProbes)
			for ei := range c.Embedders {
				s := c.Reports[ei][vi].Suite(name)
				if s == nil || s.Overall.RecallProbes == 0 {
					row += "\t-\t-"
					continue
				}
				row += fmt.Sprintf("\t%.1f%%\t%.3f", 100*s.Overall.RecallAt["10"], s.Overall.MRR)
			}
			fmt.Fprintln(tw, row+"\t")
		}
	}
	_ = tw.Flush()
}
