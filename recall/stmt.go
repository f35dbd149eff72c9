package recall

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// The recall statement: every retriever over facts and evidence in one statement
// of a fixed shape with bind parameters, prepared once per connection and run with
// a cached generic plan. What a request does not use is switched off by boolean
// parameters that the plan evaluates once (gating), never by changing the text, so
// Postgres plans it once per connection instead of once per recall.
//
// Parameters are named in the text (@tenant, @as_of, …: the fields of
// stmtParams) and bound in stmtParams' order ($1 is @tenant); see bindNames.

// Visibility arms of facts: the user's own facts (USER, the named SESSION and
// TASK) and the shared ones (TENANT, the principal's DEPARTMENT, its AGENT), each
// with its own index. An arm whose scope is not visible is switched off.
var factArms = []string{
	"f.tenant_id = @tenant AND f.user_id = @user AND ((f.scope = 'USER' AND @user_visible) OR (@session <> '' AND f.scope = 'SESSION' AND f.session_id = @session) OR (@task <> '' AND f.scope = 'TASK' AND f.task_id = @task))",
	"@tenant_visible AND f.tenant_id = @tenant AND f.scope = 'TENANT'",
	"@department <> '' AND f.tenant_id = @tenant AND f.scope = 'DEPARTMENT' AND f.department_id = @department",
	"@agent <> '' AND f.tenant_id = @tenant AND f.scope = 'AGENT' AND f.agent_id = @agent",
}

// tenantSemCurrent is the semantic arm of TENANT-scope facts in current recall:
// an ordered walk of facts_embedding_tenant_hnsw (current TENANT facts of every
// tenant) with the tenant and time filtered above it, in a plan of its own (the
// function facts_tenant_walk: a generic plan here traded the walk for reading and
// sorting every tenant's TENANT facts once there were a few hundred tenants); the
// iterative scan (hnsw.iterative_scan) keeps walking until the limit is filled or
// hnsw.max_scan_tuples is reached.
func tenantSemCurrent(n int) string {
	return fmt.Sprintf("(SELECT w.id, w.tid, w.d FROM facts_tenant_walk(@tenant, @query_vector::vector, @as_of, %d) w WHERE @run_semantic AND @tenant_visible)", n)
}

// tenantStructured is the structured arm of current TENANT facts: their best n by
// priority (structuredPriSQL), importance and validity, without reading every
// TENANT fact a memory type matches. A fact's priority is 4·predicate +
// 4·entity + 2·task + 1·memory type matched, so the best n are found among:
// every fact matched by entity or task (few), the best n by importance of each
// predicate, of each predicate and memory type, and of each memory type (each an
// ordered index scan, see the migration tenant_structured). That is exact: the
// facts matched by predicate and type (priority 5) are the best of theirs; the
// best of each predicate hold the best predicate-only ones (priority 4) in the
// number the others leave; the same for the memory type alone (priority 1).
func tenantStructured(tf string, n int) string {
	cols := "f.id, f.ctid AS tid, f.predicate, f.entity_id, f.task_id, f.memory_type, f.importance AS imp, f.valid_from AS vf"
	from := "FROM facts f WHERE @run_structured AND @tenant_visible AND f.tenant_id = @tenant AND f.scope = 'TENANT' AND " + tf
	top := fmt.Sprintf(" ORDER BY f.importance DESC, f.valid_from DESC LIMIT %d", n)
	pri := strings.ReplaceAll(structuredPriSQL, "f.", "c.")
	return fmt.Sprintf("(SELECT DISTINCT ON (pri, imp, vf, c.id) c.id, c.tid, %s AS pri, c.imp, c.vf FROM (", pri) +
		"(SELECT x.* FROM unnest(@predicates::text[]) pr(p) CROSS JOIN LATERAL (SELECT " + cols + " " + from + " AND f.predicate = pr.p" + top + ") x)" +
		" UNION ALL (SELECT x.* FROM unnest(@predicates::text[]) pr(p) CROSS JOIN unnest(@memory_types::text[]) mt(t) CROSS JOIN LATERAL (SELECT " + cols + " " + from + " AND f.predicate = pr.p AND f.memory_type = mt.t" + top + ") x)" +
		" UNION ALL (SELECT x.* FROM unnest(@memory_types::text[]) mt(t) CROSS JOIN LATERAL (SELECT " + cols + " " + from + " AND f.memory_type = mt.t" + top + ") x)" +
		" UNION ALL (SELECT x.* FROM unnest(@entity_ids::text[]) en(e) CROSS JOIN LATERAL (SELECT " + cols + " " + from + " AND f.entity_id <> '' AND f.entity_id = en.e) x)" +
		" UNION ALL (SELECT " + cols + " " + from + " AND @structured_task <> '' AND f.task_id <> '' AND f.task_id = @structured_task)" +
		fmt.Sprintf(") c ORDER BY pri DESC, imp DESC, vf DESC, c.id LIMIT %d)", n)
}

// factTimeSQL keeps the revisions that hold at @as_of (see factTime).
func factTimeSQL(current bool) string {
	if current {
		return "f.status = 'ACTIVE' AND f.valid_from <= @as_of AND (f.valid_until IS NULL OR f.valid_until > @as_of)"
	}
	return "f.valid_from <= @as_of AND (f.valid_until IS NULL OR f.valid_until > @as_of) AND NOT (f.status = 'INVALIDATED' AND f.closed_at IS NOT NULL AND f.closed_at <= @as_of)"
}

const evidenceVisibleSQL = "e.tenant_id = @tenant AND e.user_id = @user AND e.occurred_at <= @as_of AND (@user_visible OR (@session <> '' AND e.session_id = @session) OR (@task <> '' AND e.task_id = @task))"

// tsqSQL is the query's tsquery, made once per statement (an InitPlan): in a
// generic plan to_tsquery('english', @tsquery) is not folded to a constant, and
// parsing and stemming it again for every row it is compared with cost about
// 15 µs a row, several milliseconds a recall.
const tsqSQL = "(SELECT to_tsquery('english', @tsquery))"

// Evidence read from indexes (see buildRecallSQL): a user with at least
// manyTurnsMin turns that are at least 1/manyTurnsShare of all evidence. Below
// that, comparing the user's turns exactly is cheap (the light user, who must not
// get slower) or the filtered HNSW walk would pass over too many other turns
// (pg_class.reltuples: the table's size as the planner last counted it).
const (
	manyTurnsMin   = 500
	manyTurnsShare = 200
)

var manyTurnsSQL = fmt.Sprintf("@user_visible AND coalesce((SELECT s.docs FROM evidence_stats s WHERE s.tenant_id = @tenant AND s.user_id = @user), 0) >= greatest(%d, (SELECT c.reltuples FROM pg_class c WHERE c.oid = 'evidence'::regclass) / %d)", manyTurnsMin, manyTurnsShare)

// postingsPerTerm is how many turns each query word brings from evidence_postings
// for a user with many turns: the candidates BM25 scores (each one a row read).
func postingsPerTerm(n int) int { return n }

// structuredPriSQL is how well a fact matches the question's structure: 4 for
// a predicate it names, 4 for an entity, 2 for the task, 1 for a memory type.
const structuredPriSQL = "(f.predicate = ANY(@predicates::text[]))::int * 4 + (f.entity_id = ANY(@entity_ids::text[]))::int * 4 + (@structured_task <> '' AND f.task_id = @structured_task)::int * 2 + (f.memory_type = ANY(@memory_types::text[]))::int"

