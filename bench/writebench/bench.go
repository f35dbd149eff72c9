// Package writebench measures the write path end to end, as an agent calls it:
// an in-process API server and worker (app.Build) against a database of its own,
// Ingest with and without wait, a batch import, and beside each the bare Temporal
// floor. engram bench write is its flag wiring; the history bench
// (bench/recallstack) grows a user's history through it.
package writebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/client"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/cpustat"
	"github.com/engramhq/engram/internal/loadgen"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/storage"
)

// DefaultDatabase is the database the bench creates afresh for each run, next to
// ENGRAM_DATABASE_URL's.
const DefaultDatabase = "engram_bench_write"

// Options say where the bench runs and whose writes it makes.
type Options struct {
	Users        int    // users the writes are spread over
	Rounds       int    // interleaved rounds of each Ingest+wait level and its bare row
	Tenant       string // the tenant written to (default: a new bench-xxxxxxxx)
	DatabaseURL  string // database to use; empty: DatabaseName next to ENGRAM_DATABASE_URL's
	DatabaseName string // default DefaultDatabase
	Keep         bool   // keep the database's content instead of dropping it first
}

// RunOptions say what Run measures.
type RunOptions struct {
	Concurrency []int // callers of Ingest with wait, one level each
	Writes      int   // writes per level (raised to 8 per caller per round)
	Acks        int   // Ingest calls without wait (0: skip)
	BatchTurns  int   // turns of the batch import (0: skip)
	BatchSize   int   // events per batch call
}

// API is the client of the bench's server, with the bench tenant's agent key.
func (b *Bench) API() *client.Client { return b.api }

// App is the bench's in-process engine.
func (b *Bench) App() *app.App { return b.app }

// Tenant is the tenant the bench writes to.
func (b *Bench) Tenant() string { return b.tenant }

type Bench struct {
	users  int
	rounds int // interleaved rounds of each Ingest+wait level and its bare row
	tenant string
	apiKey string
	seq    atomic.Int64
	api    *client.Client
	app    *app.App
	steps  *stepTimer
	emb    *timedEmbedder
}

// start creates the database, builds the app with its worker and serves the API on a
// free port.
func Start(ctx context.Context, o Options, msgs io.Writer) (*Bench, func(), error) {
	b := &Bench{users: o.Users, rounds: o.Rounds, tenant: o.Tenant}
	if b.tenant == "" {
		b.tenant = "bench-" + uuid.NewString()[:8]
	}
	stop, err := b.start(ctx, o.DatabaseURL, o.DatabaseName, o.Keep, msgs)
	if err != nil {
		return nil, nil, err
	}
	return b, stop, nil
}

