package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// Request limits.
const (
	// expandFrom and expandNames bound entity expansion: names from the best few
	// items, a few names.
	expandFrom  = 3
	expandNames = 4

	MaxQueryBytes      = 4 << 10
	DefaultK           = 10
	MaxK               = 100
	DefaultTokenBudget = 1000
	MinTokenBudget     = 50
	MaxTokenBudget     = 8000
	maxIDLen           = 200
	// MaxFutureSkew is how far past the server's clock as_of may be (clock skew).
	MaxFutureSkew = 24 * time.Hour
	// currentSlack: an as_of this close to now reads current memory.
	currentSlack = time.Minute
	// DefaultQueryEmbeddingCache is Options.QueryEmbeddingCache's default: 4,096
	// vectors of 512 floats, 8 MiB.
	DefaultQueryEmbeddingCache = 4096
)

// AccessLogMode says when the access log and access counts are written.
type AccessLogMode int

const (
	// AccessLogAsync queues the write and returns; a background writer batches
	// queued writes (several recalls, one INSERT and one UPDATE). When the queue is
	// full the recall writes its own entry before returning. Close flushes.
	AccessLogAsync AccessLogMode = iota
	// AccessLogSync writes before Recall returns.
	AccessLogSync
	// AccessLogOff writes nothing (benchmarks of retrieval alone).
	AccessLogOff
)

