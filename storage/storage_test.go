package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func newEvent(key, text string) *storage.Event {
	return &storage.Event{IdempotencyKey: key, ActorType: "USER", ActorID: "u1", UserID: "u1", EventType: "MESSAGE", Content: text, OccurredAt: t0}
}

func userFact(key, obj string, from time.Time) *storage.Fact {
	return &storage.Fact{
		MemoryKey: key, Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeConstraint,
		Subject: "user", Predicate: "budget", Object: obj, Content: "budget at most " + obj,
		Confidence: 0.9, ValidFrom: from,
	}
}

// inParallel runs fn(0) … fn(n-1) at once and fails t with the first error.
func inParallel(t *testing.T, n int, fn func(w int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- fn(w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// eraseAll runs every step of subj's erasure to the end, batch rows at a time.
func eraseAll(t *testing.T, st *storage.Store, subj storage.ErasureSubject, batch int) {
	t.Helper()
	for _, step := range storage.ErasureSteps {
		for {
			n, err := st.EraseBatch(context.Background(), subj, step, batch)
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
	}
}

func count(t *testing.T, st *storage.Store, table, where string, args ...any) int {
	t.Helper()
	n, err := st.DB().NewSelect().Table(table).Where(where, args...).Count(context.Background())
	require.NoError(t, err)
	return int(n)
}

func TestMigrateIsIdempotentAndVectorLoaded(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	applied, err := st.Migrate(ctx)
	require.NoError(t, err)
	assert.Empty(t, applied, "template already migrated; nothing new to apply")
	var ver string
	require.NoError(t, st.DB().NewRaw("SELECT extversion FROM pg_extension WHERE extname = 'vector'").Scan(ctx, &ver))
	assert.GreaterOrEqual(t, ver, "0.8")
	require.NoError(t, st.CheckEmbeddingDim(ctx, storage.EmbeddingDim))
	assert.Error(t, st.CheckEmbeddingDim(ctx, 1536))
}

func TestInsertEventIdempotentUnderConcurrency(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make([]string, 20)
	created := make([]bool, 20)
	errs := make([]error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			e, c, err := st.InsertEvent(ctx, "tA", newEvent("k-1", "我的订单12345没收到"))
			errs[i] = err
			if err == nil {
				ids[i], created[i] = e.ID, c
			}
		}(i)
	}
	wg.Wait()
	nCreated := 0
	for i := range ids {
		require.NoError(t, errs[i])
		assert.Equal(t, ids[0], ids[i], "every caller gets the same event")
		if created[i] {
			nCreated++
		}
	}
	assert.Equal(t, 1, nCreated)
	assert.Equal(t, 1, count(t, st, "events", "tenant_id = 'tA'"))

	// The same key in another tenant is another event.
	_, c, err := st.InsertEvent(ctx, "tB", newEvent("k-1", "我的订单12345没收到"))
	require.NoError(t, err)
	assert.True(t, c)

	// The same key with other content is a conflict and writes nothing.
	_, _, err = st.InsertEvent(ctx, "tA", newEvent("k-1", "something else"))
	assert.ErrorIs(t, err, storage.ErrIdempotencyConflict)
	assert.Equal(t, 1, count(t, st, "events", "tenant_id = 'tA'"))
}

func TestBadInputNamesTheFieldAndWritesNothing(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	fieldOf := func(err error) string {
		var fe memory.FieldError
		require.True(t, errors.As(err, &fe), "want a FieldError, got %v", err)
		return fe.Field
	}
	_, _, err := st.InsertEvent(ctx, "", newEvent("k", "x"))
	assert.Equal(t, "tenant_id", fieldOf(err))
	bad := newEvent("k", "x")
	bad.EventType = "CHAT"
	_, _, err = st.InsertEvent(ctx, "tA", bad)
	assert.Equal(t, "event_type", fieldOf(err))
	assert.Contains(t, err.Error(), "MESSAGE")

	f := userFact("USER:u1/budget", "8000 CNY", t0)
	f.Scope = "GALAXY"
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteCurrent, "")
	assert.Equal(t, "scope", fieldOf(err))

	f = userFact("TASK:/budget", "8000 CNY", t0)
	f.Scope = memory.ScopeTask // a TASK-scope fact without a task id
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteCurrent, "")
	assert.Equal(t, "task_id", fieldOf(err))

	f = userFact("USER:u1/budget", "8000 CNY", t0)
	v := pgvector.NewVector(make([]float32, 3))
	f.Embedding = &v
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteCurrent, "")
	assert.Equal(t, "embedding", fieldOf(err))
	assert.Contains(t, err.Error(), "512")

	f = userFact("USER:u1/budget", "8000 CNY", t0)
	f.MemoryType = "OPINION"
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteCurrent, "")
	assert.Equal(t, "memory_type", fieldOf(err))

	f = userFact("USER:u1/budget", "8000 CNY", t0)
	f.Confidence = 1.5
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteCurrent, "")
	assert.Equal(t, "confidence", fieldOf(err))

	err = st.RecordTaskTransition(ctx, "tA", &storage.Task{ID: "t1", State: "DREAMING"}, &storage.TaskTransition{Seq: 1, ToState: "DREAMING"})
	assert.Equal(t, "state", fieldOf(err))

	assert.Equal(t, 0, count(t, st, "events", "TRUE"))
	assert.Equal(t, 0, count(t, st, "facts", "TRUE"))
	assert.Equal(t, 0, count(t, st, "tasks", "TRUE"))

	// The database itself refuses what the repositories would have: the constraints
	// are the last line of defence.
	_, err = st.DB().ExecContext(ctx, `INSERT INTO facts (tenant_id, memory_key, revision, scope, memory_type, content, status, confidence, valid_from, observed_at)
		VALUES ('tA', 'k', 1, 'USER', 'FACT', 'x', 'ACTIVE', 0.5, now(), now())`)
	assert.ErrorContains(t, err, "check constraint", "USER scope without user_id")
	_, err = st.DB().ExecContext(ctx, `INSERT INTO facts (tenant_id, memory_key, revision, scope, user_id, memory_type, content, status, confidence, valid_from, observed_at)
		VALUES ('tA', 'k', 1, 'USER', 'u1', 'FACT', 'x', 'LIVELY', 0.5, now(), now())`)
	assert.ErrorContains(t, err, "check constraint")
}

