package recall

import (
	"fmt"
	"strconv"
	"strings"
)

// Statement parts (see buildRecallSQL).
const (
	partAll = iota
	partSemantic
	partLexical
	// partExpand is partLexical without the sessions' scores: the second hop
	// (expand.go) reads its turns only.
	partExpand
)

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

// evidenceSemanticSQL is semantic retrieval over evidence (evidence_semantic). A user with few
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
func evidenceSemanticSQL(n int) string {
	return fmt.Sprintf("evidence_semantic AS (SELECT id, tid, row_number() OVER (ORDER BY d) AS rk, d FROM (SELECT id, tid, d FROM ("+
		"(SELECT ev.id, ev.tid, least(ev.d, "+bestSentenceSQL("ev.id")+") AS d FROM visible_evidence ev WHERE ev.d IS NOT NULL ORDER BY 3 LIMIT %d) UNION ALL "+
		"(SELECT h.id, h.tid, least(h.d, "+bestSentenceSQL("h.id")+") AS d FROM ("+
		"SELECT w.id, w.tid, w.d FROM evidence_walk(@tenant, @user, @query_vector::vector, @as_of, %d) w WHERE @run_semantic AND (SELECT many FROM many_turns)) h)"+
		") y ORDER BY d LIMIT %d) x)", n, heavyWalk(n), n)
}

// bestSentenceSQL is the distance of the turn id's nearest sentence, looked up by
// the primary key's prefix (tenant, turn) and nothing else: the turn is visible,
// so its sentences are, and a condition on the user would let a plan made without
// statistics read every sentence of the user's for each turn instead (a recall
// over a never-analysed suite took 7 s: 110,889 lookups of 375 rows each).
func bestSentenceSQL(id string) string { return sentenceDistSQL(id, "@query_vector::vector") }

// sentenceDistSQL is the distance of the turn id's nearest sentence to the vector
// vec, as bestSentenceSQL.
func sentenceDistSQL(id, vec string) string {
	return "(SELECT min(s.embedding <=> " + vec + ") FROM evidence_sentences s WHERE s.tenant_id = @tenant AND s.evidence_id = " + id + ")"
}

// staleSQL is whether the turn e backs a value superseded by as_of and no value
// in force then.
const staleSQL = "(EXISTS (SELECT 1 FROM fact_evidence fe JOIN facts f2 ON f2.tenant_id = fe.tenant_id AND f2.id = fe.fact_id WHERE fe.tenant_id = @tenant AND fe.evidence_id = e.id " +
	"AND f2.status = 'SUPERSEDED' AND f2.valid_until IS NOT NULL AND f2.valid_until <= @as_of) AND NOT EXISTS (SELECT 1 FROM fact_evidence fe JOIN facts f2 ON f2.tenant_id = fe.tenant_id AND f2.id = fe.fact_id " +
	"WHERE fe.tenant_id = @tenant AND fe.evidence_id = e.id AND f2.status IN ('ACTIVE', 'SUPERSEDED') AND f2.valid_from <= @as_of AND (f2.valid_until IS NULL OR f2.valid_until > @as_of)))"

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

