package typesense_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/faketypesense"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
)

func newIndex(t *testing.T) (*typesense.Index, *faketypesense.Server) {
	t.Helper()
	fake := faketypesense.New("test-key")
	t.Cleanup(fake.Close)
	ix, err := typesense.New(typesense.Config{URL: fake.URL, APIKey: "test-key", Collection: "engram_memory", BatchSize: 3})
	require.NoError(t, err)
	require.NoError(t, ix.EnsureCollection(context.Background()))
	return ix, fake
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fact(tenant string, ref memory.ScopeRef, owner, content string) *storage.Fact {
	f := &storage.Fact{
		TenantID: tenant, ID: uuid.NewString(), MemoryKey: "k-" + uuid.NewString()[:8], Revision: 1,
		Scope: ref.Scope, UserID: owner, DepartmentID: ref.DepartmentID, AgentID: ref.AgentID,
		SessionID: ref.SessionID, TaskID: ref.TaskID, MemoryType: memory.TypeFact, Content: content,
		Status: memory.FactActive, Confidence: 0.9, Importance: 0.5, ValidFrom: t0, ObservedAt: t0,
	}
	if ref.UserID != "" {
		f.UserID = ref.UserID
	}
	return f
}

func evidence(tenant, user, session, content string, at time.Time) *storage.Evidence {
	return &storage.Evidence{TenantID: tenant, ID: uuid.NewString(), Kind: "TURN", Content: content, UserID: user, SessionID: session, OccurredAt: at, Importance: 0.3}
}

func ids(hits []recall.KeywordHit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func vis(tenant, user string) recall.Visibility {
	return recall.Visibility{TenantID: tenant, UserID: user, AsOf: t0.Add(24 * time.Hour)}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := typesense.New(typesense.Config{URL: "", APIKey: "k"})
	require.ErrorContains(t, err, typesense.EnvURL)
	_, err = typesense.New(typesense.Config{URL: "typesense:8108", APIKey: "k"})
	require.ErrorContains(t, err, "not an http(s) URL")
	_, err = typesense.New(typesense.Config{URL: "http://x:8108"})
	require.ErrorContains(t, err, typesense.EnvAPIKey)
}

func TestEnsureCollectionIsIdempotent(t *testing.T) {
	ix, fake := newIndex(t)
	ctx := context.Background()
	require.NoError(t, ix.EnsureCollection(ctx))
	require.NoError(t, ix.EnsureCollection(ctx))
	require.Equal(t, 1, fake.Requests("create"))
	require.Equal(t, 3, fake.Requests("retrieve"))

	// A wrong API key is refused, not mistaken for a missing collection.
	bad, err := typesense.New(typesense.Config{URL: fake.URL, APIKey: "wrong"})
	require.NoError(t, err)
	require.ErrorContains(t, bad.EnsureCollection(ctx), "401")
	require.Equal(t, 1, fake.Requests("create"))
}

func TestUpsertAndSearchEnglishAndChinese(t *testing.T) {
	ix, fake := newIndex(t)
	ctx := context.Background()
	u := memory.ScopeRef{Scope: memory.ScopeUser, UserID: "u1"}
	order := fact("acme", u, "u1", "Order 12345 has not arrived; a ticket was opened")
	flight := fact("acme", u, "u1", "用户喜欢直飞航班")
	budget := fact("acme", u, "u1", "旅行预算是8000元")
	ev := evidence("acme", "u1", "s1", "我那个订单12345还没到", t0)
	docs := []typesense.Document{typesense.FactDocument(order), typesense.FactDocument(flight), typesense.FactDocument(budget), typesense.EvidenceDocument(ev)}
	require.NoError(t, ix.Upsert(ctx, docs))
	require.Equal(t, 2, fake.Requests("import"), "4 documents in batches of 3")
	require.NoError(t, ix.Upsert(ctx, docs), "upsert again is harmless")
	require.Len(t, fake.Docs("engram_memory"), 4)

	hits, err := ix.Search(ctx, vis("acme", "u1"), "ticket for order", nil, 10)
	require.NoError(t, err)
	require.Equal(t, []string{order.ID}, ids(hits))
	require.Equal(t, recall.KindFact, hits[0].Kind)

	hits, err = ix.Search(ctx, vis("acme", "u1"), "直飞", nil, 10)
	require.NoError(t, err)
	require.Equal(t, flight.ID, hits[0].ID)

	hits, err = ix.Search(ctx, vis("acme", "u1"), "订单", nil, 10)
	require.NoError(t, err)
	require.Equal(t, []string{ev.ID}, ids(hits))
	require.Equal(t, recall.KindEvidence, hits[0].Kind)

	hits, err = ix.Search(ctx, vis("acme", "u1"), "12345", []recall.Kind{recall.KindFact}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{order.ID}, ids(hits), "kinds narrows to facts")

	hits, err = ix.Search(ctx, vis("acme", "u1"), "12345", nil, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{order.ID, ev.ID}, ids(hits))

	hits, err = ix.Search(ctx, vis("acme", "u1"), `"-*`, nil, 10)
	require.NoError(t, err)
	require.Empty(t, hits, "a query of operators only sends nothing")

	hits, err = ix.Search(ctx, vis("acme", "u1"), strings.Repeat("订单 ", 5000), nil, 10)
	require.NoError(t, err, "a huge query is cut, not sent whole")
	require.NotEmpty(t, hits)
}

func TestRefusesDocumentsOfWrongShape(t *testing.T) {
	ix, _ := newIndex(t)
	d := typesense.FactDocument(fact("acme", memory.ScopeRef{Scope: memory.ScopeTenant}, "", "x"))
	d.ID = "forged"
	err := ix.Upsert(context.Background(), []typesense.Document{d})
	var ie *typesense.ImportError
	require.ErrorAs(t, err, &ie)
	require.Contains(t, ie.Failed, "forged")
	require.False(t, typesense.IsUnavailable(err))
}

// Tenant A never sees tenant B's documents, whatever the query and whoever asks,
// even with identical user ids and content in both tenants.
func TestTenantIsolation(t *testing.T) {
	ix, _ := newIndex(t)
	ctx := context.Background()
	words := []string{"order", "ticket", "hotel", "budget", "订单", "酒店", "预算", "直飞", "12345", "refund"}
	rng := rand.New(rand.NewSource(7))
	owner := map[string]string{}
	var docs []typesense.Document
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		for i := 0; i < 60; i++ {
			content := words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))]
			user := fmt.Sprintf("u%d", i%3)
			var d typesense.Document
			switch i % 4 {
			case 0:
				d = typesense.FactDocument(fact(tenant, memory.ScopeRef{Scope: memory.ScopeTenant}, "", content))
			case 1:
				d = typesense.FactDocument(fact(tenant, memory.ScopeRef{Scope: memory.ScopeUser, UserID: user}, user, content))
			case 2:
				d = typesense.FactDocument(fact(tenant, memory.ScopeRef{Scope: memory.ScopeDepartment, DepartmentID: "sales"}, "", content))
			default:
				d = typesense.EvidenceDocument(evidence(tenant, user, "s1", content, t0))
			}
			owner[d.RefID] = tenant
			docs = append(docs, d)
		}
	}
	require.NoError(t, ix.Upsert(ctx, docs))
	seen := 0
	for i := 0; i < 300; i++ {
		tenant := []string{"tenant-a", "tenant-b"}[i%2]
		v := recall.Visibility{TenantID: tenant, UserID: fmt.Sprintf("u%d", rng.Intn(3)), DepartmentID: "sales", SessionID: "s1", AsOf: t0.Add(time.Hour)}
		q := words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))]
		if i%10 == 0 {
			q = strings.Join(words, " ")
		}
		hits, err := ix.Search(ctx, v, q, nil, 250)
		require.NoError(t, err)
		for _, h := range hits {
			require.Equal(t, tenant, owner[h.ID], "query %q of %s returned %s", q, tenant, h.ID)
		}
		seen += len(hits)
	}
	require.Greater(t, seen, 300, "the queries do find documents")

	_, err := ix.Search(ctx, recall.Visibility{UserID: "u1"}, "order", nil, 10)
	require.ErrorContains(t, err, "tenant_id", "no tenant, no search")
	_, err = ix.Search(ctx, recall.Visibility{TenantID: "tenant-a` || tenant_id:=`tenant-b", UserID: "u1"}, "order", nil, 10)
	require.ErrorContains(t, err, "backtick", "no filter injection through ids")
}

