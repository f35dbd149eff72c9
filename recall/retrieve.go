package recall

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Retriever names, as Item.Retrievers shows them.
const (
	RetrieverSemantic   = "semantic"
	RetrieverKeyword    = "keyword"
	RetrieverGraph      = "graph"
	RetrieverStructured = "structured"
	RetrieverRecent     = "recent"
)

// factRow is a fact revision as recall reads it, tagged with the retriever that
// found it and its rank there.
type factRow struct {
	ID           string            `bun:"id"`
	TenantID     string            `bun:"tenant_id"`
	MemoryKey    string            `bun:"memory_key"`
	Revision     int               `bun:"revision"`
	Scope        memory.Scope      `bun:"scope"`
	DepartmentID string            `bun:"department_id"`
	UserID       string            `bun:"user_id"`
	AgentID      string            `bun:"agent_id"`
	SessionID    string            `bun:"session_id"`
	TaskID       string            `bun:"task_id"`
	MemoryType   memory.MemoryType `bun:"memory_type"`
	Subject      string            `bun:"subject"`
	Predicate    string            `bun:"predicate"`
	Object       string            `bun:"object"`
	Content      string            `bun:"content"`
	EntityType   string            `bun:"entity_type"`
	EntityID     string            `bun:"entity_id"`
	Status       memory.FactStatus `bun:"status"`
	Confidence   float64           `bun:"confidence"`
	Importance   float64           `bun:"importance"`
	ValidFrom    time.Time         `bun:"valid_from"`
	ValidUntil   *time.Time        `bun:"valid_until"`
	ObservedAt   time.Time         `bun:"observed_at"`
	ClosedAt     *time.Time        `bun:"closed_at"`
	Evidence     []string          `bun:"ev,array"`
	Src          string            `bun:"src"`
	Rk           int               `bun:"rk"`
	D            *float64          `bun:"d"` // semantic distance
}

const factCols = "f.id, f.tenant_id, f.memory_key, f.revision, f.scope, f.department_id, f.user_id, f.agent_id, f.session_id, f.task_id, " +
	"f.memory_type, f.subject, f.predicate, f.object, f.content, f.entity_type, f.entity_id, f.status, f.confidence, f.importance, " +
	"f.valid_from, f.valid_until, f.observed_at, f.closed_at, " +
	"array(SELECT fe.evidence_id::text FROM fact_evidence fe WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id ORDER BY fe.created_at DESC LIMIT 3) AS ev"

// evidenceRow is an evidence row as recall reads it.
type evidenceRow struct {
	ID           string    `bun:"id"`
	TenantID     string    `bun:"tenant_id"`
	Kind         string    `bun:"kind"`
	Content      string    `bun:"content"`
	Speaker      string    `bun:"speaker"`
	UserID       string    `bun:"user_id"`
	DepartmentID string    `bun:"department_id"`
	AgentID      string    `bun:"agent_id"`
	SessionID    string    `bun:"session_id"`
	TaskID       string    `bun:"task_id"`
	OccurredAt   time.Time `bun:"occurred_at"`
	Importance   float64   `bun:"importance"`
	Src          string    `bun:"src"`
	Rk           int       `bun:"rk"`
}

const evidenceCols = "e.id, e.tenant_id, e.kind, e.content, e.speaker, e.user_id, e.department_id, e.agent_id, e.session_id, e.task_id, e.occurred_at, e.importance"

// plan is everything one recall's SQL needs.
type plan struct {
	vis     Visibility
	current bool
	vec     *pgvector.Vector // nil: no semantic retrieval
	tsq     string           // "": no keyword retrieval in SQL
	parsed  *ParsedQuery
	speaker string // the schema's speaker entity (User), never walked through
	limit   int    // candidates per retriever
	hops    int
	// splitShared: the shared branch's semantic search runs in its own statement
	// (sharedSemanticQuery) on the shared facts' vector index.
	splitShared bool
}

// sqlb accumulates SQL text and bun arguments in order.
type sqlb struct {
	b    strings.Builder
	args []any
}

func (s *sqlb) w(sql string, args ...any) { s.b.WriteString(sql); s.args = append(s.args, args...) }
func (s *sqlb) f(f frag)                  { s.w(f.sql, f.args...) }