// evidenceKeywordSQL is keyword retrieval over evidence (evidence_keyword): Okapi BM25 (k1
// 1.2, b the fusion's KeywordLengthNorm, turnBM25SQL) with OR semantics. The corpus statistics are the user's turns,
// kept at commit time (evidence_stats, evidence_terms: see the migration
// evidence_index); a turn's own words count in full and the words of the turn
// before it (weight C, see storage.InsertEvidence) at 0.35; the length is the
// turn's own lexemes. The turns scored are every visible turn that matches (few
// turns), or the best postingsPerTerm of each query word by the postings' cheap
// score (many turns), each looked up by its id (OFFSET 0: a generic plan would
// otherwise read every turn of the user's that matches through the GIN index and
// join them). turn_terms keeps each matched turn's own (tfo) and previous turn's (tfp)
// counts apart, for the context and session retrievers; the turn's own count
// takes the words of its questions (weight B, turntext.SplitAsked) at the fusion's
// Asked. Turns of equal score are
// taken the more recent first, then by id (as the baseline breaks its ties;
// evidence_context and evidence_session by id): BM25 ties are common (the same words, the same length), and
// without an order which of them made the last places differed from run to run
// (one held-out question's recall@10 went from 0 to 1 between two runs of the same
// build).
func evidenceKeywordSQL(n int, b, askedWeight float64) []string {
	asked := strconv.FormatFloat(askedWeight, 'f', -1, 64)
	return []string{
		// query_lexemes: the question's words as the index stems them.
		"query_lexemes AS (SELECT coalesce(array_agg(lexeme), '{}') AS lx FROM unnest(to_tsvector('english', replace(@tsquery, ' | ', ' '))))",
		// posting_turns: for a user with many turns, the best turns of each word by
		// the postings' cheap score.
		fmt.Sprintf("posting_turns AS (SELECT DISTINCT p.evidence_id FROM unnest((SELECT lx FROM query_lexemes)::text[]) q(l) CROSS JOIN LATERAL ("+
			"SELECT p.evidence_id FROM evidence_postings p WHERE p.tenant_id = @tenant AND p.user_id = @user AND p.lexeme = q.l ORDER BY p.w DESC LIMIT %d) p "+
			"WHERE @run_keyword AND (SELECT many FROM many_turns))", postingsPerTerm(n)),
		// matched_turns: the turns to score, with their length in lexemes.
		"matched_turns AS MATERIALIZED (SELECT id, tid, sid, at, search, greatest(length(ts_filter(search, '{a,b,d}')), 1) AS dl FROM (" +
			"SELECT id, tid, sid, at, search FROM visible_evidence WHERE search IS NOT NULL UNION ALL " +
			"SELECT e.id, e.tid, e.session_id, e.occurred_at, e.search FROM posting_turns pt CROSS JOIN LATERAL (SELECT e.*, e.ctid AS tid FROM evidence e WHERE e.tenant_id = @tenant AND e.id = pt.evidence_id OFFSET 0) e WHERE " + evidenceVisibleSQL + " AND e.search @@ " + tsqSQL + ") x)",
		// turn_terms: each matched turn's count of each query word, its own (tfo)
		// and the turn before it's (tfp).
		"turn_terms AS (SELECT m.id, m.tid, m.sid, m.at, m.dl, u.lexeme, c.tfo, c.tfp, c.tfo + 0.35 * c.tfp AS tf " +
			"FROM matched_turns m CROSS JOIN LATERAL unnest(m.search) u CROSS JOIN LATERAL (SELECT (count(*) FILTER (WHERE w <> 'C' AND w <> 'B') + " + asked + " * count(*) FILTER (WHERE w = 'B'))::float8 AS tfo, " +
			"(count(*) FILTER (WHERE w = 'C'))::float8 AS tfp FROM unnest(u.weights) w) c " +
			"WHERE u.lexeme = ANY((SELECT lx FROM query_lexemes)::text[]))",
		// term_docs: each query word's document frequency among the user's turns.
		"term_docs AS (SELECT t.lexeme, greatest(t.df, 1)::float8 AS df FROM evidence_terms t WHERE @run_keyword AND t.tenant_id = @tenant AND t.user_id = @user AND t.lexeme = ANY((SELECT lx FROM query_lexemes)::text[]))",
		// turn_corpus: how many turns the user has and their average length.
		"turn_corpus AS (SELECT greatest(coalesce(max(s.docs), 0), 1)::float8 AS n, coalesce(max(s.lex_len)::float8 / nullif(max(s.lex_docs), 0), 1)::float8 AS avgdl " +
			"FROM evidence_stats s WHERE @run_keyword AND s.tenant_id = @tenant AND s.user_id = @user)",
		fmt.Sprintf("evidence_keyword AS (SELECT id, tid, row_number() OVER (ORDER BY r DESC, at DESC, id) AS rk, r FROM (SELECT t.id, t.tid, t.at, "+
			"sum("+turnBM25SQL("term_docs.df", "turn_corpus.n", "t.tf", "t.dl", "turn_corpus.avgdl", b)+") AS r "+
			"FROM turn_terms t JOIN term_docs USING (lexeme) CROSS JOIN turn_corpus GROUP BY t.id, t.tid, t.at ORDER BY r DESC, t.at DESC, t.id LIMIT %d) x)", n),
	}
}