func TestScopeVisibility(t *testing.T) {
	ix, _ := newIndex(t)
	ctx := context.Background()
	mk := func(ref memory.ScopeRef, owner string) *storage.Fact {
		return fact("acme", ref, owner, "hotel preference "+string(ref.Scope))
	}
	tenantF := mk(memory.ScopeRef{Scope: memory.ScopeTenant}, "")
	salesF := mk(memory.ScopeRef{Scope: memory.ScopeDepartment, DepartmentID: "sales"}, "")
	hrF := mk(memory.ScopeRef{Scope: memory.ScopeDepartment, DepartmentID: "hr"}, "")
	aliceF := mk(memory.ScopeRef{Scope: memory.ScopeUser, UserID: "alice"}, "alice")
	bobF := mk(memory.ScopeRef{Scope: memory.ScopeUser, UserID: "bob"}, "bob")
	agentF := mk(memory.ScopeRef{Scope: memory.ScopeAgent, AgentID: "planner"}, "alice")
	otherAgentF := mk(memory.ScopeRef{Scope: memory.ScopeAgent, AgentID: "booker"}, "alice")
	sessF := mk(memory.ScopeRef{Scope: memory.ScopeSession, SessionID: "s1"}, "alice")
	bobSessF := mk(memory.ScopeRef{Scope: memory.ScopeSession, SessionID: "s1"}, "bob") // same session id, other user
	taskF := mk(memory.ScopeRef{Scope: memory.ScopeTask, TaskID: "trip-1"}, "alice")
	task2F := mk(memory.ScopeRef{Scope: memory.ScopeTask, TaskID: "trip-2"}, "alice")
	aliceEv := evidence("acme", "alice", "s1", "hotel preference said in s1", t0)
	aliceEv2 := evidence("acme", "alice", "s9", "hotel preference said in s9", t0)
	bobEv := evidence("acme", "bob", "s1", "hotel preference said by bob", t0)
	var docs []typesense.Document
	for _, f := range []*storage.Fact{tenantF, salesF, hrF, aliceF, bobF, agentF, otherAgentF, sessF, bobSessF, taskF, task2F} {
		docs = append(docs, typesense.FactDocument(f))
	}
	for _, e := range []*storage.Evidence{aliceEv, aliceEv2, bobEv} {
		docs = append(docs, typesense.EvidenceDocument(e))
	}
	require.NoError(t, ix.Upsert(ctx, docs))

	search := func(v recall.Visibility) []string {
		v.TenantID, v.AsOf = "acme", t0.Add(time.Hour)
		hits, err := ix.Search(ctx, v, "hotel preference", nil, 100)
		require.NoError(t, err)
		return ids(hits)
	}
	require.ElementsMatch(t,
		[]string{tenantF.ID, salesF.ID, aliceF.ID, agentF.ID, sessF.ID, taskF.ID, aliceEv.ID, aliceEv2.ID},
		search(recall.Visibility{UserID: "alice", DepartmentID: "sales", AgentID: "planner", SessionID: "s1", TaskID: "trip-1"}))
	require.ElementsMatch(t,
		[]string{tenantF.ID, aliceF.ID, aliceEv.ID, aliceEv2.ID},
		search(recall.Visibility{UserID: "alice"}), "no department, agent, session or task named")
	require.ElementsMatch(t,
		[]string{tenantF.ID, hrF.ID, bobF.ID, bobSessF.ID, bobEv.ID},
		search(recall.Visibility{UserID: "bob", DepartmentID: "hr", SessionID: "s1", TaskID: "trip-1"}))
	require.ElementsMatch(t,
		[]string{taskF.ID},
		search(recall.Visibility{UserID: "alice", TaskID: "trip-1", SessionID: "s1", Scopes: []memory.Scope{memory.ScopeTask}}), "Scopes narrows")
	require.ElementsMatch(t,
		[]string{sessF.ID, aliceEv.ID},
		search(recall.Visibility{UserID: "alice", SessionID: "s1", Scopes: []memory.Scope{memory.ScopeSession}}), "evidence of the named session only")
	require.ElementsMatch(t,
		[]string{tenantF.ID},
		search(recall.Visibility{}), "no user: shared tenant facts only")

	hits, err := ix.Search(ctx, recall.Visibility{TenantID: "acme", UserID: "alice", AsOf: t0.Add(time.Hour)}, "hotel", []recall.Kind{recall.KindEvidence}, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{aliceEv.ID, aliceEv2.ID}, ids(hits))
}