// structuredPriOrNullSQL is structuredPriSQL where a fact matches the question's
// predicates, entities, task or memory types, else NULL (entity ids the parser
// finds are never empty).
const structuredPriOrNullSQL = "NULLIF((f.predicate = ANY(@predicates::text[]))::int * 4 + (f.entity_id <> '' AND f.entity_id = ANY(@entity_ids::text[]))::int * 4 + (@structured_task <> '' AND f.task_id = @structured_task)::int * 2 + (f.memory_type = ANY(@memory_types::text[]))::int, 0)"

// evidenceSemanticSQL is semantic retrieval over evidence (esem). A user with few
// turns is compared exactly: a turn's distance to the question is that of the
// turn or of its best sentence (evidence_sentences, the sentences of long turns
// embedded one by one when written), whichever is nearer; a sentence counts only
// through a visible turn. A user with many turns: a walk of
// evidence_embedding_hnsw with the tenant, user and time filtered above it
// (OFFSET 0 keeps them out of the scan, as in tenantSemCurrent; the iterative
// scan walks on until the limit is filled or hnsw.max_scan_tuples is reached).
// Many turns means the USER scope is visible, so tenant, user and time are the
// whole visibility. The walk's turns are scored again by the nearer of each and
// its best sentence (heavyWalk): a turn whose sentence is near but whose whole is
// not among them is not found (that would need an index of sentences of its
// own). A visible turn's sentences are looked
// up by the turn (the primary key's prefix): the statement is planned once for
// every user (generic plans), and a scan by user then read a light user's few
// sentences by scanning the table (6 ms of a light user's recall beside a user of
// 100,000 turns, 48,000 sentences: engram bench recall --history).
func evidenceSemanticSQL(semGate string, n int) string {
	return fmt.Sprintf("esem AS (SELECT id, tid, row_number() OVER (ORDER BY d) AS rk, d FROM (SELECT id, tid, d FROM ("+
		"(SELECT ev.id, ev.tid, least(ev.d, "+bestSentenceSQL("ev.id")+") AS d FROM ev WHERE ev.d IS NOT NULL ORDER BY 3 LIMIT %d) UNION ALL "+
		"(SELECT h.id, h.tid, least(h.d, "+bestSentenceSQL("h.id")+") AS d FROM ("+
		"SELECT w.id, w.tid, w.d FROM evidence_walk(@tenant, @user, @query_vector::vector, @as_of, %d) w WHERE "+semGate+"@run_semantic AND (SELECT many FROM hv)) h)"+
		") y ORDER BY d LIMIT %d) x), ", n, heavyWalk(n), n)
}

// bestSentenceSQL is the distance of the turn id's nearest sentence, looked up by
// the primary key's prefix (tenant, turn) and nothing else: the turn is visible,
// so its sentences are, and a condition on the user would let a plan made without
// statistics read every sentence of the user's for each turn instead (a recall
// over a never-analysed suite took 7 s: 110,889 lookups of 375 rows each).
func bestSentenceSQL(id string) string {
	return "(SELECT min(s.embedding <=> @query_vector::vector) FROM evidence_sentences s WHERE s.tenant_id = @tenant AND s.evidence_id = " + id + ")"
}

// sessionsKept is how many of the best-matching sessions the statement returns.
const sessionsKept = 10

// bm25SQL is one term's Okapi BM25 weight (k1 1.2, b 0.75) in SQL, from its
// document frequency, the corpus size, its frequency in the document, the
// document's length and the corpus's average length.
func bm25SQL(df, n, tf, dl, avgdl string) string {
	return bm25NormSQL(df, n, tf, fmt.Sprintf("(0.25 + 0.75 * %s / %s)", dl, avgdl))
}

// bm25NormSQL is one term's BM25 weight with the length normalisation norm (an SQL
// expression; 1: none).
func bm25NormSQL(df, n, tf, norm string) string {
	return fmt.Sprintf("ln(1 + (%[2]s - %[1]s + 0.5) / (%[1]s + 0.5)) * %[3]s * 2.2 / (%[3]s + 1.2 * %[4]s)", df, n, tf, norm)
}

// longTurn is how many times the average turn's length a turn may have before
// its keyword score is normalised by its length whatever Fusion.KeywordLengthNorm
// says: a pasted document or a tool's output of thousands of words says every
// word often, and would otherwise lead every question.
const longTurn = 4

// turnBM25SQL is one term's BM25 weight in a turn's own keyword score: length
// normalisation b (Fusion.KeywordLengthNorm) up to longTurn times the average
// length, and beyond it Okapi's 0.75 for the length above that.
func turnBM25SQL(df, n, tf, dl, avgdl string, b float64) string {
	return bm25NormSQL(df, n, tf, fmt.Sprintf("(%[3]s + %[4]s * %[1]s / %[2]s + 0.75 * greatest(%[1]s / %[2]s - %[5]d, 0))",
		dl, avgdl, strconv.FormatFloat(1-b, 'f', -1, 64), strconv.FormatFloat(b, 'f', -1, 64), longTurn))
}