// contextKeywordSQL is the context retriever over evidence (evidence_context): a turn found
// by the words of the turns around it, the question it answers (the turn before,
// stored with it at weight C) and the reply it got (the next turn of its session,
// next_turn), each at full weight beside its own, scored by BM25 with the corpus
// statistics of evidence_keyword (a turn that matched nothing itself takes the
// average length). It reads only matched turns and the order of the visible
// ones (visible_evidence;
// for a user with many turns, read from indexes, only the turn before counts:
// the next one would need its position kept with the turn).
func contextKeywordSQL(n int) []string {
	return []string{
		// next_turn: the turn after each visible turn in its session.
		"next_turn AS (SELECT id, lead(id) OVER (PARTITION BY sid ORDER BY at, id) AS nid FROM visible_evidence WHERE @run_keyword AND sid <> '')",
		// context_terms: a turn's words with the turn before it's and the reply's.
		"context_terms AS (SELECT id, lexeme, sum(tf) AS tf FROM (SELECT id, lexeme, tfo + tfp AS tf FROM turn_terms " +
			"UNION ALL SELECT x.id, t.lexeme, t.tfo FROM turn_terms t JOIN next_turn x ON x.nid = t.id WHERE t.tfo > 0) c GROUP BY id, lexeme)",
		fmt.Sprintf("evidence_context AS (SELECT x.id, coalesce(m.tid, ev.tid) AS tid, row_number() OVER (ORDER BY x.r DESC, x.id) AS rk, x.r FROM (SELECT c.id, "+
			"sum("+bm25SQL("term_docs.df", "turn_corpus.n", "c.tf", "coalesce(m.dl, turn_corpus.avgdl)", "turn_corpus.avgdl")+") AS r "+
			"FROM context_terms c JOIN term_docs USING (lexeme) CROSS JOIN turn_corpus LEFT JOIN matched_turns m ON m.id = c.id GROUP BY c.id ORDER BY r DESC, c.id LIMIT %d) x LEFT JOIN matched_turns m ON m.id = x.id LEFT JOIN visible_evidence ev ON ev.id = x.id)", n),
	}
}

// sessionKeywordSQL scores the user's sessions as documents (evidence_session): BM25 of the
// words of their matched turns (their own words), the session's length its
// number of visible turns, over the visible sessions as the corpus; the best
// `keep` come back as session_match rows and lift the turns of a session that matches as a
// whole (Fusion.Session). For a user with many turns (read from the indexes) the
// sessions are those of the turns the postings brought, their lengths the kept
// turn counts (sessions.turn_count, by the primary key) and the corpus's size and
// average length the kept statistics (session_stats): the document frequencies
// are over the matched turns' sessions either way.
func sessionKeywordSQL(keep int) []string {
	return []string{
		// session_turns: each session's length in turns.
		"session_turns AS (SELECT sid, count(*)::float8 AS nt FROM visible_evidence WHERE @run_keyword AND sid <> '' GROUP BY sid " +
			"UNION ALL SELECT s.id, greatest(s.turn_count, 1)::float8 FROM sessions s WHERE @run_keyword AND (SELECT many FROM many_turns) AND s.tenant_id = @tenant AND s.user_id = @user " +
			"AND s.id IN (SELECT sid FROM turn_terms WHERE sid <> '' AND tfo > 0))",
		// session_corpus: how many sessions there are and their average length.
		"session_corpus AS (SELECT CASE WHEN (SELECT many FROM many_turns) THEN h.n ELSE l.n END AS n, CASE WHEN (SELECT many FROM many_turns) THEN h.avgnt ELSE l.avgnt END AS avgnt " +
			"FROM (SELECT greatest(count(*), 1)::float8 AS n, coalesce(avg(nt), 1)::float8 AS avgnt FROM session_turns WHERE NOT (SELECT many FROM many_turns)) l CROSS JOIN " +
			"(SELECT greatest(coalesce(max(s.sessions), 0), 1)::float8 AS n, coalesce(max(s.turns)::float8 / nullif(max(s.sessions), 0), 1)::float8 AS avgnt " +
			"FROM session_stats s WHERE @run_keyword AND (SELECT many FROM many_turns) AND s.tenant_id = @tenant AND s.user_id = @user) h)",
		// session_terms, session_term_docs: a session's count of each query word,
		// and each word's number of sessions.
		"session_terms AS (SELECT sid, lexeme, sum(tfo) AS tf FROM turn_terms WHERE sid <> '' AND tfo > 0 GROUP BY sid, lexeme)",
		"session_term_docs AS (SELECT lexeme, count(*)::float8 AS df FROM session_terms GROUP BY lexeme)",
		fmt.Sprintf("evidence_session AS (SELECT s.sid, sum("+bm25SQL("d.df", "session_corpus.n", "s.tf", "ss.nt", "session_corpus.avgnt")+") AS r "+
			"FROM session_terms s JOIN session_term_docs d USING (lexeme) JOIN session_turns ss USING (sid) CROSS JOIN session_corpus GROUP BY s.sid ORDER BY r DESC, s.sid LIMIT %d)", keep),
	}
}

