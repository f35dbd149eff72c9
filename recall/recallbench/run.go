package recallbench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/loadgen"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// Queries draws n recall requests: random principals of random tenants, some in a
// session or a task, asking in English or Chinese about budgets, preferences,
// orders, rules, tools and trips.
func Queries(w *World, n int, seed uint64) []recall.Request {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]recall.Request, 0, n)
	for i := 0; i < n; i++ {
		t := r.IntN(len(w.Users))
		u := w.Users[t][r.IntN(len(w.Users[t]))]
		o := Pick(r, u.Orders)
		c := r.IntN(len(cities))
		type tq struct{ q, schema string }
		qs := []tq{
			{"what is my travel budget", "travel"}, {"do I prefer direct flights", "travel"}, {"where is my order " + o, "customer_service"},
			{"what food do I like", "general"}, {"which tools does the team use in production", "general"},
			{"what are the company's rules for expense reports", "general"}, {"the order that never arrived", "customer_service"},
			{"what did I say about hotels in " + cities[c], "travel"}, {"what is my cat's name?", "general"}, {"which seat do I prefer", "travel"},
			{"我的预算是多少", "travel"}, {"用户喜欢什么样的旅行方式", "travel"}, {"我那个没到的订单怎么样了", "customer_service"},
			{"订单" + o + "怎么样了", "customer_service"}, {"帮我继续安排上次旅行", "travel"}, {"我们团队用的是什么工具", "general"},
			{"报销有什么规定", "general"}, {"我喜欢吃什么", "general"}, {"去" + citiesZh[c] + "的酒店要带早餐吗", "travel"},
		}
		q := Pick(r, qs)
		req := recall.Request{
			Principal: recall.Principal{TenantID: u.Tenant, ID: "bench", UserID: u.ID, DepartmentID: u.Department, AgentID: u.Agent},
			Query:     q.q, Schema: q.schema, K: 10, Purpose: "bench",
		}
		if r.IntN(10) < 4 {
			req.SessionID = Pick(r, u.Sessions)
		}
		if r.IntN(10) < 3 {
			req.TaskID = Pick(r, u.Tasks)
		}
		out = append(out, req)
	}
	return out
}

// Stat is the latency of one kind of query at one concurrency.
type Stat struct {
	Name          string
	Concurrency   int
	N, Errors     int
	P50, P95, P99 time.Duration
	Mean          time.Duration
	QPS           float64
	FirstErr      error
	// CPU per query: this process's (the engine: parsing, embedding, fusion,
	// context) and the database server's, when readable (PGCPUOK).
	GoCPU, PGCPU time.Duration
	PGCPUOK      bool
}

// Kinds of measured queries.
const (
	KindRecall = "recall"
	// KindRecallComposite is recall with the default composite embedder (USE-lite
	// and n-grams), the query's embedding included: what users get.
	KindRecallComposite = "recall (composite)"
	KindBareVec         = "bare pgvector top-k"
	KindBareText        = "bare full-text"
	// The bare queries of engram bench recall --history: one user's evidence (its
	// tenant and user in the request's principal), top 10 by the HNSW index, and
	// by the GIN full-text index ranked by ts_rank, with the server's defaults.
	KindBareEvidenceVec  = "bare pgvector top-k (evidence)"
	KindBareEvidenceText = "bare full-text (evidence)"
	bareEvidenceVecSQL   = "SELECT id FROM evidence WHERE tenant_id = ? AND user_id = ? ORDER BY embedding <=> ?::vector LIMIT ?"
	bareEvidenceTextSQL  = "SELECT id FROM evidence WHERE tenant_id = ? AND user_id = ? AND search @@ plainto_tsquery('english', ?) ORDER BY ts_rank(search, plainto_tsquery('english', ?)) DESC LIMIT ?"
	bareVecSQL           = "SELECT id FROM facts WHERE tenant_id = ? ORDER BY embedding <=> ?::vector LIMIT ?"
	bareTextSQL          = "SELECT id FROM facts WHERE tenant_id = ? AND search @@ plainto_tsquery('english', ?) ORDER BY ts_rank(search, plainto_tsquery('english', ?)) DESC LIMIT ?"
	bareTextLimit        = 10
)