// As of a time, a revision counts inside its validity window; a closed revision
// never passes for current; a retracted one stops counting at its retraction.
func TestAsOf(t *testing.T) {
	ix, _ := newIndex(t)
	ctx := context.Background()
	u := memory.ScopeRef{Scope: memory.ScopeUser, UserID: "u1"}
	jan, feb, mar, apr := t0, t0.AddDate(0, 1, 0), t0.AddDate(0, 2, 0), t0.AddDate(0, 3, 0)

	old := fact("acme", u, "u1", "budget 8000")
	old.Status, old.ValidFrom, old.ValidUntil, old.ClosedAt = memory.FactSuperseded, jan, &feb, &feb
	cur := fact("acme", u, "u1", "budget 10000")
	cur.MemoryKey, cur.Revision, cur.ValidFrom = old.MemoryKey, 2, feb
	future := fact("acme", u, "u1", "budget 12000 from april")
	future.ValidFrom = apr
	orphan := fact("acme", u, "u1", "budget closed without an end") // SUPERSEDED, no valid_until
	orphan.Status = memory.FactSuperseded
	retracted := fact("acme", u, "u1", "budget retracted in march")
	retracted.Status, retracted.ValidUntil, retracted.ClosedAt = memory.FactInvalidated, &mar, &mar
	ev := evidence("acme", "u1", "s1", "budget talk in march", mar)
	var docs []typesense.Document
	for _, f := range []*storage.Fact{old, cur, future, orphan, retracted} {
		docs = append(docs, typesense.FactDocument(f))
	}
	docs = append(docs, typesense.EvidenceDocument(ev))
	require.NoError(t, ix.Upsert(ctx, docs))

	at := func(ts time.Time) []string {
		hits, err := ix.Search(ctx, recall.Visibility{TenantID: "acme", UserID: "u1", AsOf: ts}, "budget", nil, 100)
		require.NoError(t, err)
		return ids(hits)
	}
	require.ElementsMatch(t, []string{old.ID, retracted.ID}, at(jan.Add(time.Hour)))
	require.ElementsMatch(t, []string{cur.ID, retracted.ID}, at(feb.Add(time.Hour)), "valid_until is exclusive")
	require.ElementsMatch(t, []string{cur.ID, ev.ID}, at(mar.Add(time.Hour)))
	require.ElementsMatch(t, []string{cur.ID, future.ID, ev.ID}, at(apr.Add(time.Hour)))
	require.ElementsMatch(t, []string{}, at(jan.Add(-time.Hour)))
}

