package recallstack

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/engramhq/engram/bench/writebench"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/internal/cpustat"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// The unanalysed bench (engram bench recall --unanalysed): recall of a user whose
// turns were written and never analysed, as right after a bulk import with
// autovacuum yet to come, against the same data analysed. For each size it makes a
// database of its own (UnanalysedDatabase) and migrates it (storage.Store.Migrate
// runs ANALYZE over the empty tables: reltuples 0, no column statistics), turns
// autovacuum off on every table of the schema (per-table storage parameters, not
// the server's setting) and resets the database's statistics counters, so that
// pg_stat_user_tables' last_analyze and last_autoanalyze are null until something
// analyses a table. It then grows the heavy user (and the light user beside it)
// through the write path as the history bench does (grow: batch Ingest into an
// in-process API server and worker), checks that no table was analysed and
// that the planner still counts evidence as empty (pg_class.reltuples 0 or -1),
// measures recall at one caller, runs ANALYZE and measures the same queries again.

// UnanalysedDatabase is the unanalysed bench's database, next to
// ENGRAM_DATABASE_URL's, dropped and made again for each size.
const UnanalysedDatabase = "engram_bench_unanalysed"

// UnanalysedTargetRatio is what the bench holds recall to: the heavy user's p95
// over never-analysed tables within this many times its p95 over the same data
// analysed (issue 47).
const UnanalysedTargetRatio = 3.0

// UnanalysedConfig is what the unanalysed bench measures.
type UnanalysedConfig struct {
	Sizes         []int // the heavy user's turns, one fresh database each
	Queries       int   // recalls per measurement (the same ones unanalysed and analysed)
	LightTurns    int   // the light user's turns
	BatchSize     int   // events per batch Ingest call
	IngestCallers int   // batch Ingest calls at once while growing the heavy user
	EmbedCache    int   // query embeddings the measured engine caches (0: none)
	// DatabaseURL is refused: the bench drops the database it measures.
	DatabaseURL string
}

// UnanalysedStats is what the planner has of the bench database at one moment.
type UnanalysedStats struct {
	// EvidenceReltuples is pg_class.reltuples of evidence: the table's size as the
	// planner last counted it (-1 never counted, 0 counted empty).
	EvidenceReltuples float64 `json:"evidence_reltuples"`
	// EvidenceRows are the rows evidence holds (count(*)).
	EvidenceRows int `json:"evidence_rows"`
	// EvidenceColumnStats are the columns of evidence with statistics (pg_stats).
	EvidenceColumnStats int `json:"evidence_column_stats"`
	// AnalysedTables are the schema's tables whose last_analyze or
	// last_autoanalyze is set (pg_stat_user_tables), of Tables.
	AnalysedTables []string `json:"analysed_tables"`
	Tables         int      `json:"tables"`
	// AutovacuumOn are the schema's tables without autovacuum_enabled=false.
	AutovacuumOn []string `json:"autovacuum_on"`
}