func (b *Bench) start(ctx context.Context, dbURL, dbName string, keep bool, msgs io.Writer) (func(), error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return nil, err
	}
	if dbName == "" {
		dbName = DefaultDatabase
	}
	if dbURL == "" {
		if cfg.DatabaseURL == "" {
			return nil, fmt.Errorf("set ENGRAM_DATABASE_URL (the bench uses database %s on that server) or --database-url", dbName)
		}
		if dbURL, err = storage.SiblingDatabase(cfg.DatabaseURL, dbName); err != nil {
			return nil, fmt.Errorf("ENGRAM_DATABASE_URL: %w", err)
		}
		if !keep {
			if err := storage.DropDatabase(ctx, cfg.DatabaseURL, dbName); err != nil {
				return nil, err
			}
		}
		if err := storage.CreateDatabase(ctx, cfg.DatabaseURL, dbName, true); err != nil {
			return nil, err
		}
	}
	cfg.DatabaseURL = dbURL
	cfg.TaskQueue = "bench-write-" + uuid.NewString()[:8]
	st, err := storage.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	_, err = st.Migrate(ctx)
	if err == nil {
		b.apiKey, err = st.CreateAPIKey(ctx, &storage.APIKey{TenantID: b.tenant, Principal: "bench", Roles: []string{storage.RoleAgent}})
	}
	st.Close()
	if err != nil {
		return nil, err
	}
	em, err := app.Embedder(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	b.emb = &timedEmbedder{Embedder: em}
	b.steps = &stepTimer{}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.Build(ctx, cfg, log, app.Options{API: true, Worker: true, Embedder: b.emb, WorkerInterceptors: []interceptor.WorkerInterceptor{b.steps}})
	if err != nil {
		return nil, err
	}
	b.app = a
	h, err := a.HTTPHandler()
	if err != nil {
		a.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(sctx, "127.0.0.1:0", h, 5*time.Second, func(at net.Addr) { addrs <- at.String() })
	}()
	stop := func() {
		cancel()
		<-done
		a.Close()
	}
	select {
	case at := <-addrs:
		b.api = client.New("http://"+at, b.apiKey, client.WithRetry(1, 0))
	case err := <-done:
		cancel()
		a.Close()
		return nil, fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(msgs, "bench write: tenant %s, task queue %s, temporal %s, extractor %s, embedder %s\n",
		b.tenant, cfg.TaskQueue, cfg.TemporalAddress, extractorName(cfg), em.Name())
	return stop, nil
}

func extractorName(cfg config.Config) string {
	if cfg.LLMBaseURL != "" {
		return "llm " + cfg.LLMModel
	}
	return "rule"
}

// writeStats are the figures of one measurement.
type writeStats struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	PerSecond   float64 `json:"per_s"`
	Seconds     float64 `json:"seconds"`
	FirstError  string  `json:"first_error,omitempty"`
	// CPU per call, in ms: this process's (API, worker, embedder) and that of the
	// machine's temporal and postgres processes (absent when /proc is unreadable).
	CPU *callCPU `json:"cpu_ms_per_call,omitempty"`
}

type callCPU struct {
	Engine   float64 `json:"engine"`
	Temporal float64 `json:"temporal"`
	Postgres float64 `json:"postgres"`
}

// cpuReading is the CPU so far of this process and of the servers it calls.
type cpuReading struct {
	self    time.Duration
	servers map[int]cpustat.Process
	ok      bool
}

func readCPU() cpuReading {
	servers, ok := cpustat.ByCommand("temporal", "postgres")
	return cpuReading{self: cpustat.Self(), servers: servers, ok: ok}
}

// perCall is the CPU each of n calls burnt since r, or nil when it cannot be read.
func (r cpuReading) perCall(n int) *callCPU {
	var u cpuUse
	u.add(r, readCPU())
	return u.perCall(n)
}

// cpuUse adds up the CPU of measured stretches.
type cpuUse struct {
	self, temporal, postgres time.Duration
	bad                      bool
}

func (u *cpuUse) add(from, to cpuReading) {
	if !from.ok || !to.ok {
		u.bad = true
		return
	}
	servers := cpustat.Since(from.servers, to.servers)
	u.self += to.self - from.self
	u.temporal += servers["temporal"]
	u.postgres += servers["postgres"]
}

func (u cpuUse) perCall(n int) *callCPU {
	if u.bad || n == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	return &callCPU{Engine: ms(u.self), Temporal: ms(u.temporal), Postgres: ms(u.postgres)}
}

func newWriteStats(name string, conc int, lat []time.Duration, errs int, firstErr string, wall time.Duration, done int) writeStats {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	return writeStats{Name: name, Concurrency: conc, Calls: len(lat) + errs, Errors: errs, P50: pct(0.50), P95: pct(0.95), P99: pct(0.99),
		PerSecond: float64(done) / wall.Seconds(), Seconds: wall.Seconds(), FirstError: firstErr}
}

