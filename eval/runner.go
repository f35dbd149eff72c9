package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// Extractor modes.
const (
	ModeRules = "rules"
	ModeGold  = "gold"
	ModeLLM   = "llm"
)

// Recaller is what the runner asks: recall.Engine satisfies it.
type Recaller interface {
	Recall(ctx context.Context, req recall.Request) (recall.Response, error)
}

// RecallerFactory builds the recaller over the run's store and embedder.
type RecallerFactory func(st *storage.Store, em embedding.Embedder) (Recaller, error)

// LLMConfig is the endpoint of llm mode and of the optional judge.
type LLMConfig struct {
	BaseURL string
	APIKey  string
	Model   string
	Timeout time.Duration
}

// Options configure a run.
type Options struct {
	Mode string
	// K is the cut-off of precision@k, the leak and stale checks and the recall
	// request (default 10). recall@1/5/10 are always reported.
	K         int
	Store     *storage.Store
	Temporal  client.Client
	TaskQueue string
	Embedder  embedding.Embedder
	// Gov is the governance the worker applies (default governance.DefaultConfig()).
	Gov *governance.Config
	// Serve is the configuration `engram serve` would run with (config.FromEnv in
	// the CLI). The run's worker and recall engine are built from it by app, as
	// serve builds its own, with the run's task queue and governance; a zero value
	// is the defaults.
	Serve config.Config
	// NewRecaller builds the recaller (default: the recall engine).
	NewRecaller RecallerFactory
	// LLM is the endpoint for llm mode.
	LLM LLMConfig
	// Parallel scenarios ingested at once (default 8).
	Parallel int
	// ReviewTimeout: how long a candidate that needs confirmation waits for a
	// reviewer before the schema's default applies (default 1s: nobody reviews in an
	// eval, so unconfirmed inferences meet their default).
	ReviewTimeout time.Duration
	// Retrievers, when set, restricts every recall to these retrievers (see
	// recall.Request.Retrievers); empty runs them all (hybrid).
	Retrievers []string
	// Progress receives the progress bar (nil: none).
	Progress io.Writer
	// Judge, when set, answers each probe that has a reference answer (except
	// LoCoMo category 5) from the recalled memories and grades the answer.
	Judge *Judge
	// RunID makes idempotency keys unique on a shared Temporal server (default random).
	RunID string
	// NoBaseline skips asking the baseline beside the recaller (see Run).
	NoBaseline bool
	// Reuse asks the probes of a database an earlier run with this RunID ingested
	// into (--keep-db, then --reuse-db): nothing is written, the turns' evidence is
	// looked up by idempotency key. For trying recall changes without ingesting again.
	Reuse bool
	// Mismatch, when set, is told every judged turn whose extracted candidates differ
	// from its gold (for looking at what the extractor got wrong).
	Mismatch func(suite, turn, text string, want, got []string)
}

// TurnResult is what the write path did with one turn.
type TurnResult struct {
	Suite, Scenario, Turn string
	TenantID              string
	Status                string
	EventID, EvidenceID   string
	Latency               time.Duration
	Err                   string
	Gold                  bool
	GoldMatched           int
	GoldTotal             int
	Extracted             int
}

// ProbeResult is one probe's outcome.
type ProbeResult struct {
	Suite    string        `json:"suite"`
	Scenario string        `json:"scenario"`
	Probe    string        `json:"probe"`
	Category string        `json:"category"`
	Question string        `json:"question"`
	Latency  time.Duration `json:"latency_ns"`
	Err      string        `json:"error,omitempty"`
	Score    ProbeScore    `json:"score"`
	Top      []ItemSummary `json:"top,omitempty"`
	Misses   []string      `json:"misses,omitempty"`
	Wrong    []string      `json:"wrong,omitempty"`
	// Judged: the judge graded an answer; Correct is its verdict.
	Judged  bool   `json:"judged,omitempty"`
	Correct bool   `json:"correct,omitempty"`
	Answer  string `json:"answer,omitempty"`
}

// ItemSummary is a ranked item as reports show it.
type ItemSummary struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Content string `json:"content"`
	Scope   string `json:"scope,omitempty"`
	Status  string `json:"status,omitempty"`
	Flags   string `json:"flags,omitempty"`
	// Score and Why are the recaller's: how it ranked the item and why.
	Score float64 `json:"score,omitempty"`
	Why   string  `json:"why,omitempty"`
}