func TestNewRevisionClosesPreviousAndHistory(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1/budget"
	r1, err := st.WriteFact(ctx, "tA", userFact(key, "8000 CNY", t0), storage.WriteCurrent, "budget 8000")
	require.NoError(t, err)
	assert.Equal(t, 1, r1.Revision)
	r2, err := st.WriteFact(ctx, "tA", userFact(key, "10000 CNY", t0.Add(48*time.Hour)), storage.WriteCurrent, "budget 10000")
	require.NoError(t, err)
	assert.Equal(t, 2, r2.Revision)
	require.NotNil(t, r2.SupersedesID)
	assert.Equal(t, r1.ID, *r2.SupersedesID)

	hist, err := st.FactHistory(ctx, "tA", key)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	assert.Equal(t, memory.FactSuperseded, hist[0].Status)
	require.NotNil(t, hist[0].ValidUntil)
	assert.True(t, hist[0].ValidUntil.Equal(t0.Add(48*time.Hour)))
	assert.Equal(t, memory.FactActive, hist[1].Status)

	// A late-arriving older statement becomes history, not the current value.
	late, err := st.WriteFact(ctx, "tA", userFact(key, "6000 CNY", t0.Add(-24*time.Hour)), storage.WriteHistorical, "")
	require.NoError(t, err)
	assert.Equal(t, memory.FactSuperseded, late.Status)
	require.NotNil(t, late.ValidUntil)
	assert.True(t, late.ValidUntil.Equal(t0))
	cur, err := storage.CurrentFact(ctx, st.DB(), "tA", key)
	require.NoError(t, err)
	assert.Equal(t, "10000 CNY", cur.Object)
	requireNoOverlaps(t, st, "tA")

	// Retraction closes the current revision.
	closed, err := storage.CloseFact(ctx, st.DB(), "tA", key, memory.FactInvalidated, t0.Add(72*time.Hour), "user said forget it")
	require.NoError(t, err)
	assert.Equal(t, memory.FactInvalidated, closed.Status)
	_, err = storage.CurrentFact(ctx, st.DB(), "tA", key)
	assert.ErrorIs(t, err, storage.ErrNotFound)
}

