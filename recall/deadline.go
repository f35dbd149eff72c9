package recall

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/engramhq/engram/storage"
)

// DefaultTimeout is how long a recall may take when the caller's deadline is
// later or absent (Options.Timeout, ENGRAM_RECALL_TIMEOUT). A recall takes
// milliseconds; one that takes seconds has a plan gone wrong or a server too busy,
// and its caller is better served by a clear error than by a wait.
const DefaultTimeout = 2 * time.Second

// timeoutSlack is how far a connection's statement_timeout may lie beyond the
// request's remaining time before it is set again (a round trip): the cancel at
// the context's end (cancelOnDone) ends the statement on time, and the statement
// timeout is the server's own bound behind it.
const timeoutSlack = 100 * time.Millisecond

// TimeoutError is a recall (or one of its reads) that did not finish within its
// limit: the caller's deadline or the engine's Timeout, whichever came first. Its
// statement was cancelled in Postgres. errors.Is(err, context.DeadlineExceeded)
// holds.
type TimeoutError struct {
	Op    string        // what ran out of time ("recall")
	Limit time.Duration // the time it had
	// Queued: it was still waiting for a statement slot (Options.MaxStatements),
	// so no statement of it ran.
	Queued bool
}

func (e *TimeoutError) Error() string {
	if e.Queued {
		return fmt.Sprintf("%s did not finish within %s (the request's deadline, or the server's ENGRAM_RECALL_TIMEOUT): it was still waiting for a statement slot (ENGRAM_RECALL_MAX_STATEMENTS)", e.Op, e.Limit.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s did not finish within %s (the request's deadline, or the server's ENGRAM_RECALL_TIMEOUT); its statement was cancelled", e.Op, e.Limit.Round(time.Millisecond))
}

// errQueued is a recall whose context ended while it waited for a statement slot.
var errQueued = errors.New("recall: waiting for a statement slot")

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// withLimit bounds ctx by the engine's timeout and returns the limit in force (the
// shorter of it and the caller's remaining time), for the error that reports it.
func (e *Engine) withLimit(ctx context.Context) (context.Context, context.CancelFunc, time.Duration) {
	limit := e.opts.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if r := time.Until(dl); r < limit {
			limit = max(r, 0)
		}
	}
	c, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	return c, cancel, limit
}

// timeoutErr turns the error of an operation under ctx into a TimeoutError when
// ctx's deadline passed or Postgres ended the statement by its statement_timeout:
// never a driver's "read tcp …: i/o timeout".
func timeoutErr(ctx context.Context, op string, limit time.Duration, err error) error {
	if err == nil {
		return nil
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return err
	}
	// The driver's read deadline is the context's: its timeout can come a moment
	// before the context says it is done.
	dl, ok := ctx.Deadline()
	past := ok && !time.Now().Before(dl)
	if past || errors.Is(ctx.Err(), context.DeadlineExceeded) || storage.SQLState(err) == "57014" && ctx.Err() == nil {
		return &TimeoutError{Op: op, Limit: limit, Queued: errors.Is(err, errQueued)}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s: %w", op, context.Canceled)
	}
	return err
}

// AsTimeout is, for a read outside the engine (the API's reads on a
// storage.Store.Reader, whose statements end at its statement_timeout) run under
// ctx with limit in force, a *TimeoutError naming op and limit when ctx's deadline
// passed or Postgres cancelled the statement (SQLSTATE 57014); the caller's
// cancel is op's context.Canceled, and any other error err itself.
func AsTimeout(ctx context.Context, op string, limit time.Duration, err error) error {
	return timeoutErr(ctx, op, limit, err)
}

// boundStatement sets the connection's statement_timeout to the time left before
// ctx's deadline when the one in force is shorter than that (a statement would be
// cut early) or longer by more than timeoutSlack. The read pool's sessions start
// at the engine's Timeout, so a recall under the default limit sets nothing.
func boundStatement(ctx context.Context, c *storage.Conn, def time.Duration) error {
	want := def
	if dl, ok := ctx.Deadline(); ok {
		want = min(want, time.Until(dl))
	}
	if want <= 0 {
		return context.DeadlineExceeded
	}
	cur := c.StatementTimeout()
	if cur == 0 {
		cur = def
	}
	if cur >= want && cur <= want+timeoutSlack {
		return nil
	}
	return c.SetStatementTimeout(ctx, want+time.Millisecond)
}

// cancelOnDone cancels the statement running on the backend pid when ctx ends
// before stop is called (a caller that gave up, or its deadline): Postgres stops
// working for it at once, rather than at its statement_timeout or when it finds
// the socket closed. stop reports whether the cancel never ran; when it did (or
// is running), the connection must not be used again (a cancel that arrives late
// would end its next statement). stop does not wait for the cancel: the caller
// has its answer at its deadline, and the cancel (a statement on the main pool,
// perhaps a new connection) completes on its own within a second.
func (e *Engine) cancelOnDone(ctx context.Context, pid int64) (stop func() bool) {
	if pid == 0 {
		return func() bool { return true }
	}
	stopAF := context.AfterFunc(ctx, func() {
		// On the main pool: the read pool may be full of the statements to cancel.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := e.store.DB().DB.ExecContext(cctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
			e.opts.Logger.Warn("recall: cancel a statement whose caller gave up", "pid", pid, "err", err)
		}
	})
	return stopAF
}

// errConnCancelled marks a connection a cancel was sent to: database/sql closes
// it rather than pool it (driver.ErrBadConn).
var errConnCancelled = fmt.Errorf("recall: statement cancelled: %w", driver.ErrBadConn)
