package outbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/internal/faketypesense"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
)

// The outbox drain against the real Postgres of the test stack and the fake
// Typesense (no real Typesense can run here).

type outboxEnv struct {
	t    *testing.T
	st   *storage.Store
	fake *faketypesense.Server
	ix   *typesense.Index
	acts *OutboxActivities
}

func newOutboxEnv(t *testing.T) *outboxEnv {
	st := testenv.Store(t)
	fake := faketypesense.New("k")
	t.Cleanup(fake.Close)
	ix, err := typesense.New(typesense.Config{URL: fake.URL, APIKey: "k"})
	require.NoError(t, err)
	require.NoError(t, ix.EnsureCollection(context.Background()))
	return &outboxEnv{t: t, st: st, fake: fake, ix: ix, acts: &OutboxActivities{Store: st, Index: ix}}
}

var (
	jan   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later = jan.AddDate(0, 6, 0) // "now" for the searches, whatever the machine's clock says
)

// writeFact commits a fact revision and its outbox row in one transaction, as the
// write path's Commit does.
func (e *outboxEnv) writeFact(tenant, user, key, content string, validFrom time.Time) *storage.Fact {
	var out *storage.Fact
	require.NoError(e.t, e.st.InTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		f := &storage.Fact{
			MemoryKey: key, Scope: memory.ScopeUser, UserID: user, MemoryType: memory.TypeFact,
			Content: content, Confidence: 0.9, ValidFrom: validFrom,
		}
		var err error
		if out, err = storage.WriteFactRevision(ctx, tx, tenant, f, storage.WriteCurrent, storage.SearchText(content)); err != nil {
			return err
		}
		return storage.EnqueueFact(ctx, tx, tenant, out.ID)
	}))
	return out
}

func (e *outboxEnv) writeEvidence(tenant, user, content string) *storage.Evidence {
	ctx := context.Background()
	ev, _, err := e.st.InsertEvent(ctx, tenant, &storage.Event{
		IdempotencyKey: uuid.NewString(), ActorType: "USER", UserID: user, EventType: "MESSAGE", Content: content, OccurredAt: jan,
	})
	require.NoError(e.t, err)
	evd, err := e.st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: content, UserID: user, OccurredAt: jan}, storage.SearchText(content))
	require.NoError(e.t, err)
	e.queue(tenant, "EVIDENCE", evd.ID, "UPSERT")
	return evd
}

func (e *outboxEnv) queue(tenant, kind, ref, op string) {
	_, err := e.st.DB().NewRaw("INSERT INTO outbox (tenant_id, kind, ref_id, op) VALUES (?, ?, ?, ?)", tenant, kind, ref, op).Exec(context.Background())
	require.NoError(e.t, err)
}

type outboxState struct {
	ID          int64      `bun:"id"`
	RefID       string     `bun:"ref_id"`
	Attempts    int        `bun:"attempts"`
	LastError   string     `bun:"last_error"`
	ProcessedAt *time.Time `bun:"processed_at"`
}

func (e *outboxEnv) rows() []outboxState {
	var rows []outboxState
	require.NoError(e.t, e.st.DB().NewSelect().Table("outbox").Column("id", "ref_id", "attempts", "last_error", "processed_at").Order("id").Scan(context.Background(), &rows))
	return rows
}

func (e *outboxEnv) drainAll(in DrainInput) DrainResult {
	var sum DrainResult
	for i := 0; i < 100; i++ {
		r, err := e.acts.DrainOutbox(context.Background(), in)
		require.NoError(e.t, err)
		sum.Claimed += r.Claimed
		sum.Upserted += r.Upserted
		sum.Deleted += r.Deleted
		sum.Processed += r.Processed
		sum.Failed += r.Failed
		if r.Claimed == 0 || r.Failed > 0 {
			return sum
		}
	}
	e.t.Fatal("the outbox never drained")
	return sum
}