// evidenceKeywordSQL is keyword retrieval over evidence (ekw): Okapi BM25 (k1
// 1.2, b the fusion's KeywordLengthNorm, turnBM25SQL) with OR semantics. The corpus statistics are the user's turns,
// kept at commit time (evidence_stats, evidence_terms: see the migration
// evidence_index); a turn's own words count in full and the words of the turn
// before it (weight C, see storage.InsertEvidence) at 0.35; the length is the
// turn's own lexemes. The turns scored are every visible turn that matches (few
// turns), or the best postingsPerTerm of each query word by the postings' cheap
// score (many turns), each looked up by its id (OFFSET 0: a generic plan would
// otherwise read every turn of the user's that matches through the GIN index and
// join them). etf keeps each matched turn's own (tfo) and previous turn's (tfp)
// counts apart, for the context and session retrievers; the turn's own count
// takes the words of its questions (weight B, turntext.SplitAsked) at the fusion's
// Asked. Turns of equal score are
// taken the more recent first, then by id (as the baseline breaks its ties; ectx
// and esess by id): BM25 ties are common (the same words, the same length), and
// without an order which of them made the last places differed from run to run
// (one held-out question's recall@10 went from 0 to 1 between two runs of the same
// build).
func evidenceKeywordSQL(lexGate string, n int, b, askedWeight float64) string {
	asked := strconv.FormatFloat(askedWeight, 'f', -1, 64)
	return fmt.Sprintf("eq AS (SELECT coalesce(array_agg(lexeme), '{}') AS lx FROM unnest(to_tsvector('english', replace(@tsquery, ' | ', ' ')))), "+
		"ekc AS (SELECT DISTINCT p.evidence_id FROM unnest((SELECT lx FROM eq)::text[]) q(l) CROSS JOIN LATERAL ("+
		"SELECT p.evidence_id FROM evidence_postings p WHERE p.tenant_id = @tenant AND p.user_id = @user AND p.lexeme = q.l ORDER BY p.w DESC LIMIT %d) p "+
		"WHERE "+lexGate+"@run_keyword AND (SELECT many FROM hv)), "+
		"em AS MATERIALIZED (SELECT id, tid, sid, at, search, greatest(length(ts_filter(search, '{a,b,d}')), 1) AS dl FROM ("+
		"SELECT id, tid, sid, at, search FROM ev WHERE search IS NOT NULL UNION ALL "+
		"SELECT e.id, e.tid, e.session_id, e.occurred_at, e.search FROM ekc CROSS JOIN LATERAL (SELECT e.*, e.ctid AS tid FROM evidence e WHERE e.tenant_id = @tenant AND e.id = ekc.evidence_id OFFSET 0) e WHERE "+evidenceVisibleSQL+" AND e.search @@ "+tsqSQL+") x), "+
		"etf AS (SELECT m.id, m.tid, m.sid, m.at, m.dl, u.lexeme, c.tfo, c.tfp, c.tfo + 0.35 * c.tfp AS tf "+
		"FROM em m CROSS JOIN LATERAL unnest(m.search) u CROSS JOIN LATERAL (SELECT (count(*) FILTER (WHERE w <> 'C' AND w <> 'B') + "+asked+" * count(*) FILTER (WHERE w = 'B'))::float8 AS tfo, "+
		"(count(*) FILTER (WHERE w = 'C'))::float8 AS tfp FROM unnest(u.weights) w) c "+
		"WHERE u.lexeme = ANY((SELECT lx FROM eq)::text[])), "+
		"edf AS (SELECT t.lexeme, greatest(t.df, 1)::float8 AS df FROM evidence_terms t WHERE @run_keyword AND t.tenant_id = @tenant AND t.user_id = @user AND t.lexeme = ANY((SELECT lx FROM eq)::text[])), "+
		"en AS (SELECT greatest(coalesce(max(s.docs), 0), 1)::float8 AS n, coalesce(max(s.lex_len)::float8 / nullif(max(s.lex_docs), 0), 1)::float8 AS avgdl "+
		"FROM evidence_stats s WHERE @run_keyword AND s.tenant_id = @tenant AND s.user_id = @user), "+
		"ekw AS (SELECT id, tid, row_number() OVER (ORDER BY r DESC, at DESC, id) AS rk, r FROM (SELECT t.id, t.tid, t.at, "+
		"sum("+turnBM25SQL("edf.df", "en.n", "t.tf", "t.dl", "en.avgdl", b)+") AS r "+
		"FROM etf t JOIN edf USING (lexeme) CROSS JOIN en GROUP BY t.id, t.tid, t.at ORDER BY r DESC, t.at DESC, t.id LIMIT %d) x), ", postingsPerTerm(n), n)
}

// contextKeywordSQL is the context retriever over evidence (ectx): a turn found
// by the words of the turns around it, the question it answers (the turn before,
// stored with it at weight C) and the reply it got (the next turn of its session,
// enx), each at full weight beside its own, scored by BM25 with the corpus
// statistics of ekw (a turn that matched nothing itself takes the average
// length). It reads only matched turns and the order of the visible ones (ev;
// for a user with many turns, read from indexes, only the turn before counts:
// the next one would need its position kept with the turn).
func contextKeywordSQL(n int) string {
	return "enx AS (SELECT id, lead(id) OVER (PARTITION BY sid ORDER BY at, id) AS nid FROM ev WHERE @run_keyword AND sid <> ''), " +
		"ectf AS (SELECT id, lexeme, sum(tf) AS tf FROM (SELECT id, lexeme, tfo + tfp AS tf FROM etf " +
		"UNION ALL SELECT x.id, t.lexeme, t.tfo FROM etf t JOIN enx x ON x.nid = t.id WHERE t.tfo > 0) c GROUP BY id, lexeme), " +
		fmt.Sprintf("ectx AS (SELECT x.id, coalesce(m.tid, ev.tid) AS tid, row_number() OVER (ORDER BY x.r DESC, x.id) AS rk, x.r FROM (SELECT c.id, "+
			"sum("+bm25SQL("edf.df", "en.n", "c.tf", "coalesce(m.dl, en.avgdl)", "en.avgdl")+") AS r "+
			"FROM ectf c JOIN edf USING (lexeme) CROSS JOIN en LEFT JOIN em m ON m.id = c.id GROUP BY c.id ORDER BY r DESC, c.id LIMIT %d) x LEFT JOIN em m ON m.id = x.id LEFT JOIN ev ON ev.id = x.id), ", n)
}

// sessionKeywordSQL scores the user's sessions as documents (esess): BM25 of the
// words of their matched turns (their own words), the session's length its
// number of visible turns, over the visible sessions as the corpus; the best
// `keep` come back as 'S' rows and lift the turns of a session that matches as a
// whole (Fusion.Session). For a user with many turns (read from the indexes) the
// sessions are those of the turns the postings brought, their lengths the kept
// turn counts (sessions.turn_count, by the primary key) and the corpus's size and
// average length the kept statistics (session_stats): the document frequencies
// are over the matched turns' sessions either way.
func sessionKeywordSQL(keep int) string {
	return "ess AS (SELECT sid, count(*)::float8 AS nt FROM ev WHERE @run_keyword AND sid <> '' GROUP BY sid " +
		"UNION ALL SELECT s.id, greatest(s.turn_count, 1)::float8 FROM sessions s WHERE @run_keyword AND (SELECT many FROM hv) AND s.tenant_id = @tenant AND s.user_id = @user " +
		"AND s.id IN (SELECT sid FROM etf WHERE sid <> '' AND tfo > 0)), " +
		"esn AS (SELECT CASE WHEN (SELECT many FROM hv) THEN h.n ELSE l.n END AS n, CASE WHEN (SELECT many FROM hv) THEN h.avgnt ELSE l.avgnt END AS avgnt " +
		"FROM (SELECT greatest(count(*), 1)::float8 AS n, coalesce(avg(nt), 1)::float8 AS avgnt FROM ess WHERE NOT (SELECT many FROM hv)) l CROSS JOIN " +
		"(SELECT greatest(coalesce(max(s.sessions), 0), 1)::float8 AS n, coalesce(max(s.turns)::float8 / nullif(max(s.sessions), 0), 1)::float8 AS avgnt " +
		"FROM session_stats s WHERE @run_keyword AND (SELECT many FROM hv) AND s.tenant_id = @tenant AND s.user_id = @user) h), " +
		"estf AS (SELECT sid, lexeme, sum(tfo) AS tf FROM etf WHERE sid <> '' AND tfo > 0 GROUP BY sid, lexeme), " +
		"esdf AS (SELECT lexeme, count(*)::float8 AS df FROM estf GROUP BY lexeme), " +
		fmt.Sprintf("esess AS (SELECT s.sid, sum("+bm25SQL("d.df", "esn.n", "s.tf", "ss.nt", "esn.avgnt")+") AS r "+
			"FROM estf s JOIN esdf d USING (lexeme) JOIN ess ss USING (sid) CROSS JOIN esn GROUP BY s.sid ORDER BY r DESC, s.sid LIMIT %d), ", keep)
}