// branchUnion writes (SELECT … WHERE branch AND time AND cond ORDER BY … LIMIT n)
// UNION ALL … for each visibility branch.
func branchUnion(s *sqlb, branches []frag, tf frag, sel, cond frag, order string, limit int) {
	for i, br := range branches {
		if i > 0 {
			s.w(" UNION ALL ")
		}
		s.w("(SELECT ")
		s.f(sel)
		s.w(" FROM facts f WHERE ")
		s.f(br)
		s.w(" AND ")
		s.f(tf)
		if cond.sql != "" {
			s.w(" AND (")
			s.f(cond)
			s.w(")")
		}
		s.w(fmt.Sprintf(" ORDER BY %s LIMIT %d)", order, limit))
	}
}

// factsQuery builds the one statement that runs every fact retriever (semantic,
// keyword, structured, graph), each per visibility branch, and returns the facts
// found with their retriever and rank. ok is false when nothing would run.
func factsQuery(p plan) (s *sqlb, ok bool) {
	branches := factBranches(p.vis, "f")
	if len(branches) == 0 {
		return nil, false
	}
	tf := factTime(p.vis, "f", p.current)
	s = &sqlb{}
	s.w("WITH RECURSIVE ")
	var parts []string
	n := p.limit
	first := true
	cte := func(name string) {
		if !first {
			s.w(", ")
		}
		first = false
		s.w(name + " AS ")
		parts = append(parts, name)
	}
	semBranches := branches
	if p.splitShared {
		semBranches = nil
		for _, b := range branches {
			if !isSharedBranch(b) {
				semBranches = append(semBranches, b)
			}
		}
	}
	if p.vec != nil && len(semBranches) > 0 {
		cte("q")
		s.w("MATERIALIZED (SELECT ?::vector AS v)", *p.vec)
		cte("sem")
		s.w("(SELECT id, row_number() OVER (ORDER BY d) AS rk, d FROM (")
		branchUnion(s, semBranches, tf,
			frag{sql: "f.id, f.embedding <=> (SELECT v FROM q) AS d"},
			frag{sql: "f.embedding IS NOT NULL"},
			"f.embedding <=> (SELECT v FROM q)", n)
		s.w(fmt.Sprintf(") x ORDER BY d LIMIT %d)", n))
	}
	if p.tsq != "" {
		// The tsquery is a constant in each branch (to_tsquery with a configuration
		// is immutable), so the planner estimates its selectivity from the column's
		// statistics and picks, per branch, the GIN index or a filter over the
		// branch's few rows.
		cte("kw")
		s.w("(SELECT id, row_number() OVER (ORDER BY r DESC) AS rk FROM (")
		branchUnion(s, branches, tf,
			frag{sql: "f.id, ts_rank(f.search, to_tsquery('english', ?)) AS r", args: []any{p.tsq}},
			frag{sql: "f.search @@ to_tsquery('english', ?)", args: []any{p.tsq}},
			"r DESC", n)
		s.w(fmt.Sprintf(") x ORDER BY r DESC LIMIT %d)", n))
	}
	if cond, pri := structuredCond(p); cond.sql != "" {
		cte("st")
		s.w("(SELECT id, row_number() OVER (ORDER BY pri DESC, imp DESC, vf DESC) AS rk FROM (")
		sel := frag{sql: "f.id, (" + pri.sql + ") AS pri, f.importance AS imp, f.valid_from AS vf", args: pri.args}
		branchUnion(s, branches, tf, sel, cond, "pri DESC, imp DESC, vf DESC", n)
		s.w(fmt.Sprintf(") x ORDER BY pri DESC, imp DESC, vf DESC LIMIT %d)", n))
	}
	if seeds := graphSeeds(p); seeds.sql != "" {
		// seeds: the user's entities named or described by the question; walk: up to
		// hops edges further in the user's own graph (order → its tickets), never
		// back through the user; gr: the visible facts about what was reached.
		cte("seeds")
		s.w("(SELECT en.type, en.id FROM entities en WHERE en.tenant_id = ? AND en.user_id = ? AND (", p.vis.TenantID, p.vis.UserID)
		s.f(seeds)
		s.w(") ORDER BY en.updated_at DESC LIMIT 20)")
		cte("walk")
		s.w("(SELECT type, id, 0 AS depth FROM seeds UNION "+
			"SELECT nb.type, nb.id, w.depth + 1 FROM walk w CROSS JOIN LATERAL ("+
			"SELECT ed.to_type AS type, ed.to_id AS id FROM edges ed WHERE ed.tenant_id = ? AND ed.user_id = ? AND ed.from_type = w.type AND ed.from_id = w.id "+
			"UNION ALL SELECT ed.from_type, ed.from_id FROM edges ed WHERE ed.tenant_id = ? AND ed.user_id = ? AND ed.to_type = w.type AND ed.to_id = w.id"+
			") nb WHERE w.depth < ? AND nb.type <> ?)",
			p.vis.TenantID, p.vis.UserID, p.vis.TenantID, p.vis.UserID, p.hops, p.speaker)
		cte("gr")
		s.w("(SELECT id, row_number() OVER (ORDER BY depth, vf DESC) AS rk FROM (SELECT f.id, min(w.depth) AS depth, max(f.valid_from) AS vf "+
			"FROM (SELECT DISTINCT type, id, depth FROM walk LIMIT 200) w JOIN facts f ON f.tenant_id = ? AND f.entity_id = w.id AND f.entity_type = w.type WHERE (", p.vis.TenantID)
		s.f(factVisible(p.vis, "f"))
		s.w(") AND ")
		s.f(tf)
		s.w(fmt.Sprintf(" GROUP BY f.id ORDER BY 2, 3 DESC LIMIT %d) g)", n))
	}
	var srcs []string
	for _, name := range parts {
		switch name {
		case "sem":
			srcs = append(srcs, "SELECT id, '"+RetrieverSemantic+"' AS src, rk, d FROM sem")
		case "kw":
			srcs = append(srcs, "SELECT id, '"+RetrieverKeyword+"' AS src, rk, NULL::float8 AS d FROM kw")
		case "st":
			srcs = append(srcs, "SELECT id, '"+RetrieverStructured+"' AS src, rk, NULL::float8 AS d FROM st")
		case "gr":
			srcs = append(srcs, "SELECT id, '"+RetrieverGraph+"' AS src, rk, NULL::float8 AS d FROM gr")
		}
	}
	if len(srcs) == 0 {
		return nil, false
	}
	s.w(", c AS (" + strings.Join(srcs, " UNION ALL ") + ") ")
	s.w("SELECT "+factCols+", c.src, c.rk, c.d FROM c JOIN facts f ON f.tenant_id = ? AND f.id = c.id", p.vis.TenantID)
	return s, true
}

