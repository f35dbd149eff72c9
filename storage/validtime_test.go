package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/uptrace/bun"
)

// requireNoOverlaps fails when two live revisions of one key are valid at once.
func requireNoOverlaps(t *testing.T, st *storage.Store, tenant string) {
	t.Helper()
	ov, err := st.Overlaps(context.Background(), tenant)
	require.NoError(t, err)
	require.Empty(t, ov, "revisions valid at the same time")
}

func valueAsOf(t *testing.T, st *storage.Store, key string, at time.Time, knownAt time.Time) []string {
	t.Helper()
	got, err := st.FactsAsOf(context.Background(), "tA", at, storage.FactFilter{MemoryKey: key, KnownAt: knownAt})
	require.NoError(t, err)
	var out []string
	for _, f := range got {
		if f.Status == memory.FactActive || f.Status == memory.FactSuperseded {
			out = append(out, f.Object)
		}
	}
	return out
}

// TestLateStatementSplitsARevision: issue 28's budget. 2385 stated at t0+4h and
// again at t0+10h (the duplicate governed first); 2319 at t0+6h arrives last.
// Applied as governance decides (trim, historical, reopen), the key's history
// has one value at every time, and reads known at each moment see what the
// memory held then.
func TestLateStatementSplitsARevision(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1/budget"
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

	r1, err := st.WriteFact(ctx, "tA", userFact(key, "2319", h(0)), storage.WriteCurrent, "")
	require.NoError(t, err)
	r2, err := st.WriteFact(ctx, "tA", userFact(key, "2385", h(4)), storage.WriteCurrent, "")
	require.NoError(t, err)
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return storage.RestateFact(ctx, tx, "tA", r2.ID, 0.95, h(10), nil)
	}))
	requireNoOverlaps(t, st, "tA")
	before := time.Now()
	time.Sleep(5 * time.Millisecond)

	var late, reopened *storage.Fact
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		require.NoError(t, storage.LockMemoryKey(ctx, tx, "tA", key))
		require.NoError(t, storage.TrimRevision(ctx, tx, "tA", r2.ID, h(6)))
		f := userFact(key, "2319", h(6))
		until := h(10)
		f.ValidUntil = &until
		var err error
		if late, err = storage.WriteFactRevisionLocked(ctx, tx, "tA", f, storage.WriteHistorical, ""); err != nil {
			return err
		}
		reopened, err = storage.ReopenRevision(ctx, tx, "tA", r2.ID, h(10), nil, memory.FactActive, []time.Time{h(10)}, late.ID, "2385 stated again")
		return err
	}))
	after := time.Now()
	requireNoOverlaps(t, st, "tA")
	assert.Equal(t, 3, late.Revision)
	assert.Equal(t, 4, reopened.Revision)
	assert.Equal(t, memory.FactActive, reopened.Status)
	cur, err := storage.CurrentFact(ctx, st.DB(), "tA", key)
	require.NoError(t, err)
	assert.Equal(t, reopened.ID, cur.ID)
	assert.Equal(t, "2385", cur.Object)

	for _, c := range []struct {
		at          time.Time
		now, before []string
	}{
		{h(1), []string{"2319"}, []string{"2319"}},
		{h(5), []string{"2385"}, []string{"2385"}},
		{h(7), []string{"2319"}, []string{"2385"}}, // the late statement, known only after
		{h(11), []string{"2385"}, []string{"2385"}},
	} {
		assert.Equal(t, c.now, valueAsOf(t, st, key, c.at, time.Time{}), "as of %s", c.at)
		assert.Equal(t, c.now, valueAsOf(t, st, key, c.at, after), "as of %s known after the late statement", c.at)
		assert.Equal(t, c.before, valueAsOf(t, st, key, c.at, before), "as of %s known before the late statement", c.at)
	}

	// History known before: two revisions, the second ACTIVE and open.
	hist, err := st.FactHistoryKnownAt(ctx, "tA", key, before, nil)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	assert.Equal(t, r1.ID, hist[0].ID)
	assert.Equal(t, memory.FactActive, hist[1].Status)
	assert.Nil(t, hist[1].ValidUntil)
	assert.Nil(t, hist[1].ClosedAt, "retired only later")
	hist, err = st.FactHistory(ctx, "tA", key)
	require.NoError(t, err)
	require.Len(t, hist, 4)
	assert.Equal(t, memory.FactSuperseded, hist[1].Status)
	require.NotNil(t, hist[1].ClosedAt)
	assert.Equal(t, []time.Time{h(4)}, utc(hist[1].StatedAt), "the statement after the split moved to the reopened revision")

	// ACTIVE as known: before, rev 2; now, rev 4; before anything, nothing.
	list := func(k time.Time) []int {
		fs, err := st.ListFacts(ctx, "tA", storage.FactFilter{MemoryKey: key, Statuses: []memory.FactStatus{memory.FactActive}, KnownAt: k})
		require.NoError(t, err)
		var revs []int
		for _, f := range fs {
			revs = append(revs, f.Revision)
		}
		return revs
	}
	assert.Equal(t, []int{2}, list(before))
	assert.Equal(t, []int{4}, list(after))
	assert.Empty(t, list(r1.RecordedAt.Add(-time.Second)))

	// The check can fail: a revision written over another's window is reported.
	f := userFact(key, "9999", h(1))
	until := h(3)
	f.ValidUntil = &until
	_, err = st.WriteFact(ctx, "tA", f, storage.WriteHistorical, "")
	require.NoError(t, err)
	ov, err := st.Overlaps(ctx, "tA")
	require.NoError(t, err)
	require.Len(t, ov, 1)
	assert.Equal(t, storage.Overlap{MemoryKey: key, RevisionA: 1, RevisionB: 5, From: h(1)}, storage.Overlap{MemoryKey: ov[0].MemoryKey, RevisionA: ov[0].RevisionA, RevisionB: ov[0].RevisionB, From: ov[0].From.UTC()})
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}