// buildRecallSQL is the statement for current (or past) recall with n candidates
// per retriever.
//
// part selects the retrievers the statement returns: partAll, or partSemantic
// (facts and evidence by vector) and partLexical (keyword, structured, graph),
// which run at the same time on two connections. Every part defines every
// retriever, so each binds all parameters; Postgres skips what it does not read.
//
// ctx adds the context retriever (contextKeywordSQL) and sess the session scores
// (sessionKeywordSQL): each only when its fusion weight is set, so an engine that
// does not weigh them does not pay for them.
func buildRecallSQL(current bool, sh sqlShape) string {
	return buildSQL(current, factTimeSQL(current), sh)
}

// knownTimeSQL keeps the revisions that, as the memory held them at @known_at
// (transaction time: recorded by then, with the status and validity they had
// then, from fact_versions when they changed since), hold at @as_of.
const knownTimeSQL = "f.recorded_at <= @known_at AND EXISTS (SELECT 1 FROM (" +
	"SELECT f.status AS st, f.valid_from AS vf, f.valid_until AS vu WHERE coalesce(f.changed_at, f.recorded_at) <= @known_at " +
	"UNION ALL SELECT fv.status, fv.valid_from, fv.valid_until FROM fact_versions fv WHERE fv.tenant_id = f.tenant_id AND fv.fact_id = f.id AND fv.held_from <= @known_at AND fv.held_until > @known_at) k " +
	"WHERE k.vf <= @as_of AND (k.vu IS NULL OR k.vu > @as_of) AND NOT (k.st = 'INVALIDATED' AND f.closed_at IS NOT NULL AND f.closed_at <= @as_of))"

// buildKnownSQL is the statement for recall known at @known_at (past recall over the
// revisions as the memory held them then).
func buildKnownSQL(sh sqlShape) string {
	return buildSQL(false, knownTimeSQL, sh)
}

// sqlShape is what the recall statement's text depends on besides the time
// filter: n candidates per retriever, the part, whether the context and session
// retrievers are in it, and the keyword retriever's length normalisation and
// weight of a turn's questions.
type sqlShape struct {
	n, part           int
	ctx, sess         bool
	lengthNorm, asked float64
}