func TestAsOfReturnsRevisionValidThen(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1/budget"
	for i, v := range []string{"6000 CNY", "8000 CNY", "10000 CNY"} {
		_, err := st.WriteFact(ctx, "tA", userFact(key, v, t0.Add(time.Duration(i)*24*time.Hour)), storage.WriteCurrent, "")
		require.NoError(t, err)
	}
	cases := []struct {
		at   time.Time
		want string
	}{
		{t0.Add(-time.Hour), ""},
		{t0, "6000 CNY"},
		{t0.Add(23 * time.Hour), "6000 CNY"},
		{t0.Add(24 * time.Hour), "8000 CNY"},
		{t0.Add(47 * time.Hour), "8000 CNY"},
		{t0.Add(24 * 365 * time.Hour), "10000 CNY"},
	}
	for _, c := range cases {
		got, err := st.FactsAsOf(ctx, "tA", c.at, storage.FactFilter{MemoryKey: key})
		require.NoError(t, err)
		if c.want == "" {
			assert.Empty(t, got, "as of %s", c.at)
			continue
		}
		require.Len(t, got, 1, "as of %s", c.at)
		assert.Equal(t, c.want, got[0].Object, "as of %s", c.at)
	}
	requireNoOverlaps(t, st, "tA")
	// Another tenant's as-of read sees nothing.
	got, err := st.FactsAsOf(ctx, "tB", t0.Add(24*time.Hour), storage.FactFilter{MemoryKey: key})
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestOneActiveRevisionUnderConcurrentWriters(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1/budget"
	const writers = 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := st.WriteFact(ctx, "tA", userFact(key, fmt.Sprintf("%d CNY", 1000*(i+1)), t0.Add(time.Duration(i)*time.Minute)), storage.WriteCurrent, "")
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, count(t, st, "facts", "tenant_id = 'tA' AND memory_key = ? AND status = 'ACTIVE'", key))
	assert.Equal(t, writers, count(t, st, "facts", "tenant_id = 'tA' AND memory_key = ?", key))
	// Revisions are 1..20 without gaps or repeats.
	var revs []int
	require.NoError(t, st.DB().NewSelect().Table("facts").Column("revision").Where("memory_key = ?", key).Order("revision").Scan(ctx, &revs))
	for i, r := range revs {
		assert.Equal(t, i+1, r)
	}
}

func TestTenantIsolation(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	ev, _, err := st.InsertEvent(ctx, "tB", newEvent("k", "tenant B's secret"))
	require.NoError(t, err)
	fb, err := st.WriteFact(ctx, "tB", userFact("USER:u1/budget", "99999 CNY", t0), storage.WriteCurrent, "")
	require.NoError(t, err)
	_, err = st.WriteFact(ctx, "tA", userFact("USER:u1/budget", "8000 CNY", t0), storage.WriteCurrent, "")
	require.NoError(t, err)
	require.NoError(t, storage.UpsertEdge(ctx, st.DB(), "tB", &storage.Edge{Type: "PLACED", FromType: "User", FromID: "u1", ToType: "Order", ToID: "12345", UserID: "u1"}))
	require.NoError(t, st.RecordTaskTransition(ctx, "tB", &storage.Task{ID: "trip", State: memory.TaskCreated}, &storage.TaskTransition{Seq: 1, ToState: memory.TaskCreated}))

	// Same user id, same memory key, same ids: tenant A sees only its own rows.
	_, err = st.GetEvent(ctx, "tA", ev.ID)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	_, err = st.GetFact(ctx, "tA", fb.ID)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	facts, err := st.ListFacts(ctx, "tA", storage.FactFilter{UserID: "u1"})
	require.NoError(t, err)
	require.Len(t, facts, 1)
	assert.Equal(t, "8000 CNY", facts[0].Object)
	hist, err := st.FactHistory(ctx, "tA", "USER:u1/budget")
	require.NoError(t, err)
	for _, f := range hist {
		assert.Equal(t, "tA", f.TenantID)
	}
	_, err = st.GetEntity(ctx, "tA", "Order", "12345")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	edges, err := st.EdgesOf(ctx, "tA", "User", "u1")
	require.NoError(t, err)
	assert.Empty(t, edges)
	_, err = st.GetTask(ctx, "tA", "trip")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	ents, err := st.EntitiesOfUser(ctx, "tA", "u1", 10)
	require.NoError(t, err)
	assert.Empty(t, ents)

	// The database refuses a row of tenant A pointing at tenant B's event.
	_, err = st.InsertEvidence(ctx, "tA", &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: "x", OccurredAt: t0}, "x")
	assert.ErrorContains(t, err, "foreign key")
}

