// Package recall tests recall end to end: memory is written through the real write
// path (Temporal dev server, Postgres, an in-process worker with the rule extractor
// and the n-gram embedder), then read back with the recall engine.
package recall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

type env struct {
	t     *testing.T
	st    *storage.Store
	c     client.Client
	queue string
	acts  *write.MemoryActivities
	eng   *recall.Engine
}

func newEnv(t *testing.T) *env {
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	q := testenv.TaskQueue(t)
	acts := writetest.Activities(st)
	writetest.Worker(t, c, q, acts)
	eng := recall.New(st, acts.Embedder, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogSync})
	t.Cleanup(func() { _ = eng.Close() })
	return &env{t: t, st: st, c: c, queue: q, acts: acts, eng: eng}
}

var base = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

type ev struct {
	user, schema, text, session, task string
	at                                time.Time
}

// write ingests one message through the MemoryWrite workflow, then records the
// turn in the session's working memory as the workflow will.
func (e *env) write(tenant string, x ev) write.MemoryWriteResult {
	e.t.Helper()
	in := memory.IngestEvent{TenantID: tenant, IdempotencyKey: "k-" + testenv.RandomID(10), UserID: x.user, Schema: x.schema,
		Content: x.text, OccurredAt: x.at, SessionID: x.session, TaskID: x.task}
	res := writetest.Wait(e.t, writetest.Start(e.t, e.c, e.queue, write.MemoryWriteInput{Event: in}))
	if x.session != "" {
		_, err := e.acts.UpdateSession(context.Background(), write.UpdateSessionInput{TenantID: tenant, SessionID: x.session, UserID: x.user,
			Turn: storage.Turn{EvidenceID: res.EvidenceID, Speaker: "USER:" + x.user, Text: x.text, At: x.at}})
		require.NoError(e.t, err)
	}
	return res
}

func (e *env) recall(req recall.Request) recall.Response {
	e.t.Helper()
	resp, err := e.eng.Recall(context.Background(), req)
	require.NoError(e.t, err)
	return resp
}

func principal(tenant, user string) recall.Principal {
	return recall.Principal{TenantID: tenant, ID: "agent-key-1", UserID: user}
}

func describe(items []recall.Item) string {
	var b strings.Builder
	for i, it := range items {
		fmt.Fprintf(&b, "%d. %s %s %s/%s %q scope=%s score=%.4f [%s] %s\n", i+1, it.Kind, it.ID[:8], it.MemoryType, it.Predicate, it.Content, it.Scope.Key(), it.Score, strings.Join(it.Retrievers, ","), it.Why)
	}
	return b.String()
}

func indexOf(items []recall.Item, pred func(recall.Item) bool) int {
	for i, it := range items {
		if pred(it) {
			return i
		}
	}
	return -1
}

