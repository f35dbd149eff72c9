package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/api/serviceerror"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall"
)

// Outages are UNAVAILABLE, so clients that retry only that code keep the write:
// a Postgres connection terminated by the server (what a restart does: SQLSTATE
// 57P01, here from a real pg_terminate_backend), EOF, a Temporal call that timed
// out while the caller's own deadline had not (also a start past its own bound), Temporal without the namespace or
// rate limiting. A deadline the caller set and reached stays DEADLINE_EXCEEDED.
func TestOutagesAreUnavailable(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	db := st.DB()
	db.SetMaxOpenConns(1)
	var pid int
	if err := db.NewRaw("SELECT pg_backend_pid()").Scan(ctx, &pid); err != nil {
		t.Fatal(err)
	}
	other := testenv.Store(t)
	if _, err := other.DB().ExecContext(ctx, "SELECT pg_terminate_backend(?)", pid); err != nil {
		t.Fatal(err)
	}
	var one int
	terminated := db.NewRaw("SELECT 1").Scan(ctx, &one)
	if terminated == nil {
		t.Skip("the pool reconnected before the terminated connection was used")
	}

	cases := map[string]error{
		"terminated connection": fmt.Errorf("resolve api key: %w", terminated),
		"EOF":                   fmt.Errorf("resolve api key: %w", io.EOF),
		"temporal timeout":      fmt.Errorf("start memory write: %w", context.DeadlineExceeded),
		"namespace not found":   fmt.Errorf("start memory write: %w", serviceerror.NewNamespaceNotFound("default")),
		"rate limited":          serviceerror.NewResourceExhausted(0, "busy"),
		"start's own bound":     fmt.Errorf("start memory write: %w", serviceerror.NewDeadlineExceeded("context deadline exceeded")),
	}
	for name, err := range cases {
		if got := connect.CodeOf(toConnect(ctx, err)); got != connect.CodeUnavailable {
			t.Errorf("%s (%v): %v, want unavailable", name, err, got)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if got := connect.CodeOf(toConnect(done, context.Canceled)); got != connect.CodeCanceled {
		t.Errorf("the caller's own cancel: %v, want canceled", got)
	}
	// A recall past its limit (the server's, the caller's deadline not reached):
	// deadline_exceeded naming the operation and the limit, never unavailable.
	slow := toConnect(ctx, fmt.Errorf("wrapped: %w", &recall.TimeoutError{Op: "recall", Limit: 2 * time.Second}))
	if got := connect.CodeOf(slow); got != connect.CodeDeadlineExceeded || !strings.Contains(slow.Error(), "recall did not finish within 2s") {
		t.Errorf("a recall past its limit: %v (%v), want deadline_exceeded naming recall and 2s", got, slow)
	}
	if got := connect.CodeOf(toConnect(ctx, errors.New("something else"))); got != connect.CodeInternal {
		t.Errorf("an unknown error: %v, want internal", got)
	}
}
