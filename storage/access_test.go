package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// Recall's reads are counted in fact_access, not in the fact's row (which stays
// as written); importance decays only for facts nobody read lately; deleting a
// fact deletes its counts.
func TestFactReadsAndDecay(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	read, err := st.WriteFact(ctx, "tA", userFact("read", "often", t0), storage.WriteCurrent, "often")
	require.NoError(t, err)
	idle, err := st.WriteFact(ctx, "tA", userFact("idle", "never", t0), storage.WriteCurrent, "never")
	require.NoError(t, err)
	var xmin0 string
	require.NoError(t, st.DB().NewRaw("SELECT xmin::text FROM facts WHERE id = ?", read.ID).Scan(ctx, &xmin0))

	now := time.Now().UTC()
	es := []storage.AccessEntry{
		{TenantID: "tA", Principal: "p", Purpose: "recall", UserID: "u1", Query: "q", FactIDs: []string{read.ID, read.ID}, At: now.Add(-time.Minute)},
		{TenantID: "tA", Principal: "p", Purpose: "recall", UserID: "u1", Query: "q", FactIDs: []string{read.ID, "00000000-0000-0000-0000-000000000001"}, At: now},
	}
	require.NoError(t, st.RecordAccess(ctx, es, true, false))
	n, last, err := st.FactReads(ctx, "tA", read.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.WithinDuration(t, now, *last, time.Millisecond)
	n, last, err = st.FactReads(ctx, "tA", idle.ID)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Nil(t, last)
	n, _, err = st.FactReads(ctx, "tB", read.ID)
	require.NoError(t, err)
	require.Zero(t, n, "another tenant sees no counts")
	var xmin1 string
	require.NoError(t, st.DB().NewRaw("SELECT xmin::text FROM facts WHERE id = ?", read.ID).Scan(ctx, &xmin1))
	require.Equal(t, xmin0, xmin1, "counting a read does not rewrite the fact's row")

	// Both were recorded two hours ago; one was read just now, the other never.
	_, err = st.DB().NewRaw("UPDATE facts SET recorded_at = now() - interval '2 hours' WHERE tenant_id = 'tA'").Exec(ctx)
	require.NoError(t, err)
	changed, err := st.DecayImportance(ctx, time.Now(), storage.DecayPolicy{IdleFor: 30 * time.Minute, Factor: 0.5, Floor: 0.1}, 100)
	require.NoError(t, err)
	require.Equal(t, 1, changed, "the fact read a minute ago is kept; the idle one decays")
	f, err := st.GetFact(ctx, "tA", idle.ID)
	require.NoError(t, err)
	r, err := st.GetFact(ctx, "tA", read.ID)
	require.NoError(t, err)
	require.Less(t, f.Importance, r.Importance)

	_, err = st.DB().NewRaw("DELETE FROM facts WHERE tenant_id = 'tA' AND id = ?", read.ID).Exec(ctx)
	require.NoError(t, err)
	var left int
	require.NoError(t, st.DB().NewRaw("SELECT count(*) FROM fact_access WHERE fact_id = ?", read.ID).Scan(ctx, &left))
	require.Zero(t, left)
}