// Seed: "my order 12345 never arrived", later "how is that order that didn't arrive?"
func TestSeedOrderThatNeverArrived(t *testing.T) {
	e := newEnv(t)
	r1 := e.write("t1", ev{user: "u1", schema: "customer_service", text: "我的订单12345没收到", session: "s1", at: base})
	e.write("t1", ev{user: "u1", schema: "customer_service", text: "我的订单67890已经收到了，谢谢", session: "s1", at: base.Add(time.Hour)})
	e.write("t1", ev{user: "u1", schema: "customer_service", text: "我那个没到的订单怎么样了", session: "s1", at: base.Add(24 * time.Hour)})
	// Another user's order with the same id in another tenant, and another user's
	// undelivered order in this tenant, must not come back.
	e.write("t2", ev{user: "u1", schema: "customer_service", text: "我的订单12345没收到", at: base})
	e.write("t1", ev{user: "u2", schema: "customer_service", text: "我的订单55555没收到", at: base})

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "我那个没到的订单怎么样了", Schema: "customer_service", SessionID: "s1", Explain: true})
	t.Log("\n" + describe(resp.Items))
	t.Log("\n" + resp.Context)
	require.NotEmpty(t, resp.Items)
	first := resp.Items[0]
	assert.Equal(t, recall.KindFact, first.Kind)
	assert.Equal(t, "12345", first.EntityID, "the undelivered order comes first")
	assert.Contains(t, first.Retrievers, recall.RetrieverGraph)
	// The order's facts (the not-received event and the inquiry about it) lead.
	for i, it := range resp.Items[:2] {
		assert.Equal(t, "12345", it.EntityID, "item %d", i)
	}
	preds := map[string]bool{}
	for _, it := range resp.Items {
		if it.EntityID == "12345" {
			preds[it.Predicate] = true
		}
		assert.NotEqual(t, "55555", it.EntityID, "another user's order")
	}
	assert.True(t, preds["order_not_received"] && preds["order_inquiry"], "the order and its inquiry: %v", preds)
	nr := indexOf(resp.Items, func(it recall.Item) bool { return it.Predicate == "order_not_received" })
	require.GreaterOrEqual(t, nr, 0)
	assert.Contains(t, resp.Items[nr].EvidenceIDs, r1.EvidenceID, "traceable to what the user said")
	assert.Contains(t, resp.Context, "[fact:"+first.ID[:8]+"]")
	assert.NotNil(t, resp.Parsed)
	assert.Contains(t, resp.Parsed.EntityTypes, "Order")
	assert.Contains(t, resp.Parsed.States, "NOT_RECEIVED")

	// Naming the order by id works too, in English.
	resp = e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "any update on my order 12345?", Schema: "customer_service"})
	require.NotEmpty(t, resp.Items)
	assert.Equal(t, "12345", resp.Items[0].EntityID)
}

// Seed: continue planning the trip: task state, the task's 10000 budget above the
// user's 8000, and the direct-flight preference.
func TestSeedContinueTheTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write("t1", ev{user: "u1", schema: "travel", text: "预算不超过8000元", at: base})
	e.write("t1", ev{user: "u1", schema: "travel", text: "我以后尽量都坐直飞", at: base.Add(time.Hour)})
	e.write("t1", ev{user: "u1", schema: "travel", text: "我喜欢靠窗的座位", at: base.Add(2 * time.Hour)})
	e.write("t1", ev{user: "u1", schema: "travel", text: "这次旅行预算调整到10000元", task: "trip-1", session: "s9", at: base.Add(48 * time.Hour)})
	// Another task's budget of the same user stays out of this task.
	e.write("t1", ev{user: "u1", schema: "travel", text: "这次旅行预算调整到3000元", task: "trip-2", at: base.Add(50 * time.Hour)})
	require.NoError(t, e.st.RecordTaskTransition(ctx, "t1",
		&storage.Task{ID: "trip-1", UserID: "u1", Goal: "安排去东京的五天旅行", State: memory.TaskPlanning,
			Done: []string{"选定日期"}, Todo: []string{"订机票", "订酒店"}, NextStep: "订机票"},
		&storage.TaskTransition{Seq: 1, FromState: "", ToState: memory.TaskPlanning, Actor: "agent"}))

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "帮我继续安排上次旅行", TaskID: "trip-1", Schema: "travel", SessionID: "s9"})
	t.Log("\n" + describe(resp.Items))
	t.Log("\n" + resp.Context)
	require.NotNil(t, resp.Task)
	assert.Equal(t, "安排去东京的五天旅行", resp.Task.Goal)
	assert.Equal(t, memory.TaskPlanning, resp.Task.State)
	assert.Equal(t, []string{"订机票", "订酒店"}, resp.Task.Todo)

	task := indexOf(resp.Items, func(it recall.Item) bool { return it.Predicate == "budget" && it.Scope.Scope == memory.ScopeTask })
	user := indexOf(resp.Items, func(it recall.Item) bool { return it.Predicate == "budget" && it.Scope.Scope == memory.ScopeUser })
	direct := indexOf(resp.Items, func(it recall.Item) bool { return it.Predicate == "flight_type" && it.Object == "direct" })
	require.GreaterOrEqual(t, task, 0, "the task budget")
	require.GreaterOrEqual(t, user, 0, "the user budget, shown too")
	require.GreaterOrEqual(t, direct, 0, "the direct-flight preference")
	assert.Less(t, task, user, "the task's budget leads the user's")
	assert.Equal(t, "10000 CNY", resp.Items[task].Object)
	assert.Equal(t, "trip-1", resp.Items[task].Scope.TaskID)
	assert.Equal(t, "8000 CNY", resp.Items[user].Object)
	assert.Contains(t, resp.Items[user].Why, "overridden for task trip-1")
	assert.Equal(t, 0, task, "the task's budget is the first memory")
	for _, it := range resp.Items {
		assert.NotEqual(t, "3000 CNY", it.Object, "another task's budget")
	}
	// Context: sections in order, each memory line traceable, scopes labelled.
	var titles []string
	for _, s := range resp.Sections {
		titles = append(titles, s.Title)
	}
	assert.Equal(t, []string{"task", "task state", "constraints", "preferences", "recent turns"}, titles[:5])
	assert.Contains(t, resp.Context, "TASK:trip-1")
	assert.Contains(t, resp.Context, "USER:u1")
	assert.Contains(t, resp.Context, "next step: 订机票")
	assert.Less(t, strings.Index(resp.Context, "10000"), strings.Index(resp.Context, "8000元"))
	for _, s := range resp.Sections {
		if s.Title == "constraints" || s.Title == "preferences" || s.Title == "facts" {
			for _, l := range s.Lines {
				assert.Contains(t, l, "[fact:")
			}
		}
		if s.Title == "recent turns" || s.Title == "evidence" {
			for _, l := range s.Lines {
				assert.Contains(t, l, "[evidence:")
			}
		}
	}
	assert.LessOrEqual(t, resp.Tokens, 1000)
}