// buildRecallSQL is the statement for current (or past) recall with n candidates
// per retriever.
//
// part selects the retrievers the statement has: partAll, or partSemantic
// (facts and evidence by vector) and partLexical (keyword, structured, graph),
// which run at the same time on two connections.
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

// buildSQL assembles the recall statement with tf as its facts' time filter:
// the retrievers' CTEs in the order they read each other, their hits, and the
// rows (see the functions named for each CTE below).
func buildSQL(current bool, tf string, sh sqlShape) string {
	st := stmtText{current: current, tf: tf, n: sh.n, fn: max(sh.n/2, 10), arms: factArms}
	if current {
		// Current TENANT facts, which can be many, are read by each retriever from
		// its own index.
		st.arms = []string{factArms[0], factArms[2], factArms[3]}
	}
	// A part has only its retrievers' fragments, and its visible rows compute
	// only what those read (each parameter is bound by the names the text uses).
	st.semantic, st.lexical = sh.part != partLexical, sh.part != partSemantic
	ctes := []string{st.visibleFacts()}
	if st.semantic {
		ctes = append(ctes, st.factSemantic())
	}
	if st.lexical {
		ctes = append(ctes, st.factKeyword(), st.factStructured())
		ctes = append(ctes, st.factGraph()...)
	}
	ctes = append(ctes, "many_turns AS (SELECT "+manyTurnsSQL+" AS many)", st.visibleEvidence())
	if st.semantic {
		ctes = append(ctes, evidenceSemanticSQL(sh.n))
	}
	if st.lexical {
		ctes = append(ctes, evidenceKeywordSQL(sh.n, sh.lengthNorm, sh.asked)...)
		if sh.ctx {
			ctes = append(ctes, contextKeywordSQL(sh.n)...)
		}
		if sh.sess {
			ctes = append(ctes, sessionKeywordSQL(sessionsKept)...)
		}
	}
	ctes = append(ctes, hitsSQL(sh.part, sh.ctx)...)
	return "WITH RECURSIVE\n" + strings.Join(ctes, ",\n") + "\n" + rowsSQL(sh.part, sh.sess)
}

// stmtText is what the fact retrievers' text depends on: the time filter tf,
// the visibility arms read, n candidates per evidence retriever and fn per fact
// retriever, and whether the part has the semantic retrievers, the lexical ones
// (keyword, structured, graph) or both.
type stmtText struct {
	current           bool
	tf                string
	n, fn             int
	arms              []string
	semantic, lexical bool
}

// visibleFacts (visible_facts) are the visible facts of the user, its
// department and its agent (and, in past recall, the tenant's), read once for
// the semantic, keyword and structured retrievers: each row's distance, rank and
// structured priority are computed in the one pass, and each retriever takes its
// best fn per arm (a) from it. (Read by each retriever, the same few hundred
// wide rows were fetched three times, which was most of the statement's time.)
func (st stmtText) visibleFacts() string {
	dExpr, rExpr, priExpr := "NULL::float8", "NULL::real", "NULL::int"
	if st.semantic {
		dExpr = "CASE WHEN @run_semantic AND f.embedding IS NOT NULL THEN f.embedding <=> @query_vector::vector END"
	}
	if st.lexical {
		rExpr = "CASE WHEN @run_keyword AND (f.search @@ " + tsqSQL + ") IS TRUE THEN ts_rank(f.search, " + tsqSQL + ") END"
		priExpr = "CASE WHEN @run_structured THEN " + structuredPriOrNullSQL + " END"
	}
	arms := make([]string, len(st.arms))
	for i, arm := range st.arms {
		arms[i] = fmt.Sprintf("SELECT %d AS a, f.id, f.ctid AS tid, %s AS d, %s AS r, %s AS pri, f.importance AS imp, f.valid_from AS vf FROM facts f WHERE (@run_semantic OR @run_keyword OR @run_structured) AND %s AND %s",
			i, dExpr, rExpr, priExpr, arm, st.tf)
	}
	return "visible_facts AS MATERIALIZED (" + strings.Join(arms, " UNION ALL ") + ")"
}

