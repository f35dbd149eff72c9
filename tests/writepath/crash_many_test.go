package writepath

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/loadgen"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/write"
)

// 300 writes while the worker process is SIGKILLed at random moments, at least 20
// times (a new one started after each kill): every write finishes, none is lost or
// duplicated, no key has two ACTIVE revisions and every ACTIVE fact has its
// embedding. The fast path's local activities are re-run after a kill (their
// markers were never recorded), so this holds only if each step is idempotent and
// returns on a retry what it returned the first time.
func TestCrashManyKillsDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("300 writes under 20 worker kills take minutes")
	}
	const writes, minKills, callers = 300, 20, 16
	w := startKilledWorker(t)
	e, st := w.e, w.e.st
	tenant := "crash-" + testenv.RandomID(6)

	var finished atomic.Int64
	done := make(chan loadgen.Result, 1)
	go func() {
		done <- loadgen.Run(context.Background(), callers, writes, func(_ context.Context, i int) error {
			defer finished.Add(1)
			return crashWrite(e, tenant, i)
		})
	}()
	kills := w.killAtRandom(t, minKills, 2*minKills, 100, 1000, func() bool { return finished.Load() >= writes })
	res := <-done
	t.Logf("%d writes, %d worker kills", writes, kills)
	var failures []string
	for _, err := range res.Err {
		if err != nil {
			failures = append(failures, err.Error())
		}
	}
	require.Empty(t, failures, "every write finished as it should")

	assert.Equal(t, writes, e.count("events", "tenant_id = ?", tenant), "no event lost or duplicated")
	assert.Equal(t, writes, e.count("evidence", "tenant_id = ?", tenant), "one evidence row per event")
	counts, err := st.EventStatusCounts(context.Background(), tenant)
	require.NoError(t, err)
	assert.Zero(t, counts[memory.EventProcessing]+counts[memory.EventReceived]+counts[memory.EventFailed], "%v", counts)
	twice, err := st.DB().NewSelect().TableExpr("(SELECT memory_key FROM facts WHERE tenant_id = ? AND status = 'ACTIVE' GROUP BY memory_key HAVING count(*) > 1) AS twice", tenant).Count(context.Background())
	require.NoError(t, err)
	assert.Zero(t, twice, "no key with two ACTIVE revisions")
	assert.Zero(t, e.count("facts", "tenant_id = ? AND status = 'ACTIVE' AND embedding IS NULL", tenant), "no ACTIVE fact without an embedding")
	assert.Zero(t, e.count("evidence", "tenant_id = ? AND embedding IS NULL", tenant), "no turn without an embedding")
}

// crashWrite starts write i of the bench mix and waits for its result, however
// many workers die meanwhile.
func crashWrite(e *env, tenant string, i int) error {
	s := benchMix[i%len(benchMix)]
	user := fmt.Sprintf("u%d", i%12)
	ev := memory.IngestEvent{
		TenantID: tenant, IdempotencyKey: fmt.Sprintf("k-%d", i), UserID: user, SessionID: "s-" + user,
		Schema: s.schema, Content: s.text(i), OccurredAt: base.Add(time.Duration(i) * time.Minute),
	}
	if s.task {
		ev.TaskID = "trip-" + user
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := write.Start(ctx, e.c, e.queue, write.MemoryWriteInput{Event: ev, ReviewTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("start write %d: %w", i, err)
	}
	var res write.MemoryWriteResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("write %d: %w", i, err)
	}
	if res.Status != write.WriteCommitted && res.Status != write.WriteNoMemory {
		return fmt.Errorf("write %d %q: %s (%s)", i, ev.Content, res.Status, res.Reason)
	}
	return nil
}

// killedWorker is `engram worker` (the n-gram embedder) run as a process on a
// fresh database and a task queue of its own, for a test that SIGKILLs it; e
// writes on that queue.
type killedWorker struct {
	e    *env
	proc *testenv.Process
	bin  string
	env  []string
}

func startKilledWorker(t *testing.T) *killedWorker {
	bin := testenv.Build(t, "./cmd/engram")
	st, dbURL := testenv.StoreURL(t)
	e := &env{t: t, st: st, c: testenv.Temporal(t), queue: testenv.TaskQueue(t)}
	procEnv := testenv.WorkerEnv(t, dbURL, e.queue, "ENGRAM_EMBEDDER=ngram")
	return &killedWorker{e: e, proc: testenv.StartProcess(t, procEnv, bin, "worker"), bin: bin, env: procEnv}
}

// killAtRandom SIGKILLs the worker process at random moments (lo to hi ms apart),
// each time starting a new one at once, at least min times and then until done
// or max kills; it returns the kills. The last worker started runs on.
func (w *killedWorker) killAtRandom(t *testing.T, min, max, lo, hi int, done func() bool) int {
	t.Helper()
	kills := 0
	for kills < min || (!done() && kills < max) {
		time.Sleep(time.Duration(lo+rand.IntN(hi-lo)) * time.Millisecond)
		w.proc.Kill()
		kills++
		w.proc = testenv.StartProcess(t, w.env, w.bin, "worker")
	}
	return kills
}