// buildSQL assembles the recall statement with tf as its facts' time filter.
func buildSQL(current bool, tf string, sh sqlShape) string {
	n, part, ctx, sess := sh.n, sh.part, sh.ctx, sh.sess
	// fn bounds the fact retrievers' candidates: half the evidence retrievers'.
	// Facts are few per user and each is a whole statement, so their best half is
	// enough for the fusion (the eval's figures are unchanged), and each fact row
	// costs the statement far more (its projection, its evidence ids) than a turn.
	fn := max(n/2, 10)
	var b strings.Builder
	b.WriteString("WITH RECURSIVE ")
	// vf: the visible facts of the user, its department and its agent (and, in past
	// recall, the tenant's), read once for the semantic, keyword and structured
	// retrievers: each row's distance, rank and structured priority are computed
	// in the one pass, and each retriever takes its best n per arm from it. (Read
	// by each retriever, the same few hundred wide rows were fetched three times,
	// which was most of the statement's time.) Current TENANT facts, which can be
	// many, are read by each retriever from its own index.
	arms := []string{factArms[0], factArms[2], factArms[3]}
	if !current {
		arms = factArms
	}
	// A part computes only what its retrievers read; the other expressions stay
	// in the text behind a false gate (folded away when planned), so that every
	// part still gives each parameter its type.
	semGate, lexGate := "", ""
	if part == partLexical {
		semGate = "false AND "
	}
	if part == partSemantic {
		lexGate = "false AND "
	}
	dExpr := "CASE WHEN " + semGate + "@run_semantic AND f.embedding IS NOT NULL THEN f.embedding <=> @query_vector::vector END"
	rExpr := "CASE WHEN " + lexGate + "@run_keyword AND (f.search @@ " + tsqSQL + ") IS TRUE THEN ts_rank(f.search, " + tsqSQL + ") END"
	priExpr := "CASE WHEN " + lexGate + "@run_structured THEN " + structuredPriOrNullSQL + " END"
	b.WriteString("vf AS MATERIALIZED (")
	for i, arm := range arms {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "SELECT %d AS a, f.id, f.ctid AS tid, %s AS d, %s AS r, %s AS pri, f.importance AS imp, f.valid_from AS vf FROM facts f WHERE (@run_semantic OR @run_keyword OR @run_structured) AND %s AND %s",
			i, dExpr, rExpr, priExpr, arm, tf)
	}
	b.WriteString("), ")
	// fromVF takes the best n of each arm of vf by order among the rows with col.
	fromVF := func(cols, col, order string) {
		for i := range arms {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			fmt.Fprintf(&b, "(SELECT %s FROM vf WHERE a = %d AND %s IS NOT NULL ORDER BY %s LIMIT %d)", cols, i, col, order, fn)
		}
	}
	b.WriteString("sem AS (SELECT id, tid, row_number() OVER (ORDER BY d) AS rk, d FROM (")
	fromVF("id, tid, d", "d", "d")
	if current {
		b.WriteString(" UNION ALL " + tenantSemCurrent(fn))
	}
	fmt.Fprintf(&b, ") x ORDER BY d LIMIT %d), ", 2*fn)
	// Keyword: current TENANT facts use their own GIN index (facts_search_tenant_gin).
	b.WriteString("kw AS (SELECT id, tid, row_number() OVER (ORDER BY r DESC) AS rk, r FROM (")
	fromVF("id, tid, r", "r", "r DESC")
	if current {
		fmt.Fprintf(&b, " UNION ALL (SELECT f.id, f.ctid, ts_rank(f.search, "+tsqSQL+") AS r FROM facts f WHERE @run_keyword AND @tenant_visible AND (f.tenant_id || '') = @tenant AND f.scope = 'TENANT' AND %s AND f.search @@ "+tsqSQL+" ORDER BY r DESC LIMIT %d)", tf, fn)
	}
	fmt.Fprintf(&b, ") x ORDER BY r DESC LIMIT %d), ", fn)
	b.WriteString("st AS (SELECT id, tid, row_number() OVER (ORDER BY pri DESC, imp DESC, vf DESC) AS rk FROM (")
	fromVF("id, tid, pri, imp, vf", "pri", "pri DESC, imp DESC, vf DESC")
	if current {
		b.WriteString(" UNION ALL " + tenantStructured(tf, fn))
	}
	fmt.Fprintf(&b, ") x ORDER BY pri DESC, imp DESC, vf DESC LIMIT %d), ", fn)
	// Graph: the user's entities the question names (by id, else by type and
	// state), then up to @graph_hops edges further in the user's own graph, never back
	// through the speaker; the visible facts about what was reached.
	b.WriteString("seeds AS (SELECT en.type, en.id FROM entities en WHERE @run_graph AND en.tenant_id = @tenant AND en.user_id = @user AND " +
		"(en.id = ANY(@entity_ids::text[]) OR (cardinality(@entity_ids::text[]) = 0 AND en.type = ANY(@entity_types::text[]) AND (cardinality(@entity_states::text[]) = 0 OR en.state = ANY(@entity_states::text[])))) " +
		"ORDER BY en.updated_at DESC LIMIT 20), ")
	b.WriteString("walk AS (SELECT type, id, 0 AS depth FROM seeds UNION " +
		"SELECT nb.type, nb.id, w.depth + 1 FROM walk w CROSS JOIN LATERAL (" +
		"SELECT ed.to_type AS type, ed.to_id AS id FROM edges ed WHERE ed.tenant_id = @tenant AND ed.user_id = @user AND ed.from_type = w.type AND ed.from_id = w.id " +
		"UNION ALL SELECT ed.from_type, ed.from_id FROM edges ed WHERE ed.tenant_id = @tenant AND ed.user_id = @user AND ed.to_type = w.type AND ed.to_id = w.id" +
		") nb WHERE w.depth < @graph_hops AND nb.type <> @speaker_type), ")
	var vis []string
	for _, a := range factArms {
		vis = append(vis, "("+a+")")
	}
	// Each entity reached looks up its facts (facts_recall_entity; OFFSET 0 keeps
	// the lookup a nested loop): joined as a whole, the generic plan read every
	// visible fact, the tenant's included, and hashed them against the walk.
	fmt.Fprintf(&b, "gr AS (SELECT id, tid, row_number() OVER (ORDER BY depth, vf DESC) AS rk FROM (SELECT f.id, min(f.tid) AS tid, min(w.depth) AS depth, max(f.vf) AS vf "+
		"FROM (SELECT DISTINCT type, id, depth FROM walk LIMIT 200) w CROSS JOIN LATERAL (SELECT f.id, f.ctid AS tid, f.valid_from AS vf FROM facts f "+
		"WHERE f.tenant_id = @tenant AND f.entity_id <> '' AND f.entity_id = w.id AND f.entity_type = w.type AND (%s) AND %s OFFSET 0) f "+
		"GROUP BY f.id ORDER BY 2, 3 DESC LIMIT %d) g), ", strings.Join(vis, " OR "), tf, fn)
	// Evidence: a user with few turns (or whose turns are a small share of all
	// evidence, where a filtered HNSW walk would pass over many others' turns before
	// it filled its limit) is compared exactly; a user with many, from indexes (see
	// manyTurnsSQL). The choice is made once per statement from the kept statistics
	// (an InitPlan the two branches' one-time filters read), so one generic plan
	// serves both ends.
	fmt.Fprintf(&b, "hv AS (SELECT %s AS many), ", manyTurnsSQL)
	// ev: the principal's visible turns, read once for both evidence retrievers
	// (each turn's distance, and its lexemes when it matches the query).
	edExpr := "CASE WHEN " + semGate + "@run_semantic AND e.embedding IS NOT NULL THEN e.embedding <=> @query_vector::vector END"
	esExpr := "CASE WHEN " + lexGate + "@run_keyword AND (e.search @@ " + tsqSQL + ") IS TRUE THEN e.search END"
	fmt.Fprintf(&b, "ev AS MATERIALIZED (SELECT e.id, e.ctid AS tid, %s AS d, %s AS search, e.session_id AS sid, e.occurred_at AS at FROM evidence e WHERE (@run_semantic OR @run_keyword) AND NOT (SELECT many FROM hv) AND %s), ", edExpr, esExpr, evidenceVisibleSQL)
	b.WriteString(evidenceSemanticSQL(semGate, n))
	// Keyword over evidence: the turn's own words (ekw), its neighbours' (ectx),
	// its session's (esess).
	b.WriteString(evidenceKeywordSQL(lexGate, n, sh.lengthNorm, sh.asked))
	if ctx {
		b.WriteString(contextKeywordSQL(n))
	}
	if sess {
		b.WriteString(sessionKeywordSQL(sessionsKept))
	}
	var fc, ec []string
	if part != partLexical {
		fc = append(fc, "SELECT id, tid, '"+RetrieverSemantic+"' AS src, rk, d FROM sem")
		ec = append(ec, "SELECT id, tid, '"+RetrieverSemantic+"' AS src, rk, d FROM esem")
	}
	if part != partSemantic {
		fc = append(fc, "SELECT id, tid, '"+RetrieverKeyword+"' AS src, rk, r::float8 AS d FROM kw",
			"SELECT id, tid, '"+RetrieverStructured+"', rk, NULL::float8 FROM st", "SELECT id, tid, '"+RetrieverGraph+"', rk, NULL::float8 FROM gr")
		ec = append(ec, "SELECT id, tid, '"+RetrieverKeyword+"' AS src, rk, r::float8 AS d FROM ekw")
		if ctx {
			ec = append(ec, "SELECT id, tid, '"+sourceContext+"' AS src, rk, r::float8 AS d FROM ectx")
		}
	}
	// One row per fact or turn, however many retrievers found it: its hits
	// (retriever, rank, score) in one column (see parseHits), so each is read and
	// sent once.
	hits := "string_agg(src || ' ' || rk || ' ' || coalesce(d::text, ''), ',') AS hits"
	// Each row carries the tuple id it was read at (tid, the same version: one
	// statement, one snapshot; every retriever reads the rows it finds), so it is
	// fetched again by a TID scan instead of a primary-key lookup.
	b.WriteString("fc AS (SELECT id, min(tid) AS tid, " + hits + " FROM (" + strings.Join(fc, " UNION ALL ") + ") x GROUP BY id), " +
		"ec AS (SELECT id, min(tid) AS tid, " + hits + " FROM (" + strings.Join(ec, " UNION ALL ") + ") x GROUP BY id) ")
	// The rows: one per fact, turn, matching session, named task and named
	// session, told apart by kind; their columns are named by the first arm and
	// read by name (recallRow).
	factCols := "SELECT 'fact' AS kind, fc.hits, NULL::float8 AS score, f.id::text AS id, f.memory_key, f.revision, f.scope, f.department_id, f.user_id, f.agent_id, f.session_id, f.task_id, " +
		"f.memory_type, f.subject, f.predicate, f.object, f.content, f.entity_type, f.entity_id, f.status, f.confidence::text AS confidence, f.importance::text AS importance, " +
		"f.valid_from, f.valid_until, f.observed_at, f.closed_at, " +
		"array(SELECT fe.evidence_id::text FROM fact_evidence fe WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id ORDER BY fe.created_at DESC LIMIT 3)::text AS evidence_ids, '' AS speaker, f.key_id, false AS stale "
	b.WriteString(factCols + "FROM fc JOIN facts f ON f.ctid = fc.tid AND f.tenant_id = @tenant AND f.id = fc.id " +
		"UNION ALL SELECT 'evidence', ec.hits, NULL::float8, e.id::text, '', 0, 'USER', e.department_id, e.user_id, e.agent_id, e.session_id, e.task_id, " +
		"'', '', '', '', e.content, '', '', '', '1', e.importance::text, e.occurred_at, NULL::timestamptz, e.occurred_at, NULL::timestamptz, '{}', e.speaker, e.key_id, " +
		// stale: the turn backs a value superseded by as_of and no value in force then.
		"(EXISTS (SELECT 1 FROM fact_evidence fe JOIN facts f2 ON f2.tenant_id = fe.tenant_id AND f2.id = fe.fact_id WHERE fe.tenant_id = @tenant AND fe.evidence_id = e.id " +
		"AND f2.status = 'SUPERSEDED' AND f2.valid_until IS NOT NULL AND f2.valid_until <= @as_of) AND NOT EXISTS (SELECT 1 FROM fact_evidence fe JOIN facts f2 ON f2.tenant_id = fe.tenant_id AND f2.id = fe.fact_id " +
		"WHERE fe.tenant_id = @tenant AND fe.evidence_id = e.id AND f2.status IN ('ACTIVE', 'SUPERSEDED') AND f2.valid_from <= @as_of AND (f2.valid_until IS NULL OR f2.valid_until > @as_of))) AS stale " +
		"FROM ec JOIN evidence e ON e.ctid = ec.tid AND e.tenant_id = @tenant AND e.id = ec.id")
	if part != partSemantic && sess {
		// The best-matching sessions, one row each: its id and score (see fuse).
		b.WriteString(" UNION ALL SELECT 'session_match', '', r, sid, '', 0, '', '', '', '', sid, '', '', '', '', '', '', '', '', '', '', '', " +
			"NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false FROM esess")
	}
	if part != partLexical {
		// The named task and session, each only if it is the user's (or nobody's):
		// one row each, its fields as JSON in the content column, keyed by their
		// column names (taskJSON, sessionJSON).
		b.WriteString(" UNION ALL SELECT 'task', '', NULL, t.id, '', 0, '', '', t.user_id, '', '', t.id, '', '', '', '', " +
			"json_build_object('id', t.id, 'user_id', t.user_id, 'goal', t.goal, 'state', t.state, 'done', t.done, 'todo', t.todo, 'next_step', t.next_step, 'last_error', t.last_error)::text, " +
			"'', '', '', '', '', NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false " +
			"FROM (SELECT * FROM tasks t WHERE @task <> '' AND t.tenant_id = @tenant AND t.id = @task AND (t.user_id = @user OR t.user_id = '') LIMIT 1) t " +
			"UNION ALL SELECT 'session', '', NULL, s.id, '', 0, '', '', s.user_id, '', s.id, '', '', '', '', '', " +
			"json_build_object('id', s.id, 'user_id', s.user_id, 'recent', s.recent, 'summary', s.summary)::text, " +
			"'', '', '', '', '', NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false " +
			"FROM (SELECT * FROM sessions s WHERE @session <> '' AND s.tenant_id = @tenant AND s.id = @session AND (s.user_id = @user OR s.user_id = '') LIMIT 1) s")
	}
	return b.String()
}

