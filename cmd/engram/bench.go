package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/bench/recallstack"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/cpustat"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// benchCmd groups the benchmarks; `engram bench recall` is the recall benchmark.
func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks on synthetic data"}
	cmd.AddCommand(benchRecallCmd(), benchWriteCmd())
	return cmd
}

func benchRecallCmd() *cobra.Command {
	var (
		tenants, facts, evidence, queries, warmup int
		embedCache                                int
		concurrency, dbURL, accessLog, cpuProfile string
		retrievers                                []string
		reload, timings, asJSON, noComposite      bool
		oneStatement                              bool
		maxStatements                             int
		explain                                   int
		history, unanalysed                       string
		lightTurns, batchSize, ingestCallers      int
	)
	cmd := &cobra.Command{
		Use:   "recall",
		Short: "Load synthetic memory and measure recall against the bare pgvector and full-text queries",
		Long: `Loads --facts facts and --evidence evidence turns per tenant (English and Chinese; many
users, departments, agents, tasks and sessions; n-gram embeddings), then measures recall
latency (p50/p95/p99) and QPS at each --concurrency, side by side with the bare pgvector
top-k query and the bare full-text query on the same data. Recall runs twice: with
the n-gram embedder the data was loaded with, and with the default composite embedder
(USE-lite from ENGRAM_MODEL_DIR blended with the n-grams; the query's embedding is
included in its latency, as users get it; --no-composite skips it). The stored
vectors are n-gram vectors either way: the composite row measures cost, not quality.

--timings splits one recall into its steps (embedding, parse, retrieval, fusion,
expansion, context) and the recall statement into its retrievers, from an EXPLAIN
ANALYZE of each query (see recall.Engine.RetrieverTimings). With --history it adds,
at each size, the mean time of each step of the heavy and the light user's recalls
(one caller) below the tables ("steps" in --json).

The database is ENGRAM_BENCH_DATABASE_URL, or --database-url, or the database
"engram_bench" on the server of ENGRAM_DATABASE_URL (created and migrated if missing).
A loaded data set is kept and reused by later runs with the same sizes (--reload to
load again).

--history 1000,10000,100000 measures instead how recall's cost grows with one
user's history: it grows the user "heavy" through the write path (batch Ingest of
--batch-size turns into an in-process API server and worker, the configured
extractor and embedder: see engram bench write) to each size in turn, a light user
of --light-turns turns beside it in the same tenant, and measures --queries recalls
at each --concurrency for both (composite embedder, the query's embedding included),
beside the bare index queries over the heavy user's evidence (HNSW top 10, GIN
full-text top 10, on a pool of their own), with the ingest rate of each growth. Its database is "engram_bench_history" next to
ENGRAM_DATABASE_URL's (or --database-url); the history is kept, and a later run grows
it from where it stands (--reload: from nothing).

--unanalysed 1000,10000 measures recall over a history nothing has analysed, as
after a bulk import with autovacuum yet to come, against the same data analysed.
For each size it drops and makes again the database "engram_bench_unanalysed" next
to ENGRAM_DATABASE_URL's (--database-url is refused), migrates it (the migration's
ANALYZE sees empty tables), sets autovacuum_enabled and toast.autovacuum_enabled
false on every table of its schema (per table, not the server's setting) and resets
its statistics counters; then grows the heavy user to the size and the light user
to --light-turns through the write path as --history does, checks that no table
has been analysed (pg_stat_user_tables' last_analyze and last_autoanalyze null,
evidence's pg_class.reltuples 0 or -1, no column statistics; else it stops),
measures --queries recalls of each user at one caller (composite embedder, the
query's embedding included; --concurrency is not used), runs ANALYZE and measures
the same recalls again. It prints per size the heavy user's p50/p95 unanalysed and
analysed, their p95 ratio (held to at most 3), the reltuples the planner saw and
the light user's p95; --json the same. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			concs, err := parseConcurrency(concurrency)
			if err != nil {
				return err
			}
			if unanalysed != "" {
				if history != "" {
					return fmt.Errorf("--unanalysed and --history: one or the other")
				}
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
				return benchUnanalysed(cmd, unanalysed, queries, lightTurns, batchSize, ingestCallers, embedCache, dbURL, asJSON)
			}
			if history != "" {
				stopProfile, err := startCPUProfile(cpuProfile) // the growth and the recalls
				if err != nil {
					return err
				}
				defer stopProfile()
				return benchHistory(cmd, history, concs, queries, lightTurns, batchSize, ingestCallers, embedCache, dbURL, reload, timings, asJSON)
			}
			if tenants <= 0 || facts <= 0 || evidence <= 0 || queries <= 0 {
				return fmt.Errorf("--tenants, --facts, --evidence and --queries must be positive")
			}
			if maxStatements < -1 {
				return fmt.Errorf("--max-statements: %d must be a positive bound, 0 for the default or -1 for none", maxStatements)
			}
			mode := map[string]recall.AccessLogMode{"async": recall.AccessLogAsync, "sync": recall.AccessLogSync, "off": recall.AccessLogOff}
			alm, ok := mode[accessLog]
			if !ok {
				return fmt.Errorf("--access-log: %q (allowed: async, sync, off)", accessLog)
			}
			u, err := benchDatabase(ctx, dbURL)
			if err != nil {
				return err
			}
			st, err := storage.Open(ctx, u)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.Migrate(ctx); err != nil {
				return err
			}
			emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
			// The engines are built as serve builds its own (app.RecallEngine: the
			// configured keyword index, stored schemas, statement bound and limit),
			// on the bench's database and embedders.
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			var composite embedding.Embedder
			if !noComposite && explain == 0 {
				cc := cfg
				cc.EmbedBaseURL, cc.Embedder = "", "composite"
				if composite, err = app.Embedder(cc); err != nil {
					return fmt.Errorf("composite embedder (--no-composite to measure without it): %w", err)
				}
			}
			load0 := cpustat.LoadAvg()
			machine0, _ := cpustat.ReadMachine()
			msgs := out
			if asJSON {
				msgs = os.Stderr
			}
			w := recallbench.NewWorld(recallbench.Config{Tenants: tenants, Facts: facts, Evidence: evidence})
			bar := progressbar.NewOptions(w.Rows(),
				progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("loading rows"),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
				progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
			start := time.Now()
			loaded, err := recallbench.Prepare(ctx, st, u, w, emb, reload, func(n int) { _ = bar.Set(n) },
				func(s string) { fmt.Fprintf(os.Stderr, "\n[bench] %s\n", s) })
			if err != nil {
				return err
			}
			_ = bar.Finish()
			if loaded {
				fmt.Fprintf(msgs, "loaded %d tenants × (%d facts + %d evidence) in %s\n", tenants, facts, evidence, time.Since(start).Round(time.Second))
			} else {
				fmt.Fprintf(msgs, "reusing the loaded data set (%s)\n", w.Cfg.Key())
			}
			cache := -1 // by default every query is embedded: the worst case
			if embedCache > 0 {
				cache = embedCache
			}
			ro := recall.Options{AccessLog: alm, QueryEmbeddingCache: cache, OneStatement: oneStatement, MaxStatements: maxStatements}
			eng, err := app.RecallEngine(cfg, st, emb, nil, ro)
			if err != nil {
				return err
			}
			defer eng.Close()
			reqs := recallbench.Queries(w, queries, 99)
			for i := range reqs {
				reqs[i].Retrievers = retrievers
			}
			bare, err := storage.Open(ctx, u) // the bare queries' own pool, untouched by the engine's tuning
			if err != nil {
				return err
			}
			defer bare.Close()
			r := &recallbench.Runner{Store: st, Engine: eng, Emb: emb, Bare: bare}
			if composite != nil {
				if r.Composite, err = app.RecallEngine(cfg, st, composite, nil, ro); err != nil {
					return err
				}
				defer r.Composite.Close()
			}
			if explain > 0 {
				type plan struct {
					Query     string `json:"query"`
					SessionID string `json:"session_id,omitempty"`
					TaskID    string `json:"task_id,omitempty"`
					Plan      string `json:"plan"`
				}
				var plans []plan
				for i := 0; i < explain && i < len(reqs); i++ {
					p, err := eng.Explain(ctx, reqs[i])
					if err != nil {
						return fmt.Errorf("explain: %w", err)
					}
					plans = append(plans, plan{Query: reqs[i].Query, SessionID: reqs[i].SessionID, TaskID: reqs[i].TaskID, Plan: p})
				}
				if asJSON {
					return printValue(out, plans)
				}
				for i, p := range plans {
					fmt.Fprintf(out, "### query %d: %q (session %q, task %q)\n%s\n", i, p.Query, p.SessionID, p.TaskID, p.Plan)
				}
				return nil
			}
			if timings {
				engines := []struct {
					name string
					eng  *recall.Engine
				}{{"ngram", eng}}
				if r.Composite != nil {
					engines = append(engines, struct {
						name string
						eng  *recall.Engine
					}{"composite", r.Composite})
				}
				w := reqs
				if warmup < len(w) {
					w = w[:warmup]
				}
				res := map[string]map[string]float64{}
				for _, e := range engines {
					if _, err := r.Steps(ctx, e.eng, w, false); err != nil { // warm up
						return err
					}
					steps, err := r.Steps(ctx, e.eng, reqs, true)
					if err != nil {
						return err
					}
					res[e.name] = recallbench.StepsJSON(steps)
					if !asJSON {
						fmt.Fprintf(out, "recall steps with the %s embedder (mean over %d queries, 1 caller; sql.* from EXPLAIN ANALYZE):\n", e.name, len(reqs))
						recallbench.PrintSteps(out, steps)
					}
				}
				if asJSON {
					return printValue(out, map[string]any{"stepsMs": res, "queries": len(reqs), "loadBefore": load0, "loadAfter": cpustat.LoadAvg()})
				}
				return nil
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			machine0, _ = cpustat.ReadMachine() // from here: the measured runs only
			stats := r.Run(ctx, reqs, concs, warmup)
			machine1, _ := cpustat.ReadMachine()
			steal := cpustat.StealPercent(machine0, machine1)
			if asJSON {
				rep := recallbench.NewReport(stats)
				rep.LoadBefore, rep.LoadAfter, rep.StealPercent = load0, cpustat.LoadAvg(), math.Round(steal*10)/10
				rep.Queries, rep.Tenants, rep.Facts, rep.Evidence, rep.AccessLog = queries, tenants, facts, evidence, accessLog
				if composite != nil {
					rep.CompositeModel = composite.Name()
				}
				return printValue(out, rep)
			}
			fmt.Fprintf(out, "\n%d queries per run; %d tenants × (%d facts + %d evidence); access log %s; load average %s → %s; host steal %.1f%% of the machine's CPU\n\n",
				queries, tenants, facts, evidence, accessLog, load0, cpustat.LoadAvg(), steal)
			recallbench.PrintTable(out, stats)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&tenants, "tenants", 2, "tenants to load")
	f.IntVar(&facts, "facts", 100000, "facts per tenant")
	f.IntVar(&evidence, "evidence", 100000, "evidence rows per tenant")
	f.IntVar(&queries, "queries", 300, "queries per measurement")
	f.IntVar(&warmup, "warmup", 100, "unmeasured queries first")
	f.StringVar(&concurrency, "concurrency", "1,8", "concurrent callers, comma separated")
	f.StringVar(&dbURL, "database-url", "", "database to use (default: ENGRAM_BENCH_DATABASE_URL, else engram_bench next to ENGRAM_DATABASE_URL)")
	f.StringVar(&accessLog, "access-log", "async", "access log writes: async, sync or off")
	f.BoolVar(&timings, "timings", false, "instead of the table, show where a recall spends its time (mean per step and per retriever)")
	f.IntVar(&embedCache, "embed-cache", 0, "query embeddings the engines cache (0: none, every query is embedded; the engine's default is 4096)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the measured runs (with --history: of the whole run) to this file (go tool pprof)")
	f.IntVar(&maxStatements, "max-statements", 0, "recall statements on Postgres at once (recall.Options.MaxStatements; 0: the default, GOMAXPROCS + 1; -1: no bound)")
	f.BoolVar(&oneStatement, "one-statement", false, "run every retriever in one statement (recall.Options.OneStatement) instead of two at once when a recall runs alone")
	f.StringSliceVar(&retrievers, "retrievers", nil, "run only these retrievers (semantic, keyword, graph, structured, recent; default all): what each costs")
	f.BoolVar(&asJSON, "json", false, "write the figures as JSON")
	f.BoolVar(&noComposite, "no-composite", false, "measure recall with the n-gram embedder only (no USE-lite model needed)")
	f.IntVar(&explain, "explain", 0, "instead of the table, print EXPLAIN (ANALYZE, BUFFERS) of the first N queries' statements")
	f.BoolVar(&reload, "reload", false, "load the data set again even if the database holds it")
	f.StringVar(&history, "history", "", "instead, grow one user's history to these sizes (turns, comma separated, ascending) and measure recall at each")
	f.StringVar(&unanalysed, "unanalysed", "", "instead, for each of these sizes (turns, comma separated) load one user's history into a new database with autovacuum off and nothing analysed, and measure recall at one caller unanalysed, then after ANALYZE (p95 ratio)")
	f.IntVar(&lightTurns, "light-turns", 200, "with --history or --unanalysed: the light user's turns")
	f.IntVar(&batchSize, "batch-size", 500, "with --history or --unanalysed: events per batch Ingest call (1 to 500)")
	f.IntVar(&ingestCallers, "ingest-callers", 1, "with --history or --unanalysed: batch Ingest calls at once while growing the heavy user")
	return cmd
}

// parseConcurrency reads --concurrency: a comma-separated list of numbers of
// callers, 1 to 256.
func parseConcurrency(flag string) ([]int, error) {
	var concs []int
	for _, s := range strings.Split(flag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > 256 {
			return nil, fmt.Errorf("--concurrency: %q is not a list of numbers from 1 to 256", flag)
		}
		concs = append(concs, n)
	}
	return concs, nil
}

// startCPUProfile starts a Go CPU profile into path (none when path is empty); the
// returned function stops it.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// benchDatabase returns the benchmark's database URL, creating the database
// engram_bench next to ENGRAM_DATABASE_URL's when needed, so a benchmark never
// fills the engine's own database.
func benchDatabase(ctx context.Context, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if u := os.Getenv("ENGRAM_BENCH_DATABASE_URL"); u != "" {
		return u, nil
	}
	base := os.Getenv("ENGRAM_DATABASE_URL")
	if base == "" {
		return "", missingSetting("ENGRAM_DATABASE_URL", "the bench uses database engram_bench on that server, or give --database-url")
	}
	u, err := storage.SiblingDatabase(base, "engram_bench")
	if err != nil {
		return "", fmt.Errorf("ENGRAM_DATABASE_URL: %w", err)
	}
	if err := storage.CreateDatabase(ctx, base, "engram_bench", true); err != nil {
		return "", err
	}
	return u, nil
}

// parseSizes reads a comma-separated list of positive numbers of turns (flag
// names the flag in the error).
func parseSizes(flag, list string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive number of turns", flag, f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// benchUnanalysed is engram bench recall --unanalysed (recallstack.RunUnanalysed).
// Its progress goes to stderr, the figures to stdout.
func benchUnanalysed(cmd *cobra.Command, list string, queries, lightTurns, batchSize, ingestCallers, embedCache int, dbURL string, asJSON bool) error {
	sizes, err := parseSizes("--unanalysed", list)
	if err != nil {
		return err
	}
	if queries <= 0 || lightTurns < 0 || batchSize < 1 || batchSize > 500 || ingestCallers < 1 {
		return fmt.Errorf("--queries and --ingest-callers must be positive, --light-turns not negative, --batch-size 1 to 500")
	}
	rep, err := recallstack.RunUnanalysed(cmd.Context(), recallstack.UnanalysedConfig{Sizes: sizes, Queries: queries, LightTurns: lightTurns,
		BatchSize: batchSize, IngestCallers: ingestCallers, EmbedCache: embedCache, DatabaseURL: dbURL}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if asJSON {
		return printValue(cmd.OutOrStdout(), rep)
	}
	recallstack.PrintUnanalysed(cmd.OutOrStdout(), rep)
	return nil
}

// benchHistory is engram bench recall --history (recallstack.RunHistory).
func benchHistory(cmd *cobra.Command, history string, concs []int, queries, lightTurns, batchSize, ingestCallers, embedCache int, dbURL string, reload, timings, asJSON bool) error {
	sizes, err := parseSizes("--history", history)
	if err != nil {
		return err
	}
	if queries <= 0 || lightTurns < 0 || batchSize < 1 || batchSize > 500 || ingestCallers < 1 {
		return fmt.Errorf("--queries and --ingest-callers must be positive, --light-turns not negative, --batch-size 1 to 500")
	}
	msgs := cmd.OutOrStdout()
	if asJSON {
		msgs = cmd.ErrOrStderr()
	}
	rep, err := recallstack.RunHistory(cmd.Context(), recallstack.HistoryConfig{Sizes: sizes, Concurrency: concs, Queries: queries,
		LightTurns: lightTurns, BatchSize: batchSize, IngestCallers: ingestCallers, DatabaseURL: dbURL, Reload: reload, Steps: timings, EmbedCache: embedCache}, msgs)
	if err != nil {
		return err
	}
	if asJSON {
		return printValue(cmd.OutOrStdout(), rep)
	}
	recallstack.PrintHistory(cmd.OutOrStdout(), rep)
	return nil
}