// benchUserTurns are what the bench's users say: facts the rule extractor finds
// (none needs a review) and small talk that leaves no memory.
var benchUserTurns = []struct {
	schema string
	text   func(i int) string
}{
	{"travel", func(i int) string { return fmt.Sprintf("预算不超过%d元", 5000+(i%40)*100) }},
	{"travel", func(int) string { return "我以后尽量都坐直飞" }},
	{"customer_service", func(i int) string { return fmt.Sprintf("我的订单%d没收到", 10000+i) }},
	{"general", func(int) string { return "今天天气不错，我们聊聊别的吧" }},
	{"travel", func(int) string { return "I prefer an aisle seat" }},
	{"general", func(i int) string { return fmt.Sprintf("thanks, that helps (%d)", i) }},
	{"travel", func(int) string { return "I don't want layovers" }},
}

// event is turn n of the bench's conversation: users take turns, every other turn
// is the agent's reply; at, when set, is its time.
func (b *Bench) event(n int, at time.Time) *engramv1.Event {
	user := fmt.Sprintf("u%03d", n/2%b.users)
	k := n / 2 / b.users // the user's turn number
	ev := &engramv1.Event{
		IdempotencyKey: fmt.Sprintf("bw-%s-%d", b.tenant, b.seq.Add(1)), UserId: user,
		SessionId: fmt.Sprintf("s-%s-%d", user, k/20), EventType: engramv1.EventType_EVENT_TYPE_MESSAGE,
	}
	if n%2 == 1 {
		ev.ActorType, ev.Schema, ev.Content = engramv1.ActorType_ACTOR_TYPE_AGENT, "general", fmt.Sprintf("好的，我记下了（%d）。", k)
	} else {
		t := benchUserTurns[k%len(benchUserTurns)]
		ev.ActorType, ev.Schema, ev.Content = engramv1.ActorType_ACTOR_TYPE_USER, t.schema, t.text(k)
	}
	if !at.IsZero() {
		ev.OccurredAt = timestamppb.New(at)
	}
	return ev
}

// okStatus is whether a waited write finished as a write of these turns should.
func okStatus(s engramv1.WriteStatus) bool {
	return s == engramv1.WriteStatus_WRITE_STATUS_COMMITTED || s == engramv1.WriteStatus_WRITE_STATUS_NO_MEMORY
}

// calls runs n calls of one at conc at once and measures them: the latencies of
// the calls that succeeded, the errors, and the CPU they all burnt.
func calls(ctx context.Context, name string, conc, n int, one func(ctx context.Context, i int) error) writeStats {
	var p pooled
	p.measure(ctx, conc, n, one)
	return p.stats(name, conc)
}

// minPerCaller is how many calls each caller makes in a round at least: a round
// starts with every caller's first call at once and ends with fewer and fewer
// callers busy, so in a round of 50 calls by 32 callers (the old default at 32)
// much of the time was spent below 32 in flight, and the rate measured was that
// of the ramps more than that of 32 callers.
const minPerCaller = 8

// LevelWrites is the number of writes measured at c callers: writes, or enough
// that each of the rounds gives every caller minPerCaller calls.
func LevelWrites(writes, c, rounds int) int {
	if writes == 0 {
		return 0
	}
	return max(writes, max(1, rounds)*c*minPerCaller)
}

// interleaved measures a and its comparator b (a write and the bare-Temporal
// floor under it) in rounds that alternate between them, n calls of each in all,
// and pools each one's rounds. On a machine whose speed drifts during a run (a
// shared one, or a Temporal dev server slowing as its database grows) both are
// measured across the same stretch of time.
func interleaved(ctx context.Context, conc, n, rounds int, nameA string, a func(context.Context, int) error, nameB string, b func(context.Context, int) error) (writeStats, writeStats) {
	rounds = max(1, min(rounds, n))
	var pa, pb pooled
	for r := range rounds {
		k := n / rounds
		if r < n%rounds {
			k++
		}
		pa.measure(ctx, conc, k, a)
		pb.measure(ctx, conc, k, b)
	}
	return pa.stats(nameA, conc), pb.stats(nameB, conc)
}