// Runner measures recall and the bare queries on the same requests.
type Runner struct {
	Store  *storage.Store
	Engine *recall.Engine
	Emb    embedding.Embedder
	// Composite, when set, is an engine with the composite embedder: measured as
	// KindRecallComposite beside Engine (which embeds with Emb, the n-grams).
	Composite *recall.Engine
	// Bare runs the bare queries (default Store). Give it its own pool: the
	// engine tunes the connections it uses (hnsw.ef_search, iterative scans), and
	// the bare queries must run with the server's defaults.
	Bare *storage.Store
}

func (b *Runner) bare() *storage.Store {
	if b.Bare != nil {
		return b.Bare
	}
	return b.Store
}

func (b *Runner) one(ctx context.Context, kind string, req recall.Request) error {
	switch kind {
	case KindRecall:
		_, err := b.Engine.Recall(ctx, req)
		return err
	case KindRecallComposite:
		_, err := b.Composite.Recall(ctx, req)
		return err
	case KindBareVec:
		vs, err := b.Emb.Embed(ctx, []string{req.Query})
		if err != nil {
			return err
		}
		var ids []string
		return b.bare().DB().NewRaw(bareVecSQL, req.Principal.TenantID, pgvector.NewVector(vs[0]), req.K).Scan(ctx, &ids)
	case KindBareText:
		q := storage.SearchText(req.Query)
		var ids []string
		return b.bare().DB().NewRaw(bareTextSQL, req.Principal.TenantID, q, q, bareTextLimit).Scan(ctx, &ids)
	case KindBareEvidenceVec:
		vs, err := b.Emb.Embed(ctx, []string{req.Query})
		if err != nil {
			return err
		}
		var ids []string
		return b.bare().DB().NewRaw(bareEvidenceVecSQL, req.Principal.TenantID, req.Principal.UserID, pgvector.NewVector(vs[0]), bareTextLimit).Scan(ctx, &ids)
	case KindBareEvidenceText:
		q := storage.SearchText(req.Query)
		var ids []string
		return b.bare().DB().NewRaw(bareEvidenceTextSQL, req.Principal.TenantID, req.Principal.UserID, q, q, bareTextLimit).Scan(ctx, &ids)
	}
	return fmt.Errorf("unknown kind %q", kind)
}

// Measure runs every request once as kind with conc concurrent callers.
func (b *Runner) Measure(ctx context.Context, kind string, reqs []recall.Request, conc int) Stat {
	cpu0 := b.snapshotCPU(ctx, b.bare())
	r := loadgen.Run(ctx, conc, len(reqs), func(ctx context.Context, i int) error { return b.one(ctx, kind, reqs[i]) })
	lat, wall := r.Latency, r.Wall
	errs := 0
	for _, err := range r.Err {
		if err != nil {
			errs++
		}
	}
	st := Stat{Name: kind, Concurrency: conc, N: len(reqs), Errors: errs, QPS: float64(len(reqs)) / wall.Seconds()}
	if len(reqs) > 0 {
		self, pg, ok := b.cpuSince(ctx, b.bare(), cpu0)
		st.GoCPU, st.PGCPU, st.PGCPUOK = self/time.Duration(len(reqs)), pg/time.Duration(len(reqs)), ok
	}
	st.FirstErr = r.FirstError()
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	if len(lat) > 0 {
		st.Mean = sum / time.Duration(len(lat))
		st.P50, st.P95, st.P99 = Percentile(lat, 50), Percentile(lat, 95), Percentile(lat, 99)
	}
	return st
}

func Percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	if i > 0 {
		i--
	}
	return sorted[i]
}

// Run warms up, then measures recall, the bare vector and the bare full-text query
// at each concurrency.
func (b *Runner) Run(ctx context.Context, reqs []recall.Request, concurrency []int, warmup int) []Stat {
	kinds := []string{KindRecall, KindBareVec, KindBareText}
	if b.Composite != nil {
		kinds = []string{KindRecall, KindRecallComposite, KindBareVec, KindBareText}
	}
	for _, kind := range kinds {
		w := reqs
		if warmup < len(w) {
			w = w[:warmup]
		}
		b.Measure(ctx, kind, w, 2)
	}
	var out []Stat
	for _, c := range concurrency {
		for _, kind := range kinds {
			out = append(out, b.Measure(ctx, kind, reqs, c))
		}
	}
	return out
}