// Runner runs suites through the pipeline.
type Runner struct {
	opt      Options
	recaller Recaller
	ingestor *write.Ingestor
	turnRes  map[string]*TurnResult // by tenant-scoped turn key
	mu       sync.Mutex
}

var unsafeTenant = regexp.MustCompile(`[^A-Za-z0-9._:@-]+`)

// TenantID is the tenant a scenario's tenant runs in: each copy of each scenario
// has tenants of its own, so scenarios never see each other's memory.
func TenantID(suite string, sc Scenario, tenant string) string {
	s := fmt.Sprintf("%s.%s.%d.%s", suite, sc.Name, sc.Instance, tenant)
	return unsafeTenant.ReplaceAllString(s, "_")
}

// RunsIn reports whether the scenario runs in mode.
func (sc Scenario) RunsIn(mode string) bool {
	return len(sc.Modes) == 0 || slices.Contains(sc.Modes, mode)
}

type job struct {
	suite *Suite
	sc    *Scenario
}

// Run ingests every scenario, then asks every probe, and scores the run.
//
// Unless opt.NoBaseline is set (or the recaller is the baseline itself), the same
// probes are also asked of the baseline (plain BM25 over the raw turns) on the same
// ingested memory, and each suite's report carries the baseline's figures beside
// the engine's (SuiteReport.Baseline); Check fails a suite whose evidence recall@1
// or @10 is below the baseline's.
func Run(ctx context.Context, suites []*Suite, opt Options) (*Report, error) {
	variants := []Variant{{Retrievers: opt.Retrievers}}
	if !opt.NoBaseline {
		variants = append(variants, Variant{Name: "baseline", NewRecaller: NewBaseline})
	}
	reps, err := RunVariants(ctx, suites, opt, variants)
	if err != nil {
		return nil, err
	}
	if len(reps) > 1 {
		AttachBaseline(reps[0], reps[1])
	}
	return reps[0], nil
}

// AttachBaseline puts the baseline run's figures beside each suite's own.
func AttachBaseline(rep, base *Report) {
	for i := range rep.Suites {
		b := base.Suite(rep.Suites[i].Suite)
		if b == nil {
			continue
		}
		m := b.Overall
		rep.Suites[i].Baseline = &m
		rep.Suites[i].BaselineCategories = b.Categories
		rep.Suites[i].baselineProbes = b.Probes
	}
}

// Variant is one way of asking the probes: the retrievers recall runs, or another
// recaller altogether.
type Variant struct {
	Name       string
	Retrievers []string // empty: all (hybrid)
	// NewRecaller, when set, answers this variant's probes instead of the run's
	// recaller (the baseline beside the engine).
	NewRecaller RecallerFactory
}

