package writepath

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/write"
)

// A batch writes each user's events in runs (WriteRun: one transaction for many
// events, committed before each governance step). These tests hold it to what the
// same events written one by one make, on the real stack.

// runTexts are turns of a travel conversation: statements the rule extractor makes
// facts of (budgets and seats, which supersede each other), and chatter it does not.
var runTexts = []string{
	"预算不超过8000元", "以后预算不超过9000元", "预算不超过12000元", "我以后尽量都坐直飞",
	"I prefer an aisle seat", "I prefer a window seat", "thanks, that helps", "ok", "我的订单12345没收到",
	"what time is it in Lisbon?", "sounds good, book it", "I don't want layovers",
	"We landed in Lisbon late on Friday night. The next morning we walked up to the castle and ate sardines by the river.",
}

// runEvents is a random history of users' turns in time order, keys prefixed.
func runEvents(r *rand.Rand, tenant, prefix string, n int) []memory.IngestEvent {
	users := []string{"ua", "ub", "uc"}
	var out []memory.IngestEvent
	for i := 0; i < n; i++ {
		u := users[r.IntN(len(users))]
		out = append(out, memory.IngestEvent{TenantID: tenant, IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i), UserID: u,
			Schema: "travel", Content: runTexts[r.IntN(len(runTexts))], OccurredAt: base.Add(time.Duration(i) * time.Minute), SessionID: "s-" + u})
	}
	return out
}

// memoryOf is what the tenant remembers of each user: active facts, the status of
// each event (by its position), evidence and session turns.
func (e *env) memoryOf(tenant string, evs []memory.IngestEvent) map[string]any {
	e.t.Helper()
	out := map[string]any{}
	for _, u := range []string{"ua", "ub", "uc"} {
		var facts []string
		for _, f := range e.active(tenant, u) {
			facts = append(facts, fmt.Sprintf("%s %s=%s (%s)", f.Scope, f.Predicate, f.Object, f.Origin))
		}
		sort.Strings(facts)
		out[u+" facts"] = facts
		out[u+" evidence"] = e.count("evidence", "tenant_id = ? AND user_id = ?", tenant, u)
		out[u+" embedded"] = e.count("evidence", "tenant_id = ? AND user_id = ? AND embedding IS NOT NULL", tenant, u)
		out[u+" sentences"] = e.count("evidence_sentences", "tenant_id = ? AND user_id = ?", tenant, u)
		var turns int
		require.NoError(e.t, e.st.DB().NewSelect().Table("sessions").ColumnExpr("coalesce(sum(turn_count), 0)").
			Where("tenant_id = ? AND user_id = ?", tenant, u).Scan(context.Background(), &turns))
		out[u+" session turns"] = turns
	}
	var statuses []string
	for _, ev := range evs {
		var st string
		require.NoError(e.t, e.st.DB().NewSelect().Table("events").Column("status").
			Where("tenant_id = ? AND idempotency_key = ?", tenant, ev.IdempotencyKey).Scan(context.Background(), &st))
		statuses = append(statuses, st)
	}
	out["statuses"] = statuses
	return out
}

// Random histories written as batches of random slices remember what the same
// events written one by one remember: the same facts (supersession in time order),
// the same event statuses, evidence (with its vectors and its sentences' vectors,
// which the batch embeds in Index steps) and session turns.
func TestBatchRunsMatchSingleWrites(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	ctx := context.Background()
	for seed := uint64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 20 + r.IntN(25)
		slice := 1 + r.IntN(40)
		batchTenant, singleTenant := "run-b-"+testenv.RandomID(6), "run-s-"+testenv.RandomID(6)
		bevs := runEvents(rand.New(rand.NewPCG(seed, 11)), batchTenant, "b", n)
		sevs := runEvents(rand.New(rand.NewPCG(seed, 11)), singleTenant, "s", n)

		run, err := write.StartBatch(ctx, e.c, e.queue, batchTenant, "batch-"+testenv.RandomID(8),
			write.MemoryWriteBatchInput{Events: bevs, Parallelism: 1 + r.IntN(3), SliceEvents: slice})
		require.NoError(t, err)
		var res write.MemoryWriteBatchResult
		require.NoError(t, run.Get(ctx, &res))
		require.Len(t, res.Results, n)
		for _, ev := range sevs {
			e.write(ev)
		}
		want := e.memoryOf(singleTenant, sevs)
		facts := 0
		for _, u := range []string{"ua", "ub", "uc"} {
			facts += len(want[u+" facts"].([]string))
		}
		require.NotZero(t, facts, "seed %d: the history makes facts", seed)
		require.NotZero(t, want["ua sentences"].(int)+want["ub sentences"].(int)+want["uc sentences"].(int), "seed %d: a long turn's sentences", seed)
		assert.Equal(t, want, e.memoryOf(batchTenant, bevs), "seed %d: %d events, slices of %d", seed, n, slice)
	}
}