// PrintTable writes the figures side by side with the ratio that matters: recall
// p50 over the bare pgvector top-k p50 at the same concurrency.
func PrintTable(out io.Writer, stats []Stat) {
	tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tcallers\tn\tp50\tp95\tp99\tmean\tQPS\tCPU/query (engine+server)\terrors\t")
	bare := map[int]time.Duration{}
	for _, s := range stats {
		if s.Name == KindBareVec {
			bare[s.Concurrency] = s.P50
		}
	}
	for _, s := range stats {
		cpu := MsCell(s.GoCPU) + "+?"
		if s.PGCPUOK {
			cpu = MsCell(s.GoCPU) + "+" + MsCell(s.PGCPU)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t%d\t\n", s.Name, s.Concurrency, s.N, MsCell(s.P50), MsCell(s.P95), MsCell(s.P99), MsCell(s.Mean), s.QPS, cpu, s.Errors)
	}
	_ = tw.Flush()
	var ratios []string
	for _, s := range stats {
		if (s.Name == KindRecall || s.Name == KindRecallComposite) && bare[s.Concurrency] > 0 {
			ratios = append(ratios, fmt.Sprintf("%s, %d caller(s): %.2f×", s.Name, s.Concurrency, float64(s.P50)/float64(bare[s.Concurrency])))
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(out, "\np50 / bare pgvector p50: %s\n", strings.Join(ratios, "; "))
	}
	for _, s := range stats {
		if s.FirstErr != nil {
			fmt.Fprintf(out, "%s at %d: first error: %v\n", s.Name, s.Concurrency, s.FirstErr)
		}
	}
}

func MsCell(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// Steps runs every request once (one caller) on eng and returns the mean time
// of each step the engine reports in Response.Timings. With sql set it also
// splits the recall statement by retriever (recall.Engine.RetrieverTimings, an
// EXPLAIN ANALYZE of each request) and adds those means as "sql.*".
func (b *Runner) Steps(ctx context.Context, eng *recall.Engine, reqs []recall.Request, sql bool) (map[string]time.Duration, error) {
	sum := map[string]time.Duration{}
	n, ns := 0, 0
	for _, req := range reqs {
		resp, err := eng.Recall(ctx, req)
		if err != nil {
			return nil, err
		}
		n++
		for k, v := range resp.Timings {
			sum[k] += v
		}
	}
	for k := range sum {
		sum[k] /= time.Duration(max(n, 1))
	}
	if !sql {
		return sum, nil
	}
	parts := map[string]time.Duration{}
	for _, req := range reqs {
		rt, err := eng.RetrieverTimings(ctx, req)
		if err != nil {
			return nil, err
		}
		ns++
		for k, v := range rt {
			parts[k] += v
		}
	}
	for k, v := range parts {
		sum[k] = v / time.Duration(max(ns, 1))
	}
	return sum, nil
}

// PrintSteps writes the step timings, slowest first.
func PrintSteps(out io.Writer, steps map[string]time.Duration) {
	names := make([]string, 0, len(steps))
	for k := range steps {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return int(steps[b] - steps[a]) })
	for _, k := range names {
		fmt.Fprintf(out, "  %-24s %s\n", k, MsCell(steps[k]))
	}
}

// StepsJSON is the step timings in milliseconds.
func StepsJSON(steps map[string]time.Duration) map[string]float64 {
	out := make(map[string]float64, len(steps))
	for k, v := range steps {
		out[k] = Millis(v)
	}
	return out
}

func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pgCPUms is the database server's CPU per query in ms, nil when it could not be
// read.
func (s Stat) PgCPUms() *float64 {
	if !s.PGCPUOK {
		return nil
	}
	v := Millis(s.PGCPU)
	return &v
}

// StatJSON is one measurement as --json writes it.
type StatJSON struct {
	Query       string  `json:"query"`
	Concurrency int     `json:"concurrency"`
	N           int     `json:"n"`
	Errors      int     `json:"errors"`
	P50ms       float64 `json:"p50_ms"`
	P95ms       float64 `json:"p95_ms"`
	P99ms       float64 `json:"p99_ms"`
	MeanMs      float64 `json:"mean_ms"`
	QPS         float64 `json:"qps"`
	// CPU per query, in ms: the bench process's and the database server's
	// (omitted when the server's processes cannot be read).
	GoCPUms    float64  `json:"go_cpu_ms_per_query"`
	PGCPUms    *float64 `json:"pg_cpu_ms_per_query,omitempty"`
	FirstError string   `json:"first_error,omitempty"`
}

// ConcurrencyJSON is the figures that matter at one concurrency: recall with the
// bench's n-gram embedder, recall with the composite embedder (when measured) and
// the bare pgvector top-k query.
type ConcurrencyJSON struct {
	Concurrency          int      `json:"concurrency"`
	RecallP50ms          float64  `json:"recall_p50_ms"`
	RecallP95ms          float64  `json:"recall_p95_ms"`
	RecallQPS            float64  `json:"recall_qps"`
	CompositeRecallP50ms *float64 `json:"composite_recall_p50_ms,omitempty"`
	CompositeRecallP95ms *float64 `json:"composite_recall_p95_ms,omitempty"`
	CompositeRecallQPS   *float64 `json:"composite_recall_qps,omitempty"`
	PgvectorP50ms        float64  `json:"pgvector_p50_ms"`
	PgvectorP95ms        float64  `json:"pgvector_p95_ms"`
	PgvectorQPS          float64  `json:"pgvector_qps"`
}

// Report is the whole --json output of a run.
type Report struct {
	Rows          []StatJSON        `json:"rows"`
	ByConcurrency []ConcurrencyJSON `json:"by_concurrency"`
	LoadBefore    string            `json:"load_before,omitempty"` // /proc/loadavg when the run started
	LoadAfter     string            `json:"load_after,omitempty"`
	// StealPercent is the share of the machine's CPU the hypervisor gave to other
	// guests during the run (cpustat.StealPercent): high, and the figures measured
	// a slower machine.
	StealPercent   float64 `json:"host_steal_percent"`
	Queries        int     `json:"queries"`
	Tenants        int     `json:"tenants"`
	Facts          int     `json:"facts"`
	Evidence       int     `json:"evidence"`
	AccessLog      string  `json:"access_log"`
	CompositeModel string  `json:"composite_embedder,omitempty"`
}

// NewReport turns stats into the JSON report's rows and per-concurrency figures.
func NewReport(stats []Stat) Report {
	var r Report
	by := map[int]*ConcurrencyJSON{}
	var order []int
	for _, s := range stats {
		sj := StatJSON{Query: s.Name, Concurrency: s.Concurrency, N: s.N, Errors: s.Errors, P50ms: Millis(s.P50), P95ms: Millis(s.P95),
			P99ms: Millis(s.P99), MeanMs: Millis(s.Mean), QPS: Round2(s.QPS)}
		if s.FirstErr != nil {
			sj.FirstError = s.FirstErr.Error()
		}
		sj.GoCPUms, sj.PGCPUms = Millis(s.GoCPU), s.PgCPUms()
		r.Rows = append(r.Rows, sj)
		c, ok := by[s.Concurrency]
		if !ok {
			c = &ConcurrencyJSON{Concurrency: s.Concurrency}
			by[s.Concurrency] = c
			order = append(order, s.Concurrency)
		}
		switch s.Name {
		case KindRecall:
			c.RecallP50ms, c.RecallP95ms, c.RecallQPS = sj.P50ms, sj.P95ms, sj.QPS
		case KindRecallComposite:
			c.CompositeRecallP50ms, c.CompositeRecallP95ms, c.CompositeRecallQPS = &sj.P50ms, &sj.P95ms, &sj.QPS
		case KindBareVec:
			c.PgvectorP50ms, c.PgvectorP95ms, c.PgvectorQPS = sj.P50ms, sj.P95ms, sj.QPS
		}
	}
	for _, c := range order {
		r.ByConcurrency = append(r.ByConcurrency, *by[c])
	}
	return r
}

func Round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
