package recallstack

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/bench/writebench"
	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/cpustat"
	"github.com/engramhq/engram/internal/loadgen"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// The history bench: one user's history grown through the real write path (batch
// Ingest into an in-process server and worker, bench/writebench), recall measured
// at each size for that user and for a light user beside it in the same tenant.
// The database (HistoryDatabase) keeps what was loaded: a later run grows the
// history from where the last one stopped, and the events' idempotency keys are
// their place in the history, so a run cut short is resumed without writing twice.

// HistoryDatabase is the history bench's own database, next to ENGRAM_DATABASE_URL's.
const HistoryDatabase = "engram_bench_history"

const (
	historyTenant = "bench-history"
	heavyUser     = "heavy"
	lightUser     = "light"
)

// HistoryConfig is what the history bench measures.
type HistoryConfig struct {
	Sizes       []int // the heavy user's turns at each measurement, ascending
	Concurrency []int // callers of recall at each size
	Queries     int   // recalls per measurement
	LightTurns  int   // the light user's turns
	BatchSize   int   // events per batch Ingest call
	// IngestCallers send the heavy user's batches at once (default 1).
	IngestCallers int
	DatabaseURL   string
	Reload        bool // drop the loaded history first
	// Steps adds, at each size, the mean time of each step of a recall (one
	// caller, Response.Timings, and the statement split by retriever, "sql.*",
	// from EXPLAIN ANALYZE) for the heavy and the light user.
	Steps bool
	// EmbedCache is how many query embeddings the measured engine caches (0:
	// none, every query is embedded, as in the recall bench: the history's 300
	// questions repeat, and a cache would answer most of them).
	EmbedCache int
}

// HistoryPoint is one size's figures (--json).
type HistoryPoint struct {
	History     int     `json:"history"`
	Concurrency int     `json:"concurrency"`
	RecallP50   float64 `json:"recall_p50_ms"`
	RecallP95   float64 `json:"recall_p95_ms"`
	RecallP99   float64 `json:"recall_p99_ms"`
	RecallQPS   float64 `json:"recall_qps"`
	LightP50    float64 `json:"light_p50_ms"`
	LightP95    float64 `json:"light_p95_ms"`
	// The bare index queries over the heavy user's evidence at this size and
	// concurrency (the query's embedding included, as in recall): top 10 by
	// the HNSW index, and by the GIN full-text index.
	BareVecP50  float64 `json:"bare_vec_p50_ms"`
	BareVecP95  float64 `json:"bare_vec_p95_ms"`
	BareTextP50 float64 `json:"bare_text_p50_ms"`
	BareTextP95 float64 `json:"bare_text_p95_ms"`
	// CPU of one heavy user's recall, the engine's (this process: embedding,
	// fusion, the driver) and the database server's (when readable).
	GoCPUms    float64  `json:"go_cpu_ms_per_recall"`
	PGCPUms    *float64 `json:"pg_cpu_ms_per_recall,omitempty"`
	Errors     int      `json:"errors"`
	FirstError string   `json:"first_error,omitempty"`
}

// HistoryIngest is the growth to one size: turns written and their rate.
type HistoryIngest struct {
	History      int     `json:"history"`
	Turns        int     `json:"turns"`
	Seconds      float64 `json:"seconds"`
	TurnsPerS    float64 `json:"ingest_turns_per_s"`
	BatchP95Secs float64 `json:"batch_p95_s"`
	// MaxTaskSecs is the longest workflow task of the growth's batches (from
	// WorkflowTaskStarted to its WorkflowTaskCompleted in their histories).
	MaxTaskSecs float64 `json:"max_workflow_task_s"`
	Batches     int     `json:"batches"`
}