// pooled gathers the calls of one or more measured stretches.
type pooled struct {
	lat      []time.Duration
	calls    int
	errs     int
	firstErr string
	wall     time.Duration
	cpu      cpuUse
}

func (p *pooled) measure(ctx context.Context, conc, n int, one func(context.Context, int) error) {
	cpu0 := readCPU()
	r := loadgen.Run(ctx, conc, n, one)
	p.cpu.add(cpu0, readCPU())
	p.wall += r.Wall
	p.calls += n
	for i, err := range r.Err {
		if err != nil {
			p.errs++
		} else {
			p.lat = append(p.lat, r.Latency[i])
		}
	}
	if err := r.FirstError(); err != nil && p.firstErr == "" {
		p.firstErr = err.Error()
	}
}

func (p *pooled) stats(name string, conc int) writeStats {
	s := newWriteStats(name, conc, p.lat, p.errs, p.firstErr, p.wall, len(p.lat))
	s.CPU = p.cpu.perCall(p.calls)
	return s
}

// Report is the figures of a run, what --json prints.
type Report struct {
	table  []writeStats
	Waited []waitedJSON `json:"write"`
	// BareTemporal is the same Update-with-Start on an empty workflow, per
	// concurrency: the Temporal server's floor under each write figure.
	BareTemporal   []waitedJSON       `json:"bare_temporal_write"`
	BareAck        *writeStats        `json:"bare_temporal_ack,omitempty"`
	BareAckP50     float64            `json:"bare_temporal_ack_p50_ms,omitempty"`
	Ack            *writeStats        `json:"ack,omitempty"`
	AckP50         float64            `json:"ack_p50_ms,omitempty"`
	AckDrained     string             `json:"ack_drained,omitempty"`
	Batch          *writeStats        `json:"batch,omitempty"`
	BatchTurnsPerS float64            `json:"batch_turns_per_s,omitempty"`
	Steps          map[string]float64 `json:"single_caller_steps_ms,omitempty"`
	Histories      *historyCounts     `json:"single_caller_history,omitempty"`
	Rounds         int                `json:"rounds"`
	LoadBefore     string             `json:"load_before"`
	LoadAfter      string             `json:"load_after"`
	// StealPercent: the machine's CPU the hypervisor gave to other guests during
	// the run (cpustat.StealPercent).
	StealPercent float64 `json:"host_steal_percent"`
	// TemporalWorkflows is how many workflow executions the Temporal server held
	// (in the namespace) when the run began: a dev server's SQLite costs more per
	// workflow as it fills, so figures of a fresh server and a full one differ.
	TemporalWorkflows int64 `json:"temporal_workflows_before"`
}

type waitedJSON struct {
	Concurrency int      `json:"concurrency"`
	P50         float64  `json:"write_p50_ms"`
	P95         float64  `json:"write_p95_ms"`
	P99         float64  `json:"write_p99_ms"`
	PerSecond   float64  `json:"writes_per_s"`
	Errors      int      `json:"errors"`
	Calls       int      `json:"calls"`
	CPU         *callCPU `json:"cpu_ms_per_write,omitempty"`
}

