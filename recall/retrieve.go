package recall

import (
	"context"
	"fmt"
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
	Evidence     []string          `bun:"evidence_ids,array"`
	Src          string            `bun:"src"`
	Rk           int               `bun:"rk"`
	D            *float64          `bun:"d"` // semantic distance, or keyword (ts_rank) score
}

const factCols = "f.id, f.tenant_id, f.memory_key, f.revision, f.scope, f.department_id, f.user_id, f.agent_id, f.session_id, f.task_id, " +
	"f.memory_type, f.subject, f.predicate, f.object, f.content, f.entity_type, f.entity_id, f.status, f.confidence, f.importance, " +
	"f.valid_from, f.valid_until, f.observed_at, f.closed_at, " +
	"array(SELECT fe.evidence_id::text FROM fact_evidence fe WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id ORDER BY fe.created_at DESC LIMIT 3) AS evidence_ids"

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
	D            *float64  `bun:"d"` // semantic distance, or keyword (BM25) score
	// Stale: the turn backs a value superseded by as_of, and no value in force then.
	Stale bool `bun:"stale"`
	// Sim is the turn's similarity to the question whichever retriever found it
	// (the statement's sim column; below -1: not known).
	Sim float64 `bun:"-"`
}

const evidenceCols = "e.id, e.tenant_id, e.kind, e.content, e.speaker, e.user_id, e.department_id, e.agent_id, e.session_id, e.task_id, e.occurred_at, e.importance"

// plan is everything one recall's SQL needs.
type plan struct {
	vis     Visibility
	current bool
	// knownAt, when set, answers as the memory held its revisions then
	// (transaction time); the recall is a past one.
	knownAt time.Time
	vec     *pgvector.Vector // nil: no semantic retrieval
	tsq     string           // "": no keyword retrieval in SQL
	parsed  *ParsedQuery
	// blank: no question was asked, so the structured retriever asks for every
	// memory type and the recall answers with the principal's current facts.
	blank   bool
	speaker string // the schema's speaker entity (User), never walked through
	limit   int    // candidates per retriever
	hops    int
	// sessions: the best-matching sessions' keyword scores, from the statement.
	sessions map[string]float64
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
	if len(fids) > 0 && len(factBranches(p.vis)) > 0 {
		s := &sqlb{}
		s.w("SELECT "+factCols+", '"+RetrieverKeyword+"' AS src, 0 AS rk FROM facts f WHERE f.tenant_id = ? AND f.id IN (?) AND (", p.vis.TenantID, bun.In(fids))
		s.f(factVisible(p.vis))
		s.w(") AND ")
		s.f(factTime(p.vis, p.current))
		s.w(" LIMIT 100")
		if err := e.db.NewRaw(s.b.String(), s.args...).Scan(ctx, &frs); err != nil {
			return nil, nil, fmt.Errorf("hydrate keyword facts: %w", err)
		}
		for i := range frs {
			frs[i].Rk = rank[string(KindFact)+frs[i].ID]
		}
	}
	if ev, ok := evidenceVisible(p.vis); ok && len(eids) > 0 {
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
