// Package writepath tests the MemoryWrite workflow end to end: a real Temporal dev
// server, a real Postgres, a worker in this process (or a separate process for the
// crash test), the rule extractor, and the LLM extractor against a local fake
// OpenAI-compatible server (the only fake: no LLM is reachable here).
package writepath

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

type env struct {
	t     *testing.T
	st    *storage.Store
	c     client.Client
	queue string
}

func newEnv(t *testing.T, ex llm.Extractor) *env {
	return newEnvWith(t, ex, embedding.NewNGramEmbedder(storage.EmbeddingDim))
}

// newEnvWith is newEnv with the embedder emb.
func newEnvWith(t *testing.T, ex llm.Extractor, emb embedding.Embedder) *env {
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	return &env{t: t, st: st, c: c, queue: startWriteWorker(t, c, st, ex, emb)}
}

// startWriteWorker runs a worker of the write path on c, on a task queue of its
// own (returned), until the test ends.
func startWriteWorker(tb testing.TB, c client.Client, st *storage.Store, ex llm.Extractor, emb embedding.Embedder) string {
	tb.Helper()
	return startWriteWorkerGov(tb, c, st, ex, emb, governance.DefaultConfig())
}

// startWriteWorkerGov is startWriteWorker with the governance gov.
func startWriteWorkerGov(tb testing.TB, c client.Client, st *storage.Store, ex llm.Extractor, emb embedding.Embedder, gov governance.Config) string {
	tb.Helper()
	q := testenv.TaskQueue(tb)
	acts := writetest.Activities(st)
	acts.Extractor, acts.Embedder, acts.Gov = ex, emb, gov
	writetest.Worker(tb, c, q, acts)
	return q
}

var base = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func (e *env) start(in write.MemoryWriteInput) client.WorkflowRun {
	e.t.Helper()
	return writetest.Start(e.t, e.c, e.queue, in)
}

func (e *env) write(ev memory.IngestEvent) write.MemoryWriteResult {
	e.t.Helper()
	return e.wait(e.start(write.MemoryWriteInput{Event: ev}))
}

func (e *env) wait(run client.WorkflowRun) write.MemoryWriteResult {
	e.t.Helper()
	return writetest.Wait(e.t, run)
}

func (e *env) active(tenant, user string) []storage.Fact {
	e.t.Helper()
	fs, err := e.st.ListFacts(context.Background(), tenant, storage.FactFilter{UserID: user, Statuses: []memory.FactStatus{memory.FactActive}})
	require.NoError(e.t, err)
	return fs
}

func find(fs []storage.Fact, pred string, scope memory.Scope) *storage.Fact {
	for i := range fs {
		if fs[i].Predicate == pred && fs[i].Scope == scope {
			return &fs[i]
		}
	}
	return nil
}

func (e *env) count(table, where string, args ...any) int {
	e.t.Helper()
	n, err := e.st.DB().NewSelect().Table(table).Where(where, args...).Count(context.Background())
	require.NoError(e.t, err)
	return int(n)
}

// Seed: "my order 12345 never arrived", then "how is that order that didn't arrive?"
func TestSeedOrderNeverArrived(t *testing.T) {
	newEnv(t, llm.NewRuleExtractor()).seedOrder()
}

// The seed sentences, which the rule extractor reads and the LLM tests' fake
// model answers (seedScript).
const (
	textOrder    = "我的订单12345没收到"
	textInquiry  = "我那个没到的订单怎么样了"
	textBudget   = "预算不超过8000元"
	textTrip     = "这次旅行预算调整到10000元"
	textBudget9k = "以后预算不超过9000元"
	textDirect   = "我以后尽量都坐直飞"
	textInferred = "我上次坐了靠窗的位置，挺好"
)