func TestEntityEdgeUpsertAndTaskTransitions(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	db := st.DB()
	require.NoError(t, storage.UpsertEntity(ctx, db, "tA", &storage.Entity{Type: "Order", ID: "12345", UserID: "u1", State: "NOT_RECEIVED", Attributes: json.RawMessage(`{"amount": 199}`)}))
	require.NoError(t, storage.UpsertEntity(ctx, db, "tA", &storage.Entity{Type: "Order", ID: "12345", Attributes: json.RawMessage(`{"carrier": "SF"}`)}))
	e, err := st.GetEntity(ctx, "tA", "Order", "12345")
	require.NoError(t, err)
	assert.Equal(t, "NOT_RECEIVED", e.State, "an empty state does not erase the stored one")
	assert.JSONEq(t, `{"amount": 199, "carrier": "SF"}`, string(e.Attributes))
	for i := 0; i < 2; i++ {
		require.NoError(t, storage.UpsertEdge(ctx, db, "tA", &storage.Edge{Type: "PLACED", FromType: "User", FromID: "u1", ToType: "Order", ToID: "12345", UserID: "u1"}))
	}
	edges, err := st.EdgesOf(ctx, "tA", "Order", "12345")
	require.NoError(t, err)
	assert.Len(t, edges, 1)

	task := &storage.Task{ID: "trip-1", UserID: "u1", Goal: "plan the trip", State: memory.TaskCreated}
	require.NoError(t, st.RecordTaskTransition(ctx, "tA", task, &storage.TaskTransition{Seq: 1, ToState: memory.TaskCreated, Actor: "agent"}))
	task2 := &storage.Task{ID: "trip-1", UserID: "u1", Goal: "plan the trip", State: memory.TaskPlanning, Todo: []string{"book hotel"}}
	tr2 := &storage.TaskTransition{Seq: 2, FromState: memory.TaskCreated, ToState: memory.TaskPlanning, Actor: "agent", Reason: "plan"}
	require.NoError(t, st.RecordTaskTransition(ctx, "tA", task2, tr2))
	require.NoError(t, st.RecordTaskTransition(ctx, "tA", task2, tr2), "a retried write is a no-op")
	// A stale write (lower seq) does not roll the task back.
	require.NoError(t, st.RecordTaskTransition(ctx, "tA", &storage.Task{ID: "trip-1", State: memory.TaskCreated}, &storage.TaskTransition{Seq: 1, ToState: memory.TaskCreated}))
	got, err := st.GetTask(ctx, "tA", "trip-1")
	require.NoError(t, err)
	assert.Equal(t, memory.TaskPlanning, got.State)
	assert.Equal(t, []string{"book hotel"}, got.Todo)
	trs, err := st.ListTaskTransitions(ctx, "tA", "trip-1")
	require.NoError(t, err)
	require.Len(t, trs, 2)
	assert.Equal(t, memory.TaskPlanning, trs[1].ToState)
}