// sharedSemanticQuery is the semantic search over the shared facts the principal
// may see (TENANT, its DEPARTMENT and AGENT), current revisions only. It runs on
// the partial vector index of shared facts (facts_embedding_shared_hnsw): the
// planner, which cannot know that a few hundred toasted vectors cost more to read
// and compare than a short walk of that small graph, is kept from sorting the
// btree-selected rows by running it with sorts and bitmap scans disabled (see
// runSharedSemantic).
func sharedSemanticQuery(p plan) (*sqlb, bool) {
	if p.vec == nil || !p.current {
		return nil, false
	}
	branches := factBranches(p.vis, "f")
	var shared *frag
	for i := range branches {
		if isSharedBranch(branches[i]) {
			shared = &branches[i]
		}
	}
	if shared == nil {
		return nil, false
	}
	n := p.limit
	s := &sqlb{}
	s.w("WITH q AS MATERIALIZED (SELECT ?::vector AS v), sem AS MATERIALIZED (SELECT f.id, f.embedding <=> (SELECT v FROM q) AS d FROM facts f WHERE ", *p.vec)
	s.f(*shared)
	s.w(" AND ")
	s.f(factTime(p.vis, "f", true))
	s.w(fmt.Sprintf(" AND f.embedding IS NOT NULL ORDER BY f.embedding <=> (SELECT v FROM q) LIMIT %d) ", n))
	s.w("SELECT "+factCols+", '"+RetrieverSemantic+"' AS src, 0 AS rk, sem.d FROM sem JOIN facts f ON f.tenant_id = ? AND f.id = sem.id", p.vis.TenantID)
	return s, true
}

func (e *Engine) querySharedSemantic(ctx context.Context, p plan) ([]factRow, error) {
	s, ok := sharedSemanticQuery(p)
	if !ok {
		return nil, nil
	}
	var rows []factRow
	err := e.runInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)"); err != nil {
			return err
		}
		return tx.NewRaw(s.b.String(), s.args...).Scan(ctx, &rows)
	})
	if err != nil {
		return nil, fmt.Errorf("recall shared facts: %w", err)
	}
	return rows, nil
}

// rerankSemantic gives the semantic hits of both statements one ranking by
// distance.
func rerankSemantic(rows []factRow) {
	var idx []int
	for i := range rows {
		if rows[i].Src == RetrieverSemantic && rows[i].D != nil {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return *rows[idx[a]].D < *rows[idx[b]].D })
	for r, i := range idx {
		rows[i].Rk = r + 1
	}
}