// stmtArgs are the statement's parameters for plan p.
func stmtArgs(p plan, on retrieverSet) stmtParams {
	v := p.vis
	session, task, dept, agent := "", "", "", ""
	if v.SessionID != "" && v.allows(memory.ScopeSession) {
		session = v.SessionID
	}
	if v.TaskID != "" && v.allows(memory.ScopeTask) {
		task = v.TaskID
	}
	if v.DepartmentID != "" && v.allows(memory.ScopeDepartment) {
		dept = v.DepartmentID
	}
	if v.AgentID != "" && v.allows(memory.ScopeAgent) {
		agent = v.AgentID
	}
	q := p.parsed
	types := q.MemoryTypes
	if v.TaskID != "" {
		types = addUnique(addUnique(types, memory.TypeConstraint), memory.TypePreference)
	}
	typeStrs := make([]string, len(types))
	for i, t := range types {
		typeStrs[i] = string(t)
	}
	hasSt := on.has(RetrieverStructured) && (len(q.Predicates) > 0 || len(q.EntityIDs) > 0 || len(typeStrs) > 0 || v.TaskID != "")
	hasSeeds := on.has(RetrieverGraph) && (len(q.EntityIDs) > 0 || len(q.EntityTypes) > 0)
	var vec any
	if p.vec != nil && on.has(RetrieverSemantic) {
		vec = p.vec.String()
	}
	return stmtParams{
		Tenant: v.TenantID, User: v.UserID, UserVisible: v.allows(memory.ScopeUser), Session: session,
		Task: task, TenantVisible: v.allows(memory.ScopeTenant), Department: dept,
		Agent: agent, AsOf: v.AsOf.UTC(), QueryVector: vec,
		TSQuery: p.tsq, Predicates: storage.TextArray(q.Predicates), EntityIDs: storage.TextArray(q.EntityIDs),
		MemoryTypes: storage.TextArray(typeStrs), EntityTypes: storage.TextArray(q.EntityTypes), EntityStates: storage.TextArray(q.States),
		GraphHops: int64(p.hops), SpeakerType: p.speaker, StructuredTask: v.TaskID,
		RunStructured: hasSt, RunGraph: hasSeeds, RunSemantic: vec != nil,
		RunKeyword: p.tsq != "" && on.has(RetrieverKeyword),
		KnownAt:    p.knownAt.UTC(), // read by known-at statements only
	}
}