// Run measures what o asks for (see the command's help) and returns the figures;
// progress goes to msgs.
func (b *Bench) Run(ctx context.Context, msgs io.Writer, o RunOptions) (*Report, error) {
	concs, writes, acks, batchTurns, batchSize := o.Concurrency, o.Writes, o.Acks, o.BatchTurns, o.BatchSize
	rep := &Report{LoadBefore: cpustat.LoadAvg(), Rounds: b.rounds, TemporalWorkflows: -1}
	if n, err := b.app.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: b.app.Config.TemporalNamespace}); err == nil {
		rep.TemporalWorkflows = n.GetCount()
	}
	machine0, _ := cpustat.ReadMachine()
	var table []writeStats
	turn := atomic.Int64{}
	var sample []*engramv1.IngestResult
	var sampleMu sync.Mutex
	waited := func(ctx context.Context, _ int) error {
		res, err := b.api.Ingest(ctx, b.event(int(turn.Add(1))-1, time.Time{}), client.Wait())
		if err != nil {
			return err
		}
		if !okStatus(res.Status) {
			return fmt.Errorf("write %s ended %s: %s", res.IdempotencyKey, res.Status, res.Reason)
		}
		sampleMu.Lock()
		if len(sample) < 5 {
			sample = append(sample, res)
		}
		sampleMu.Unlock()
		return nil
	}
	bare, err := startBareTemporal(b.app.Temporal)
	if err != nil {
		return nil, err
	}
	defer bare.stop()
	// Unmeasured writes first, at the highest concurrency: the model, the caches and
	// the connection pools warm up (a Postgres backend opened during a measurement
	// would leave its CPU out of the figures).
	warm := slices.Max(append([]int{2}, concs...))
	_ = calls(ctx, "warm-up", warm, 2*warm, waited)
	_ = calls(ctx, "warm-up", warm, 2*warm, bare.waited)
	// Statistics of the warmed-up tables: the statements are planned again with them,
	// as in a database autovacuum has analyzed (storage.Store.Analyze).
	if err := b.app.Store.Analyze(ctx); err != nil {
		return nil, fmt.Errorf("analyze the bench database: %w", err)
	}
	sample = nil
	for _, c := range concs {
		if writes == 0 {
			break
		}
		b.steps.reset()
		b.emb.reset()
		n := LevelWrites(writes, c, b.rounds)
		fmt.Fprintf(msgs, "ingest with wait, %d caller(s), %d writes …\n", c, n)
		s, bs := interleaved(ctx, c, n, b.rounds, "ingest+wait", waited, "bare temporal", bare.waited)
		table = append(table, s)
		rep.Waited = append(rep.Waited, waitedJSON{Concurrency: c, P50: s.P50, P95: s.P95, P99: s.P99, PerSecond: s.PerSecond, Errors: s.Errors, Calls: s.Calls, CPU: s.CPU})
		if c == 1 && s.Calls > s.Errors {
			rep.Steps = b.steps.perWrite(s.Calls-s.Errors, s.P50, b.emb)
			h, err := b.histories(ctx, sample)
			if err != nil {
				fmt.Fprintf(msgs, "reading histories: %v\n", err)
			}
			rep.Histories = h
		}
		table = append(table, bs)
		rep.BareTemporal = append(rep.BareTemporal, waitedJSON{Concurrency: c, P50: bs.P50, P95: bs.P95, P99: bs.P99, PerSecond: bs.PerSecond, Errors: bs.Errors, Calls: bs.Calls, CPU: bs.CPU})
	}
	if batchTurns > 0 {
		fmt.Fprintf(msgs, "batch import of %d turns, %d per call …\n", batchTurns, batchSize)
		base := time.Now().Add(-time.Duration(batchTurns+1) * time.Second).UTC().Truncate(time.Second)
		n := (batchTurns + batchSize - 1) / batchSize
		first := int(turn.Add(int64(batchTurns))) - batchTurns
		var turns atomic.Int64
		s := calls(ctx, "batch", 1, n, func(ctx context.Context, i int) error {
			var evs []*engramv1.Event
			for j := i * batchSize; j < (i+1)*batchSize && j < batchTurns; j++ {
				evs = append(evs, b.event(first+j, base.Add(time.Duration(j)*time.Second)))
			}
			res, err := b.api.IngestBatch(ctx, evs, client.WaitFor(5*time.Minute))
			if err != nil {
				return err
			}
			for _, r := range res.Results {
				if !okStatus(r.Status) {
					return fmt.Errorf("batch event %s ended %s: %s", r.IdempotencyKey, r.Status, r.Reason)
				}
			}
			turns.Add(int64(len(evs)))
			return nil
		})
		rep.BatchTurnsPerS = float64(turns.Load()) / s.Seconds
		s.PerSecond = rep.BatchTurnsPerS
		rep.Batch = &s
		table = append(table, s)
	}
	if acks > 0 {
		fmt.Fprintf(msgs, "ingest without wait, 1 caller, %d writes …\n", acks)
		s := calls(ctx, "ingest (ack)", 1, acks, func(ctx context.Context, _ int) error {
			_, err := b.api.Ingest(ctx, b.event(int(turn.Add(1))-1, time.Time{}))
			return err
		})
		rep.Ack, rep.AckP50 = &s, s.P50
		table = append(table, s)
		rep.AckDrained = b.drain(ctx, 3*time.Minute)
		// A variable of its own: rep.Ack points at s.
		bs := calls(ctx, "bare temporal (ack)", 1, acks, bare.started)
		rep.BareAck, rep.BareAckP50 = &bs, bs.P50
		table = append(table, bs)
	}
	rep.LoadAfter = cpustat.LoadAvg()
	machine1, _ := cpustat.ReadMachine()
	rep.StealPercent = math.Round(cpustat.StealPercent(machine0, machine1)*10) / 10
	rep.table = table
	return rep, nil
}

