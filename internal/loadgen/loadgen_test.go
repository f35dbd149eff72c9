package loadgen

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Every call runs once, at most conc at a time; errors and latencies land at the
// call's index; calls after ctx ends are not made and carry its error.
func TestRun(t *testing.T) {
	var running, peak atomic.Int64
	boom := errors.New("boom")
	r := Run(context.Background(), 3, 10, func(_ context.Context, i int) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		if i == 4 {
			return boom
		}
		return nil
	})
	assert.LessOrEqual(t, peak.Load(), int64(3))
	assert.Len(t, r.Err, 10)
	assert.ErrorIs(t, r.FirstError(), boom)
	for i, l := range r.Latency {
		assert.GreaterOrEqual(t, l, 5*time.Millisecond, "call %d", i)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var made atomic.Int64
	r = Run(ctx, 2, 5, func(context.Context, int) error { made.Add(1); return nil })
	assert.Zero(t, made.Load())
	assert.ErrorIs(t, r.FirstError(), context.Canceled)
}
