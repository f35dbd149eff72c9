package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// The one prepared-statement cache: every connection of the store's pools (Open,
// Reader, OpenReadPool) keeps the statements prepared on it, by their text.
//
// bun writes each value into the SQL text, so Postgres parses and plans every call
// afresh: at 32 callers of engram bench write, planning was 1.8 ms of Postgres's
// 4.9 ms of CPU per write, 0.27 ms a call for a select on facts, whose twenty
// indexes the planner weighs each time; recall's statement, planned per call, was
// what made recall slow. A statement sent with its values as parameters ($1 … $n:
// the write path's selects, prepared.go, and recall's statement) is prepared on
// the connection the first time it runs there, through the pool or in a
// transaction, and run again by name; the pools' sessions use generic plans
// (pool), so Postgres plans it there once. bun's own statements carry no
// parameters and pass through as before.

// maxStmts bounds the statements kept per connection; past it they are all
// closed and prepared again as used (the statements are a fixed set, a few dozen).
const maxStmts = 256

// connector opens pgdriver's connections as *Conn.
type connector struct{ *pgdriver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: dc.(*pgdriver.Conn)}, nil
}

// Conn is one connection of a store's pool (database/sql's driver connection;
// sql.Conn.Raw hands it over): pgdriver's, with the statements prepared on it and
// the session settings a reader gave it. Like the connection, it is used by one
// goroutine at a time.
type Conn struct {
	*pgdriver.Conn
	stmts map[string]driver.Stmt
	inTx  bool
	// settings are the session settings Session ran; pid the backend's.
	settings string
	pid      int64
	timeout  time.Duration
}

// QueryContext runs a statement with parameters as a prepared statement of this
// connection; one without, as pgdriver does (bun's).
func (c *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.Conn.QueryContext(ctx, query, args)
	}
	return run(ctx, c, query, func(st driver.Stmt) (driver.Rows, error) {
		return st.(driver.StmtQueryContext).QueryContext(ctx, args)
	})
}

// ExecContext is QueryContext for a statement whose rows are not read.
func (c *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.Conn.ExecContext(ctx, query, args)
	}
	return run(ctx, c, query, func(st driver.Stmt) (driver.Result, error) {
		return st.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

// BeginTx begins a transaction; a statement that fails in one is not run again
// (run), the transaction being aborted.
func (c *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return connTx{tx, c}, nil
}

type connTx struct {
	driver.Tx
	c *Conn
}

func (t connTx) Commit() error   { t.c.inTx = false; return t.Tx.Commit() }
func (t connTx) Rollback() error { t.c.inTx = false; return t.Tx.Rollback() }

// run calls fn with the statement of query prepared on c (the first time it
// runs there). A statement the server no longer has, or whose cached plan a
// schema change made unusable, is prepared again, and outside a transaction run
// again once (both errors come before any row).
func run[T any](ctx context.Context, c *Conn, query string, fn func(driver.Stmt) (T, error)) (T, error) {
	var zero T
	st, err := c.prepared(ctx, query)
	if err != nil {
		return zero, err
	}
	out, err := fn(st)
	if err == nil || !isStalePrepared(err) {
		return out, err
	}
	_ = st.Close()
	delete(c.stmts, query)
	if c.inTx || ctx.Err() != nil {
		return zero, err
	}
	if st, err = c.prepared(ctx, query); err != nil {
		return zero, err
	}
	return fn(st)
}

func isStalePrepared(err error) bool {
	m := err.Error()
	return strings.Contains(m, "cached plan must not change result type") ||
		(strings.Contains(m, "prepared statement") && strings.Contains(m, "does not exist"))
}

func (c *Conn) prepared(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if len(c.stmts) >= maxStmts {
		for _, st := range c.stmts {
			_ = st.Close()
		}
		c.stmts = nil
	}
	st, err := c.Conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = map[string]driver.Stmt{}
	}
	c.stmts[query] = st
	return st, nil
}

// EachRow runs query (prepared as QueryContext's) with args, given to the driver
// as they are, and calls row with each row's values as the driver read them
// (recall reads its rows so, without database/sql's copies).
func (c *Conn) EachRow(ctx context.Context, query string, args []any, row func(cols []string, vals []driver.Value) error) error {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := c.QueryContext(ctx, query, nv)
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

// Session runs settings (SET statements) on the connection unless they are the
// ones it ran last, and returns the backend's pid (pg_backend_pid: to cancel its
// statement from another connection).
func (c *Conn) Session(ctx context.Context, settings string) (pid int64, err error) {
	if c.settings == settings && c.pid != 0 {
		return c.pid, nil
	}
	if _, err := c.Conn.ExecContext(ctx, settings, nil); err != nil {
		return 0, err
	}
	err = c.EachRow(ctx, "SELECT pg_backend_pid()", nil, func(_ []string, v []driver.Value) error {
		switch id := v[0].(type) {
		case int64:
			c.pid = id
		case int32:
			c.pid = int64(id)
		default:
			return fmt.Errorf("pg_backend_pid is %T", v[0])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	c.settings = settings
	return c.pid, nil
}

// StatementTimeout is the statement_timeout SetStatementTimeout gave the session
// (0: none, the one its pool's sessions start with).
func (c *Conn) StatementTimeout() time.Duration { return c.timeout }

// SetStatementTimeout sets the session's statement_timeout to d (whole
// milliseconds).
func (c *Conn) SetStatementTimeout(ctx context.Context, d time.Duration) error {
	ms := d.Milliseconds()
	if _, err := c.Conn.ExecContext(ctx, fmt.Sprintf("SET statement_timeout = %d", ms), nil); err != nil {
		return err
	}
	c.timeout = time.Duration(ms) * time.Millisecond
	return nil
}