func TestDeleteAndDeleteByFilter(t *testing.T) {
	ix, fake := newIndex(t)
	ctx := context.Background()
	var docs []typesense.Document
	var aliceFacts []*storage.Fact
	for i := 0; i < 4; i++ {
		f := fact("acme", memory.ScopeRef{Scope: memory.ScopeUser, UserID: "alice"}, "alice", "alice likes tea")
		aliceFacts = append(aliceFacts, f)
		docs = append(docs, typesense.FactDocument(f))
	}
	bob := fact("acme", memory.ScopeRef{Scope: memory.ScopeUser, UserID: "bob"}, "bob", "bob likes tea")
	otherAlice := fact("other", memory.ScopeRef{Scope: memory.ScopeUser, UserID: "alice"}, "alice", "alice likes tea")
	aliceEv := evidence("acme", "alice", "s1", "I like tea", t0)
	docs = append(docs, typesense.FactDocument(bob), typesense.FactDocument(otherAlice), typesense.EvidenceDocument(aliceEv))
	require.NoError(t, ix.Upsert(ctx, docs))

	// Delete: one document; absent documents and other tenants' ids are no-ops.
	require.NoError(t, ix.Delete(ctx, "acme", recall.KindFact, aliceFacts[0].ID))
	require.NoError(t, ix.Delete(ctx, "acme", recall.KindFact, aliceFacts[0].ID), "deleting twice is fine")
	require.NoError(t, ix.Delete(ctx, "acme", recall.KindFact, otherAlice.ID), "acme cannot address other's document")
	require.Len(t, fake.Docs("engram_memory"), 6)
	hits, err := ix.Search(ctx, vis("acme", "alice"), "tea", nil, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{aliceFacts[1].ID, aliceFacts[2].ID, aliceFacts[3].ID, aliceEv.ID}, ids(hits))

	// DeleteByFilter: erase alice in acme; bob and alice in the other tenant stay.
	_, err = ix.DeleteByFilter(ctx, "acme", typesense.Filter{})
	require.ErrorContains(t, err, "whole tenant", "an empty filter is refused")
	n, err := ix.DeleteByFilter(ctx, "acme", typesense.Filter{UserID: "alice", Kind: recall.KindEvidence})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = ix.DeleteByFilter(ctx, "acme", typesense.Filter{UserID: "alice"})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	hits, err = ix.Search(ctx, vis("acme", "alice"), "tea", nil, 100)
	require.NoError(t, err)
	require.Empty(t, hits)
	hits, err = ix.Search(ctx, vis("other", "alice"), "tea", nil, 100)
	require.NoError(t, err)
	require.Equal(t, []string{otherAlice.ID}, ids(hits))
	n64, err := ix.EraseSubject(ctx, "acme", "")
	require.NoError(t, err)
	require.Equal(t, int64(1), n64, "the whole tenant: bob's fact")
	require.Len(t, fake.Docs("engram_memory"), 1)
	n64, err = ix.EraseSubject(ctx, "other", "alice")
	require.NoError(t, err)
	require.Equal(t, int64(1), n64)
	require.Empty(t, fake.Docs("engram_memory"))
}