// fromVisibleFacts takes the best fn of each arm of visible_facts by order among
// the rows with col.
func (st stmtText) fromVisibleFacts(cols, col, order string) string {
	arms := make([]string, len(st.arms))
	for i := range st.arms {
		arms[i] = fmt.Sprintf("(SELECT %s FROM visible_facts WHERE a = %d AND %s IS NOT NULL ORDER BY %s LIMIT %d)", cols, i, col, order, st.fn)
	}
	return strings.Join(arms, " UNION ALL ")
}

// factSemantic (fact_semantic): the facts nearest the question's vector.
func (st stmtText) factSemantic() string {
	from := st.fromVisibleFacts("id, tid, d", "d", "d")
	if st.current {
		from += " UNION ALL " + tenantSemCurrent(st.fn)
	}
	return fmt.Sprintf("fact_semantic AS (SELECT id, tid, row_number() OVER (ORDER BY d) AS rk, d FROM (%s) x ORDER BY d LIMIT %d)", from, 2*st.fn)
}

// factKeyword (fact_keyword): the facts that match the question's words, by
// ts_rank. Current TENANT facts use their own GIN index (facts_search_tenant_gin).
func (st stmtText) factKeyword() string {
	from := st.fromVisibleFacts("id, tid, r", "r", "r DESC")
	if st.current {
		from += fmt.Sprintf(" UNION ALL (SELECT f.id, f.ctid, ts_rank(f.search, "+tsqSQL+") AS r FROM facts f WHERE @run_keyword AND @tenant_visible AND (f.tenant_id || '') = @tenant AND f.scope = 'TENANT' AND %s AND f.search @@ "+tsqSQL+" ORDER BY r DESC LIMIT %d)", st.tf, st.fn)
	}
	return fmt.Sprintf("fact_keyword AS (SELECT id, tid, row_number() OVER (ORDER BY r DESC) AS rk, r FROM (%s) x ORDER BY r DESC LIMIT %d)", from, st.fn)
}

// factStructured (fact_structured): the facts of the predicates, entities, task
// and memory types the question names, by how many of them they match
// (structuredPriSQL), importance and validity.
func (st stmtText) factStructured() string {
	from := st.fromVisibleFacts("id, tid, pri, imp, vf", "pri", "pri DESC, imp DESC, vf DESC")
	if st.current {
		from += " UNION ALL " + tenantStructured(st.tf, st.fn)
	}
	return fmt.Sprintf("fact_structured AS (SELECT id, tid, row_number() OVER (ORDER BY pri DESC, imp DESC, vf DESC) AS rk FROM (%s) x ORDER BY pri DESC, imp DESC, vf DESC LIMIT %d)", from, st.fn)
}