// Print writes the report as tables for people.
func Print(out io.Writer, rep *Report) {
	table := rep.table
	fmt.Fprintf(out, "\nload average %s → %s; host steal %.1f%% of the machine's CPU; the Temporal server held %s workflows at the start\n\n",
		rep.LoadBefore, rep.LoadAfter, rep.StealPercent, countOrUnknown(rep.TemporalWorkflows))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tcallers\tcalls\terrors\tp50 ms\tp95 ms\tp99 ms\tper s\tCPU ms/call (engram+temporal+postgres)\t")
	for _, s := range table {
		unit := "writes"
		if s.Name == "batch" {
			unit = "turns"
		}
		cpu := "?"
		if c := s.CPU; c != nil {
			cpu = fmt.Sprintf("%.1f+%.1f+%.1f", c.Engine, c.Temporal, c.Postgres)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f %s\t%s\t\n", s.Name, s.Concurrency, s.Calls, s.Errors, s.P50, s.P95, s.P99, s.PerSecond, unit, cpu)
	}
	_ = tw.Flush()
	for _, s := range table {
		if s.FirstError != "" {
			fmt.Fprintf(out, "first error of %s at %d: %s\n", s.Name, s.Concurrency, s.FirstError)
		}
	}
	if rep.AckDrained != "" {
		fmt.Fprintf(out, "after the acknowledged writes: %s\n", rep.AckDrained)
	}
	if rep.Steps != nil {
		fmt.Fprintf(out, "\nwhere a single caller's write spends its time (mean ms per write; steps may overlap):\n")
		keys := make([]string, 0, len(rep.Steps))
		for k := range rep.Steps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%.2f\t\n", k, rep.Steps[k])
		}
		_ = tw.Flush()
	}
	if h := rep.Histories; h != nil {
		fmt.Fprintf(out, "\nhistory of a single caller's write (mean of %d): %.1f workflow tasks, %.1f activities, %.1f local activities, %.1f events, %.1f ms start to close\n",
			h.Writes, h.WorkflowTasks, h.Activities, h.LocalActivities, h.Events, h.Millis)
	}
}

