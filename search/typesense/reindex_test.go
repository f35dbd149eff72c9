package typesense_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/search/typesense"
	"github.com/engramhq/engram/storage"
)

// Reindex streams a tenant's facts and evidence from the real Postgres of the test
// stack into the fake, resumes from a cursor, and drops documents whose rows are gone.
func TestReindexFromPostgres(t *testing.T) {
	st := testenv.Store(t)
	ix, fake := newIndex(t)
	ctx := context.Background()
	var factIDs []string
	for i := 0; i < 7; i++ {
		f, err := st.WriteFact(ctx, "acme", &storage.Fact{
			MemoryKey: uuid.NewString(), Scope: memory.ScopeUser, UserID: "alice", MemoryType: memory.TypePreference,
			Content: "prefers aisle seats", Confidence: 0.8, ValidFrom: t0,
		}, storage.WriteCurrent, "")
		require.NoError(t, err)
		factIDs = append(factIDs, f.ID)
	}
	_, err := st.WriteFact(ctx, "globex", &storage.Fact{
		MemoryKey: "x", Scope: memory.ScopeUser, UserID: "alice", MemoryType: memory.TypePreference,
		Content: "prefers aisle seats", Confidence: 0.8, ValidFrom: t0,
	}, storage.WriteCurrent, "")
	require.NoError(t, err)
	ev, _, err := st.InsertEvent(ctx, "acme", &storage.Event{IdempotencyKey: "e1", ActorType: "USER", UserID: "alice", EventType: "MESSAGE", Content: "靠过道的座位", OccurredAt: t0})
	require.NoError(t, err)
	evd, err := st.InsertEvidence(ctx, "acme", &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: "我喜欢靠过道的座位", UserID: "alice", OccurredAt: t0}, "")
	require.NoError(t, err)

	// A document whose row no longer exists, written before the run.
	stale := typesense.FactDocument(fact("acme", memory.ScopeRef{Scope: memory.ScopeUser, UserID: "alice"}, "alice", "prefers aisle seats (deleted)"))
	keep := typesense.FactDocument(fact("globex", memory.ScopeRef{Scope: memory.ScopeUser, UserID: "alice"}, "alice", "another tenant's document"))
	require.NoError(t, ix.Upsert(ctx, []typesense.Document{stale, keep}))
	time.Sleep(1100 * time.Millisecond) // indexed_at has second resolution

	var cursors []typesense.ReindexCursor
	res, err := ix.Reindex(ctx, st, "acme", typesense.ReindexOptions{
		PageSize: 3, StaleMargin: -1,
		Progress: func(c typesense.ReindexCursor) { cursors = append(cursors, c) },
	})
	require.NoError(t, err)
	require.Equal(t, typesense.ReindexResult{Facts: 7, Evidence: 1, StaleRemoved: 1}, res)
	require.Equal(t, "done", cursors[len(cursors)-1].Phase)

	v := recall.Visibility{TenantID: "acme", UserID: "alice", AsOf: t0.Add(time.Hour)}
	hits, err := ix.Search(ctx, v, "aisle", nil, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, factIDs, ids(hits))
	hits, err = ix.Search(ctx, v, "过道", nil, 100)
	require.NoError(t, err)
	require.Equal(t, []string{evd.ID}, ids(hits))
	docs := fake.Docs("engram_memory")
	require.Contains(t, docs, keep.ID, "another tenant's documents are untouched")
	require.NotContains(t, docs, stale.ID)

	// Resuming from a cursor in the middle of the facts writes the rest only.
	mid := cursors[0]
	require.Equal(t, "facts", mid.Phase)
	imports := fake.Requests("import")
	res, err = ix.Reindex(ctx, st, "acme", typesense.ReindexOptions{PageSize: 3, Resume: mid})
	require.NoError(t, err)
	require.Equal(t, 7, res.Facts)
	require.Equal(t, 1, res.Evidence)
	require.Equal(t, imports+3, fake.Requests("import"), "4 facts left (2 pages) and 1 evidence page")
}