// parseUUIDArray reads a '{a,b}' literal of values that need no quoting.
func parseUUIDArray(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// connState is what the engine keeps per database connection: whether it is tuned
// and the statements prepared on it.
type connState struct {
	stmts map[string]driver.Stmt
	// pid is the connection's backend (pg_backend_pid), for cancelling its
	// statement; timeout its statement_timeout when set by boundStatement (0:
	// the read pool's, Options.Timeout).
	pid     int64
	timeout time.Duration
}

// connStates maps a driver connection to its state. Connections the pool closed
// leave stale entries; the map is cleared when it grows past connStatesMax (their
// statements are then prepared again, which is harmless).
type connStates struct {
	mu sync.Mutex
	m  map[any]*connState
}

const connStatesMax = 512

func (c *connStates) get(dc any) (*connState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > connStatesMax {
		c.m = map[any]*connState{}
	}
	s, ok := c.m[dc]
	if !ok {
		s = &connState{stmts: map[string]driver.Stmt{}}
		c.m[dc] = s
	}
	return s, ok
}

func (c *connStates) drop(dc any) {
	c.mu.Lock()
	delete(c.m, dc)
	c.mu.Unlock()
}

// tuneSQL is run once on each connection recall uses (session settings, for the
// statements recall prepares): a wider HNSW candidate list with iterative scans
// (pgvector 0.8) so a visibility filter still fills the top k, no JIT (it costs
// more than these short statements), and generic plans for prepared statements
// (the statement's shape is fixed; re-planning it per call is what made recall
// slow; storage.Open's pool starts its connections so too, for the write path's
// prepared selects, and this keeps a pool opened otherwise the same); the hnsw
// settings favour completeness for every filtered search.
func (e *Engine) tuneSQL() string {
	return fmt.Sprintf("SET hnsw.ef_search = %d; SET hnsw.iterative_scan = relaxed_order; SET hnsw.max_scan_tuples = %d; SET jit = off; SET plan_cache_mode = force_generic_plan",
		e.opts.EfSearch, e.opts.MaxScanTuples)
}

// onConn runs fn on one pooled connection, tuned and with its prepared statements.
func (e *Engine) onConn(ctx context.Context, fn func(q *connQuerier) error) error {
	c, err := e.db.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		st, known := e.conns.get(dc)
		q := &connQuerier{dc: dc, st: st}
		if !known {
			if err := q.tune(ctx, e.tuneSQL()); err != nil {
				e.conns.drop(dc)
				return fmt.Errorf("tune connection: %w", err)
			}
		}
		if err := q.boundStatement(ctx, e.opts.Timeout); err != nil {
			e.conns.drop(dc)
			return errors.Join(err, driver.ErrBadConn)
		}
		stop := e.cancelOnDone(ctx, st.pid)
		err := fn(q)
		if !stop() {
			e.conns.drop(dc)
			return errors.Join(err, errConnCancelled)
		}
		// A statement cut off by its deadline (the driver's read deadline is the
		// context's, and can come a moment before the context says it is done) or
		// by the network leaves the connection mid-protocol: it is closed, never
		// pooled.
		var ne net.Error
		if err != nil && (errors.Is(err, driver.ErrBadConn) || ctx.Err() != nil || errors.As(err, &ne)) {
			e.conns.drop(dc)
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
}

// tune runs the session settings on a connection recall has not used before and
// reads its backend's pid (cancelOnDone).
func (q *connQuerier) tune(ctx context.Context, settings string) error {
	if err := q.exec(ctx, settings); err != nil {
		return err
	}
	return q.query1(ctx, "SELECT pg_backend_pid()", nil, func(_ []string, v []driver.Value) error {
		q.st.pid = int64(asInt(v[0]))
		return nil
	})
}

type connQuerier struct {
	dc any
	st *connState
}

func (q *connQuerier) exec(ctx context.Context, sql string) error {
	ex, ok := q.dc.(driver.ExecerContext)
	if !ok {
		return fmt.Errorf("driver connection %T cannot execute", q.dc)
	}
	_, err := ex.ExecContext(ctx, sql, nil)
	return err
}

// query runs sql (prepared on this connection the first time) with args and calls
// row for each row. A statement the server no longer has, or whose cached plan a
// schema change made unusable, is prepared again once.
func (q *connQuerier) query(ctx context.Context, sql string, args []any, row func(cols []string, vals []driver.Value) error) error {
	called := false
	err := q.query1(ctx, sql, args, func(c []string, v []driver.Value) error { called = true; return row(c, v) })
	if err != nil && !called && ctx.Err() == nil && isStalePrepared(err) {
		if s, ok := q.st.stmts[sql]; ok {
			_ = s.Close()
			delete(q.st.stmts, sql)
		}
		return q.query1(ctx, sql, args, row)
	}
	return err
}

func isStalePrepared(err error) bool {
	m := err.Error()
	return strings.Contains(m, "cached plan must not change result type") ||
		(strings.Contains(m, "prepared statement") && strings.Contains(m, "does not exist"))
}

func (q *connQuerier) query1(ctx context.Context, sql string, args []any, row func(cols []string, vals []driver.Value) error) error {
	stmt, ok := q.st.stmts[sql]
	if !ok {
		pc, ok := q.dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare", q.dc)
		}
		s, err := pc.PrepareContext(ctx, sql)
		if err != nil {
			return err
		}
		q.st.stmts[sql] = s
		stmt = s
	}
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	sq, ok := stmt.(driver.StmtQueryContext)
	if !ok {
		return fmt.Errorf("statement %T cannot query", stmt)
	}
	rows, err := sq.QueryContext(ctx, nv)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols := rows.Columns()
	vals := make([]driver.Value, len(cols))
	for {
		if err := rows.Next(vals); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := row(cols, vals); err != nil {
			return err
		}
	}
}

// literal renders an argument as SQL text (EXPLAIN of the prepared statement).
func literal(a any) string {
	switch v := a.(type) {
	case nil:
		return "NULL"
	case bool:
		if v {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Time:
		return "'" + v.UTC().Format(time.RFC3339Nano) + "'"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case pgvector.Vector:
		return "'" + v.String() + "'"
	}
	return fmt.Sprintf("'%v'", a)
}

func asString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func asInt(v driver.Value) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func asFloat(v driver.Value) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case []byte:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	}
	return 0
}

func asTime(v driver.Value) time.Time {
	if t, ok := v.(time.Time); ok {
		return t
	}
	return time.Time{}
}

func asTimePtr(v driver.Value) *time.Time {
	if t, ok := v.(time.Time); ok {
		return &t
	}
	return nil
}

// Statement parts (see buildRecallSQL).
const (
	partAll = iota
	partSemantic
	partLexical
	// partExpand is partLexical without the sessions' scores: the second hop
	// (expand.go) reads its turns only.
	partExpand
)

// runRecallSQL runs the recall statement (its two parts at once on two
// connections when the recall runs alone, see Options.OneStatement) and splits its
// rows into facts and evidence.
//
// embed, when not nil, sets the query's vector in the plan. Run alone, the lexical
// part, which reads no vector, starts first and runs while the query is embedded
// (a forward pass of milliseconds, on this process's CPU, while the lexical part
// is Postgres's); the semantic part starts once the vector is there. A statement
// of all parts waits for the vector first.
func (e *Engine) runRecallSQL(ctx context.Context, p plan, on retrieverSet, ts *taskSession, embed func() (*pgvector.Vector, error)) ([]factRow, []evidenceRow, error) {
	if e.opts.OneStatement || e.inflight.Load() > 1 {
		if embed != nil {
			v, err := embed()
			if err != nil {
				return nil, nil, err
			}
			p.vec = v
		}
		return e.runPart(ctx, p, stmtArgs(p, on), partAll, ts)
	}
	var wg sync.WaitGroup
	var f2 []factRow
	var e2 []evidenceRow
	var err2 error
	var lex taskSession
	lexArgs := stmtArgs(p, on) // before the vector: the lexical part reads none
	wg.Add(1)
	go func() {
		defer wg.Done()
		f2, e2, err2 = e.runPart(ctx, p, lexArgs, partLexical, &lex)
	}()
	var facts []factRow
	var evs []evidenceRow
	var err error
	if embed != nil {
		p.vec, err = embed()
	}
	if err == nil {
		facts, evs, err = e.runPart(ctx, p, stmtArgs(p, on), partSemantic, ts)
	}
	wg.Wait()
	if ts != nil {
		ts.sessions = lex.sessions
	}
	if err == nil {
		err = err2
	}
	if err != nil {
		return nil, nil, err
	}
	return append(facts, f2...), append(evs, e2...), nil
}

// hit is one retriever's finding of a row: its rank and score (distance or
// keyword rank; nil for the retrievers that give none).
type hit struct {
	src string
	rk  int
	d   *float64
}

// parseHits reads the statement's hits column: "src rank score" per retriever,
// comma separated, the score empty when there is none.
func parseHits(s string) ([]hit, error) {
	out := make([]hit, 0, strings.Count(s, ",")+1)
	for s != "" {
		one, rest, _ := strings.Cut(s, ",")
		s = rest
		f := strings.SplitN(one, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("recall: unreadable hit %q", one)
		}
		rk, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("recall: unreadable hit %q", one)
		}
		h := hit{src: f[0], rk: rk}
		if f[2] != "" {
			d, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return nil, fmt.Errorf("recall: unreadable hit %q", one)
			}
			h.d = &d
		}
		out = append(out, h)
	}
	return out, nil
}

// taskSession is the task and session a recall names, read by its statement.
type taskSession struct {
	task    *storage.Task
	session *storage.Session
	// sessions are the best-matching sessions' keyword scores (esess).
	sessions map[string]float64
}

