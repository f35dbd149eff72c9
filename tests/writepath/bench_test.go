package writepath

// BenchmarkWritePath measures the write path with the rule extractor through a real
// in-process worker, the Temporal dev server and Postgres: writes per second and the
// p50/p95 latency from starting a MemoryWrite to its committed result.
//
//	eval "$(scripts/stack env)"
//	go test ./tests/writepath/ -run x -bench WritePath -benchtime 200x

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// benchSentence is one kind of event of the mix; i varies amounts and ids.
type benchSentence struct {
	schema string
	text   func(i int) string
	task   bool
}

// benchMix is the seed sentences and variants. Each user says all of them in turn, so
// a user's events touch several keys and some supersede each other. None depends on
// another being committed first (the inquiry names its order: "我那个没到的订单" racing
// its order at concurrency 8 is unresolved and waits for a review), and none needs a
// review, so every write ends COMMITTED.
var benchMix = []benchSentence{
	{"travel", func(i int) string { return fmt.Sprintf("预算不超过%d元", 5000+(i%40)*100) }, false},
	{"travel", func(int) string { return "我以后尽量都坐直飞" }, false},
	{"customer_service", func(i int) string { return fmt.Sprintf("我的订单%d没收到", 10000+i) }, false},
	{"travel", func(i int) string { return fmt.Sprintf("这次旅行预算调整到%d元", 8000+(i%20)*500) }, true},
	{"customer_service", func(i int) string { return fmt.Sprintf("订单%d怎么样了", 10000+i-2) }, false},
	{"travel", func(int) string { return "I prefer an aisle seat" }, false},
	{"travel", func(i int) string { return fmt.Sprintf("以后预算不超过%d元", 9000+(i%10)*100) }, false},
	{"travel", func(int) string { return "I don't want layovers" }, false},
}

func BenchmarkWritePath(b *testing.B) {
	st := testenv.Store(b)
	c := testenv.Temporal(b)
	q := startWriteWorker(b, c, st, llm.NewRuleExtractor(), embedding.NewNGramEmbedder(storage.EmbeddingDim))
	tenant := "bench-" + testenv.RandomID(6)
	var runs atomic.Int64

	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency-%d", conc), func(b *testing.B) {
			prefix := fmt.Sprintf("c%d-r%d", conc, runs.Add(1))
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var failed atomic.Int64
			var firstErr sync.Once
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						d, err := benchWrite(c, q, tenant, prefix, i)
						lat[i] = d
						if err != nil {
							failed.Add(1)
							firstErr.Do(func() { b.Errorf("write %d: %v", i, err) })
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d of %d writes failed", failed.Load(), b.N)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 95)), "p95-ms")
		})
	}
}

// benchWrite ingests event i of the mix for its user and waits for the committed
// result.
func benchWrite(c client.Client, queue, tenant, prefix string, i int) (time.Duration, error) {
	s := benchMix[i%len(benchMix)]
	user := fmt.Sprintf("%s-u%d", prefix, i/len(benchMix))
	ev := memory.IngestEvent{
		TenantID: tenant, IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i), UserID: user, SessionID: "s-" + user,
		Schema: s.schema, Content: s.text(i), OccurredAt: base.Add(time.Duration(i) * time.Minute),
	}
	if s.task {
		ev.TaskID = "trip-" + user
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	run, err := write.Start(ctx, c, queue, write.MemoryWriteInput{Event: ev, ReviewTimeout: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	var res write.MemoryWriteResult
	if err := run.Get(ctx, &res); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if res.Status != write.WriteCommitted || len(res.Results) == 0 {
		return d, fmt.Errorf("%q: status %s (%s)", ev.Content, res.Status, res.Reason)
	}
	for _, r := range res.Results {
		if r.Status != memory.CandidateAccepted {
			return d, fmt.Errorf("%q: candidate %s %s (%s)", ev.Content, r.Status, r.Action, r.Reason)
		}
	}
	return d, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100 // nearest rank
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
