// Package loadgen runs a benchmark's calls: n calls, conc at once, each timed.
// `engram bench write` and `engram bench recall` measure through it.
package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Result is what Run measured, per call in call order.
type Result struct {
	Latency []time.Duration
	Err     []error // nil for a call that succeeded; ctx's error for one never run
	Wall    time.Duration
}

// FirstError is the error of the first failed call, or nil.
func (r Result) FirstError() error {
	for _, err := range r.Err {
		if err != nil {
			return err
		}
	}
	return nil
}

// Run makes calls 0..n-1 of one with conc callers at once, until all ran or ctx
// ends.
func Run(ctx context.Context, conc, n int, one func(ctx context.Context, i int) error) Result {
	r := Result{Latency: make([]time.Duration, n), Err: make([]error, n)}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range max(conc, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					r.Err[i] = err
					continue
				}
				t := time.Now()
				r.Err[i] = one(ctx, i)
				r.Latency[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	r.Wall = time.Since(start)
	return r
}