// drain waits until none of the tenant's events is PROCESSING or RECEIVED, and says
// how long that took.
func (b *Bench) drain(ctx context.Context, limit time.Duration) string {
	start := time.Now()
	for {
		counts, err := b.app.Store.EventStatusCounts(ctx, b.tenant)
		if err != nil {
			return err.Error()
		}
		left := counts["PROCESSING"] + counts["RECEIVED"]
		if left == 0 {
			return fmt.Sprintf("every write finished %s after the last acknowledgement (%v)", time.Since(start).Round(time.Millisecond), counts)
		}
		if time.Since(start) > limit {
			return fmt.Sprintf("%d writes still running after %s (%v)", left, limit, counts)
		}
		select {
		case <-ctx.Done():
			return ctx.Err().Error()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// historyCounts are the mean counts of a few writes' histories.
type historyCounts struct {
	Writes          int     `json:"writes"`
	WorkflowTasks   float64 `json:"workflow_tasks"`
	Activities      float64 `json:"activities"`
	LocalActivities float64 `json:"local_activities"`
	Events          float64 `json:"events"`
	Millis          float64 `json:"start_to_close_ms"`
}

func (b *Bench) histories(ctx context.Context, results []*engramv1.IngestResult) (*historyCounts, error) {
	h := &historyCounts{}
	for _, r := range results {
		it := b.app.Temporal.GetWorkflowHistory(ctx, r.WorkflowId, r.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var first, last time.Time
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return nil, err
			}
			if first.IsZero() {
				first = e.GetEventTime().AsTime()
			}
			last = e.GetEventTime().AsTime()
			h.Events++
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				h.WorkflowTasks++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				h.Activities++
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				h.LocalActivities++
			}
		}
		h.Millis += float64(last.Sub(first).Microseconds()) / 1000
		h.Writes++
	}
	if h.Writes == 0 {
		return nil, errors.New("no write to read")
	}
	n := float64(h.Writes)
	h.WorkflowTasks, h.Activities, h.LocalActivities, h.Events, h.Millis = h.WorkflowTasks/n, h.Activities/n, h.LocalActivities/n, h.Events/n, h.Millis/n
	return h, nil
}

// stepTimer is a worker interceptor that adds up the time spent inside each
// activity (local or not), by activity name.
type stepTimer struct {
	interceptor.WorkerInterceptorBase
	mu sync.Mutex
	d  map[string]time.Duration
}

func (s *stepTimer) reset() {
	s.mu.Lock()
	s.d = map[string]time.Duration{}
	s.mu.Unlock()
}

func (s *stepTimer) add(name string, d time.Duration) {
	s.mu.Lock()
	if s.d == nil {
		s.d = map[string]time.Duration{}
	}
	s.d[name] += d
	s.mu.Unlock()
}

// perWrite is the mean time per write of each step and of the embedder, and the
// rest of the median write (the API, Temporal's round trips, scheduling).
func (s *stepTimer) perWrite(n int, p50 float64, emb *timedEmbedder) map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	var sum float64
	for k, d := range s.d {
		v := float64(d.Microseconds()) / 1000 / float64(n)
		out["step "+k] = v
		sum += v
	}
	out["embedder (inside the steps)"] = float64(emb.total().Microseconds()) / 1000 / float64(n)
	out["all steps"] = sum
	out["rest of the p50 write (API, Temporal round trips, scheduling)"] = p50 - sum
	return out
}

func (s *stepTimer) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &stepTimerActivity{root: s}
	i.Next = next
	return i
}

type stepTimerActivity struct {
	interceptor.ActivityInboundInterceptorBase
	root *stepTimer
}

func (a *stepTimerActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	res, err := a.Next.ExecuteActivity(ctx, in)
	a.root.add(activity.GetInfo(ctx).ActivityType.Name, time.Since(start))
	return res, err
}

// timedEmbedder adds up the time spent embedding.
type timedEmbedder struct {
	embedding.Embedder
	ns atomic.Int64
}

func (t *timedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	defer func() { t.ns.Add(int64(time.Since(start))) }()
	return t.Embedder.Embed(ctx, texts)
}

func (t *timedEmbedder) reset()               { t.ns.Store(0) }
func (t *timedEmbedder) total() time.Duration { return time.Duration(t.ns.Load()) }

// countOrUnknown prints n, or "an unknown number of" when it is negative.
func countOrUnknown(n int64) string {
	if n < 0 {
		return "an unknown number of"
	}
	return strconv.FormatInt(n, 10)
}