// Seed: "what kind of travel does the user like?" → the preferences.
func TestSeedTravelPreferences(t *testing.T) {
	e := newEnv(t)
	e.write("t1", ev{user: "u1", schema: "travel", text: "预算不超过8000元", at: base})
	e.write("t1", ev{user: "u1", schema: "travel", text: "我以后尽量都坐直飞", at: base.Add(time.Hour)})
	e.write("t1", ev{user: "u1", schema: "travel", text: "我喜欢靠窗的座位", at: base.Add(2 * time.Hour)})
	e.write("t1", ev{user: "u1", schema: "travel", text: "我们团队生产环境用的是Flink 1.17", at: base.Add(3 * time.Hour)})
	e.write("t1", ev{user: "u2", schema: "travel", text: "我喜欢坐转机的航班", at: base})

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "用户喜欢什么样的旅行方式", Schema: "travel"})
	t.Log("\n" + describe(resp.Items))
	require.GreaterOrEqual(t, len(resp.Items), 2)
	for i := 0; i < 2; i++ {
		assert.Equal(t, memory.TypePreference, resp.Items[i].MemoryType, "item %d", i)
		assert.Equal(t, "u1", resp.Items[i].Scope.UserID)
	}
	assert.GreaterOrEqual(t, indexOf(resp.Items[:2], func(it recall.Item) bool { return it.Predicate == "flight_type" }), 0)
	assert.GreaterOrEqual(t, indexOf(resp.Items[:3], func(it recall.Item) bool { return it.Predicate == "seat" }), 0)
	var prefs *recall.Section
	for i := range resp.Sections {
		if resp.Sections[i].Title == "preferences" {
			prefs = &resp.Sections[i]
		}
	}
	require.NotNil(t, prefs)
	assert.Contains(t, strings.Join(prefs.Lines, "\n"), "直飞")
}

