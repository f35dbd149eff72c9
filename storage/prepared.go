package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/uptrace/bun"
)

// Prepared statements for the selects and updates every write runs. bun writes each
// value into the SQL text, so Postgres parses and plans every call afresh: at 32
// callers of engram bench write, planning was 1.8 ms of Postgres's 4.9 ms of CPU per
// write (pg_stat_statements), 0.27 ms a call for a select on facts, whose twenty
// indexes the planner weighs each time (0.47 ms a write is left, mostly inserts
// still sent by bun). These statements are built with bun once, with bun.Safe("$n")
// where the values go and the constants that select partial indexes written in, and
// run as prepared statements with the values as parameters: database/sql prepares
// each on a pooled connection the first time it runs there (a transaction's
// included), and Postgres plans it there once (the pool's connections use generic
// plans, Open). A statement whose plan a schema change invalidated is planned again
// by Postgres.

// placeholders returns bun.Safe("$1") … bun.Safe("$n"), to build a statement's text.
func placeholders(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = bun.Safe(fmt.Sprintf("$%d", i+1))
	}
	return out
}

// preparedTexts memoizes statement texts by name: a statement is built once a process.
var preparedTexts sync.Map // name → string

// preparedText returns the text of the statement called name, built by build (with
// db's dialect) the first time.
func preparedText(db bun.IDB, name string, build func(db bun.IDB, p []any) string, params int) string {
	if s, ok := preparedTexts.Load(name); ok {
		return s.(string)
	}
	s := build(db, placeholders(params))
	preparedTexts.Store(name, s)
	return s
}

type stmtKey struct {
	db  *sql.DB
	sql string
}

// preparedStmts holds each pool's prepared statements (database/sql keeps, per
// statement, the connections it is prepared on). Store.Close closes its pool's.
var preparedStmts sync.Map // stmtKey → *sql.Stmt

func stmtFor(ctx context.Context, db *sql.DB, text string) (*sql.Stmt, error) {
	k := stmtKey{db, text}
	if s, ok := preparedStmts.Load(k); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if prev, loaded := preparedStmts.LoadOrStore(k, s); loaded {
		_ = s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// closePrepared closes the statements prepared for the pool db.
func closePrepared(db *sql.DB) {
	preparedStmts.Range(func(k, v any) bool {
		if k.(stmtKey).db == db {
			_ = v.(*sql.Stmt).Close()
			preparedStmts.Delete(k)
		}
		return true
	})
}

// preparedOn returns the prepared statement of text for db: the pool's, or the
// transaction's (close it after use; the connection keeps it prepared).
// It also returns the pool db runs on (which scans rows as bun would).
func preparedOn(ctx context.Context, db bun.IDB, text string) (st *sql.Stmt, pool *bun.DB, inTx bool, err error) {
	switch d := db.(type) {
	case *bun.DB:
		pool = d
	case bun.Tx:
		pool = d.NewSelect().DB()
	default:
		return nil, nil, false, fmt.Errorf("storage: cannot run a prepared statement through %T", db)
	}
	if st, err = stmtFor(ctx, pool.DB, text); err != nil {
		return nil, nil, false, err
	}
	if tx, ok := db.(bun.Tx); ok {
		return tx.Tx.StmtContext(ctx, st), pool, true, nil
	}
	return st, pool, false, nil
}

// execPrepared runs the statement text (an update) with args through db.
func execPrepared(ctx context.Context, db bun.IDB, text string, args ...any) (sql.Result, error) {
	st, _, inTx, err := preparedOn(ctx, db, text)
	if err != nil {
		return nil, err
	}
	if inTx {
		defer st.Close()
	}
	return st.ExecContext(ctx, args...)
}

// selectPrepared runs the select text with args through db (the pool, or a
// transaction on its connection) and scans the rows into dest as bun would.
func selectPrepared(ctx context.Context, db bun.IDB, text string, dest any, args ...any) error {
	st, pool, inTx, err := preparedOn(ctx, db, text)
	if err != nil {
		return err
	}
	if inTx {
		defer st.Close()
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	return pool.ScanRows(ctx, rows, dest)
}

// firstPrepared is selectPrepared for one row: its values in dest, or errNoRows.
func firstPrepared[T any](ctx context.Context, db bun.IDB, text string, dest *T, args ...any) error {
	var rows []T
	if err := selectPrepared(ctx, db, text, &rows, args...); err != nil {
		return err
	}
	if len(rows) == 0 {
		return errNoRows
	}
	*dest = rows[0]
	return nil
}

// TextArray is vs as the text of a Postgres text[] value (a parameter): every
// element quoted, its quotes and backslashes escaped, NUL characters (which no
// Postgres text holds) dropped.
func TextArray(vs []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, r := range v {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			if r != 0 {
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