// HistoryReport is the history bench's result.
type HistoryReport struct {
	Points     []HistoryPoint  `json:"points"`
	Ingest     []HistoryIngest `json:"ingest"`
	LightTurns int             `json:"light_turns"`
	Embedder   string          `json:"embedder"`
	// EmbedCache is the measured engine's query-embedding cache (0: none).
	EmbedCache int    `json:"embed_cache"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// Steps are, with HistoryConfig.Steps, each size's mean step times (ms) of
	// the heavy and the light user's recalls at one caller.
	Steps []HistorySteps `json:"steps,omitempty"`
}

// HistorySteps is where the recalls at one size spend their time.
type HistorySteps struct {
	History int                `json:"history"`
	Heavy   map[string]float64 `json:"heavy_ms"`
	Light   map[string]float64 `json:"light_ms"`
}

// RunHistory grows the heavy user to each size and measures recall there.
func RunHistory(ctx context.Context, cfg HistoryConfig, msgs io.Writer) (*HistoryReport, error) {
	for i, s := range cfg.Sizes {
		if s <= 0 || (i > 0 && s <= cfg.Sizes[i-1]) {
			return nil, fmt.Errorf("--history: sizes must be positive and ascending, got %v", cfg.Sizes)
		}
		if s > MaxHistoryTurns {
			return nil, fmt.Errorf("--history: %d turns is more than the bench dates before today (at most %d)", s, MaxHistoryTurns)
		}
	}
	if cfg.Reload && cfg.DatabaseURL != "" {
		// The bench drops only a database it names itself (HistoryDatabase); a
		// --database-url it would keep, and grow from where it stands, unasked.
		return nil, fmt.Errorf("--reload: the bench drops only its own database %s; drop the one --database-url names yourself, or leave out --database-url", HistoryDatabase)
	}
	b, stop, err := writebench.Start(ctx, writebench.Options{Users: 1, Rounds: 1, Tenant: historyTenant,
		DatabaseURL: cfg.DatabaseURL, DatabaseName: HistoryDatabase, Keep: !cfg.Reload}, msgs)
	if err != nil {
		return nil, err
	}
	defer stop()
	a := b.App()
	keys, err := writeKeys(ctx, a.Store, "hist")
	if err != nil {
		return nil, err
	}
	rep := &HistoryReport{LightTurns: cfg.LightTurns, Embedder: a.Embedder.Name(), LoadBefore: cpustat.LoadAvg()}
	if _, err := grow(ctx, b.API(), a.Temporal, a.Store, keys, lightUser, cfg.LightTurns, cfg.BatchSize, 1, msgs); err != nil {
		return nil, err
	}
	bare, err := storage.Open(ctx, a.Config.DatabaseURL) // the bare queries' own pool, untouched by the engine's tuning
	if err != nil {
		return nil, err
	}
	defer bare.Close()
	eng, err := measuredEngine(a, cfg.EmbedCache)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	rep.EmbedCache = max(cfg.EmbedCache, 0)
	run := &recallbench.Runner{Store: a.Store, Composite: eng, Emb: a.Embedder, Bare: bare}
	for _, size := range cfg.Sizes {
		ing, err := grow(ctx, b.API(), a.Temporal, a.Store, keys, heavyUser, size, cfg.BatchSize, max(1, cfg.IngestCallers), msgs)
		if err != nil {
			return nil, err
		}
		if ing.Turns > 0 {
			rep.Ingest = append(rep.Ingest, ing)
			// Statistics of the grown tables, as autovacuum would have them.
			if err := a.Store.Analyze(ctx); err != nil {
				return nil, err
			}
		}
		heavyQ := historyQueries(heavyUser, cfg.Queries, uint64(size))
		lightQ := historyQueries(lightUser, cfg.Queries, uint64(size)+1)
		run.Measure(ctx, recallbench.KindRecallComposite, heavyQ[:min(20, len(heavyQ))], 1) // warm-up
		run.Measure(ctx, recallbench.KindRecallComposite, lightQ[:min(20, len(lightQ))], 1)
		for _, c := range cfg.Concurrency {
			fmt.Fprintf(msgs, "history %d: recall at %d caller(s) …\n", size, c)
			h := run.Measure(ctx, recallbench.KindRecallComposite, heavyQ, c)
			l := run.Measure(ctx, recallbench.KindRecallComposite, lightQ, c)
			bv := run.Measure(ctx, recallbench.KindBareEvidenceVec, heavyQ, c)
			bt := run.Measure(ctx, recallbench.KindBareEvidenceText, heavyQ, c)
			p := HistoryPoint{History: size, Concurrency: c, RecallP50: recallbench.Millis(h.P50), RecallP95: recallbench.Millis(h.P95), RecallP99: recallbench.Millis(h.P99),
				RecallQPS: recallbench.Round2(h.QPS), LightP50: recallbench.Millis(l.P50), LightP95: recallbench.Millis(l.P95),
				BareVecP50: recallbench.Millis(bv.P50), BareVecP95: recallbench.Millis(bv.P95), BareTextP50: recallbench.Millis(bt.P50), BareTextP95: recallbench.Millis(bt.P95),
				GoCPUms: recallbench.Millis(h.GoCPU), PGCPUms: h.PgCPUms(), Errors: h.Errors + l.Errors + bv.Errors + bt.Errors}
			if e := firstErr(h.FirstErr, l.FirstErr, bv.FirstErr, bt.FirstErr); e != nil {
				p.FirstError = e.Error()
			}
			rep.Points = append(rep.Points, p)
		}
		if cfg.Steps {
			fmt.Fprintf(msgs, "history %d: recall steps …\n", size)
			hs, err := run.Steps(ctx, eng, heavyQ, true)
			if err != nil {
				return nil, err
			}
			ls, err := run.Steps(ctx, eng, lightQ, true)
			if err != nil {
				return nil, err
			}
			rep.Steps = append(rep.Steps, HistorySteps{History: size, Heavy: recallbench.StepsJSON(hs), Light: recallbench.StepsJSON(ls)})
		}
	}
	rep.LoadAfter = cpustat.LoadAvg()
	return rep, nil
}

// writeKeys is the prefix of the idempotency keys of the turns written to st's
// database: prefix and the database's oid (new whenever the database is made
// again). A write's key is its Temporal workflow id, and the finished workflows of
// a dropped database's turns, still in the namespace, would answer COMMITTED for
// turns this one never stored.
func writeKeys(ctx context.Context, st *storage.Store, prefix string) (string, error) {
	var dbOID int64
	if err := st.DB().NewRaw("SELECT oid::int8 FROM pg_database WHERE datname = current_database()").Scan(ctx, &dbOID); err != nil {
		return "", fmt.Errorf("read the bench database's oid: %w", err)
	}
	return fmt.Sprintf("%s%d", prefix, dbOID), nil
}

// measuredEngine is the engine the history benches measure: the server's (its
// embedder, keyword index and stored schemas) but for its query cache (embedCache
// queries; 0: none, every query is embedded).
func measuredEngine(a *app.App, embedCache int) (*recall.Engine, error) {
	cache := -1
	if embedCache > 0 {
		cache = embedCache
	}
	return app.RecallEngine(a.Config, a.Store, a.Embedder, a.Log, recall.Options{QueryEmbeddingCache: cache, AccessLog: recall.AccessLogAsync})
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// PrintHistory writes the history bench's figures as tables.
func PrintHistory(out io.Writer, rep *HistoryReport) {
	cache := "none (every query embedded)"
	if rep.EmbedCache > 0 {
		cache = fmt.Sprintf("%d queries", rep.EmbedCache)
	}
	fmt.Fprintf(out, "\nembedder %s, query cache %s; light user %d turns; load average %s → %s\n\n", rep.Embedder, cache, rep.LightTurns, rep.LoadBefore, rep.LoadAfter)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "history (turns)\tcallers\trecall p50 ms\tp95 ms\tp99 ms\tQPS\tlight p50 ms\tlight p95 ms\tbare hnsw p50 ms\tp95 ms\tbare fts p50 ms\tp95 ms\tCPU/recall ms (engine+server)\terrors\t")
	for _, p := range rep.Points {
		cpu := fmt.Sprintf("%.2f+?", p.GoCPUms)
		if p.PGCPUms != nil {
			cpu = fmt.Sprintf("%.2f+%.2f", p.GoCPUms, *p.PGCPUms)
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%d\t\n", p.History, p.Concurrency, p.RecallP50, p.RecallP95, p.RecallP99, p.RecallQPS, p.LightP50, p.LightP95,
			p.BareVecP50, p.BareVecP95, p.BareTextP50, p.BareTextP95, cpu, p.Errors)
	}
	_ = tw.Flush()
	if len(rep.Ingest) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "grown to (turns)\tturns written\tseconds\tturns/s\tbatches\tbatch p95 s\tlongest workflow task s\t")
		for _, g := range rep.Ingest {
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.2f\t\n", g.History, g.Turns, g.Seconds, g.TurnsPerS, g.Batches, g.BatchP95Secs, g.MaxTaskSecs)
		}
		_ = tw.Flush()
	}
	for _, st := range rep.Steps {
		fmt.Fprintf(out, "\nrecall steps at %d turns (mean ms, 1 caller):\n", st.History)
		names := make([]string, 0, len(st.Heavy))
		for k := range st.Heavy {
			names = append(names, k)
		}
		slices.SortFunc(names, func(a, b string) int { return cmpFloat(st.Heavy[b], st.Heavy[a]) })
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\theavy\tlight\t")
		for _, k := range names {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", k, st.Heavy[k], st.Light[k])
		}
		_ = tw.Flush()
	}
	for _, p := range rep.Points {
		if p.FirstError != "" {
			fmt.Fprintf(out, "first error at %d turns, %d callers: %s\n", p.History, p.Concurrency, p.FirstError)
		}
	}
}

// grow writes user's turns until the user has size of them (turn i is always the
// same event, keyed by its place), batchSize a call, and measures the rate.
func grow(ctx context.Context, api *client.Client, tc tclient.Client, st *storage.Store, keys, user string, size, batchSize, callers int, msgs io.Writer) (HistoryIngest, error) {
	have, err := storedTurns(ctx, st, user)
	if err != nil {
		return HistoryIngest{}, err
	}
	ing := HistoryIngest{History: size}
	if have >= size {
		return ing, nil
	}
	// At most the last batch of each caller of a run cut short is partly stored:
	// those are sent again (their stored turns are retries).
	from := max(0, have-have%batchSize-(callers-1)*batchSize)
	fmt.Fprintf(msgs, "growing %s from %d to %d turns, %d caller(s) …\n", user, have, size, callers)
	n := (size - from + batchSize - 1) / batchSize
	var prog struct { // turns written, and those and the time of the last progress line
		sync.Mutex
		done, lastDone int
		last           time.Time
	}
	prog.last = time.Now()
	runs := make([][2]string, n) // each batch's workflow id and run
	r := loadgen.Run(ctx, callers, n, func(ctx context.Context, b int) error {
		i := from + b*batchSize
		evs := make([]*engramv1.Event, 0, batchSize)
		for j := i; j < min(i+batchSize, size); j++ {
			evs = append(evs, historyTurn(keys, user, j))
		}
		res, err := api.IngestBatch(ctx, evs, client.WaitFor(5*time.Minute))
		if err != nil {
			return fmt.Errorf("ingest %s's turns %d-%d: %w", user, i, i+len(evs)-1, err)
		}
		if len(res.Results) > 0 {
			runs[b] = [2]string{res.Results[0].WorkflowId, res.Results[0].RunId}
		}
		for _, r := range res.Results {
			if r.Status != engramv1.WriteStatus_WRITE_STATUS_COMMITTED && r.Status != engramv1.WriteStatus_WRITE_STATUS_NO_MEMORY {
				return fmt.Errorf("ingest %s's turn %s ended %s: %s", user, r.IdempotencyKey, r.Status, r.Reason)
			}
		}
		prog.Lock()
		defer prog.Unlock()
		now := time.Now()
		if prog.done += len(evs); (prog.done/batchSize)%20 == 0 || now.Sub(prog.last) >= 10*time.Second {
			rate := float64(prog.done-prog.lastDone) / now.Sub(prog.last).Seconds()
			prog.lastDone, prog.last = prog.done, now
			fmt.Fprintf(msgs, "  %s: %d turns written (%.1f turns/s since the last line)\n", user, from+prog.done, rate)
		}
		return nil
	})
	if err := r.FirstError(); err != nil {
		return ing, err
	}
	ing.Turns = size - from
	ing.Seconds = r.Wall.Seconds()
	ing.TurnsPerS = recallbench.Round2(float64(ing.Turns) / ing.Seconds)
	slices.Sort(r.Latency)
	ing.BatchP95Secs = recallbench.Round2(recallbench.Percentile(r.Latency, 95).Seconds())
	ing.Batches = n
	longest, err := longestTask(ctx, tc, runs)
	if err != nil {
		return ing, err
	}
	ing.MaxTaskSecs = recallbench.Round2(longest.Seconds())
	return ing, nil
}

// longestTask is the longest workflow task in the histories of runs.
func longestTask(ctx context.Context, tc tclient.Client, runs [][2]string) (time.Duration, error) {
	var longest time.Duration
	for _, r := range runs {
		if r[0] == "" {
			continue
		}
		it := tc.GetWorkflowHistory(ctx, r[0], r[1], false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var started time.Time
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return 0, fmt.Errorf("read the history of %s: %w", r[0], err)
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				started = e.GetEventTime().AsTime()
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				if !started.IsZero() {
					longest = max(longest, e.GetEventTime().AsTime().Sub(started))
				}
				started = time.Time{}
			}
		}
	}
	return longest, nil
}

// storedTurns is how many of user's turns are stored.
func storedTurns(ctx context.Context, st *storage.Store, user string) (int, error) {
	n, err := st.DB().NewSelect().Table("events").Where("tenant_id = ? AND user_id = ?", historyTenant, user).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count %s's turns: %w", user, err)
	}
	return int(n), nil
}

// What a long conversation with an assistant is about: the people, places and
// things of a life, in a few hundred words, so that words are shared by many
// turns (as in real history) and a question names a few of them.
var (
	histPeople     = []string{"Priya", "Marcus", "Elena", "Tom", "Aisha", "Kenji", "Sofia", "Daniel", "Mei", "Omar", "Hannah", "Lucas", "Grace", "Ravi", "Chloe", "Ivan", "Nora", "Felix", "Zara", "Leo"}
	histPlaces     = []string{"Muir Woods", "the farmers market", "Lisbon", "the climbing gym", "Golden Gate Park", "Kyoto", "the library", "Ocean Beach", "the office", "Tahoe", "Seattle", "the bakery on 5th", "Yosemite", "the museum", "Berlin", "the dentist", "the pool", "Napa", "the cinema", "Portland"}
	histActivities = []string{"hiking", "cooking dinner", "a pottery class", "running", "a board game night", "swimming", "a concert", "painting", "a wine tasting", "cycling", "yoga", "a book club", "camping", "a job interview", "kayaking", "baking bread", "a chess tournament", "gardening", "a photography walk", "volunteering"}
	histThings     = []string{"a new laptop", "running shoes", "a sourdough starter", "concert tickets", "a camera lens", "a bike helmet", "a cookbook", "a tent", "noise-cancelling headphones", "a yoga mat", "a birthday gift", "plane tickets", "a houseplant", "a guitar", "a rain jacket"}
	histFeelings   = []string{"great", "exhausting", "fun", "a bit stressful", "relaxing", "amazing", "disappointing", "wonderful", "tiring but worth it", "surprisingly good"}
	histWhen       = []string{"this morning", "yesterday", "last weekend", "on Saturday", "last night", "on Friday evening", "earlier today", "on Sunday afternoon"}
)

// historyStart and historySessionGap date the history: sessions of twenty turns six
// hours apart from 1990, so the largest history the bench grows (MaxHistoryTurns, 50,000
// sessions) ends in 2024, before any day the bench runs on (Ingest refuses a time more
// than a day ahead; sessions a day apart from 2015 reached it at turn 87,000).
var historyStart = time.Date(1990, 1, 1, 9, 0, 0, 0, time.UTC)

const (
	historySessionGap = 6 * time.Hour
	// MaxHistoryTurns is the largest --history size.
	MaxHistoryTurns = 1_000_000
)

// historyTurn is turn i of user's history, its idempotency key keys-user-i: sessions of twenty turns six hours apart,
// the user and the assistant taking turns, each user turn about people, places,
// activities and things, each reply asking after what was said.
func historyTurn(keys, user string, i int) *engramv1.Event {
	seed := uint64(i)
	if user != heavyUser {
		seed += 1 << 40
	}
	r := rand.New(rand.NewPCG(seed, 29))
	session := i / 20
	at := historyStart.Add(time.Duration(session)*historySessionGap + time.Duration(i%20)*90*time.Second)
	ev := &engramv1.Event{
		IdempotencyKey: fmt.Sprintf("%s-%s-%d", keys, user, i), UserId: user, SessionId: fmt.Sprintf("%s-s%d", user, session),
		EventType: engramv1.EventType_EVENT_TYPE_MESSAGE, OccurredAt: timestamppb.New(at), Schema: "general",
	}
	if i%2 == 1 {
		// The reply asks after the user's turn before it (drawn from its seed).
		pr := rand.New(rand.NewPCG(seed-1, 29))
		act, place := recallbench.Pick(pr, histActivities), recallbench.Pick(pr, histPlaces)
		ev.ActorType, ev.ActorId = engramv1.ActorType_ACTOR_TYPE_AGENT, "assistant"
		ev.Content = recallbench.Pick(r, []string{
			fmt.Sprintf("That sounds %s! How did %s at %s go?", recallbench.Pick(r, histFeelings), act, place),
			fmt.Sprintf("I'll remember that you enjoy %s. Would you like me to find more things to do near %s?", act, place),
			fmt.Sprintf("Noted. Do you want a reminder before your next trip to %s?", place),
			fmt.Sprintf("Got it. Should I add %s with %s to your calendar?", act, recallbench.Pick(r, histPeople)),
		})
		return ev
	}
	ev.ActorType, ev.ActorId = engramv1.ActorType_ACTOR_TYPE_USER, user
	act, place := recallbench.Pick(r, histActivities), recallbench.Pick(r, histPlaces) // the reply's subject: drawn first
	p1, p2 := recallbench.Pick(r, histPeople), recallbench.Pick(r, histPeople)
	ev.Content = recallbench.Pick(r, []string{
		fmt.Sprintf("I went %s at %s with %s %s, it was %s.", act, place, p1, recallbench.Pick(r, histWhen), recallbench.Pick(r, histFeelings)),
		fmt.Sprintf("%s and I are planning %s at %s next month.", p1, act, place),
		fmt.Sprintf("I bought %s for %s because %s wants to try it too.", recallbench.Pick(r, histThings), act, p2),
		fmt.Sprintf("%s told me about a place near %s that is good for %s.", p1, place, act),
		fmt.Sprintf("Remind me that %s's birthday is coming up, maybe %s at %s?", p1, act, place),
		fmt.Sprintf("I skipped %s %s because I was tired; %s went to %s instead.", act, recallbench.Pick(r, histWhen), p2, place),
	})
	return ev
}

// historyQueries are n questions of user about its history.
func historyQueries(user string, n int, seed uint64) []recall.Request {
	r := rand.New(rand.NewPCG(seed, 31))
	out := make([]recall.Request, 0, n)
	for range n {
		act, place, p := recallbench.Pick(r, histActivities), recallbench.Pick(r, histPlaces), recallbench.Pick(r, histPeople)
		q := recallbench.Pick(r, []string{
			fmt.Sprintf("When did I go %s at %s?", act, place),
			fmt.Sprintf("What did %s tell me about %s?", p, place),
			fmt.Sprintf("What am I planning with %s?", p),
			fmt.Sprintf("What did I buy for %s?", act),
			fmt.Sprintf("How was %s with %s?", act, p),
			fmt.Sprintf("Where did I go %s?", recallbench.Pick(r, histWhen)),
		})
		out = append(out, recall.Request{
			Principal: recall.Principal{TenantID: historyTenant, ID: "bench", UserID: user},
			Query:     q, K: 10, Purpose: "bench",
		})
	}
	return out
}