// What was said once and never became a fact is still found, from evidence.
func TestEvidenceOnlyMemoryIsFound(t *testing.T) {
	e := newEnv(t)
	e.write("t1", ev{user: "u1", schema: "general", text: "I'm flying to Lisbon next month", at: base})
	r := e.write("t1", ev{user: "u1", schema: "general", text: "my cat is called Mochi", at: base.Add(time.Hour)})
	e.write("t1", ev{user: "u1", schema: "general", text: "the weather was nice today", at: base.Add(2 * time.Hour)})
	e.write("t1", ev{user: "u2", schema: "general", text: "my cat is called Biscuit", at: base.Add(time.Hour)})
	n, err := e.st.DB().NewSelect().Table("facts").Where("tenant_id = 't1' AND content ILIKE '%Mochi%'").Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "the rule extractor makes no fact of it")

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "what is my cat's name?"})
	t.Log("\n" + describe(resp.Items))
	require.NotEmpty(t, resp.Items)
	assert.Equal(t, recall.KindEvidence, resp.Items[0].Kind)
	assert.Equal(t, r.EvidenceID, resp.Items[0].ID)
	assert.Contains(t, resp.Context, "Mochi")
	assert.NotContains(t, resp.Context, "Biscuit")
	assert.Contains(t, resp.Context, "[evidence:"+r.EvidenceID[:8]+"]")

	// Chinese too (the general schema now keeps a pet's name as a fact: the turn
	// comes first, or the fact standing on it).
	r2 := e.write("t1", ev{user: "u1", schema: "general", text: "我家的狗叫豆豆", at: base.Add(3 * time.Hour)})
	resp = e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "我的狗叫什么名字"})
	require.NotEmpty(t, resp.Items)
	top := resp.Items[0]
	assert.True(t, top.ID == r2.EvidenceID || slices.Contains(top.EvidenceIDs, r2.EvidenceID), "the turn about the dog, or its fact, first: %s", describe(resp.Items))
}

// Superseded, expired and invalidated revisions never appear as current; as_of
// in the past returns what was true then.
func TestLifecycleAndAsOf(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write("t1", ev{user: "u1", schema: "travel", text: "预算不超过8000元", at: base})
	e.write("t1", ev{user: "u1", schema: "travel", text: "以后预算不超过9000元", at: base.Add(72 * time.Hour)})

	write := func(key, content string, from time.Time, until *time.Time) *storage.Fact {
		f, err := e.st.WriteFact(ctx, "t1", &storage.Fact{MemoryKey: key, Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeFact,
			Subject: "user", Predicate: "note", Object: content, Content: content, Confidence: 0.9, ValidFrom: from, ValidUntil: until}, storage.WriteCurrent, storage.SearchText(content))
		require.NoError(t, err)
		return f
	}
	// Retracted on day 5.
	write("USER:u1|user|car", "the user drives a red car", base, nil)
	tx, err := e.st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = storage.CloseFact(ctx, tx, "t1", "USER:u1|user|car", memory.FactInvalidated, base.Add(5*24*time.Hour), "retracted")
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	// Valid for ten days only (an ACTIVE row whose window has passed), and one
	// already marked EXPIRED.
	end := base.Add(10 * 24 * time.Hour)
	write("USER:u1|user|visa", "the user holds a red visa for ten days", base, &end)
	write("USER:u1|user|pass", "the user has a red gym pass", base, nil)
	tx, err = e.st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = storage.CloseFact(ctx, tx, "t1", "USER:u1|user|pass", memory.FactExpired, base.Add(20*24*time.Hour), "expired")
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	now := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "我的预算是多少 red car visa gym pass", Schema: "travel", Explain: true})
	t.Log("\n" + describe(now.Candidates))
	objects := map[string]bool{}
	for _, it := range now.Candidates {
		if it.Kind == recall.KindFact {
			assert.Equal(t, memory.FactActive, it.Status, "only current revisions: %s", it.Content)
			objects[it.Object] = true
		}
	}
	assert.True(t, objects["9000 CNY"])
	assert.False(t, objects["8000 CNY"], "superseded")
	assert.False(t, objects["the user drives a red car"], "invalidated")
	assert.False(t, objects["the user holds a red visa for ten days"], "its validity has passed")
	assert.False(t, objects["the user has a red gym pass"], "expired")

	then := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "我的预算是多少 red car visa gym pass", Schema: "travel", AsOf: base.Add(48 * time.Hour), Explain: true})
	t.Log("\n" + describe(then.Candidates))
	objects = map[string]bool{}
	for _, it := range then.Candidates {
		objects[it.Object] = true
		if it.Kind == recall.KindEvidence {
			assert.False(t, it.OccurredAt.After(base.Add(48*time.Hour)), "evidence from after as_of")
		}
	}
	assert.True(t, objects["8000 CNY"], "the budget then")
	assert.False(t, objects["9000 CNY"], "not yet said")
	assert.True(t, objects["the user drives a red car"], "believed until its retraction")
	assert.True(t, objects["the user holds a red visa for ten days"])
	assert.True(t, objects["the user has a red gym pass"])
	assert.True(t, then.AsOf.Equal(base.Add(48*time.Hour)))

	later := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "red car visa gym pass", AsOf: base.Add(12 * 24 * time.Hour), Explain: true})
	objects = map[string]bool{}
	for _, it := range later.Candidates {
		objects[it.Object] = true
	}
	assert.False(t, objects["the user drives a red car"], "retracted before then")
	assert.False(t, objects["the user holds a red visa for ten days"], "expired before then")
	assert.True(t, objects["the user has a red gym pass"])
}

