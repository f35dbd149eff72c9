package recall

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/storage"
)

// Recall's connections: its own read pool's connections (storage's *Conn, which
// prepare the statement once per connection and keep it, run with a cached
// generic plan), each tuned once (tuneSQL), bounded by a statement timeout and
// cancelled in the server when the caller gives up.

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

// onConn runs fn on one pooled connection, tuned, with its statement timeout
// bound to ctx and its statement cancelled when ctx ends first.
func (e *Engine) onConn(ctx context.Context, fn func(c *storage.Conn) error) error {
	sc, err := e.db.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	return sc.Raw(func(dc any) error {
		c, ok := dc.(*storage.Conn)
		if !ok {
			return fmt.Errorf("recall: connection %T is not one of storage's pools", dc)
		}
		pid, err := c.Session(ctx, e.tuneSQL())
		if err != nil {
			return fmt.Errorf("tune connection: %w", err)
		}
		if err := boundStatement(ctx, c, e.opts.Timeout); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		stop := e.cancelOnDone(ctx, pid)
		err = fn(c)
		if !stop() {
			return errors.Join(err, errConnCancelled)
		}
		// A statement cut off by its deadline (the driver's read deadline is the
		// context's, and can come a moment before the context says it is done) or
		// by the network leaves the connection mid-protocol: it is closed, never
		// pooled.
		var ne net.Error
		if err != nil && (errors.Is(err, driver.ErrBadConn) || ctx.Err() != nil || errors.As(err, &ne)) {
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
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