// structuredCond is the structured retriever's condition (facts of the parsed
// predicates, memory types and entities; with a task, the task's facts and the
// constraints and preferences that bound it) and its priority expression.
func structuredCond(p plan) (cond, pri frag) {
	var conds, pris []string
	var cargs, pargs []any
	q := p.parsed
	if len(q.Predicates) > 0 {
		conds = append(conds, "f.predicate IN (?)")
		cargs = append(cargs, bun.In(q.Predicates))
		pris = append(pris, "(f.predicate IN (?))::int * 4")
		pargs = append(pargs, bun.In(q.Predicates))
	}
	if len(q.EntityIDs) > 0 {
		conds = append(conds, "(f.entity_id <> '' AND f.entity_id IN (?))")
		cargs = append(cargs, bun.In(q.EntityIDs))
		pris = append(pris, "(f.entity_id IN (?))::int * 4")
		pargs = append(pargs, bun.In(q.EntityIDs))
	}
	types := q.MemoryTypes
	if p.vis.TaskID != "" {
		types = addUnique(addUnique(types, memory.TypeConstraint), memory.TypePreference)
		conds = append(conds, "f.task_id = ?")
		cargs = append(cargs, p.vis.TaskID)
		pris = append(pris, "(f.task_id = ?)::int * 2")
		pargs = append(pargs, p.vis.TaskID)
	}
	if len(types) > 0 {
		conds = append(conds, "f.memory_type IN (?)")
		cargs = append(cargs, bun.In(types))
		pris = append(pris, "(f.memory_type IN (?))::int")
		pargs = append(pargs, bun.In(types))
	}
	if len(conds) == 0 {
		return frag{}, frag{}
	}
	return frag{sql: strings.Join(conds, " OR "), args: cargs}, frag{sql: strings.Join(pris, " + "), args: pargs}
}

// graphSeeds selects the user's entities a question is about: those it names by
// id, else those of the types it names (in the states it names).
func graphSeeds(p plan) frag {
	q := p.parsed
	var parts []string
	var args []any
	if len(q.EntityIDs) > 0 {
		parts = append(parts, "en.id IN (?)")
		args = append(args, bun.In(q.EntityIDs))
	}
	if len(q.EntityTypes) > 0 && len(q.EntityIDs) == 0 {
		c := "en.type IN (?)"
		args = append(args, bun.In(q.EntityTypes))
		if len(q.States) > 0 {
			c += " AND en.state IN (?)"
			args = append(args, bun.In(q.States))
		}
		parts = append(parts, "("+c+")")
	}
	return frag{sql: strings.Join(parts, " OR "), args: args}
}

// evidenceQuery runs the semantic and keyword retrievers over evidence.
func evidenceQuery(p plan) (*sqlb, bool) {
	ev, ok := evidenceVisible(p.vis, "e")
	if !ok || (p.vec == nil && p.tsq == "") {
		return nil, false
	}
	n := p.limit
	s := &sqlb{}
	s.w("WITH ")
	var srcs []string
	if p.vec != nil {
		s.w("q AS MATERIALIZED (SELECT ?::vector AS v), sem AS (SELECT id, row_number() OVER (ORDER BY d) AS rk FROM (SELECT e.id, e.embedding <=> (SELECT v FROM q) AS d FROM evidence e WHERE ", *p.vec)
		s.f(ev)
		s.w(fmt.Sprintf(" AND e.embedding IS NOT NULL ORDER BY e.embedding <=> (SELECT v FROM q) LIMIT %d) x)", n))
		srcs = append(srcs, "SELECT id, '"+RetrieverSemantic+"' AS src, rk FROM sem")
	}
	if p.tsq != "" {
		if p.vec != nil {
			s.w(", ")
		}
		s.w("kw AS (SELECT id, row_number() OVER (ORDER BY r DESC) AS rk FROM (SELECT e.id, ts_rank(e.search, to_tsquery('english', ?)) AS r FROM evidence e WHERE ", p.tsq)
		s.f(ev)
		s.w(fmt.Sprintf(" AND e.search @@ to_tsquery('english', ?) ORDER BY r DESC LIMIT %d) x)", n), p.tsq)
		srcs = append(srcs, "SELECT id, '"+RetrieverKeyword+"' AS src, rk FROM kw")
	}
	s.w(", c AS (" + strings.Join(srcs, " UNION ALL ") + ") ")
	s.w("SELECT "+evidenceCols+", c.src, c.rk FROM c JOIN evidence e ON e.tenant_id = ? AND e.id = c.id", p.vis.TenantID)
	return s, true
}