// factGraph is the graph retriever: the user's entities the question names (by
// id, else by type and state: graph_seeds), then up to @graph_hops edges
// further in the user's own graph, never back through the speaker (graph_walk);
// the visible facts about what was reached (fact_graph). Each entity reached
// looks up its facts (facts_recall_entity; OFFSET 0 keeps the lookup a nested
// loop): joined as a whole, the generic plan read every visible fact, the
// tenant's included, and hashed them against the walk.
func (st stmtText) factGraph() []string {
	return []string{
		"graph_seeds AS (SELECT en.type, en.id FROM entities en WHERE @run_graph AND en.tenant_id = @tenant AND en.user_id = @user AND " +
			"(en.id = ANY(@entity_ids::text[]) OR (cardinality(@entity_ids::text[]) = 0 AND en.type = ANY(@entity_types::text[]) AND (cardinality(@entity_states::text[]) = 0 OR en.state = ANY(@entity_states::text[])))) " +
			"ORDER BY en.updated_at DESC LIMIT 20)",
		"graph_walk AS (SELECT type, id, 0 AS depth FROM graph_seeds UNION " +
			"SELECT nb.type, nb.id, w.depth + 1 FROM graph_walk w CROSS JOIN LATERAL (" +
			"SELECT ed.to_type AS type, ed.to_id AS id FROM edges ed WHERE ed.tenant_id = @tenant AND ed.user_id = @user AND ed.from_type = w.type AND ed.from_id = w.id " +
			"UNION ALL SELECT ed.from_type, ed.from_id FROM edges ed WHERE ed.tenant_id = @tenant AND ed.user_id = @user AND ed.to_type = w.type AND ed.to_id = w.id" +
			") nb WHERE w.depth < @graph_hops AND nb.type <> @speaker_type)",
		fmt.Sprintf("fact_graph AS (SELECT id, tid, row_number() OVER (ORDER BY depth, vf DESC) AS rk FROM (SELECT f.id, min(f.tid) AS tid, min(w.depth) AS depth, max(f.vf) AS vf "+
			"FROM (SELECT DISTINCT type, id, depth FROM graph_walk LIMIT 200) w CROSS JOIN LATERAL (SELECT f.id, f.ctid AS tid, f.valid_from AS vf FROM facts f "+
			"WHERE f.tenant_id = @tenant AND f.entity_id <> '' AND f.entity_id = w.id AND f.entity_type = w.type AND (%s) AND %s OFFSET 0) f "+
			"GROUP BY f.id ORDER BY 2, 3 DESC LIMIT %d) g)", factVisibleSQL(), st.tf, st.fn),
	}
}

// factVisibleSQL is every visibility arm as one condition on f.
func factVisibleSQL() string {
	vis := make([]string, len(factArms))
	for i, a := range factArms {
		vis[i] = "(" + a + ")"
	}
	return strings.Join(vis, " OR ")
}

// visibleEvidence (visible_evidence) are the principal's visible turns, read
// once for both evidence retrievers (each turn's distance, and its lexemes when
// it matches the query). A user with few turns (or whose turns are a small share
// of all evidence, where a filtered HNSW walk would pass over many others' turns
// before it filled its limit) is compared exactly; a user with many, from
// indexes (see manyTurnsSQL). The choice is made once per statement from the
// kept statistics (many_turns, an InitPlan the two branches' one-time filters
// read), so one generic plan serves both ends.
func (st stmtText) visibleEvidence() string {
	edExpr, esExpr := "NULL::float8", "NULL::tsvector"
	if st.semantic {
		edExpr = "CASE WHEN @run_semantic AND e.embedding IS NOT NULL THEN e.embedding <=> @query_vector::vector END"
	}
	if st.lexical {
		esExpr = "CASE WHEN @run_keyword AND (e.search @@ " + tsqSQL + ") IS TRUE THEN e.search END"
	}
	return fmt.Sprintf("visible_evidence AS MATERIALIZED (SELECT e.id, e.ctid AS tid, %s AS d, %s AS search, e.session_id AS sid, e.occurred_at AS at FROM evidence e WHERE (@run_semantic OR @run_keyword) AND NOT (SELECT many FROM many_turns) AND %s)", edExpr, esExpr, evidenceVisibleSQL)
}

// hitsSQL gathers the part's retrievers' findings: one row per fact (fact_hits)
// or turn (evidence_hits), however many retrievers found it, its hits
// (retriever, rank, score) in one column (see parseHits), so each is read and
// sent once. Each row carries the tuple id it was read at (tid, the same
// version: one statement, one snapshot; every retriever reads the rows it
// finds), so it is fetched again by a TID scan instead of a primary-key lookup.
func hitsSQL(part int, ctx bool) []string {
	var fc, ec []string
	if part != partLexical {
		fc = append(fc, "SELECT id, tid, '"+RetrieverSemantic+"' AS src, rk, d FROM fact_semantic")
		ec = append(ec, "SELECT id, tid, '"+RetrieverSemantic+"' AS src, rk, d FROM evidence_semantic")
	}
	if part != partSemantic {
		fc = append(fc, "SELECT id, tid, '"+RetrieverKeyword+"' AS src, rk, r::float8 AS d FROM fact_keyword",
			"SELECT id, tid, '"+RetrieverStructured+"', rk, NULL::float8 FROM fact_structured", "SELECT id, tid, '"+RetrieverGraph+"', rk, NULL::float8 FROM fact_graph")
		ec = append(ec, "SELECT id, tid, '"+RetrieverKeyword+"' AS src, rk, r::float8 AS d FROM evidence_keyword")
		if ctx {
			ec = append(ec, "SELECT id, tid, '"+sourceContext+"' AS src, rk, r::float8 AS d FROM evidence_context")
		}
	}
	hits := "string_agg(src || ' ' || rk || ' ' || coalesce(d::text, ''), ',') AS hits"
	return []string{
		"fact_hits AS (SELECT id, min(tid) AS tid, " + hits + " FROM (" + strings.Join(fc, " UNION ALL ") + ") x GROUP BY id)",
		"evidence_hits AS (SELECT id, min(tid) AS tid, " + hits + " FROM (" + strings.Join(ec, " UNION ALL ") + ") x GROUP BY id)",
	}
}