// A run whose result was lost (its worker killed after the commit) is run again:
// it answers the same and writes nothing twice.
func TestWriteRunAgainWritesNothingTwice(t *testing.T) {
	st := testenv.Store(t)
	acts := writetest.Activities(st)
	tenant := "run-" + testenv.RandomID(6)
	evs := runEvents(rand.New(rand.NewPCG(3, 3)), tenant, "k", 30)
	in := write.WriteRunInput{ExtractAttempts: 3}
	for _, ev := range evs {
		if ev.UserID == "ua" {
			in.Records = append(in.Records, write.RecordInput{Event: ev, WorkflowID: "write-batch/test"})
		}
	}
	first, err := acts.WriteRun(context.Background(), in)
	require.NoError(t, err)
	require.Len(t, first.Results, len(in.Records))
	counts := func() []int {
		var out []int
		for _, table := range []string{"events", "evidence", "facts", "evidence_postings"} {
			n, err := st.DB().NewSelect().Table(table).Where("tenant_id = ?", tenant).Count(context.Background())
			require.NoError(t, err)
			out = append(out, int(n))
		}
		return out
	}
	before := counts()
	again, err := acts.WriteRun(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, before, counts(), "events, evidence, facts, postings")
	require.Len(t, again.Results, len(first.Results))
	for i := range first.Results {
		assert.Equal(t, first.Results[i].Record.EvidenceID, again.Results[i].Record.EvidenceID, "event %d", i)
		assert.Equal(t, first.Results[i].Status, again.Results[i].Status, "event %d", i)
	}
}

// An event that fails for good in the middle of a run (its key already names
// another event) fails the batch naming it; the user's events before it are
// written, the event its key names is left as it was, and nothing after it is written.
func TestBatchRunStopsAtAnEventThatFails(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	ctx := context.Background()
	tenant := "run-" + testenv.RandomID(6)
	taken := writetest.Event(tenant, "ua", "travel", "预算不超过8000元", base)
	e.write(taken)
	var evs []memory.IngestEvent
	for i, text := range []string{"I prefer an aisle seat", "thanks", "以后预算不超过9000元", "ok", "I prefer a window seat"} {
		ev := writetest.Event(tenant, "ua", "travel", text, base.Add(time.Duration(i+1)*time.Minute))
		if i == 3 {
			ev.IdempotencyKey = taken.IdempotencyKey // the key of another event
		}
		evs = append(evs, ev)
	}
	run, err := write.StartBatch(ctx, e.c, e.queue, tenant, "batch-"+testenv.RandomID(8), write.MemoryWriteBatchInput{Events: evs})
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "events[3]")
	assert.True(t, strings.Contains(strings.ToLower(err.Error()), "idempotency") || strings.Contains(err.Error(), "another"), err.Error())
	for i, ev := range evs[:3] {
		assert.Equal(t, 1, e.count("evidence", "tenant_id = ? AND event_id = (SELECT id FROM events WHERE tenant_id = ? AND idempotency_key = ?)", tenant, tenant, ev.IdempotencyKey), "event %d written", i)
	}
	assert.Zero(t, e.count("events", "tenant_id = ? AND idempotency_key = ?", tenant, evs[4].IdempotencyKey), "nothing after the failed event")
	b := find(e.active(tenant, "ua"), "budget", memory.ScopeUser)
	require.NotNil(t, b)
	assert.Equal(t, "9000 CNY", b.Object, "the run's budget before the failure was governed and committed")
	assert.Equal(t, 1, e.count("events", "tenant_id = ? AND idempotency_key = ? AND content = ?", tenant, taken.IdempotencyKey, taken.Content), "the event the key names is as it was")
}