func TestUnavailableIsReported(t *testing.T) {
	ix, fake := newIndex(t)
	fake.SetFailing(true)
	err := ix.Upsert(context.Background(), []typesense.Document{typesense.FactDocument(fact("acme", memory.ScopeRef{Scope: memory.ScopeTenant}, "", "x"))})
	require.Error(t, err)
	require.True(t, typesense.IsUnavailable(err))
	_, err = ix.Search(context.Background(), vis("acme", "u1"), "x", nil, 10)
	require.True(t, typesense.IsUnavailable(err))
}

func TestVisibilityFilterShape(t *testing.T) {
	f, ok, err := typesense.VisibilityFilter(recall.Visibility{TenantID: "acme", UserID: "u1", TaskID: "trip-1", AsOf: time.Unix(1000, 0)}, []recall.Kind{recall.KindFact})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "tenant_id:=`acme` && ((kind:=`fact` && valid_from:<=1000 && valid_until:>1000 && (status:=`ACTIVE` || valid_until:<253402300799) && (status:!=`INVALIDATED` || closed_at:>1000) && ((user_id:=`u1` && (scope:=`USER` || (scope:=`TASK` && task_id:=`trip-1`))) || scope:=`TENANT`)))", f)
	_, ok, err = typesense.VisibilityFilter(recall.Visibility{TenantID: "acme", Scopes: []memory.Scope{memory.ScopeUser}}, nil)
	require.NoError(t, err)
	require.False(t, ok, "USER scope without a user: nothing visible")
}