// Working memory: the last 12 turns and a summary every 6; recall shows them.
func TestWorkingMemory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 14; i++ {
		e.write("t1", ev{user: "u1", schema: "general", text: fmt.Sprintf("turn %d: we discussed the quarterly report section %d", i, i), session: "s1", at: base.Add(time.Duration(i) * time.Minute)})
	}
	sess, err := e.st.GetSession(ctx, "t1", "s1")
	require.NoError(t, err)
	assert.Len(t, sess.Recent, 12)
	assert.Equal(t, 14, sess.TurnCount)
	assert.Equal(t, 12, sess.SummarizedAtTurn)
	assert.NotEmpty(t, sess.Summary)
	assert.Contains(t, sess.Recent[0].Text, "turn 2:")

	// Retrying an update changes nothing.
	res, err := e.acts.UpdateSession(ctx, write.UpdateSessionInput{TenantID: "t1", SessionID: "s1", UserID: "u1", Turn: sess.Recent[5]})
	require.NoError(t, err)
	assert.False(t, res.Appended)

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "what did we discuss?", SessionID: "s1", TokenBudget: 2000})
	var recent, summary []string
	for _, s := range resp.Sections {
		switch s.Title {
		case "recent turns":
			recent = s.Lines
		case "summary":
			summary = s.Lines
		}
	}
	assert.NotEmpty(t, summary)
	require.NotEmpty(t, recent)
	assert.Contains(t, recent[len(recent)-1], "turn 13:", "newest turn last")
	assert.Contains(t, recent[len(recent)-1], "[evidence:")

	// Another user naming this session sees none of it.
	other := e.recall(recall.Request{Principal: principal("t1", "u2"), Query: "what did we discuss?", SessionID: "s1"})
	assert.NotContains(t, other.Context, "quarterly report")
}