// row reads a task or session row of the statement (their fields as JSON, see
// taskJSON and sessionJSON) or a session's keyword score.
func (ts *taskSession) row(r recallRow) error {
	switch r.Kind {
	case rowSessionMatch:
		if ts.sessions == nil {
			ts.sessions = map[string]float64{}
		}
		ts.sessions[r.ID] = r.Score
	case rowTask:
		var t taskJSON
		if err := json.Unmarshal([]byte(r.Content), &t); err != nil {
			return fmt.Errorf("read task: %w", err)
		}
		ts.task = &storage.Task{ID: t.ID, UserID: t.UserID, Goal: t.Goal, State: t.State, Done: t.Done, Todo: t.Todo, NextStep: t.NextStep, LastError: t.LastError}
	case rowSession:
		var s sessionJSON
		if err := json.Unmarshal([]byte(r.Content), &s); err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		ts.session = &storage.Session{ID: s.ID, UserID: s.UserID, Recent: s.Recent, Summary: s.Summary}
	}
	return nil
}

// acquire waits for a statement slot (Options.MaxStatements) or ctx's end; the
// returned func gives it back.
func (e *Engine) acquire(ctx context.Context) (func(), error) {
	if e.slots != nil {
		select {
		case e.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errQueued, ctx.Err())
		}
	}
	n := e.running.Add(1)
	for p := e.peak.Load(); n > p && !e.peak.CompareAndSwap(p, n); p = e.peak.Load() {
	}
	return func() {
		e.running.Add(-1)
		if e.slots != nil {
			<-e.slots
		}
	}, nil
}

func (e *Engine) runPart(ctx context.Context, p plan, params stmtParams, part int, ts *taskSession) ([]factRow, []evidenceRow, error) {
	release, err := e.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	sql, n := e.recallSQL(p, part)
	args := params.args(n)
	var facts []factRow
	var evs []evidenceRow
	err = e.onConn(ctx, func(q *connQuerier) error {
		var sc rowScanner
		return q.query(ctx, sql, args, func(cols []string, v []driver.Value) error {
			var r recallRow
			if err := sc.scan(cols, v, &r); err != nil {
				return err
			}
			switch r.Kind {
			case rowTask, rowSession, rowSessionMatch:
				if ts == nil {
					return nil
				}
				return ts.row(r)
			}
			// Content may be sealed at rest (ENGRAM_ENCRYPTION_KEY): open it here, where
			// it leaves the database; a wrong key is an error, never garbage.
			if r.KeyID != "" {
				clear, err := e.store.DecryptContent(r.KeyID, r.Content)
				if err != nil {
					return err
				}
				r.Content = clear
			}
			hs, err := parseHits(r.Hits)
			if err != nil {
				return err
			}
			if r.Kind == rowEvidence {
				ev := r.evidence(p.vis.TenantID)
				for _, h := range hs {
					ev.Src, ev.Rk, ev.D = h.src, h.rk, h.d
					evs = append(evs, ev)
				}
				return nil
			}
			f := r.fact(p.vis.TenantID)
			for _, h := range hs {
				f.Src, f.Rk, f.D = h.src, h.rk, h.d
				facts = append(facts, f)
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("recall: %w", err)
	}
	return facts, evs, nil
}

// recallSQL returns the (cached) statement text for current, past or known-at
// recall.
func (e *Engine) recallSQL(p plan, part int) (string, int) {
	e.sqlOnce.Do(func() {
		for _, pt := range []int{partAll, partSemantic, partLexical, partExpand} {
			ctx, sess := e.opts.Fusion.Context > 0, e.opts.Fusion.Session > 0
			built := pt
			if pt == partExpand {
				built, sess = partLexical, false
			}
			sh := sqlShape{n: e.opts.CandidateLimit, part: built, ctx: ctx, sess: sess, lengthNorm: e.opts.Fusion.KeywordLengthNorm, asked: e.opts.Fusion.Asked}
			e.sqlCurrent[pt] = bound(buildRecallSQL(true, sh))
			e.sqlPast[pt] = bound(buildRecallSQL(false, sh))
			e.sqlKnown[pt] = bound(buildKnownSQL(sh))
		}
	})
	s := e.sqlPast[part]
	switch {
	case !p.knownAt.IsZero():
		s = e.sqlKnown[part]
	case p.current:
		s = e.sqlCurrent[part]
	}
	return s.sql, s.params
}

// boundSQL is a statement's text with its parameters numbered and how many it
// binds (bindNames).
type boundSQL struct {
	sql    string
	params int
}

func bound(sql string) boundSQL {
	s, n := bindNames(sql)
	return boundSQL{s, n}
}

// explainRecallSQL prepares the statement under a name on one connection and
// shows the plan Postgres caches for it (generic) with this request's values.
func (e *Engine) explainRecallSQL(ctx context.Context, p plan, on retrieverSet, options string) (string, error) {
	sql, n := e.recallSQL(p, partAll)
	args := stmtArgs(p, on).args(n)
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(a)
	}
	var lines []string
	err := e.onConn(ctx, func(q *connQuerier) error {
		_ = q.exec(ctx, "DEALLOCATE engram_recall_explain")
		if err := q.exec(ctx, "PREPARE engram_recall_explain AS "+sql); err != nil {
			return err
		}
		defer func() { _ = q.exec(ctx, "DEALLOCATE engram_recall_explain") }()
		qc, ok := q.dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot query", q.dc)
		}
		for i := 0; i < 2; i++ { // the first run plans; the second shows the cached plan
			lines = lines[:0]
			rows, err := qc.QueryContext(ctx, "EXPLAIN ("+options+") EXECUTE engram_recall_explain("+strings.Join(lits, ", ")+")", nil)
			if err != nil {
				return err
			}
			vals := make([]driver.Value, 1)
			for rows.Next(vals) == nil {
				lines = append(lines, asString(vals[0]))
			}
			rows.Close()
		}
		return nil
	})
	return strings.Join(lines, "\n"), err
}

func asBool(v driver.Value) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x == "t" || x == "true"
	case []byte:
		return string(x) == "t" || string(x) == "true"
	}
	return false
}

// heavyWalk is how many turns the HNSW walk brings for a user with many turns:
// 3n, each scored again exactly by the nearer of itself and its best sentence
// (evidence_sentences, by the primary key), as a light user's turns are, the best
// n kept. A turn whose best sentence is near the question but whose whole is not
// is found only if the walk reaches it. With every user of the development suites
// read from the indexes, the whole engine's evidence recall @1/@5/@10 was
// 0.460/0.719/0.798 (open) and 0.410/0.652/0.740 (held out) with a walk of n,
// 0.463/0.722/0.814 and 0.410/0.659/0.746 with 2n, 0.460/0.735/0.823 and
// 0.410/0.659/0.746 with 4n (hnsw.ef_search 100); read exactly,
// 0.460/0.737/0.826 and 0.410/0.659/0.753. A walk of 3n with ef_search 3n (120:
// one pass of the graph search, where 4n with 100 had to scan on) gave
// 0.460/0.733/0.824 and 0.410/0.659/0.753, and at 100,000 turns cost about 1 ms
// less of the server's CPU a recall (engram bench recall --history 100000, two
// runs of each build in turn: p50 12.5-13.0 ms against 13.8-14.2, 8 callers
// 115-117 QPS against 110.5).
// The walk is a plan of its own (evidence_walk), so its length does not turn the
// generic plan into a sort of the table.
func heavyWalk(n int) int { return 3 * n }