// Options tune the engine; zero values take the defaults.
type Options struct {
	// CandidateLimit bounds what each retriever returns per table (default 40).
	CandidateLimit int
	// EfSearch is hnsw.ef_search for the semantic retriever (default: the evidence
	// walk's length, heavyWalk(CandidateLimit), and at least 100).
	EfSearch int
	// MaxScanTuples bounds an iterative HNSW scan (hnsw.max_scan_tuples, default 5000).
	MaxScanTuples int
	// GraphHops bounds the walk from the entities a question names (default 2).
	GraphHops int
	// RRFK is the reciprocal-rank-fusion constant (default 60); unused since fusion
	// is score-based (see Fusion), kept so old configurations still parse.
	RRFK float64
	// Fusion weighs the retrievers (zero value: DefaultFusion).
	Fusion Fusion
	// DefaultSchema parses questions when the request names none (default general).
	DefaultSchema string
	AccessLog     AccessLogMode
	// OneStatement runs every retriever in one statement on one connection. By
	// default a recall that runs alone runs the semantic retrievers and the
	// others as two statements at once on two connections (lower latency when
	// cores are free), and recalls that run beside others run one statement each
	// (two statements cost more CPU than one, which is what bounds throughput).
	OneStatement bool
	// QueryEmbeddingCache is how many query embeddings the engine keeps (an LRU
	// keyed by the exact query text, in front of the embedder; default
	// DefaultQueryEmbeddingCache); negative turns the cache off.
	QueryEmbeddingCache int
	// MaxStatements bounds the recall statements running on Postgres at once
	// (default GOMAXPROCS + 1, at least 2; negative: no bound). A statement past
	// it waits in the engine for a slot, as long as its context allows: eight
	// callers on two cores ran eight statements at once, each slower than alone
	// (engram bench recall at 8 callers, two interleaved runs each: unbounded
	// 391/396 QPS, p95 39/40 ms; a bound of 4 405/415, 33/33 ms; of 3 446/445,
	// 28/29 ms). The bound is per engine: with Postgres on a larger machine of
	// its own, raise it (ENGRAM_RECALL_MAX_STATEMENTS).
	MaxStatements int
	// Timeout bounds every recall (default DefaultTimeout; ENGRAM_RECALL_TIMEOUT),
	// and a caller's earlier deadline bounds it further. Postgres enforces it: the
	// engine reads through a pool of its own whose sessions carry it as
	// statement_timeout, and a statement whose caller's context ends is cancelled
	// in the server at once. A recall past it fails with a TimeoutError.
	Timeout time.Duration
	// Now is the clock (tests); default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Engine answers recalls. It is safe for concurrent use.
type Engine struct {
	store   *storage.Store
	db      *bun.DB
	emb     embedding.Embedder
	kw      KeywordIndex
	pgKW    bool
	schemas schema.Source
	opts    Options

	schemaMu    sync.RWMutex
	schemaCache map[string]schemaEntry

	log *accessLogger

	// inflight counts the recalls running now (see Options.OneStatement).
	inflight atomic.Int32
	// slots holds a token per recall statement running (Options.MaxStatements);
	// nil when unbounded. running counts them, peak is the most seen (tests).
	slots         chan struct{}
	running, peak atomic.Int32

	// The recall statement for current and past recall (fixed per engine).
	sqlOnce                       sync.Once
	sqlCurrent, sqlPast, sqlKnown [4]boundSQL // by part
}

type schemaEntry struct {
	s  *schema.Schema
	at time.Time
}

// New builds an engine. emb may be nil (no semantic retrieval); kw nil means
// Postgres full-text; schemas nil means the built-in schemas.
func New(store *storage.Store, emb embedding.Embedder, kw KeywordIndex, schemas schema.Source, opts Options) *Engine {
	if opts.CandidateLimit <= 0 {
		opts.CandidateLimit = 40
	}
	if opts.CandidateLimit > 200 {
		opts.CandidateLimit = 200
	}
	if opts.EfSearch <= 0 {
		// The walk of a user with many turns fits in one pass of the graph search.
		opts.EfSearch = max(100, heavyWalk(opts.CandidateLimit))
	}
	if opts.MaxScanTuples <= 0 {
		opts.MaxScanTuples = 5000
	}
	if opts.GraphHops <= 0 {
		opts.GraphHops = 2
	}
	if opts.RRFK <= 0 {
		opts.RRFK = 60
	}
	if opts.Fusion == (Fusion{}) {
		opts.Fusion = DefaultFusion()
	}
	if opts.DefaultSchema == "" {
		opts.DefaultSchema = memory.DefaultSchema
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if schemas == nil {
		schemas = schema.Builtins
	}
	if kw == nil {
		kw = NewPostgresKeyword(store)
	}
	if opts.QueryEmbeddingCache == 0 {
		opts.QueryEmbeddingCache = DefaultQueryEmbeddingCache
	}
	if emb != nil && opts.QueryEmbeddingCache > 0 {
		if c, err := embedding.NewCachedEmbedder(emb, opts.QueryEmbeddingCache); err == nil {
			emb = c
		}
	}
	if opts.MaxStatements == 0 {
		opts.MaxStatements = max(2, runtime.GOMAXPROCS(0)+1)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	_, pg := kw.(*PostgresKeyword)
	e := &Engine{store: store, db: store.OpenReadPool(opts.Timeout, 32), emb: emb, kw: kw, pgKW: pg, schemas: schemas, opts: opts, schemaCache: map[string]schemaEntry{}}
	if opts.MaxStatements > 0 {
		e.slots = make(chan struct{}, opts.MaxStatements)
	}
	e.log = newAccessLogger(store, opts.AccessLog, opts.Logger)
	return e
}

// Close flushes queued access-log writes and stops the background writer.
func (e *Engine) Close() error {
	err := e.log.close()
	return errors.Join(err, e.db.Close())
}

// Flush waits until every queued access-log write is stored.
func (e *Engine) Flush(ctx context.Context) error { return e.log.flush(ctx) }

// schema returns a parsed schema, cached for a minute (schemas are versioned and
// rarely change; parsing one per recall would cost more than the recall).
// The cache is per tenant: a tenant's stored schema of a name wins over the
// built-in one (schema.Stored), and one tenant's never answers another's recall.
func (e *Engine) schema(ctx context.Context, tenantID, name string) (*schema.Schema, error) {
	now := time.Now()
	key := tenantID + "\x1f" + name
	e.schemaMu.RLock()
	ce, ok := e.schemaCache[key]
	e.schemaMu.RUnlock()
	if ok && now.Sub(ce.at) < time.Minute {
		return ce.s, nil
	}
	s, err := e.schemas(schema.WithTenant(ctx, tenantID), name)
	if err != nil {
		return nil, err
	}
	e.schemaMu.Lock()
	e.schemaCache[key] = schemaEntry{s: s, at: now}
	e.schemaMu.Unlock()
	return s, nil
}

// validate checks a request before anything touches the database and fills in
// defaults.
func (e *Engine) validate(req *Request, now time.Time) error {
	p := req.Principal
	if strings.TrimSpace(p.TenantID) == "" {
		return memory.FieldError{Field: "principal.tenant_id", Problem: "is empty"}
	}
	if strings.TrimSpace(p.UserID) == "" {
		return memory.FieldError{Field: "principal.user_id", Problem: "is empty: recall reads memory on behalf of a user"}
	}
	for field, v := range map[string]string{"principal.tenant_id": p.TenantID, "principal.user_id": p.UserID, "principal.department_id": p.DepartmentID,
		"principal.agent_id": p.AgentID, "principal.id": p.ID, "session_id": req.SessionID, "task_id": req.TaskID, "schema": req.Schema, "purpose": req.Purpose} {
		if len(v) > maxIDLen {
			return memory.FieldError{Field: field, Problem: fmt.Sprintf("is longer than %d bytes", maxIDLen)}
		}
	}
	if len(req.Query) > MaxQueryBytes {
		return memory.FieldError{Field: "query", Problem: fmt.Sprintf("is %d bytes, the limit is %d", len(req.Query), MaxQueryBytes)}
	}
	if !utf8.ValidString(req.Query) {
		return memory.FieldError{Field: "query", Problem: "is not valid UTF-8"}
	}
	switch {
	case req.K == 0:
		req.K = DefaultK
	case req.K < 0 || req.K > MaxK:
		return memory.FieldError{Field: "k", Problem: fmt.Sprintf("%d is outside 1..%d", req.K, MaxK)}
	}
	switch {
	case req.TokenBudget == 0:
		req.TokenBudget = DefaultTokenBudget
	case req.TokenBudget < MinTokenBudget || req.TokenBudget > MaxTokenBudget:
		return memory.FieldError{Field: "token_budget", Problem: fmt.Sprintf("%d is outside %d..%d", req.TokenBudget, MinTokenBudget, MaxTokenBudget)}
	}
	for i, sc := range req.Scopes {
		if !sc.Valid() {
			return memory.FieldError{Field: fmt.Sprintf("scopes[%d]", i), Problem: fmt.Sprintf("unknown scope %q (allowed: TENANT, DEPARTMENT, USER, AGENT, SESSION, TASK)", sc)}
		}
	}
	if req.AsOf.After(now.Add(MaxFutureSkew)) {
		return memory.FieldError{Field: "as_of", Problem: fmt.Sprintf("%s is in the future; memory is only known up to now", req.AsOf.UTC().Format(time.RFC3339))}
	}
	if !req.AsOf.IsZero() && req.AsOf.Year() < 1970 {
		return memory.FieldError{Field: "as_of", Problem: "is before 1970"}
	}
	if req.KnownAt.After(now.Add(MaxFutureSkew)) {
		return memory.FieldError{Field: "known_at", Problem: fmt.Sprintf("%s is in the future; memory is only known up to now", req.KnownAt.UTC().Format(time.RFC3339))}
	}
	if !req.KnownAt.IsZero() && req.KnownAt.Year() < 1970 {
		return memory.FieldError{Field: "known_at", Problem: "is before 1970"}
	}
	if _, err := parseRetrievers(req.Retrievers); err != nil {
		return err
	}
	if req.Schema == "" {
		req.Schema = e.opts.DefaultSchema
	}
	return nil
}

// retrieverSet is the set of retrievers a recall runs.
type retrieverSet uint8

// Retrievers lists every retriever, in the order Request.Retrievers names them.
var Retrievers = []string{RetrieverSemantic, RetrieverKeyword, RetrieverGraph, RetrieverStructured, RetrieverRecent}

func (s retrieverSet) has(name string) bool {
	for i, r := range Retrievers {
		if r == name {
			return s&(1<<i) != 0
		}
	}
	return false
}

// parseRetrievers reads Request.Retrievers: empty means all.
func parseRetrievers(names []string) (retrieverSet, error) {
	if len(names) == 0 {
		return 1<<len(Retrievers) - 1, nil
	}
	if len(names) > 2*len(Retrievers) {
		return 0, memory.FieldError{Field: "retrievers", Problem: fmt.Sprintf("names %d retrievers; there are %d", len(names), len(Retrievers))}
	}
	var s retrieverSet
	for i, n := range names {
		j := slices.Index(Retrievers, strings.ToLower(strings.TrimSpace(n)))
		if j < 0 {
			if len(n) > 40 {
				n = n[:40] + "…"
			}
			return 0, memory.FieldError{Field: fmt.Sprintf("retrievers[%d]", i), Problem: fmt.Sprintf("unknown retriever %q (allowed: %s)", n, strings.Join(Retrievers, ", "))}
		}
		s |= 1 << j
	}
	return s, nil
}

// Recall answers one request: principal → task state → structured filter → query
// parsing → candidates (semantic, keyword, graph, structured over facts; semantic
// and keyword over evidence; the session's recent turns) → fusion → one revision
// per key, task scope first → context within the budget → access log.
func (e *Engine) Recall(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	now := e.opts.Now()
	if err := e.validate(&req, now); err != nil {
		return Response{}, err
	}
	ctx, cancel, limit := e.withLimit(ctx)
	defer cancel()
	resp, err := e.recall(ctx, req, start, now)
	return resp, timeoutErr(ctx, "recall", limit, err)
}

// recall is Recall once the request is valid and bounded by its limit.
func (e *Engine) recall(ctx context.Context, req Request, start, now time.Time) (Response, error) {
	st := &stepTimes{m: map[string]time.Duration{}}
	asOf, current := recallTime(req, now)
	t := time.Now()
	p, err := e.plan(ctx, req, asOf, current)
	if err != nil {
		return Response{}, err
	}
	st.mark("parse", t)
	on, _ := parseRetrievers(req.Retrievers)
	facts, evs, ts, err := e.retrieve(ctx, req, &p, on, st)
	if err != nil {
		return Response{}, err
	}
	var recent []storage.Turn
	if ts.session != nil && on.has(RetrieverRecent) {
		for _, tr := range ts.session.Recent {
			if !tr.At.After(asOf) {
				recent = append(recent, tr)
			}
		}
	}
	ranked, err := e.rankAll(ctx, req, p, on, facts, evs, recent, st)
	if err != nil {
		return Response{}, err
	}

	t = time.Now()
	resp := Response{AsOf: asOf}
	resp.Task = ts.task
	items := ranked
	if len(items) > req.K {
		items = items[:req.K]
	}
	resp.Items = items
	if resp.Items == nil {
		resp.Items = []Item{}
	}
	summary := ""
	if ts.session != nil && current {
		summary = ts.session.Summary
	}
	resp.Sections, resp.Context, resp.Tokens = buildContext(resp.Task, ranked, req.K, recent, summary, req.TokenBudget)
	if req.Explain {
		resp.Candidates = ranked
		resp.Parsed = p.parsed
	}
	st.mark("context", t)

	t = time.Now()
	if err := e.log.record(ctx, accessEntry{req: req, items: resp.Items}); err != nil {
		return Response{}, fmt.Errorf("access log: %w", err)
	}
	st.mark("access_log", t)
	st.m["total"] = time.Since(start)
	resp.Timings = st.m
	return resp, nil
}

// stepTimes are a recall's steps' durations (Response.Timings); steps that run
// at once mark them together.
type stepTimes struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

func (s *stepTimes) mark(step string, since time.Time) {
	d := time.Since(since)
	s.mu.Lock()
	s.m[step] = d
	s.mu.Unlock()
}

// recallTime is the time a recall is about and whether that is now (current
// recall).
func recallTime(req Request, now time.Time) (asOf time.Time, current bool) {
	asOf = req.AsOf
	switch {
	case !req.KnownAt.IsZero():
		// What the memory held at known_at: a past recall over its revisions as
		// they were then, about as_of (default: known_at itself).
		if asOf.IsZero() {
			asOf = req.KnownAt
		}
	case asOf.IsZero() || !asOf.Before(now.Add(-currentSlack)):
		if asOf.IsZero() || asOf.After(now) {
			asOf = now
		}
		current = true
	}
	return asOf.UTC(), current
}

// plan reads the question with the principal's schema: what the statement is
// to look for, and for whom.
func (e *Engine) plan(ctx context.Context, req Request, asOf time.Time, current bool) (plan, error) {
	vis := Visibility{
		TenantID: req.Principal.TenantID, UserID: req.Principal.UserID, DepartmentID: req.Principal.DepartmentID,
		AgentID: req.Principal.AgentID, SessionID: req.SessionID, TaskID: req.TaskID, AsOf: asOf, Scopes: req.Scopes,
	}
	sch, err := e.schema(ctx, req.Principal.TenantID, req.Schema)
	if err != nil {
		return plan{}, memory.FieldError{Field: "schema", Problem: err.Error()}
	}
	parsed := parseQuery(sch, req.Query, asOf)
	speaker := "User"
	if se, ok := sch.SpeakerEntity(); ok {
		speaker = se.Name
	}
	p := plan{vis: vis, current: current, knownAt: req.KnownAt, parsed: parsed, blank: strings.TrimSpace(req.Query) == "", speaker: speaker, limit: e.opts.CandidateLimit, hops: e.opts.GraphHops}
	if e.pgKW && len(parsed.Terms) > 0 {
		p.tsq = tsQueryText(parsed.Terms)
	}
	return p, nil
}

// retrieve runs the retrievers: one statement runs every retriever over facts
// and evidence and reads the named task and session; an external keyword index
// (when configured) runs alongside. It sets p's vector and session scores.
func (e *Engine) retrieve(ctx context.Context, req Request, p *plan, on retrieverSet, st *stepTimes) ([]factRow, []evidenceRow, taskSession, error) {
	var embed func() (*pgvector.Vector, error)
	if e.emb != nil && strings.TrimSpace(req.Query) != "" && on.has(RetrieverSemantic) {
		embed = func() (*pgvector.Vector, error) {
			t := time.Now()
			vecs, err := e.emb.Embed(ctx, []string{req.Query})
			if err != nil {
				return nil, fmt.Errorf("embed query: %w", err)
			}
			if len(vecs) == 1 && len(vecs[0]) == storage.EmbeddingDim {
				v := pgvector.NewVector(vecs[0])
				p.vec = &v // the plan's, for what runs after retrieval
			} else if len(vecs) == 1 {
				return nil, fmt.Errorf("embed query: the embedder returned %d dimensions, the database stores %d", len(vecs[0]), storage.EmbeddingDim)
			}
			st.mark("embed", t)
			return p.vec, nil
		}
	}
	var wg sync.WaitGroup
	var extF []factRow
	var extE []evidenceRow
	var extErr error
	if !e.pgKW && len(p.parsed.Terms) > 0 && on.has(RetrieverKeyword) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			defer st.mark("keyword_index", t)
			hits, err := e.kw.Search(ctx, p.vis, req.Query, []Kind{KindFact, KindEvidence}, e.opts.CandidateLimit)
			if err != nil {
				e.opts.Logger.Warn("recall: keyword index failed; continuing without it", "index", e.kw.Name(), "err", err)
				return
			}
			extF, extE, extErr = e.hydrate(ctx, *p, hits)
		}()
	}
	t := time.Now()
	var ts taskSession // the statement reads the named task and session too
	facts, evs, err := e.runRecallSQL(ctx, *p, on, &ts, embed)
	p.sessions = ts.sessions
	st.mark("retrieve", t)
	wg.Wait()
	if err := errors.Join(extErr, err); err != nil {
		return nil, nil, ts, err
	}
	facts = append(facts, extF...)
	evs = append(evs, extE...)
	if facts, err = e.asKnown(ctx, *p, facts); err != nil {
		return nil, nil, ts, err
	}
	if e.opts.Fusion.SemanticAll {
		t := time.Now()
		if err := e.similarities(ctx, *p, evs); err != nil {
			return nil, nil, ts, err
		}
		st.mark("similar", t)
	}
	return facts, evs, ts, nil
}

// rankAll fuses what the retrievers found, then adds the second hop over names
// the best turns mention (expand.go) and lifts the turns next to the best
// (adjacent.go).
func (e *Engine) rankAll(ctx context.Context, req Request, p plan, on retrieverSet, facts []factRow, evs []evidenceRow, recent []storage.Turn, st *stepTimes) ([]Item, error) {
	t := time.Now()
	ranked := fuse(e.opts.Fusion, p, facts, evs, recent)
	st.mark("fuse", t)
	if e.opts.Fusion.Expand > 0 && on.has(RetrieverGraph) && e.pgKW {
		t = time.Now()
		top := ranked
		if len(top) > expandFrom {
			top = top[:expandFrom]
		}
		if names := expansionNames(req.Query, top, expandNames); len(names) > 0 {
			f2, e2, err := e.expand(ctx, p, names)
			if err == nil {
				f2, err = e.asKnown(ctx, p, f2)
			}
			if err == nil && e.opts.Fusion.SemanticAll {
				err = e.similarities(ctx, p, e2)
			}
			if err != nil {
				return nil, err
			}
			facts, evs = append(facts, f2...), append(evs, e2...)
			ranked = fuse(e.opts.Fusion, p, facts, evs, recent)
		}
		st.mark("expand", t)
	}
	if e.opts.Fusion.Feedback > 0 && e.opts.Fusion.FeedbackFrom > 0 && len(req.Retrievers) == 0 && p.vec != nil {
		t = time.Now()
		fb, err := e.feedback(ctx, p, ranked)
		if err != nil {
			return nil, err
		}
		if len(fb) > 0 {
			evs = append(evs, fb...)
			ranked = fuse(e.opts.Fusion, p, facts, evs, recent)
		}
		st.mark("feedback", t)
	}
	if e.opts.Fusion.Adjacent > 0 && len(req.Retrievers) == 0 {
		t = time.Now()
		var err error
		if ranked, err = e.adjacent(ctx, p, ranked); err != nil {
			return nil, err
		}
		st.mark("adjacent", t)
	}
	return ranked, nil
}

// asKnown keeps, in a known-at recall, the fact rows as the memory held them at
// p.knownAt: recorded by then, valid at as_of with the status and validity they
// had then (which the rows then carry); any other recall keeps them as they are.
func (e *Engine) asKnown(ctx context.Context, p plan, facts []factRow) ([]factRow, error) {
	if p.knownAt.IsZero() || len(facts) == 0 {
		return facts, nil
	}
	ids := make([]string, 0, len(facts))
	for _, f := range facts {
		ids = append(ids, f.ID)
	}
	states, err := storage.FactStatesAt(ctx, e.db, p.vis.TenantID, ids, p.knownAt)
	if err != nil {
		return nil, err
	}
	at := p.vis.AsOf
	out := facts[:0]
	for _, f := range facts {
		st, ok := states[f.ID]
		if !ok || st.ValidFrom.After(at) || (st.ValidUntil != nil && !st.ValidUntil.After(at)) ||
			(st.Status == memory.FactInvalidated && st.ClosedAt != nil && !st.ClosedAt.After(at)) {
			continue
		}
		f.Status, f.ValidFrom, f.ValidUntil, f.ClosedAt = st.Status, st.ValidFrom, st.ValidUntil, st.ClosedAt
		out = append(out, f)
	}
	return out, nil
}

// explainPlan builds the plan of a request as Recall would (no access log, no
// task or session read): what Explain and RetrieverTimings run.
func (e *Engine) explainPlan(ctx context.Context, req Request) (plan, retrieverSet, error) {
	now := e.opts.Now()
	if err := e.validate(&req, now); err != nil {
		return plan{}, 0, err
	}
	sch, err := e.schema(ctx, req.Principal.TenantID, req.Schema)
	if err != nil {
		return plan{}, 0, memory.FieldError{Field: "schema", Problem: err.Error()}
	}
	asOf, current := req.AsOf, true
	if asOf.IsZero() {
		asOf = now
	} else if asOf.Before(now.Add(-currentSlack)) {
		current = false
	}
	vis := Visibility{TenantID: req.Principal.TenantID, UserID: req.Principal.UserID, DepartmentID: req.Principal.DepartmentID,
		AgentID: req.Principal.AgentID, SessionID: req.SessionID, TaskID: req.TaskID, AsOf: asOf.UTC(), Scopes: req.Scopes}
	p := plan{vis: vis, current: current, parsed: parseQuery(sch, req.Query, asOf), speaker: "User", limit: e.opts.CandidateLimit, hops: e.opts.GraphHops}
	if se, ok := sch.SpeakerEntity(); ok {
		p.speaker = se.Name
	}
	if e.emb != nil && req.Query != "" {
		vecs, err := e.emb.Embed(ctx, []string{req.Query})
		if err != nil {
			return plan{}, 0, err
		}
		v := pgvector.NewVector(vecs[0])
		p.vec = &v
	}
	if len(p.parsed.Terms) > 0 {
		p.tsq = tsQueryText(p.parsed.Terms)
	}
	on, _ := parseRetrievers(req.Retrievers)
	return p, on, nil
}

// Explain runs the request's fact and evidence statements under EXPLAIN (ANALYZE,
// BUFFERS) and returns the plans: where a slow recall spends its time. It writes
// no access log.
func (e *Engine) Explain(ctx context.Context, req Request) (string, error) {
	p, on, err := e.explainPlan(ctx, req)
	if err != nil {
		return "", err
	}
	out, err := e.explainRecallSQL(ctx, p, on, "ANALYZE, BUFFERS")
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	return "== recall statement (cached generic plan)\n" + out + "\n", nil
}

// RetrieverTimings splits the recall statement of req by retriever: it runs the
// one-statement form under EXPLAIN (ANALYZE, FORMAT JSON) and reads the inclusive
// time of each retriever's CTE scan (semantic, keyword, structured and graph over
// facts; semantic and keyword over evidence). "rows" is the rest of the
// statement: joining the candidates to their rows and the fact_evidence lookups;
// "statement" is the execution time. EXPLAIN's per-node clock adds overhead, so
// the parts are larger than in a plain run; compare them with each other.
func (e *Engine) RetrieverTimings(ctx context.Context, req Request) (map[string]time.Duration, error) {
	p, on, err := e.explainPlan(ctx, req)
	if err != nil {
		return nil, err
	}
	out, err := e.explainRecallSQL(ctx, p, on, "ANALYZE, FORMAT JSON")
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	return retrieverTimesFromPlan(out)
}