func (e *outboxEnv) search(tenant, user, q string, asOf time.Time) []string {
	hits, err := e.ix.Search(context.Background(), recall.Visibility{TenantID: tenant, UserID: user, AsOf: asOf}, q, nil, 100)
	require.NoError(e.t, err)
	var out []string
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func TestDrainOutboxMakesWritesSearchable(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := context.Background()
	feb := jan.AddDate(0, 1, 0)
	order := e.writeFact("acme", "alice", "order:12345:status", "Order 12345 has not arrived", jan)
	b1 := e.writeFact("acme", "alice", "alice:budget", "travel budget 8000", jan)
	b2 := e.writeFact("acme", "alice", "alice:budget", "travel budget 10000", feb) // supersedes b1
	other := e.writeFact("globex", "alice", "order:12345:status", "Order 12345 has not arrived", jan)
	turn := e.writeEvidence("acme", "alice", "我那个订单12345还没到")
	require.Len(t, e.rows(), 5)

	sum := e.drainAll(DrainInput{Batch: 2})
	require.Equal(t, 5, sum.Claimed)
	require.Equal(t, 5, sum.Processed)
	require.Zero(t, sum.Failed)
	for _, r := range e.rows() {
		require.NotNil(t, r.ProcessedAt, "row %d processed", r.ID)
		require.Equal(t, 1, r.Attempts)
		require.Empty(t, r.LastError)
	}

	now := later
	require.ElementsMatch(t, []string{order.ID, turn.ID}, e.search("acme", "alice", "12345", now))
	require.ElementsMatch(t, []string{other.ID}, e.search("globex", "alice", "12345", now))
	require.Empty(t, e.search("acme", "bob", "12345", now), "another user sees none of alice's memory")
	require.ElementsMatch(t, []string{turn.ID}, e.search("acme", "alice", "订单", now))
	// The superseded revision was re-indexed with its new status and window though
	// only the new revision was queued.
	require.Equal(t, []string{b2.ID}, e.search("acme", "alice", "budget", now))
	require.Equal(t, []string{b1.ID}, e.search("acme", "alice", "budget", jan.Add(24*time.Hour)))

	// A DELETE row removes the document; an UPSERT of a row that is gone too.
	e.queue("acme", "EVIDENCE", turn.ID, "DELETE")
	_, err := e.st.DB().NewDelete().Table("facts").Where("tenant_id = 'globex' AND id = ?", other.ID).Exec(ctx)
	require.NoError(t, err)
	e.queue("globex", "FACT", other.ID, "UPSERT")
	sum = e.drainAll(DrainInput{})
	require.Equal(t, 2, sum.Processed)
	require.Equal(t, 2, sum.Deleted)
	require.Equal(t, []string{order.ID}, e.search("acme", "alice", "12345", now))
	require.Empty(t, e.search("globex", "alice", "12345", now))

	r, err := e.acts.DrainOutbox(ctx, DrainInput{})
	require.NoError(t, err)
	require.Zero(t, r.Claimed, "nothing left")
}

func TestDrainOutboxKeepsRowsWhenTypesenseFails(t *testing.T) {
	e := newOutboxEnv(t)
	f1 := e.writeFact("acme", "alice", "k1", "hotel near the station", jan)
	f2 := e.writeFact("acme", "alice", "k2", "hotel with a pool", jan)

	e.fake.SetFailing(true)
	for attempt := 1; attempt <= 2; attempt++ {
		r, err := e.acts.DrainOutbox(context.Background(), DrainInput{})
		require.NoError(t, err, "a failing index is not an activity failure")
		require.Equal(t, 2, r.Claimed)
		require.Equal(t, 2, r.Failed)
		require.Zero(t, r.Processed)
		require.Contains(t, r.LastError, "500")
		for _, row := range e.rows() {
			require.Nil(t, row.ProcessedAt)
			require.Equal(t, attempt, row.Attempts)
			require.Contains(t, row.LastError, "injected failure")
		}
	}

	e.fake.SetFailing(false)
	sum := e.drainAll(DrainInput{})
	require.Equal(t, 2, sum.Processed)
	for _, row := range e.rows() {
		require.NotNil(t, row.ProcessedAt)
		require.Equal(t, 3, row.Attempts)
		require.Empty(t, row.LastError)
	}
	require.ElementsMatch(t, []string{f1.ID, f2.ID}, e.search("acme", "alice", "hotel", later))
}

func TestDrainOutboxStopsRetryingAtMaxAttempts(t *testing.T) {
	e := newOutboxEnv(t)
	f := e.writeFact("acme", "alice", "k1", "window seat preferred", jan)
	e.fake.SetFailing(true)
	for i := 0; i < 3; i++ {
		_, err := e.acts.DrainOutbox(context.Background(), DrainInput{MaxAttempts: 3})
		require.NoError(t, err)
	}
	e.fake.SetFailing(false)
	r, err := e.acts.DrainOutbox(context.Background(), DrainInput{MaxAttempts: 3})
	require.NoError(t, err)
	require.Zero(t, r.Claimed, "a row that used its attempts is left for an operator")
	rows := e.rows()
	require.Len(t, rows, 1)
	require.Nil(t, rows[0].ProcessedAt, "still pending, with its error: nothing is lost")
	require.Equal(t, 3, rows[0].Attempts)
	require.NotEmpty(t, rows[0].LastError)

	// A reindex recovers it.
	res, err := e.acts.ReindexTypesense(context.Background(), ReindexInput{TenantID: "acme"})
	require.NoError(t, err)
	require.Equal(t, 1, res.Facts)
	require.Equal(t, []string{f.ID}, e.search("acme", "alice", "window", later))
}

// Concurrent drainers never take the same row: every row ends processed with one
// attempt.
func TestDrainOutboxConcurrentDrainersSkipLockedRows(t *testing.T) {
	e := newOutboxEnv(t)
	for i := 0; i < 40; i++ {
		e.writeFact("acme", "alice", uuid.NewString(), "note number "+uuid.NewString()[:6], jan)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := e.acts.DrainOutbox(context.Background(), DrainInput{Batch: 3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += r.Processed
				mu.Unlock()
				if r.Claimed == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 40, total)
	for _, row := range e.rows() {
		require.NotNil(t, row.ProcessedAt)
		require.Equal(t, 1, row.Attempts, "row %d drained once", row.ID)
	}
	require.Len(t, e.search("acme", "alice", "note", later), 40)
}

func TestReindexTypesenseRefusesNoTenant(t *testing.T) {
	e := newOutboxEnv(t)
	_, err := e.acts.ReindexTypesense(context.Background(), ReindexInput{})
	require.ErrorContains(t, err, "tenant_id")
}
