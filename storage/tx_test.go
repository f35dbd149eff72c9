package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

func txTurn(t *testing.T, ctx context.Context, st *storage.Store, tenant, key string) *storage.Evidence {
	t.Helper()
	e, _, err := st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: key, ActorType: "USER", UserID: "u1", EventType: "MESSAGE", Content: "hiking in lisbon " + key, OccurredAt: t0})
	require.NoError(t, err)
	evd, err := st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: e.ID, Kind: "TURN", Content: "hiking in lisbon " + key, UserID: "u1", OccurredAt: t0}, storage.SearchText("hiking in lisbon"))
	require.NoError(t, err)
	return evd
}

// The store's methods called with WithTx's context run in that transaction: what
// they wrote is gone when it rolls back, kept when it commits, and InTx nests as a
// savepoint (its failure rolls back only its own statements).
func TestWithTx(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	count := func() int {
		n, err := st.DB().NewSelect().Table("events").Where("tenant_id = 't-tx'").Count(ctx)
		require.NoError(t, err)
		return int(n)
	}
	for _, commit := range []bool{false, true} {
		tx, err := st.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		tctx := st.WithTx(ctx, tx)
		key := fmt.Sprintf("k-%v", commit)
		txTurn(t, tctx, st, "t-tx", key)
		boom := errors.New("boom")
		require.ErrorIs(t, st.InTx(tctx, func(ctx context.Context, tx bun.Tx) error {
			txTurn(t, ctx, st, "t-tx-never", "never") // in the savepoint (ctx carries the transaction)
			return boom
		}), boom)
		got, err := st.EventsByKey(tctx, "t-tx", []string{key}) // reads see the transaction's writes
		require.NoError(t, err)
		require.Len(t, got, 1)
		if commit {
			require.NoError(t, tx.Commit())
			assert.Equal(t, 1, count(), "committed")
		} else {
			require.NoError(t, tx.Rollback())
			assert.Equal(t, 0, count(), "rolled back")
		}
	}
	n, err := st.DB().NewSelect().Table("events").Where("tenant_id = 't-tx-never'").Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the savepoint's statements were rolled back")
}

// SetEvidenceEmbeddings sets many turns' vectors in one statement, only the
// tenant's, and refuses a vector of the wrong size naming it.
func TestSetEvidenceEmbeddings(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	a1, a2 := txTurn(t, ctx, st, "t-a", "a1"), txTurn(t, ctx, st, "t-a", "a2")
	b1 := txTurn(t, ctx, st, "t-b", "b1")
	vec := func(x float32) pgvector.Vector {
		v := make([]float32, storage.EmbeddingDim)
		v[0], v[1] = x, 1
		return pgvector.NewVector(v)
	}
	require.NoError(t, st.SetEvidenceEmbeddings(ctx, "t-a", []string{a1.ID, a2.ID, b1.ID}, []pgvector.Vector{vec(1), vec(2), vec(3)}))
	var got []struct {
		ID        string           `bun:"id"`
		Embedding *pgvector.Vector `bun:"embedding"`
	}
	require.NoError(t, st.DB().NewSelect().Table("evidence").Column("id", "embedding").Where("tenant_id IN ('t-a', 't-b')").Scan(ctx, &got))
	byID := map[string]float32{}
	for _, g := range got {
		if g.Embedding != nil {
			byID[g.ID] = g.Embedding.Slice()[0]
		}
	}
	assert.Equal(t, map[string]float32{a1.ID: 1, a2.ID: 2}, byID, "the tenant's turns, not another's")

	err := st.SetEvidenceEmbeddings(ctx, "t-a", []string{a1.ID, a2.ID}, []pgvector.Vector{vec(4), pgvector.NewVector([]float32{1, 2})})
	var fe memory.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "embeddings[1]", fe.Field)
}
