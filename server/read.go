package server

import (
	"context"
	"time"

	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// read runs fn, a pure read the API serves (op names it: "get fact"), on the read
// store, under ctx bounded by the read store's statement timeout: the limit in
// force is the shorter of that timeout and the time left before the caller's
// deadline. A read that does not finish within it (its
// context's deadline passed, or Postgres cancelled its statement at its
// statement_timeout) is a *recall.TimeoutError naming op and the limit, which
// toConnect answers as deadline_exceeded; never a driver's "i/o timeout" or an
// internal error. When the caller's deadline is the shorter, the client gives up
// then and the backend stops at its statement_timeout at the latest.
func (d Deps) read(ctx context.Context, op string, fn func(ctx context.Context, st *storage.Store) error) error {
	st := d.ReadStore
	if st == nil {
		st = d.Store
	}
	limit := st.StatementTimeout()
	if dl, ok := ctx.Deadline(); ok {
		if r := max(time.Until(dl), 0); limit == 0 || r < limit {
			limit = r
		}
	} else if limit == 0 {
		// A store without a statement timeout and a caller without a deadline:
		// nothing bounds the read, and nothing to report.
		return fn(ctx, st)
	}
	rctx := ctx
	if t := st.StatementTimeout(); t > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	return recall.AsTimeout(rctx, op, limit, fn(rctx, st))
}
