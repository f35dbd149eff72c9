package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

type factTruth struct {
	tenant     string
	ref        memory.ScopeRef
	owner      string
	status     memory.FactStatus
	from       time.Time
	until      *time.Time
	closedAt   *time.Time
	entityUser string
}

type evTruth struct {
	tenant, user, session, task string
	at                          time.Time
}

var vocab = []string{"budget", "direct flights", "hotel with pool", "order 5001 never arrived", "order 5002", "ticket", "Kafka 3.6 in production",
	"预算不超过8000元", "以后尽量都坐直飞", "订单5001没收到", "酒店要带泳池", "工单", "靠窗的座位", "我的猫叫团子", "expense rules", "window seat"}

// Many users, departments, agents, tasks and sessions in two tenants (one user
// with many turns, see below), rows
// written straight through storage; thousands of random recalls, each checked
// candidate by candidate (every retriever's hits, not only the top k) against the
// visibility rule.
func TestIsolationRandomized(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	r := rand.New(rand.NewPCG(7, 11))
	now := time.Now().UTC()
	start := now.AddDate(0, 0, -60)
	tenants := []string{"t1", "t2"}
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9"}
	depts := []string{"d0", "d1", "d2"}
	agents := []string{"a0", "a1"}
	tasks := func(u string) []string { return []string{"task-" + u + "-0", "task-" + u + "-1"} }
	sessions := func(u string) []string { return []string{"sess-" + u + "-0", "sess-" + u + "-1"} }
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	vec := func(s string) *pgvector.Vector { v := pgvector.NewVector(emb.Vector(s)); return &v }

	facts := map[string]factTruth{}
	evs := map[string]evTruth{}
	for _, tn := range tenants {
		// Entities and edges: every user has orders 5001/5002 in its own tenant (the
		// same ids in both tenants) and a ticket about the first.
		for ui, u := range users {
			o1, o2 := fmt.Sprintf("5%03d", ui*2+1), fmt.Sprintf("5%03d", ui*2+2)
			for _, o := range []string{o1, o2} {
				require.NoError(t, storage.UpsertEdge(ctx, st.DB(), tn, &storage.Edge{Type: "PLACED", FromType: "User", FromID: u, ToType: "Order", ToID: o, UserID: u}))
			}
			require.NoError(t, storage.UpsertEntity(ctx, st.DB(), tn, &storage.Entity{Type: "Order", ID: o1, UserID: u, State: "NOT_RECEIVED"}))
			require.NoError(t, storage.UpsertEdge(ctx, st.DB(), tn, &storage.Edge{Type: "ABOUT", FromType: "ServiceTicket", FromID: "T" + o1, ToType: "Order", ToID: o1, UserID: u}))
		}
		for i := 0; i < 300; i++ {
			ui := r.IntN(len(users))
			u := users[ui]
			ref := memory.ScopeRef{Scope: memory.Scopes[r.IntN(len(memory.Scopes))], UserID: u}
			switch ref.Scope {
			case memory.ScopeTenant:
				ref.UserID = ""
			case memory.ScopeDepartment:
				ref.UserID, ref.DepartmentID = "", pick(depts)
			case memory.ScopeAgent:
				ref.AgentID = pick(agents)
			case memory.ScopeSession:
				ref.SessionID = pick(sessions(u))
			case memory.ScopeTask:
				ref.TaskID = pick(tasks(u))
			}
			text := pick(vocab) + " " + pick(vocab)
			f := &storage.Fact{MemoryKey: fmt.Sprintf("%s|k%d", ref.Key(), i), Scope: ref.Scope, DepartmentID: ref.DepartmentID, UserID: ref.UserID,
				AgentID: ref.AgentID, SessionID: ref.SessionID, TaskID: ref.TaskID, MemoryType: memory.MemoryTypes[r.IntN(5)],
				Subject: "user", Predicate: pick([]string{"budget", "flight_type", "prefers", "uses", "order_not_received"}), Object: text, Content: text,
				Confidence: 0.5 + r.Float64()/2, ValidFrom: start.Add(time.Duration(r.Int64N(int64(50 * 24 * time.Hour)))), Embedding: vec(text)}
			if r.IntN(4) == 0 { // about one of the owner's orders
				f.EntityType, f.EntityID = "Order", fmt.Sprintf("5%03d", ui*2+1+r.IntN(2))
			}
			wf, err := st.WriteFact(ctx, tn, f, storage.WriteCurrent, storage.SearchText(text))
			require.NoError(t, err)
			tr := factTruth{tenant: tn, ref: ref, owner: ref.UserID, status: memory.FactActive, from: wf.ValidFrom}
			switch r.IntN(6) {
			case 0, 1:
				status := memory.FactInvalidated
				if r.IntN(2) == 0 {
					status = memory.FactExpired
				}
				tx, err := st.DB().BeginTx(ctx, nil)
				require.NoError(t, err)
				closed, err := storage.CloseFact(ctx, tx, tn, wf.MemoryKey, status, wf.ValidFrom.Add(time.Duration(r.Int64N(int64(5*24*time.Hour)))), "test")
				require.NoError(t, err)
				require.NoError(t, tx.Commit())
				tr.status, tr.until, tr.closedAt = status, closed.ValidUntil, closed.ClosedAt
			}
			facts[wf.ID] = tr
		}
		// In t1, u0 is a heavy user (1,200 more turns, most of the tenant's): its
		// recalls read evidence from the indexes (HNSW, keyword postings), everyone
		// else's exactly; both must keep to the visibility rule.
		turns := 300
		if tn == "t1" {
			turns += 1200
		}
		for i := 0; i < turns; i++ {
			u := pick(users)
			if i >= 300 {
				u = "u0"
			}
			text := pick(vocab) + " " + pick(vocab)
			at := start.Add(time.Duration(r.Int64N(int64(59 * 24 * time.Hour))))
			sess, task := pick(sessions(u)), ""
			if r.IntN(2) == 0 {
				task = pick(tasks(u))
			}
			e, _, err := st.InsertEvent(ctx, tn, &storage.Event{IdempotencyKey: fmt.Sprintf("e%d", i), ActorType: "USER", ActorID: u, UserID: u, SessionID: sess, TaskID: task, EventType: "MESSAGE", Content: text, OccurredAt: at})
			require.NoError(t, err)
			evd, err := st.InsertEvidence(ctx, tn, &storage.Evidence{EventID: e.ID, Kind: "TURN", Content: text, UserID: u, SessionID: sess, TaskID: task, OccurredAt: at, Embedding: vec(text)}, storage.SearchText(text))
			require.NoError(t, err)
			evs[evd.ID] = evTruth{tenant: tn, user: u, session: sess, task: task, at: at}
			if r.IntN(5) == 0 {
				_, _, err := st.AppendTurn(ctx, tn, sess, u, storage.Turn{EvidenceID: evd.ID, Speaker: "USER:" + u, Text: text, At: at}, 12)
				require.NoError(t, err)
			}
		}
	}
	_, err := st.DB().ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)

	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	kw := recall.NewPostgresKeyword(st)
	queries := append(append([]string{}, vocab...), "我那个没到的订单怎么样了", "what is my budget", "用户喜欢什么样的旅行方式", "order 5003", "订单5004怎么样了", "ticket about my order")
	seen := map[string]int{}
	checked := 0
	n := 2000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		u := pick(users)
		req := recall.Request{
			Principal: recall.Principal{TenantID: pick(tenants), UserID: u, DepartmentID: pick(append(depts, "")), AgentID: pick(append(agents, ""))},
			Query:     pick(queries), Schema: pick([]string{"general", "customer_service", "travel"}), K: 1 + r.IntN(30), Explain: true,
		}
		owner := u
		if r.IntN(4) == 0 {
			owner = pick(users) // someone else's session or task, named on purpose
		}
		if r.IntN(2) == 0 {
			req.SessionID = pick(sessions(owner))
		}
		if r.IntN(2) == 0 {
			req.TaskID = pick(tasks(owner))
		}
		if r.IntN(5) == 0 {
			req.Scopes = []memory.Scope{memory.Scopes[r.IntN(6)], memory.Scopes[r.IntN(6)]}
		}
		if r.IntN(4) == 0 {
			req.AsOf = start.Add(time.Duration(r.Int64N(int64(60 * 24 * time.Hour))))
		}
		resp, err := eng.Recall(ctx, req)
		require.NoError(t, err)
		asOf := resp.AsOf
		current := req.AsOf.IsZero()
		vis := recall.Visibility{TenantID: req.Principal.TenantID, UserID: u, DepartmentID: req.Principal.DepartmentID, AgentID: req.Principal.AgentID,
			SessionID: req.SessionID, TaskID: req.TaskID, AsOf: asOf, Scopes: req.Scopes}
		for _, it := range append(resp.Candidates, resp.Items...) {
			checked++
			for _, rt := range it.Retrievers {
				seen[rt]++
			}
			switch it.Kind {
			case recall.KindFact:
				tr, ok := facts[it.ID]
				require.True(t, ok, "unknown fact %s", it.ID)
				if !assert.True(t, vis.VisibleFact(tr.tenant, tr.ref, tr.owner, tr.status, tr.from, tr.until, tr.closedAt, current),
					"query %d %+v returned fact %s %+v via %v", i, req, it.ID, tr, it.Retrievers) {
					t.FailNow()
				}
			case recall.KindEvidence:
				tr, ok := evs[it.ID]
				require.True(t, ok, "unknown evidence %s", it.ID)
				if !assert.True(t, vis.VisibleEvidence(tr.tenant, tr.user, tr.session, tr.task, tr.at),
					"query %d %+v returned evidence %s %+v via %v", i, req, it.ID, tr, it.Retrievers) {
					t.FailNow()
				}
			}
		}
		// The keyword index on its own, under the same visibility.
		if i%4 == 0 {
			hits, err := kw.Search(ctx, vis, req.Query, nil, 50)
			require.NoError(t, err)
			for _, h := range hits {
				seen["keyword-index"]++
				if h.Kind == recall.KindFact {
					tr := facts[h.ID]
					require.True(t, vis.VisibleFact(tr.tenant, tr.ref, tr.owner, tr.status, tr.from, tr.until, tr.closedAt, current), "keyword index returned fact %s %+v", h.ID, tr)
				} else {
					tr := evs[h.ID]
					require.True(t, vis.VisibleEvidence(tr.tenant, tr.user, tr.session, tr.task, tr.at), "keyword index returned evidence %s %+v", h.ID, tr)
				}
			}
		}
	}
	// The heavy user's recalls did take the path of many turns: the keyword
	// postings, not the exact read of the user's turns (the vectors' walk is the
	// HNSW index once the table is large enough for the planner to prefer it).
	plan, err := eng.Explain(ctx, recall.Request{Principal: recall.Principal{TenantID: "t1", UserID: "u0"}, Query: "what is my budget", K: 10})
	require.NoError(t, err)
	require.Regexp(t, `Index Only Scan Backward using evidence_postings_pkey on evidence_postings \S+ +\(cost=[^)]*\) \(actual`, plan, "u0 in t1 is read from the postings")
	require.Regexp(t, `Index Scan using evidence_tenant_user_time on evidence \S+ +\(cost=[^)]*\) \(never executed`, plan, "u0 in t1 is not read exactly")
	t.Logf("%d queries, %d items checked; hits per retriever: %v", n, checked, seen)
	for _, rt := range []string{recall.RetrieverSemantic, recall.RetrieverKeyword, recall.RetrieverGraph, recall.RetrieverStructured, recall.RetrieverRecent, "keyword-index"} {
		assert.Greater(t, seen[rt], 50, "retriever %s was exercised", rt)
	}
}
