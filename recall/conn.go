package recall

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgvector/pgvector-go"
)

// Recall's connections: its own read pool's connections, each tuned once
// (tuneSQL), bounded by a statement timeout and cancelled in the server when the
// caller gives up, with the statements prepared on it (connState.stmts: the
// statement is prepared once per connection and run with a cached generic plan).

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