// unanalysed says why s is not a database nothing has analysed since it was
// migrated (nil when it is one).
func (s UnanalysedStats) unanalysed() error {
	var why []string
	if len(s.AnalysedTables) > 0 {
		why = append(why, "analysed tables: "+strings.Join(s.AnalysedTables, ", "))
	}
	if s.EvidenceReltuples > 0 {
		why = append(why, fmt.Sprintf("pg_class.reltuples of evidence is %g", s.EvidenceReltuples))
	}
	if s.EvidenceColumnStats > 0 {
		why = append(why, fmt.Sprintf("%d columns of evidence have statistics", s.EvidenceColumnStats))
	}
	if len(s.AutovacuumOn) > 0 {
		why = append(why, "autovacuum on for: "+strings.Join(s.AutovacuumOn, ", "))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("the database is not unanalysed (%s)", strings.Join(why, "; "))
}

// UnanalysedPhase is recall's latency in one state of the statistics.
type UnanalysedPhase struct {
	P50      float64 `json:"recall_p50_ms"`
	P95      float64 `json:"recall_p95_ms"`
	P99      float64 `json:"recall_p99_ms"`
	LightP50 float64 `json:"light_p50_ms"`
	LightP95 float64 `json:"light_p95_ms"`
	// CPU of one heavy user's recall, the engine's and the database server's
	// (when readable): a figure a busy machine distorts less than latency.
	GoCPUms    float64         `json:"go_cpu_ms_per_recall"`
	PGCPUms    *float64        `json:"pg_cpu_ms_per_recall,omitempty"`
	Errors     int             `json:"errors"`
	FirstError string          `json:"first_error,omitempty"`
	Stats      UnanalysedStats `json:"stats"`
}

// UnanalysedPoint is one size's figures.
type UnanalysedPoint struct {
	Turns      int             `json:"turns"`
	Unanalysed UnanalysedPhase `json:"unanalysed"`
	Analysed   UnanalysedPhase `json:"analysed"`
	// RatioP95 is the heavy user's p95 unanalysed over its p95 analysed (0 when
	// the analysed p95 is 0); LightRatioP95 the light user's.
	RatioP95      float64 `json:"ratio_p95"`
	LightRatioP95 float64 `json:"light_ratio_p95"`
	// WithinTarget: RatioP95 is at most UnanalysedTargetRatio.
	WithinTarget bool          `json:"within_target"`
	Ingest       HistoryIngest `json:"ingest"`
}

// UnanalysedReport is the unanalysed bench's result.
type UnanalysedReport struct {
	Points      []UnanalysedPoint `json:"points"`
	Queries     int               `json:"queries"`
	LightTurns  int               `json:"light_turns"`
	Embedder    string            `json:"embedder"`
	EmbedCache  int               `json:"embed_cache"`
	TargetRatio float64           `json:"target_ratio_p95"`
	LoadBefore  string            `json:"load_before"`
	LoadAfter   string            `json:"load_after"`
}

// RunUnanalysed measures recall over each size of never-analysed history, then
// over the same data analysed.
func RunUnanalysed(ctx context.Context, cfg UnanalysedConfig, msgs io.Writer) (*UnanalysedReport, error) {
	for _, s := range cfg.Sizes {
		if s <= 0 || s > MaxHistoryTurns {
			return nil, fmt.Errorf("--unanalysed: sizes are 1 to %d turns, got %v", MaxHistoryTurns, cfg.Sizes)
		}
	}
	if len(cfg.Sizes) == 0 || cfg.Queries <= 0 {
		return nil, fmt.Errorf("--unanalysed: give at least one size and a positive --queries")
	}
	if cfg.DatabaseURL != "" {
		return nil, fmt.Errorf("--unanalysed drops and makes again its own database %s for each size; leave out --database-url (it is made next to ENGRAM_DATABASE_URL's)", UnanalysedDatabase)
	}
	env, err := config.FromEnv()
	if err != nil {
		return nil, err
	}
	if env.DatabaseURL == "" {
		return nil, fmt.Errorf("set ENGRAM_DATABASE_URL (the bench uses database %s on that server)", UnanalysedDatabase)
	}
	rep := &UnanalysedReport{Queries: cfg.Queries, LightTurns: cfg.LightTurns, EmbedCache: max(cfg.EmbedCache, 0),
		TargetRatio: UnanalysedTargetRatio, LoadBefore: cpustat.LoadAvg()}
	for _, n := range cfg.Sizes {
		p, emb, err := unanalysedSize(ctx, cfg, env.DatabaseURL, n, msgs)
		if err != nil {
			return nil, fmt.Errorf("--unanalysed %d: %w", n, err)
		}
		rep.Points, rep.Embedder = append(rep.Points, p), emb
	}
	rep.LoadAfter = cpustat.LoadAvg()
	return rep, nil
}

// unanalysedSize is one size: a new database, n turns written, recall measured
// unanalysed and analysed. It returns the point and the embedder's name.
func unanalysedSize(ctx context.Context, cfg UnanalysedConfig, base string, n int, msgs io.Writer) (UnanalysedPoint, string, error) {
	p := UnanalysedPoint{Turns: n}
	fmt.Fprintf(msgs, "unanalysed %d: database %s made again, migrated, autovacuum off on its tables, statistics counters reset …\n", n, UnanalysedDatabase)
	if err := freshUnanalysedDatabase(ctx, base); err != nil {
		return p, "", err
	}
	// The database is migrated already: Start's Migrate applies nothing and so
	// analyses nothing.
	b, stop, err := writebench.Start(ctx, writebench.Options{Users: 1, Rounds: 1, Tenant: historyTenant,
		DatabaseName: UnanalysedDatabase, Keep: true}, msgs)
	if err != nil {
		return p, "", err
	}
	defer stop()
	a := b.App()
	keys, err := writeKeys(ctx, a.Store, "unan")
	if err != nil {
		return p, "", err
	}
	if _, err := grow(ctx, b.API(), a.Temporal, a.Store, keys, lightUser, cfg.LightTurns, cfg.BatchSize, 1, msgs); err != nil {
		return p, "", err
	}
	if p.Ingest, err = grow(ctx, b.API(), a.Temporal, a.Store, keys, heavyUser, n, cfg.BatchSize, max(1, cfg.IngestCallers), msgs); err != nil {
		return p, "", err
	}
	loaded, err := readUnanalysedStats(ctx, a.Store)
	if err != nil {
		return p, "", err
	}
	fmt.Fprintf(msgs, "unanalysed %d: loaded %d evidence rows; planner's reltuples %g, %d of %d tables analysed, %d columns of evidence with statistics\n",
		n, loaded.EvidenceRows, loaded.EvidenceReltuples, len(loaded.AnalysedTables), loaded.Tables, loaded.EvidenceColumnStats)
	if err := loaded.unanalysed(); err != nil {
		return p, "", fmt.Errorf("after loading: %w", err)
	}
	bare, err := storage.Open(ctx, a.Config.DatabaseURL) // reads the backends' CPU (pg_stat_activity) beside the engine's pool
	if err != nil {
		return p, "", err
	}
	defer bare.Close()
	eng, err := measuredEngine(a, cfg.EmbedCache)
	if err != nil {
		return p, "", err
	}
	defer eng.Close()
	run := &recallbench.Runner{Store: a.Store, Composite: eng, Emb: a.Embedder, Bare: bare}
	heavyQ := historyQueries(heavyUser, cfg.Queries, uint64(n))
	lightQ := historyQueries(lightUser, cfg.Queries, uint64(n)+1)

	fmt.Fprintf(msgs, "unanalysed %d: %d recalls of each user at 1 caller, unanalysed …\n", n, cfg.Queries)
	p.Unanalysed = measureUnanalysedPhase(ctx, run, heavyQ, lightQ)
	// Still nothing analysed: the figures are those of unanalysed tables throughout.
	if p.Unanalysed.Stats, err = readUnanalysedStats(ctx, a.Store); err != nil {
		return p, "", err
	}
	if err := p.Unanalysed.Stats.unanalysed(); err != nil {
		return p, "", fmt.Errorf("after the unanalysed recalls: %w", err)
	}
	fmt.Fprintf(msgs, "unanalysed %d: ANALYZE …\n", n)
	if err := a.Store.Analyze(ctx); err != nil { // also plans the pool's statements again
		return p, "", fmt.Errorf("analyze: %w", err)
	}
	fmt.Fprintf(msgs, "unanalysed %d: the same recalls, analysed …\n", n)
	p.Analysed = measureUnanalysedPhase(ctx, run, heavyQ, lightQ)
	if p.Analysed.Stats, err = readUnanalysedStats(ctx, a.Store); err != nil {
		return p, "", err
	}
	p.RatioP95 = latencyRatio(p.Unanalysed.P95, p.Analysed.P95)
	p.LightRatioP95 = latencyRatio(p.Unanalysed.LightP95, p.Analysed.LightP95)
	p.WithinTarget = p.RatioP95 > 0 && p.RatioP95 <= UnanalysedTargetRatio
	return p, a.Embedder.Name(), nil
}

// measureUnanalysedPhase measures the heavy and the light user's recalls at one
// caller, after a few unmeasured ones (the model, the caches, the pool's
// connections and their plans: made here with whatever statistics there are).
func measureUnanalysedPhase(ctx context.Context, run *recallbench.Runner, heavyQ, lightQ []recall.Request) UnanalysedPhase {
	run.Measure(ctx, recallbench.KindRecallComposite, heavyQ[:min(20, len(heavyQ))], 1)
	run.Measure(ctx, recallbench.KindRecallComposite, lightQ[:min(20, len(lightQ))], 1)
	h := run.Measure(ctx, recallbench.KindRecallComposite, heavyQ, 1)
	l := run.Measure(ctx, recallbench.KindRecallComposite, lightQ, 1)
	ph := UnanalysedPhase{P50: recallbench.Millis(h.P50), P95: recallbench.Millis(h.P95), P99: recallbench.Millis(h.P99), LightP50: recallbench.Millis(l.P50), LightP95: recallbench.Millis(l.P95),
		GoCPUms: recallbench.Millis(h.GoCPU), PGCPUms: h.PgCPUms(), Errors: h.Errors + l.Errors}
	if e := firstErr(h.FirstErr, l.FirstErr); e != nil {
		ph.FirstError = e.Error()
	}
	return ph
}

// latencyRatio is a over b, to two places (0 when b is 0: no ratio).
func latencyRatio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return recallbench.Round2(a / b)
}