// seedOrder writes the order seed's two messages for user u1 of tenant t1 (order
// 12345 never arrived, then how is that order) and checks what they leave: the
// order NOT_RECEIVED, placed by u1, both messages evidence for facts about it, an
// ACTIVE fact of each. It returns the types of the edges from u1 to the order.
func (e *env) seedOrder() map[string]bool {
	t := e.t
	t.Helper()
	r1 := e.write(writetest.Event("t1", "u1", "customer_service", textOrder, base))
	require.Equal(t, write.WriteCommitted, r1.Status, r1.Reason)
	r2 := e.write(writetest.Event("t1", "u1", "customer_service", textInquiry, base.Add(24*time.Hour)))
	require.Equal(t, write.WriteCommitted, r2.Status, r2.Reason)
	ctx := context.Background()
	order, err := e.st.GetEntity(ctx, "t1", "Order", "12345")
	require.NoError(t, err)
	assert.Equal(t, "NOT_RECEIVED", order.State)
	assert.Equal(t, "u1", order.UserID)
	edges, err := e.st.EdgesOf(ctx, "t1", "Order", "12345")
	require.NoError(t, err)
	types := map[string]bool{}
	for _, ed := range edges {
		assert.Equal(t, "u1", ed.FromID)
		types[ed.Type] = true
	}
	assert.True(t, types["PLACED"], "User PLACED Order")
	var evidence []string
	require.NoError(t, e.st.DB().NewSelect().Table("fact_evidence").ColumnExpr("fact_evidence.evidence_id").
		Join("JOIN facts f ON f.id = fact_evidence.fact_id").
		Where("f.tenant_id = 't1' AND f.entity_id = '12345'").Scan(ctx, &evidence))
	assert.ElementsMatch(t, []string{r1.EvidenceID, r2.EvidenceID}, evidence, "evidence points to both messages")
	fs := e.active("t1", "u1")
	assert.NotNil(t, find(fs, "order_not_received", memory.ScopeUser))
	assert.NotNil(t, find(fs, "order_inquiry", memory.ScopeUser), "the inquiry is recorded as an event about the order")
	return types
}

// Seed: a user-level budget of 8000, then this trip's budget 10000.
func TestSeedBudgetTaskDoesNotOverwriteUser(t *testing.T) {
	newEnv(t, llm.NewRuleExtractor()).seedBudget()
}

// seedBudget writes the budget seed (a user budget of 8000, then this trip's
// budget of 10000) and checks that the trip's budget is a TASK fact beside the
// user's; then a later user-level change, which must supersede the user fact only.
func (e *env) seedBudget() {
	t := e.t
	t.Helper()
	require.Equal(t, write.WriteCommitted, e.write(writetest.Event("t1", "u1", "travel", textBudget, base)).Status)
	ev := writetest.Event("t1", "u1", "travel", textTrip, base.Add(48*time.Hour))
	ev.TaskID = "trip-1"
	require.Equal(t, write.WriteCommitted, e.write(ev).Status)

	fs := e.active("t1", "u1")
	user := find(fs, "budget", memory.ScopeUser)
	task := find(fs, "budget", memory.ScopeTask)
	require.NotNil(t, user)
	require.NotNil(t, task)
	assert.Equal(t, "8000 CNY", user.Object)
	assert.Equal(t, memory.FactActive, user.Status)
	assert.Equal(t, "10000 CNY", task.Object)
	assert.Equal(t, "trip-1", task.TaskID)
	assert.Contains(t, task.Reason, "stays ACTIVE", "the reason says the broader fact was kept")
	// History of each key shows its revision with its reason.
	for _, f := range []*storage.Fact{user, task} {
		h, err := e.st.FactHistory(context.Background(), "t1", f.MemoryKey)
		require.NoError(t, err)
		require.Len(t, h, 1)
		assert.NotEmpty(t, h[0].Reason)
	}
	// A later user-level change supersedes the user fact only.
	require.Equal(t, write.WriteCommitted, e.write(writetest.Event("t1", "u1", "travel", textBudget9k, base.Add(72*time.Hour))).Status)
	h, err := e.st.FactHistory(context.Background(), "t1", user.MemoryKey)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, memory.FactSuperseded, h[0].Status)
	assert.Equal(t, "9000 CNY", h[1].Object)
	assert.Contains(t, h[1].Reason, "supersedes")
	assert.Equal(t, "10000 CNY", find(e.active("t1", "u1"), "budget", memory.ScopeTask).Object)
}

// Seed: "from now on I'd rather fly direct" → a USER-scope PREFERENCE, STATED, ACTIVE.
func TestSeedDirectFlightPreference(t *testing.T) {
	newEnv(t, llm.NewRuleExtractor()).seedDirect()
}

// seedDirect writes "from now on I'd rather fly direct" and checks the fact it
// makes: a USER-scope PREFERENCE, STATED, ACTIVE, with its vector (stored by
// Commit). It returns the write's result and the fact.
func (e *env) seedDirect() (write.MemoryWriteResult, *storage.Fact) {
	t := e.t
	t.Helper()
	r := e.write(writetest.Event("t1", "u1", "travel", textDirect, base))
	require.Equal(t, write.WriteCommitted, r.Status)
	f := find(e.active("t1", "u1"), "flight_type", memory.ScopeUser)
	require.NotNil(t, f)
	assert.Equal(t, memory.TypePreference, f.MemoryType)
	assert.Equal(t, memory.OriginStated, f.Origin)
	assert.Equal(t, "direct", f.Object)
	assert.Equal(t, 1, e.count("facts", "id = ? AND embedding IS NOT NULL", f.ID))
	return r, f
}

