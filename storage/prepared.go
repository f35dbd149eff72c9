package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// Prepared statements for the selects and updates every write runs (conn.go says
// why): built with bun once, with bun.Safe("$n") where the values go and the
// constants that select partial indexes written in, and run with the values as
// parameters, which makes the connection prepare them.

// textDB writes statement texts with bun: a handle of the pools' dialect with no
// connection.
var textDB = bun.NewDB(nil, pgdialect.New())

// statementText is the text build writes with textDB, given bun.Safe("$1") …
// bun.Safe("$n") for the n values it takes.
func statementText(n int, build func(db bun.IDB, p []any) string) string {
	p := make([]any, n)
	for i := range p {
		p[i] = bun.Safe(fmt.Sprintf("$%d", i+1))
	}
	return build(textDB, p)
}

// sqlOn is where a statement with parameters runs through db: its pool or its
// transaction, as database/sql has them (bun's own methods would write the values
// into the text). It also returns the pool db runs on, which scans rows as bun would.
func sqlOn(db bun.IDB) (interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, *bun.DB, error) {
	switch d := db.(type) {
	case *bun.DB:
		return d.DB, d, nil
	case bun.Tx:
		return d.Tx, d.NewSelect().DB(), nil
	}
	return nil, nil, fmt.Errorf("storage: cannot run a prepared statement through %T", db)
}

// execPrepared runs the statement text (an update) with args through db.
func execPrepared(ctx context.Context, db bun.IDB, text string, args ...any) (sql.Result, error) {
	on, _, err := sqlOn(db)
	if err != nil {
		return nil, err
	}
	return on.ExecContext(ctx, text, args...)
}

// selectPrepared runs the select text with args through db (the pool, or a
// transaction on its connection) and scans the rows into dest as bun would.
func selectPrepared(ctx context.Context, db bun.IDB, text string, dest any, args ...any) error {
	on, pool, err := sqlOn(db)
	if err != nil {
		return err
	}
	rows, err := on.QueryContext(ctx, text, args...)
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