// runInTx runs fn in a read-only transaction with the vector index tuned for
// filtered search: a wider candidate list and iterative scans (pgvector 0.8), so a
// selective visibility filter still yields enough rows from the HNSW index.
func (e *Engine) runInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return e.db.RunInTx(ctx, &sql.TxOptions{ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "SELECT set_config('hnsw.ef_search', ?, true), set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.max_scan_tuples', ?, true), set_config('jit', 'off', true)",
			fmt.Sprint(e.opts.EfSearch), fmt.Sprint(e.opts.MaxScanTuples)); err != nil {
			return fmt.Errorf("tune vector search: %w", err)
		}
		return fn(ctx, tx)
	})
}

func (e *Engine) queryFacts(ctx context.Context, p plan) ([]factRow, error) {
	s, ok := factsQuery(p)
	if !ok {
		return nil, nil
	}
	var rows []factRow
	err := e.runInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return tx.NewRaw(s.b.String(), s.args...).Scan(ctx, &rows)
	})
	if err != nil {
		return nil, fmt.Errorf("recall facts: %w", err)
	}
	return rows, nil
}

func (e *Engine) queryEvidence(ctx context.Context, p plan) ([]evidenceRow, error) {
	s, ok := evidenceQuery(p)
	if !ok {
		return nil, nil
	}
	var rows []evidenceRow
	err := e.runInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return tx.NewRaw(s.b.String(), s.args...).Scan(ctx, &rows)
	})
	if err != nil {
		return nil, fmt.Errorf("recall evidence: %w", err)
	}
	return rows, nil
}

// hydrate loads the hits of an external keyword index, applying visibility again:
// an index outside Postgres is never trusted to have filtered.
func (e *Engine) hydrate(ctx context.Context, p plan, hits []KeywordHit) ([]factRow, []evidenceRow, error) {
	var fids, eids []string
	rank := map[string]int{}
	for i, h := range hits {
		if _, seen := rank[string(h.Kind)+h.ID]; seen || !isUUID(h.ID) {
			continue
		}
		rank[string(h.Kind)+h.ID] = i + 1
		if h.Kind == KindFact {
			fids = append(fids, h.ID)
		} else if h.Kind == KindEvidence {
			eids = append(eids, h.ID)
		}
	}
	var frs []factRow
	var ers []evidenceRow
	if len(fids) > 0 && len(factBranches(p.vis, "f")) > 0 {
		s := &sqlb{}
		s.w("SELECT "+factCols+", '"+RetrieverKeyword+"' AS src, 0 AS rk FROM facts f WHERE f.tenant_id = ? AND f.id IN (?) AND (", p.vis.TenantID, bun.In(fids))
		s.f(factVisible(p.vis, "f"))
		s.w(") AND ")
		s.f(factTime(p.vis, "f", p.current))
		s.w(" LIMIT 100")
		if err := e.db.NewRaw(s.b.String(), s.args...).Scan(ctx, &frs); err != nil {
			return nil, nil, fmt.Errorf("hydrate keyword facts: %w", err)
		}
		for i := range frs {
			frs[i].Rk = rank[string(KindFact)+frs[i].ID]
		}
	}
	if ev, ok := evidenceVisible(p.vis, "e"); ok && len(eids) > 0 {
		s := &sqlb{}
		s.w("SELECT "+evidenceCols+", '"+RetrieverKeyword+"' AS src, 0 AS rk FROM evidence e WHERE e.tenant_id = ? AND e.id IN (?) AND ", p.vis.TenantID, bun.In(eids))
		s.f(ev)
		s.w(" LIMIT 100")
		if err := e.db.NewRaw(s.b.String(), s.args...).Scan(ctx, &ers); err != nil {
			return nil, nil, fmt.Errorf("hydrate keyword evidence: %w", err)
		}
		for i := range ers {
			ers[i].Rk = rank[string(KindEvidence)+ers[i].ID]
		}
	}
	return frs, ers, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !((r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')) {
				return false
			}
		}
	}
	return true
}

func isSharedBranch(b frag) bool {
	return strings.Contains(b.sql, "scope IN ('TENANT', 'DEPARTMENT', 'AGENT')")
}
