package writepath

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// Batches written in runs (one transaction for many events) while the worker
// process is SIGKILLed at random moments, at least six times, a new one started
// after each kill: every batch finishes, and each remembers exactly what the same
// events written one by one (by a worker nobody kills) remember: facts, event
// statuses, evidence with its vectors and sentences, session turns. A kill inside a
// run rolls back its open transaction and the run is run again; a kill after its
// commit leaves a committed run whose result was never recorded, and the run again
// must write nothing twice.
func TestBatchRunsUnderWorkerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("batches under worker kills take minutes")
	}
	const batches, minKills = 6, 6
	w := startKilledWorker(t)
	e, st, c := w.e, w.e.st, w.e.c
	// The reference: the same events written one by one by an in-process worker of
	// its own queue (the killed worker's extractor, embedder and governance).
	ref := &env{t: t, st: st, c: c, queue: startWriteWorker(t, c, st, llm.NewRuleExtractor(), embedding.NewNGramEmbedder(storage.EmbeddingDim))}

	type batch struct {
		tenant, single string
		evs, sevs      []memory.IngestEvent
		slice, par     int
	}
	var bs []batch
	for seed := uint64(1); seed <= batches; seed++ {
		r := rand.New(rand.NewPCG(seed, 23))
		n := 40 + r.IntN(40)
		b := batch{tenant: "runk-b-" + testenv.RandomID(6), single: "runk-s-" + testenv.RandomID(6), slice: 1 + r.IntN(60), par: 1 + r.IntN(3)}
		b.evs = runEvents(rand.New(rand.NewPCG(seed, 29)), b.tenant, "b", n)
		b.sevs = runEvents(rand.New(rand.NewPCG(seed, 29)), b.single, "s", n)
		bs = append(bs, b)
	}

	var finished atomic.Int64
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer finished.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			// Started one after another, so kills fall on every stage of some batch.
			time.Sleep(time.Duration(i) * 700 * time.Millisecond)
			run, err := write.StartBatch(ctx, c, e.queue, b.tenant, "batch-"+testenv.RandomID(8),
				write.MemoryWriteBatchInput{Events: b.evs, Parallelism: b.par, SliceEvents: b.slice})
			if err != nil {
				errs[i] = fmt.Errorf("start batch %d: %w", i, err)
				return
			}
			var res write.MemoryWriteBatchResult
			if err := run.Get(ctx, &res); err != nil {
				errs[i] = fmt.Errorf("batch %d: %w", i, err)
				return
			}
			if len(res.Results) != len(b.evs) {
				errs[i] = fmt.Errorf("batch %d: %d results for %d events", i, len(res.Results), len(b.evs))
			}
		}()
	}
	kills := w.killAtRandom(t, minKills, 4*minKills, 150, 1350, func() bool { return finished.Load() >= int64(len(bs)) })
	wg.Wait()
	t.Logf("%d batches, %d worker kills", len(bs), kills)
	for _, err := range errs {
		require.NoError(t, err)
	}
	for i, b := range bs {
		for _, ev := range b.sevs {
			ref.write(ev)
		}
		want := ref.memoryOf(b.single, b.sevs)
		assert.Equal(t, want, e.memoryOf(b.tenant, b.evs), "batch %d: %d events, slices of %d, parallelism %d", i, len(b.evs), b.slice, b.par)
		assert.Equal(t, len(b.evs), e.count("events", "tenant_id = ?", b.tenant), "batch %d: no event lost or duplicated", i)
		twice, err := st.DB().NewSelect().TableExpr("(SELECT memory_key FROM facts WHERE tenant_id = ? AND status = 'ACTIVE' GROUP BY memory_key HAVING count(*) > 1) AS twice", b.tenant).Count(context.Background())
		require.NoError(t, err)
		assert.Zero(t, twice, "batch %d: no key with two ACTIVE revisions", i)
	}
}