// freshUnanalysedDatabase drops and makes again UnanalysedDatabase next to base's,
// migrates it (which analyses its empty tables), turns autovacuum off on every
// table of its schema, and resets its statistics counters (pg_stat_reset, this
// database's only): last_analyze and last_autoanalyze are null from here until
// something analyses a table.
func freshUnanalysedDatabase(ctx context.Context, base string) error {
	u, err := storage.SiblingDatabase(base, UnanalysedDatabase)
	if err != nil {
		return fmt.Errorf("ENGRAM_DATABASE_URL: %w", err)
	}
	if err := storage.DropDatabase(ctx, base, UnanalysedDatabase); err != nil {
		return fmt.Errorf("drop %s: %w", UnanalysedDatabase, err)
	}
	if err := storage.CreateDatabase(ctx, base, UnanalysedDatabase, false); err != nil {
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
	var tables []string
	if err := st.DB().NewRaw(`SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'm') ORDER BY 1`).Scan(ctx, &tables); err != nil {
		return fmt.Errorf("list the tables: %w", err)
	}
	for _, t := range tables {
		if _, err := st.DB().ExecContext(ctx, "ALTER TABLE "+t+" SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)"); err != nil {
			return fmt.Errorf("turn autovacuum off for %s: %w", t, err)
		}
	}
	if _, err := st.DB().ExecContext(ctx, "SELECT pg_stat_reset()"); err != nil {
		return fmt.Errorf("reset the statistics counters: %w", err)
	}
	return nil
}

// readUnanalysedStats reads what the planner has of st's database.
func readUnanalysedStats(ctx context.Context, st *storage.Store) (UnanalysedStats, error) {
	s := UnanalysedStats{AnalysedTables: []string{}, AutovacuumOn: []string{}}
	db := st.DB()
	if err := db.NewRaw("SELECT reltuples::float8 FROM pg_class WHERE oid = 'evidence'::regclass").Scan(ctx, &s.EvidenceReltuples); err != nil {
		return s, fmt.Errorf("read evidence's reltuples: %w", err)
	}
	if err := db.NewRaw("SELECT count(*) FROM evidence").Scan(ctx, &s.EvidenceRows); err != nil {
		return s, fmt.Errorf("count evidence: %w", err)
	}
	if err := db.NewRaw("SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'evidence'").Scan(ctx, &s.EvidenceColumnStats); err != nil {
		return s, fmt.Errorf("read evidence's column statistics: %w", err)
	}
	var rows []struct {
		Name     string `bun:"name"`
		Analysed bool   `bun:"analysed"`
		Autovac  bool   `bun:"autovac"`
	}
	// A table the statistics collector has not seen has no row in
	// pg_stat_user_tables: never analysed.
	if err := db.NewRaw(`SELECT c.relname AS name,
			coalesce(t.last_analyze IS NOT NULL OR t.last_autoanalyze IS NOT NULL, false) AS analysed,
			NOT coalesce('autovacuum_enabled=false' = ANY(c.reloptions), false) AS autovac
		FROM pg_class c LEFT JOIN pg_stat_user_tables t ON t.relid = c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'm') ORDER BY 1`).Scan(ctx, &rows); err != nil {
		return s, fmt.Errorf("read the tables' statistics: %w", err)
	}
	s.Tables = len(rows)
	for _, r := range rows {
		if r.Analysed {
			s.AnalysedTables = append(s.AnalysedTables, r.Name)
		}
		if r.Autovac {
			s.AutovacuumOn = append(s.AutovacuumOn, r.Name)
		}
	}
	return s, nil
}

// PrintUnanalysed writes the unanalysed bench's figures as a table.
func PrintUnanalysed(out io.Writer, rep *UnanalysedReport) {
	cache := "none (every query embedded)"
	if rep.EmbedCache > 0 {
		cache = fmt.Sprintf("%d queries", rep.EmbedCache)
	}
	fmt.Fprintf(out, "\nrecall of the heavy user at 1 caller, %d queries, over tables never analysed (autovacuum off) and then analysed;\nembedder %s, query cache %s; light user %d turns; load average %s → %s\n\n",
		rep.Queries, rep.Embedder, cache, rep.LightTurns, rep.LoadBefore, rep.LoadAfter)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "turns\tunanalysed p50 ms\tp95 ms\tanalysed p50 ms\tp95 ms\tratio p95\treltuples seen\tlight p95 ms (un/an)\tCPU/recall ms un (engine+server)\tan\terrors\t")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%.2f/%.2f\t%s\t%s\t%d\t\n", p.Turns,
			p.Unanalysed.P50, p.Unanalysed.P95, p.Analysed.P50, p.Analysed.P95, ratioCell(p.RatioP95, rep.TargetRatio),
			reltuplesCell(p.Unanalysed.Stats, p.Analysed.Stats), p.Unanalysed.LightP95, p.Analysed.LightP95,
			cpuCell(p.Unanalysed), cpuCell(p.Analysed), p.Unanalysed.Errors+p.Analysed.Errors)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\n(ratio p95: unanalysed over analysed, held to at most %g; reltuples seen: pg_class.reltuples of evidence unanalysed → analysed, of the rows it holds)\n", rep.TargetRatio)
	for _, p := range rep.Points {
		for _, ph := range []struct {
			name string
			e    string
		}{{"unanalysed", p.Unanalysed.FirstError}, {"analysed", p.Analysed.FirstError}} {
			if ph.e != "" {
				fmt.Fprintf(out, "first error at %d turns, %s: %s\n", p.Turns, ph.name, ph.e)
			}
		}
	}
}

func ratioCell(r, target float64) string {
	switch {
	case r == 0:
		return "-"
	case r > target:
		return fmt.Sprintf("%.2f (> %g)", r, target)
	}
	return fmt.Sprintf("%.2f", r)
}

func reltuplesCell(un, an UnanalysedStats) string {
	return fmt.Sprintf("%g → %g of %d", un.EvidenceReltuples, math.Round(an.EvidenceReltuples), an.EvidenceRows)
}

func cpuCell(ph UnanalysedPhase) string {
	if ph.PGCPUms == nil {
		return fmt.Sprintf("%.2f+?", ph.GoCPUms)
	}
	return fmt.Sprintf("%.2f+%.2f", ph.GoCPUms, *ph.PGCPUms)
}