func TestSameStatementTwiceIsOneFactTwoEvidence(t *testing.T) {
	newEnv(t, llm.NewRuleExtractor()).seedDirectTwice()
}

// seedDirectTwice writes "from now on I'd rather fly direct" twice, an hour
// apart, and checks the second is a duplicate: one fact, supported by both
// messages' evidence, its confidence raised.
func (e *env) seedDirectTwice() {
	t := e.t
	t.Helper()
	r1 := e.write(writetest.Event("t1", "u1", "travel", textDirect, base))
	r2 := e.write(writetest.Event("t1", "u1", "travel", textDirect, base.Add(time.Hour)))
	require.Len(t, r2.Results, 1)
	assert.Equal(t, string(governance.ActionDuplicate), r2.Results[0].Action)
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1' AND predicate = 'flight_type'"))
	f := find(e.active("t1", "u1"), "flight_type", memory.ScopeUser)
	require.NotNil(t, f)
	ids, err := e.st.FactEvidenceIDs(context.Background(), "t1", f.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{r1.EvidenceID, r2.EvidenceID}, ids)
	assert.Greater(t, f.Confidence, 0.9, "a repeated statement raises confidence")
}

func TestSameIdempotencyKeyIsOneEventOneRun(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	ev := writetest.Event("t1", "u1", "travel", "预算不超过8000元", base)
	var wg sync.WaitGroup
	runIDs := make([]string, 8)
	for i := range runIDs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			run := e.start(write.MemoryWriteInput{Event: ev})
			runIDs[i] = run.GetRunID()
			e.wait(run)
		}(i)
	}
	wg.Wait()
	for _, id := range runIDs {
		assert.Equal(t, runIDs[0], id, "every caller joins the same run")
	}
	// Once finished, the same key again starts nothing new: the caller gets the
	// finished run back.
	run := e.start(write.MemoryWriteInput{Event: ev})
	assert.Equal(t, runIDs[0], run.GetRunID())
	e.wait(run)
	assert.Equal(t, 1, e.count("events", "tenant_id = 't1'"))
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1'"))
}

func pendingOf(t *testing.T, c client.Client, run client.WorkflowRun) []write.PendingCandidate {
	t.Helper()
	var out []write.PendingCandidate
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.QueryPending)
		if err != nil {
			return false
		}
		out = nil
		return v.Get(&out) == nil && len(out) > 0
	}, 20*time.Second, 100*time.Millisecond)
	return out
}

func TestInferredPreferenceNeedsReview(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	inferred := "我上次坐了靠窗的位置，挺好"
	for _, tc := range []struct {
		name   string
		decide func(run client.WorkflowRun, id string)
		want   memory.CandidateStatus
		active bool
	}{
		{"signal confirm", func(run client.WorkflowRun, id string) {
			require.NoError(t, e.c.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.SignalReview,
				write.ReviewRequest{CandidateID: id, Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}}))
		}, memory.CandidateAccepted, true},
		{"update reject", func(run client.WorkflowRun, id string) {
			// An update for an unknown candidate is refused and changes nothing.
			h, err := e.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: write.UpdateReview,
				WaitForStage: client.WorkflowUpdateStageCompleted,
				Args:         []any{write.ReviewRequest{CandidateID: "nope", Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "bob"}}}})
			if err == nil {
				err = h.Get(context.Background(), nil)
			}
			require.ErrorContains(t, err, "candidate_id")
			h, err = e.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: write.UpdateReview,
				WaitForStage: client.WorkflowUpdateStageCompleted,
				Args:         []any{write.ReviewRequest{CandidateID: id, Verdict: governance.Verdict{Kind: governance.VerdictReject, Reviewer: "bob", Note: "not sure"}}}})
			require.NoError(t, err)
			require.NoError(t, h.Get(context.Background(), nil))
		}, memory.CandidateRejected, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := "u-" + testenv.RandomID(6)
			run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", user, "travel", inferred, base)})
			p := pendingOf(t, e.c, run)
			require.Len(t, p, 1)
			assert.Equal(t, "INFERRED", p[0].Origin)
			c, err := e.st.GetCandidate(context.Background(), "t1", p[0].CandidateID)
			require.NoError(t, err)
			assert.Equal(t, memory.CandidateNeedsConfirmation, c.Status, "pending review is visible in Postgres")
			tc.decide(run, p[0].CandidateID)
			res := e.wait(run)
			require.Len(t, res.Results, 1)
			assert.Equal(t, tc.want, res.Results[0].Status)
			c, err = e.st.GetCandidate(context.Background(), "t1", p[0].CandidateID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Status)
			assert.NotEmpty(t, c.Reviewer)
			f := find(e.active("t1", user), "seat", memory.ScopeUser)
			assert.Equal(t, tc.active, f != nil)
			if f != nil {
				// Committed after the review, with its vector.
				assert.Equal(t, 1, e.count("facts", "id = ? AND embedding IS NOT NULL", f.ID))
			}
		})
	}
	t.Run("real timeout applies the schema default", func(t *testing.T) {
		user := "u-" + testenv.RandomID(6)
		run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", user, "travel", inferred, base), ReviewTimeout: 2 * time.Second})
		p := pendingOf(t, e.c, run)
		res := e.wait(run)
		require.Len(t, res.Results, 1)
		assert.Equal(t, "engram:review-timeout", res.Results[0].Reviewer)
		want := memory.CandidateRejected
		if p[0].Default == "confirm" {
			want = memory.CandidateAccepted
		}
		assert.Equal(t, want, res.Results[0].Status)
	})
}