// Each recall is logged with who asked, why, and what was returned, and the facts
// returned count one more access.
func TestAccessLog(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write("t1", ev{user: "u1", schema: "travel", text: "我以后尽量都坐直飞", at: base})
	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "直飞", Schema: "travel", Purpose: "plan trip"})
	require.NotEmpty(t, resp.Items)
	var row struct {
		Principal string   `bun:"principal"`
		Purpose   string   `bun:"purpose"`
		UserID    string   `bun:"user_id"`
		Query     string   `bun:"query"`
		FactIDs   []string `bun:"fact_ids,array"`
		EvIDs     []string `bun:"evidence_ids,array"`
	}
	require.NoError(t, e.st.DB().NewRaw("SELECT principal, purpose, user_id, query, fact_ids::text[] AS fact_ids, evidence_ids::text[] AS evidence_ids FROM access_log WHERE tenant_id = 't1'").Scan(ctx, &row))
	assert.Equal(t, "agent-key-1", row.Principal)
	assert.Equal(t, "plan trip", row.Purpose)
	assert.Equal(t, "u1", row.UserID)
	assert.Equal(t, "直飞", row.Query)
	var fid string
	for _, it := range resp.Items {
		if it.Kind == recall.KindFact {
			fid = it.ID
			assert.Contains(t, row.FactIDs, it.ID)
		} else {
			assert.Contains(t, row.EvIDs, it.ID)
		}
	}
	require.NotEmpty(t, fid)
	n, last, err := e.st.FactReads(ctx, "t1", fid)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.NotNil(t, last)

	// The asynchronous writer batches and flushes on Close.
	async := recall.New(e.st, embedding.NewNGramEmbedder(storage.EmbeddingDim), nil, nil, recall.Options{})
	for i := 0; i < 5; i++ {
		_, err := async.Recall(ctx, recall.Request{Principal: principal("t1", "u1"), Query: "直飞", Schema: "travel"})
		require.NoError(t, err)
	}
	require.NoError(t, async.Close())
	n, _, err = e.st.FactReads(ctx, "t1", fid)
	require.NoError(t, err)
	assert.Equal(t, int64(6), n)
	logged, err := e.st.DB().NewSelect().Table("access_log").Where("tenant_id = 't1'").Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 6, logged)
}

// Bad requests name the field and never reach the database: the engine here has
// a closed store, so anything that got that far would fail differently.
func TestBadRequests(t *testing.T) {
	st := testenv.Store(t)
	require.NoError(t, st.Close())
	eng := recall.New(st, embedding.NewNGramEmbedder(storage.EmbeddingDim), nil, nil, recall.Options{AccessLog: recall.AccessLogSync})
	defer eng.Close()
	ok := recall.Request{Principal: principal("t1", "u1"), Query: "budget"}
	cases := []struct {
		name  string
		edit  func(r *recall.Request)
		field string
	}{
		{"no tenant", func(r *recall.Request) { r.Principal.TenantID = "" }, "principal.tenant_id"},
		{"no user", func(r *recall.Request) { r.Principal.UserID = " " }, "principal.user_id"},
		{"negative k", func(r *recall.Request) { r.K = -1 }, "k"},
		{"huge k", func(r *recall.Request) { r.K = 1_000_000 }, "k"},
		{"k just over", func(r *recall.Request) { r.K = 101 }, "k"},
		{"budget too small", func(r *recall.Request) { r.TokenBudget = 10 }, "token_budget"},
		{"budget too large", func(r *recall.Request) { r.TokenBudget = 1 << 20 }, "token_budget"},
		{"unknown scope", func(r *recall.Request) { r.Scopes = []memory.Scope{memory.ScopeUser, "GALAXY"} }, "scopes[1]"},
		{"query of megabytes", func(r *recall.Request) { r.Query = strings.Repeat("预算", 1<<20) }, "query"},
		{"query just over 4 KB", func(r *recall.Request) { r.Query = strings.Repeat("a", 4097) }, "query"},
		{"invalid utf-8", func(r *recall.Request) { r.Query = "\xff\xfe" }, "query"},
		{"as_of in the far future", func(r *recall.Request) { r.AsOf = time.Now().AddDate(1, 0, 0) }, "as_of"},
		{"as_of before 1970", func(r *recall.Request) { r.AsOf = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC) }, "as_of"},
		{"unknown schema", func(r *recall.Request) { r.Schema = "astrology" }, "schema"},
		{"huge session id", func(r *recall.Request) { r.SessionID = strings.Repeat("s", 1000) }, "session_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			_, err := eng.Recall(context.Background(), r)
			var fe memory.FieldError
			require.True(t, errors.As(err, &fe), "want a FieldError, got %v", err)
			assert.Equal(t, tc.field, fe.Field)
			assert.NotEmpty(t, fe.Problem)
		})
	}
	// The valid request does reach the (closed) database.
	_, err := eng.Recall(context.Background(), ok)
	require.Error(t, err)
	var fe memory.FieldError
	assert.False(t, errors.As(err, &fe))
}