// RunVariants ingests the suites once and asks every probe once per variant (same
// memory, different retrievers), returning one report per variant in order.
func RunVariants(ctx context.Context, suites []*Suite, opt Options, variants []Variant) ([]*Report, error) {
	if len(variants) == 0 {
		return nil, errors.New("eval: no variant to run")
	}
	if opt.K <= 0 {
		opt.K = 10
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 8
	}
	if opt.ReviewTimeout <= 0 {
		opt.ReviewTimeout = time.Second
	}
	if opt.Mode == "" {
		opt.Mode = ModeRules
	}
	if opt.RunID == "" {
		opt.RunID = randomID(10)
	}
	if opt.Store == nil || opt.Temporal == nil || opt.TaskQueue == "" {
		return nil, errors.New("eval: a store, a Temporal client and a task queue are required")
	}
	if opt.Embedder == nil {
		opt.Embedder = embedding.NewNGramEmbedder(storage.EmbeddingDim)
	}
	gov := governance.DefaultConfig()
	if opt.Gov != nil {
		gov = *opt.Gov
	}
	if opt.NewRecaller == nil {
		opt.NewRecaller = EngineRecaller(opt.Serve, recall.Options{})
	}
	var jobs []job
	for _, s := range suites {
		for i := range s.Scenarios {
			if s.Scenarios[i].RunsIn(opt.Mode) {
				jobs = append(jobs, job{s, &s.Scenarios[i]})
			}
		}
	}
	ex, closeEx, err := extractorFor(opt, jobs)
	if err != nil {
		return nil, err
	}
	defer closeEx()

	wcfg := opt.Serve
	wcfg.TaskQueue, wcfg.Governance = opt.TaskQueue, gov
	w, err := app.NewWorkerWith(opt.Temporal, wcfg, opt.Store, opt.Embedder, ex, nil)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	recs := make([]Recaller, len(variants))
	for i, v := range variants {
		f := opt.NewRecaller
		if v.NewRecaller != nil {
			f = v.NewRecaller
		}
		rec, err := f(opt.Store, opt.Embedder)
		if err != nil {
			return nil, fmt.Errorf("recaller %s: %w", v.Name, err)
		}
		if c, ok := rec.(interface{ Close() error }); ok {
			defer c.Close()
		} else if c, ok := rec.(interface{ Close() }); ok {
			defer c.Close()
		}
		recs[i] = rec
	}
	// Turns are taken in as serve takes them (app.NewIngestor), with the run's
	// review timeout: nobody reviews in an eval.
	icfg := wcfg
	icfg.ReviewTimeout = opt.ReviewTimeout
	r := &Runner{opt: opt, recaller: recs[0], ingestor: app.NewIngestor(icfg, opt.Store, opt.Temporal, nil, nil), turnRes: map[string]*TurnResult{}}

	total := 0
	for _, j := range jobs {
		total += len(j.sc.Turns) + len(variants)*len(j.sc.Probes)
	}
	var bar *progressbar.ProgressBar
	if opt.Progress != nil {
		bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("eval %s: ingest", opt.Mode)),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	tick := func() {
		if bar != nil {
			_ = bar.Add(1)
		}
	}

	// Phase 1: ingest every scenario (scenarios in parallel, one scenario's turns in
	// their order of arrival, which is the file order).
	started := time.Now()
	var turns []*TurnResult
	var firstErr error
	if opt.Reuse {
		if turns, err = r.reused(ctx, jobs); err != nil {
			return nil, err
		}
		if bar != nil {
			_ = bar.Add(len(turns))
		}
	}
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		if opt.Reuse {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(j job) {
			defer wg.Done()
			defer func() { <-sem }()
			for _, t := range j.sc.Turns {
				tr := r.ingest(ctx, j, t)
				r.mu.Lock()
				turns = append(turns, tr)
				if tr.Err != "" && firstErr == nil {
					firstErr = fmt.Errorf("%s/%s turn %s: %s", j.suite.Name, j.sc.Name, t.ID, tr.Err)
				}
				r.mu.Unlock()
				tick()
			}
		}(j)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	ingestTime := time.Since(started)
	// What a bulk import leaves behind has never been analysed (autovacuum comes
	// when it comes): the engine analyses after it, as a user's import should.
	if err := opt.Store.Analyze(ctx); err != nil {
		return nil, fmt.Errorf("analyze after ingest: %w", err)
	}

	// Phase 2: ask every probe, once all tenants' memory is in place (so a leak
	// across scenarios or tenants would show).
	if bar != nil {
		bar.Describe(fmt.Sprintf("eval %s: probe", opt.Mode))
	}
	probes := make([][]ProbeResult, len(variants))
	for vi, v := range variants {
		for _, j := range jobs {
			for _, p := range j.sc.Probes {
				probes[vi] = append(probes[vi], r.probe(ctx, recs[vi], j, p, v.Retrievers))
				tick()
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	reps := make([]*Report, len(variants))
	for vi, v := range variants {
		rep := buildReport(opt, suites, jobs, turns, probes[vi])
		rep.IngestSeconds = ingestTime.Seconds()
		if err := r.extraction(ctx, jobs, rep); err != nil {
			return nil, err
		}
		if len(v.Retrievers) > 0 {
			rep.Notes = append(rep.Notes, "retrievers: "+strings.Join(v.Retrievers, ", "))
		}
		reps[vi] = rep
	}
	return reps, nil
}

// turnTimeout bounds the wait for one turn's write: a stuck turn fails the run
// instead of hanging it.
const turnTimeout = 5 * time.Minute

func turnKey(tenant, scenario string, instance int, turn string) string {
	return fmt.Sprintf("%s\x1f%s\x1f%d\x1f%s", tenant, scenario, instance, turn)
}

func (r *Runner) ingest(ctx context.Context, j job, t Turn) *TurnResult {
	sc := j.sc
	u, _ := sc.user(t.Speaker, t.Tenant)
	tenant := TenantID(j.suite.Name, *sc, u.Tenant)
	tr := &TurnResult{Suite: j.suite.Name, Scenario: sc.Name, Turn: t.ID, TenantID: tenant, Gold: t.Gold != nil}
	ev := memory.IngestEvent{
		TenantID: tenant, IdempotencyKey: r.opt.RunID + "/" + t.ID, ActorType: t.Actor, ActorID: cmp.Or(t.Person, t.Speaker),
		UserID: u.ID, DepartmentID: u.Department, SessionID: t.Session, TaskID: t.Task,
		EventType: "MESSAGE", Source: "eval", Schema: t.Schema, Content: t.Text, Locator: t.Locator, OccurredAt: t.At(),
	}
	start := time.Now()
	if err := ev.Validate(); err != nil { // as the API checks it
		tr.Err = err.Error()
		return tr
	}
	// Recorded and started as serve's Ingest does; its result is the write's final
	// one (the review defaults applied), which a stuck turn does not hold up for
	// more than turnTimeout.
	in, err := r.ingestor.Ingest(ctx, ev, false, 0)
	if err != nil {
		tr.Err = err.Error()
		return tr
	}
	gctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	var res write.MemoryWriteResult
	if err := r.opt.Temporal.GetWorkflow(gctx, in.WorkflowID, in.RunID).Get(gctx, &res); err != nil {
		tr.Err = err.Error()
		return tr
	}
	tr.Latency = time.Since(start)
	tr.Status, tr.EventID, tr.EvidenceID = res.Status, res.EventID, res.EvidenceID
	r.mu.Lock()
	r.turnRes[turnKey(tenant, sc.Name, sc.Instance, t.ID)] = tr
	r.mu.Unlock()
	return tr
}

// reused looks up the turns of a database ingested by an earlier run with the
// same RunID (Options.Reuse): each turn's event and evidence by idempotency key.
func (r *Runner) reused(ctx context.Context, jobs []job) ([]*TurnResult, error) {
	type hit struct {
		Key        string `bun:"idempotency_key"`
		EventID    string `bun:"event_id"`
		EvidenceID string `bun:"evidence_id"`
		Status     string `bun:"status"`
	}
	byTenant := map[string]map[string]hit{}
	var out []*TurnResult
	for _, j := range jobs {
		for _, t := range j.sc.Turns {
			u, _ := j.sc.user(t.Speaker, t.Tenant)
			tenant := TenantID(j.suite.Name, *j.sc, u.Tenant)
			hits, ok := byTenant[tenant]
			if !ok {
				var rows []hit
				err := r.opt.Store.DB().NewRaw(`SELECT e.idempotency_key, e.id::text AS event_id, coalesce(min(v.id::text), '') AS evidence_id, e.status
FROM events e LEFT JOIN evidence v ON v.tenant_id = e.tenant_id AND v.event_id = e.id
WHERE e.tenant_id = ? GROUP BY e.idempotency_key, e.id, e.status`, tenant).Scan(ctx, &rows)
				if err != nil {
					return nil, fmt.Errorf("reuse: look up the turns of %s: %w", tenant, err)
				}
				hits = map[string]hit{}
				for _, h := range rows {
					hits[h.Key] = h
				}
				byTenant[tenant] = hits
			}
			h, ok := hits[r.opt.RunID+"/"+t.ID]
			if !ok {
				return nil, fmt.Errorf("reuse: turn %s of %s/%s is not in the database (another run id?)", t.ID, j.suite.Name, j.sc.Name)
			}
			tr := &TurnResult{Suite: j.suite.Name, Scenario: j.sc.Name, Turn: t.ID, TenantID: tenant, Gold: t.Gold != nil,
				Status: h.Status, EventID: h.EventID, EvidenceID: h.EvidenceID}
			r.turnRes[turnKey(tenant, j.sc.Name, j.sc.Instance, t.ID)] = tr
			out = append(out, tr)
		}
	}
	return out, nil
}

// evidenceOf returns the evidence ids of a turn of the scenario: its own and
// those of the later messages it was told in (Turn.Part).
func (r *Runner) evidenceOf(j job, turnID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range j.sc.Turns {
		if t.ID != turnID && t.Part != turnID {
			continue
		}
		u, _ := j.sc.user(t.Speaker, t.Tenant)
		tenant := TenantID(j.suite.Name, *j.sc, u.Tenant)
		if tr := r.turnRes[turnKey(tenant, j.sc.Name, j.sc.Instance, t.ID)]; tr != nil && tr.EvidenceID != "" {
			out = append(out, tr.EvidenceID)
		}
	}
	return out
}

func (r *Runner) probe(ctx context.Context, rec Recaller, j job, p Probe, retrievers []string) ProbeResult {
	sc := j.sc
	tenant := TenantID(j.suite.Name, *sc, p.Tenant)
	pr := ProbeResult{Suite: j.suite.Name, Scenario: scenarioLabel(*sc), Probe: p.ID, Category: p.Category, Question: p.Question}
	req := recall.Request{
		Principal: recall.Principal{TenantID: tenant, ID: p.User, UserID: p.User, DepartmentID: p.Department},
		Query:     p.Question, SessionID: p.Session, TaskID: p.Task, AsOf: p.When(),
		K: max(r.opt.K, 10), Schema: p.Schema, Purpose: "eval", Retrievers: retrievers,
	}
	start := time.Now()
	resp, err := rec.Recall(ctx, req)
	pr.Latency = time.Since(start)
	if err != nil {
		pr.Err = err.Error()
		pr.Score = scoreFailed(p)
		return pr
	}
	items := resp.Items
	looked, err := lookup(ctx, r.opt.Store, items)
	if err != nil {
		pr.Err = err.Error()
		pr.Score = scoreFailed(p)
		return pr
	}
	pc := probeContext{
		probe: p, tenant: tenant, k: r.opt.K, items: items, rows: looked,
		evidence: func(turn string) []string { return r.evidenceOf(j, turn) },
	}
	pr.Score, pr.Misses, pr.Wrong, pr.Top = pc.score()
	if r.opt.Judge != nil && p.Answer != "" && !strings.HasPrefix(p.Category, "5") {
		var mems []string
		for i, it := range items {
			if i >= r.opt.K {
				break
			}
			mems = append(mems, fmt.Sprintf("- [%s] %s", it.OccurredAt.Format("2 January 2006"), it.Content))
		}
		ans, ok, err := r.opt.Judge.Grade(ctx, p.Question, p.Answer, mems)
		if err != nil {
			pr.Err = "judge: " + err.Error()
		} else {
			pr.Judged, pr.Correct, pr.Answer = true, ok, ans
		}
	}
	return pr
}

func scenarioLabel(sc Scenario) string {
	if sc.Instance == 0 {
		return sc.Name
	}
	return fmt.Sprintf("%s#%d", sc.Name, sc.Instance)
}

// extraction compares what the extractor proposed with the gold of each turn.
func (r *Runner) extraction(ctx context.Context, jobs []job, rep *Report) error {
	type agg struct{ matched, extracted, gold int }
	per := map[string]*agg{}
	for _, j := range jobs {
		for _, t := range j.sc.Turns {
			if t.Gold == nil {
				continue
			}
			u, _ := j.sc.user(t.Speaker, t.Tenant)
			tenant := TenantID(j.suite.Name, *j.sc, u.Tenant)
			r.mu.Lock()
			tr := r.turnRes[turnKey(tenant, j.sc.Name, j.sc.Instance, t.ID)]
			r.mu.Unlock()
			if tr == nil || tr.EventID == "" {
				continue
			}
			cands, err := r.opt.Store.ListCandidates(ctx, tenant, storage.CandidateFilter{EventID: tr.EventID, Limit: 100})
			if err != nil {
				return fmt.Errorf("load candidates of %s: %w", t.ID, err)
			}
			var got []goldKey
			for _, c := range cands {
				got = append(got, goldKey{Subject: subjectKey(c.Subject), Predicate: c.Predicate, Object: normObject(c.Object), Retraction: c.Retraction, Entity: c.EntityID})
			}
			var want []goldKey
			for _, g := range *t.Gold {
				want = append(want, goldKey{Subject: subjectKey(g.Subject), Predicate: g.Predicate, Object: normObject(g.Object), Retraction: g.Retraction, Entity: g.EntityID})
			}
			m := matchGold(got, want)
			if r.opt.Mismatch != nil && (m < len(got) || m < len(want)) {
				r.opt.Mismatch(j.suite.Name, t.ID, t.Text, keyStrings(want), keyStrings(got))
			}
			a := per[j.suite.Name]
			if a == nil {
				a = &agg{}
				per[j.suite.Name] = a
			}
			a.matched += m
			a.extracted += len(got)
			a.gold += len(want)
		}
	}
	for i := range rep.Suites {
		a := per[rep.Suites[i].Suite]
		if a == nil {
			continue
		}
		ex := &Extraction{GoldCandidates: a.gold, Extracted: a.extracted, Matched: a.matched}
		ex.Precision = ratio(a.matched, a.extracted, 1)
		ex.Recall = ratio(a.matched, a.gold, 1)
		rep.Suites[i].Extraction = ex
	}
	return nil
}

type goldKey struct {
	Subject    string // "" matches any (gold written without one)
	Predicate  string
	Object     string
	Retraction bool
	Entity     string
}

// matchGold counts the gold candidates matched by an extracted one (each used once).
// An event's object is its state, which extractors may or may not fill in: events
// match on predicate and entity.
func matchGold(got, want []goldKey) int {
	used := make([]bool, len(got))
	n := 0
	for _, w := range want {
		for i, g := range got {
			if used[i] || g.Predicate != w.Predicate || g.Retraction != w.Retraction {
				continue
			}
			if w.Subject != "" && g.Subject != "" && w.Subject != g.Subject {
				continue // what one person said is not a fact about the other
			}
			if w.Entity != "" || g.Entity != "" {
				if g.Entity != w.Entity {
					continue
				}
			} else if !w.Retraction && !sameObject(g.Object, w.Object) {
				continue
			}
			used[i] = true
			n++
			break
		}
	}
	return n
}

// subjectKey folds a subject for matching: "user" and "" both mean the speaker of
// a one-person suite.
func subjectKey(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "user" {
		return ""
	}
	return s
}

// sameObject: normalised objects are equal, or the words of one (folded: "a", "the",
// plural and -ing endings aside) are all in the other ("rock climbing" and "indoor
// rock climbing", "a beagle named Pickle" and "beagle Pickle").
func sameObject(a, b string) bool {
	if a == b {
		return true
	}
	wa, wb := objectWords(a), objectWords(b)
	if len(wa) == 0 || len(wb) == 0 {
		return false
	}
	within := func(x, y map[string]bool) bool {
		for w := range x {
			if !y[w] {
				return false
			}
		}
		return true
	}
	if within(wa, wb) || within(wb, wa) {
		return true
	}
	// The same head ("running when the streets are empty", "running early in the
	// morning"): the first word that names the thing.
	return firstWord(a) != "" && firstWord(a) == firstWord(b)
}

func firstWord(s string) string {
	for _, w := range strings.Fields(s) {
		w = strings.Trim(w, ",.;:!?\"'")
		if w != "" && !objectFiller[w] {
			return fold(w)
		}
	}
	return ""
}

// Relations said in several ways.
var objectSynonyms = map[string]string{"dad": "father", "mom": "mother", "mum": "mother", "grandma": "grandmother", "grandpa": "grandfather", "puppy": "dog", "kitten": "cat", "bunny": "rabbit"}

func fold(w string) string {
	if s, ok := objectSynonyms[w]; ok {
		return s
	}
	for _, suf := range []string{"ing", "es", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return strings.TrimSuffix(w, suf)
		}
	}
	return w
}

var objectFiller = map[string]bool{"a": true, "an": true, "the": true, "named": true, "called": true, "my": true, "of": true, "to": true, "and": true}

func objectWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' }) {
		if objectFiller[w] {
			continue
		}
		out[fold(w)] = true
	}
	return out
}

func keyStrings(ks []goldKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = fmt.Sprintf("%s %s: %s", k.Subject, k.Predicate, k.Object)
	}
	return out
}

func normObject(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(s, ",", ""))), " ")
}

func ratio(a, b int, empty float64) float64 {
	if b == 0 {
		return empty
	}
	return float64(a) / float64(b)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s)-1)*p + 0.5)
	return s[idx]
}
