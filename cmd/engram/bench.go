package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// benchCmd groups the benchmarks; `engram bench recall` is the recall benchmark.
func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks on synthetic data"}
	cmd.AddCommand(benchRecallCmd())
	return cmd
}

func benchRecallCmd() *cobra.Command {
	var (
		tenants, facts, evidence, queries, warmup int
		concurrency, dbURL, accessLog             string
		reload, timings                           bool
		explain                                   int
	)
	cmd := &cobra.Command{
		Use:   "recall",
		Short: "Load synthetic memory and measure recall against the bare pgvector and full-text queries",
		Long: `Loads --facts facts and --evidence evidence turns per tenant (English and Chinese; many
users, departments, agents, tasks and sessions; n-gram embeddings), then measures recall
latency (p50/p95/p99) and QPS at each --concurrency, side by side with the bare pgvector
top-k query and the bare full-text query on the same data.

The database is ENGRAM_BENCH_DATABASE_URL, or --database-url, or the database
"engram_bench" on the server of ENGRAM_DATABASE_URL (created and migrated if missing).
A loaded data set is kept and reused by later runs with the same sizes (--reload to
load again).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			var concs []int
			for _, s := range strings.Split(concurrency, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n <= 0 || n > 256 {
					return fmt.Errorf("--concurrency: %q is not a list of positive numbers", concurrency)
				}
				concs = append(concs, n)
			}
			if tenants <= 0 || facts <= 0 || evidence <= 0 || queries <= 0 {
				return fmt.Errorf("--tenants, --facts, --evidence and --queries must be positive")
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
			emb := llm.NewNGramEmbedder(storage.EmbeddingDim)
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
				fmt.Fprintf(out, "loaded %d tenants × (%d facts + %d evidence) in %s\n", tenants, facts, evidence, time.Since(start).Round(time.Second))
			} else {
				fmt.Fprintf(out, "reusing the loaded data set (%s)\n", w.Cfg.Key())
			}
			eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: alm})
			defer eng.Close()
			reqs := recallbench.Queries(w, queries, 99)
			bare, err := storage.Open(ctx, u) // the bare queries' own pool, untouched by the engine's tuning
			if err != nil {
				return err
			}
			defer bare.Close()
			r := &recallbench.Runner{Store: st, Engine: eng, Emb: emb, Bare: bare}
			if explain > 0 {
				for i := 0; i < explain && i < len(reqs); i++ {
					plan, err := eng.Explain(ctx, reqs[i])
					if err != nil {
						return fmt.Errorf("explain: %w", err)
					}
					fmt.Fprintf(out, "### query %d: %q (session %q, task %q)\n%s\n", i, reqs[i].Query, reqs[i].SessionID, reqs[i].TaskID, plan)
				}
				return nil
			}
			if timings {
				fmt.Fprintf(out, "recall steps (mean over %d queries, 1 caller):\n", len(reqs))
				recallbench.PrintSteps(out, r.Steps(ctx, reqs))
				return nil
			}
			stats := r.Run(ctx, reqs, concs, warmup)
			fmt.Fprintf(out, "\n%d queries per run; %d tenants × (%d facts + %d evidence); access log %s\n\n", queries, tenants, facts, evidence, accessLog)
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
	f.BoolVar(&timings, "timings", false, "instead of the table, show where a recall spends its time (mean per step)")
	f.IntVar(&explain, "explain", 0, "instead of the table, print EXPLAIN (ANALYZE, BUFFERS) of the first N queries' statements")
	f.BoolVar(&reload, "reload", false, "load the data set again even if the database holds it")
	return cmd
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
		return "", fmt.Errorf("set ENGRAM_DATABASE_URL (the bench uses database engram_bench on that server) or --database-url")
	}
	pu, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("ENGRAM_DATABASE_URL: %w", err)
	}
	pu.Path = "/engram_bench"
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(base)))
	defer admin.Close()
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = 'engram_bench'").Scan(&n); err != nil {
		return "", fmt.Errorf("look for database engram_bench: %w", err)
	}
	if n == 0 {
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE engram_bench"); err != nil && !strings.Contains(err.Error(), "already exists") {
			return "", fmt.Errorf("create database engram_bench: %w", err)
		}
	}
	return pu.String(), nil
}