func TestRetractionInvalidates(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	e.write(writetest.Event("t1", "u1", "travel", "预算不超过8000元", base))
	r := e.write(writetest.Event("t1", "u1", "travel", "忘掉我说的预算", base.Add(time.Hour)))
	require.Len(t, r.Results, 1)
	assert.Equal(t, string(governance.ActionInvalidate), r.Results[0].Action)
	assert.Nil(t, find(e.active("t1", "u1"), "budget", memory.ScopeUser))
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1' AND status = 'INVALIDATED'"))
}

func TestBatchIngest(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	var evs []memory.IngestEvent
	for i, text := range []string{"预算不超过8000元", "我以后尽量都坐直飞", "以后预算不超过9000元"} {
		for _, u := range []string{"ua", "ub"} {
			evs = append(evs, writetest.Event("t1", u, "travel", text, base.Add(time.Duration(i)*time.Hour)))
		}
	}
	run, err := write.StartBatch(context.Background(), e.c, e.queue, "t1", "batch-"+testenv.RandomID(8), write.MemoryWriteBatchInput{Events: evs, Parallelism: 2})
	require.NoError(t, err)
	var res write.MemoryWriteBatchResult
	require.NoError(t, run.Get(context.Background(), &res))
	assert.Equal(t, 6, res.Committed)
	for _, u := range []string{"ua", "ub"} {
		b := find(e.active("t1", u), "budget", memory.ScopeUser)
		require.NotNil(t, b)
		assert.Equal(t, "9000 CNY", b.Object, "events of one user are applied in time order")
	}
}

func TestTenantsDoNotShareMemory(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	e.write(writetest.Event("tA", "u1", "travel", "预算不超过8000元", base))
	e.write(writetest.Event("tB", "u1", "travel", "预算不超过20000元", base.Add(time.Hour)))
	a := find(e.active("tA", "u1"), "budget", memory.ScopeUser)
	b := find(e.active("tB", "u1"), "budget", memory.ScopeUser)
	require.NotNil(t, a)
	require.NotNil(t, b)
	assert.Equal(t, "8000 CNY", a.Object, "tenant B's statement never supersedes tenant A's fact")
	assert.Equal(t, "20000 CNY", b.Object)
	assert.Equal(t, 1, a.Revision)
}

func TestBadInputFailsWithoutWriting(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	ev := writetest.Event("t1", "", "travel", "预算不超过8000元", base)
	run := e.start(write.MemoryWriteInput{Event: ev})
	err := run.Get(context.Background(), nil)
	require.ErrorContains(t, err, "user_id")
	ev = writetest.Event("t1", "u1", "no-such-schema", "预算不超过8000元", base)
	err = e.start(write.MemoryWriteInput{Event: ev}).Get(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, fmt.Sprint(err), "no-such-schema")
	assert.Equal(t, 0, e.count("facts", "TRUE"))
	assert.Equal(t, 0, e.count("events", "TRUE"), "nothing is recorded for a rejected event")
}
