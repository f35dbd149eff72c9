package recall

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

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
// Its text is one fragment per retriever (statement.go), its parameters are
// named in the text (@tenant, @as_of, …: the fields of stmtParams, params.go)
// and numbered in the order the text first uses them (bindNames), its rows are
// read by column name (row.go), on recall's own connections (conn.go).

// stmtArgs are the statement's parameters for plan p.
func stmtArgs(p plan, on retrieverSet) stmtParams {
	v := p.vis
	q := p.parsed
	types := q.MemoryTypes
	if p.blank {
		types = memory.MemoryTypes
	}
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
	sp := visibilityParams(v)
	sp.QueryVector, sp.TSQuery = vec, p.tsq
	sp.Predicates, sp.EntityIDs, sp.MemoryTypes = storage.TextArray(q.Predicates), storage.TextArray(q.EntityIDs), storage.TextArray(typeStrs)
	sp.EntityTypes, sp.EntityStates = storage.TextArray(q.EntityTypes), storage.TextArray(q.States)
	sp.GraphHops, sp.SpeakerType, sp.StructuredTask = int64(p.hops), p.speaker, v.TaskID
	sp.RunStructured, sp.RunGraph, sp.RunSemantic = hasSt, hasSeeds, vec != nil
	sp.RunKeyword = p.tsq != "" && on.has(RetrieverKeyword)
	sp.KnownAt = p.knownAt.UTC() // read by known-at statements only
	return sp
}

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
	task    *TaskState
	session *storage.Session
	// sessions are the best-matching sessions' keyword scores (evidence_session).
	sessions map[string]float64
}

// row reads a task or session row of the statement (their fields as JSON, see
// TaskState and sessionJSON) or a session's keyword score.
func (ts *taskSession) row(r recallRow) error {
	switch r.Kind {
	case rowSessionMatch:
		if ts.sessions == nil {
			ts.sessions = map[string]float64{}
		}
		ts.sessions[r.ID] = r.Score
	case rowTask:
		ts.task = new(TaskState)
		if err := json.Unmarshal([]byte(r.Content), ts.task); err != nil {
			return fmt.Errorf("read task: %w", err)
		}
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
	sql, names := e.recallSQL(p, part)
	args := params.args(names)
	var facts []factRow
	var evs []evidenceRow
	err = e.onConn(ctx, func(c *storage.Conn) error {
		var sc rowScanner[recallRow]
		return c.EachRow(ctx, sql, args, func(cols []string, v []driver.Value) error {
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
func (e *Engine) recallSQL(p plan, part int) (string, []string) {
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

// boundSQL is a statement's text with its parameters numbered and their names
// in order (bindNames).
type boundSQL struct {
	sql    string
	params []string
}

func bound(sql string) boundSQL {
	s, n := bindNames(sql)
	return boundSQL{s, n}
}

// explainRecallSQL prepares the statement under a name on one connection and
// shows the plan Postgres caches for it (generic) with this request's values.
func (e *Engine) explainRecallSQL(ctx context.Context, p plan, on retrieverSet, options string) (string, error) {
	sql, names := e.recallSQL(p, partAll)
	args := stmtArgs(p, on).args(names)
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(a)
	}
	var lines []string
	err := e.onConn(ctx, func(c *storage.Conn) error {
		exec := func(text string) error { _, err := c.ExecContext(ctx, text, nil); return err }
		_ = exec("DEALLOCATE engram_recall_explain")
		if err := exec("PREPARE engram_recall_explain AS " + sql); err != nil {
			return err
		}
		defer func() { _ = exec("DEALLOCATE engram_recall_explain") }()
		for i := 0; i < 2; i++ { // the first run plans; the second shows the cached plan
			lines = lines[:0]
			rows, err := c.QueryContext(ctx, "EXPLAIN ("+options+") EXECUTE engram_recall_explain("+strings.Join(lits, ", ")+")", nil)
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