// rowsSQL is the statement's rows: one per fact, turn, matching session, named
// task and named session, told apart by kind; their columns are named by the
// first arm and read by name (recallRow).
func rowsSQL(part int, sess bool) string {
	var b strings.Builder
	b.WriteString("SELECT 'fact' AS kind, fh.hits, NULL::float8 AS score, f.id::text AS id, f.memory_key, f.revision, f.scope, f.department_id, f.user_id, f.agent_id, f.session_id, f.task_id, " +
		"f.memory_type, f.subject, f.predicate, f.object, f.content, f.entity_type, f.entity_id, f.status, f.confidence::text AS confidence, f.importance::text AS importance, " +
		"f.valid_from, f.valid_until, f.observed_at, f.closed_at, " +
		"array(SELECT fe.evidence_id::text FROM fact_evidence fe WHERE fe.tenant_id = f.tenant_id AND fe.fact_id = f.id ORDER BY fe.created_at DESC LIMIT 3)::text AS evidence_ids, '' AS speaker, f.key_id, false AS stale " +
		"FROM fact_hits fh JOIN facts f ON f.ctid = fh.tid AND f.tenant_id = @tenant AND f.id = fh.id\n" +
		"UNION ALL SELECT 'evidence', eh.hits, NULL::float8, e.id::text, '', 0, 'USER', e.department_id, e.user_id, e.agent_id, e.session_id, e.task_id, " +
		"'', '', '', '', e.content, '', '', '', '1', e.importance::text, e.occurred_at, NULL::timestamptz, e.occurred_at, NULL::timestamptz, '{}', e.speaker, e.key_id, " +
		staleSQL + " AS stale " +
		"FROM evidence_hits eh JOIN evidence e ON e.ctid = eh.tid AND e.tenant_id = @tenant AND e.id = eh.id")
	if part != partSemantic && sess {
		// The best-matching sessions, one row each: its id and score (see fuse).
		b.WriteString("\nUNION ALL SELECT 'session_match', '', r, sid, '', 0, '', '', '', '', sid, '', '', '', '', '', '', '', '', '', '', '', " +
			"NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false FROM evidence_session")
	}
	if part != partLexical {
		// The named task and session, each only if it is the user's (or nobody's):
		// one row each, its fields as JSON in the content column: the task keyed
		// as TaskState's JSON, the session by its columns' names (sessionJSON).
		b.WriteString("\nUNION ALL SELECT 'task', '', NULL, t.id, '', 0, '', '', t.user_id, '', '', t.id, '', '', '', '', " +
			"json_build_object('task_id', t.id, 'goal', t.goal, 'state', t.state, 'done', t.done, 'todo', t.todo, 'next_step', t.next_step, 'last_error', t.last_error)::text, " +
			"'', '', '', '', '', NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false " +
			"FROM (SELECT * FROM tasks t WHERE @task <> '' AND t.tenant_id = @tenant AND t.id = @task AND (t.user_id = @user OR t.user_id = '') LIMIT 1) t\n" +
			"UNION ALL SELECT 'session', '', NULL, s.id, '', 0, '', '', s.user_id, '', s.id, '', '', '', '', '', " +
			"json_build_object('id', s.id, 'user_id', s.user_id, 'recent', s.recent, 'summary', s.summary)::text, " +
			"'', '', '', '', '', NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, '{}', '', '', false " +
			"FROM (SELECT * FROM sessions s WHERE @session <> '' AND s.tenant_id = @tenant AND s.id = @session AND (s.user_id = @user OR s.user_id = '') LIMIT 1) s")
	}
	return b.String()
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
