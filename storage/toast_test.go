package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// A fact's vector, content and search text stay in its row (no TOAST read per
// row in recall): see the migrations vectors_inline and sentences_inline.
func TestFactRowsStayInline(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	v := make([]float32, storage.EmbeddingDim)
	for i := range v {
		v[i] = float32(i%17) / 17 // dense, like a model's vector
	}
	f := userFact("inline", strings.Repeat("long object ", 40), t0)
	vec := pgvector.NewVector(v)
	f.Embedding = &vec
	_, err := st.WriteFact(ctx, "tA", f, storage.WriteCurrent, strings.Repeat("words to search ", 40))
	require.NoError(t, err)
	for _, table := range []string{"facts", "evidence", "evidence_sentences"} {
		var n int
		require.NoError(t, st.DB().NewRaw("SELECT count(*) FROM pg_class WHERE relname = ? AND reloptions @> ARRAY['toast_tuple_target=8160']", table).Scan(ctx, &n))
		require.Equal(t, 1, n, "%s has toast_tuple_target=8160", table)
	}
	var toastSize int64
	require.NoError(t, st.DB().NewRaw("SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'facts'").Scan(ctx, &toastSize))
	require.Zero(t, toastSize, "nothing of the fact went to the TOAST table")
}
