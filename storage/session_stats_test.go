package storage_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// sessionStatsDrift is how many rows of tenant's session_stats differ from a
// count over its sessions.
func sessionStatsDrift(t *testing.T, st *storage.Store, tenant string) int {
	t.Helper()
	kept := "SELECT user_id, sessions, turns FROM session_stats WHERE tenant_id = ?0"
	counted := "SELECT user_id, count(*), sum(turn_count) FROM sessions WHERE tenant_id = ?0 GROUP BY user_id"
	var n int
	require.NoError(t, st.DB().NewRaw(fmt.Sprintf("SELECT count(*) FROM ((%[1]s EXCEPT ALL %[2]s) UNION ALL (%[2]s EXCEPT ALL %[1]s)) d", kept, counted), tenant).
		Scan(context.Background(), &n))
	return n
}

// The sessions' counts and lengths recall scores sessions with (session_stats)
// are kept in step with the sessions by their triggers: under concurrent appends
// of turns to the same users' sessions (the same rows upserted at once, the
// appends' own retries), a rolled-back append, and the erasure of a user, after
// which no row of the user's is left.
func TestSessionStatsKeptUnderConcurrency(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	const tenant = "t-sess"
	users := []string{"u1", "u2", "u3"}
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	// Six writers append 40 turns each to twelve sessions, and replay each turn
	// once after the next (a retried request). Workers at the same step write the
	// same instant, and a slow worker's turn can arrive older than every turn of
	// a full window: it is then taken for a replay of a turn that aged out and
	// not appended (AppendTurn's rule), so the count to expect is that of the
	// appends that said appended, and no replay may say it.
	var appended, replayed atomic.Int64
	inParallel(t, 6, func(w int) error {
		type sent struct {
			u, sid string
			turn   storage.Turn
		}
		var prev *sent
		for i := range 40 {
			u := users[(w+i)%len(users)]
			sid := fmt.Sprintf("%s-s%d", u, i%4)
			turn := storage.Turn{EvidenceID: fmt.Sprintf("ev-%d-%d", w, i), Text: "hello", At: base.Add(time.Duration(i) * time.Minute)}
			_, ok, err := st.AppendTurn(ctx, tenant, sid, u, turn, 8)
			if err != nil {
				return err
			}
			if ok {
				appended.Add(1)
			}
			if prev != nil {
				if _, ok, err := st.AppendTurn(ctx, tenant, prev.sid, prev.u, prev.turn, 8); err != nil {
					return err
				} else if ok {
					replayed.Add(1)
				}
			}
			prev = &sent{u, sid, turn}
		}
		return nil
	})
	require.Zero(t, replayed.Load(), "replayed turns appended again")
	require.Greater(t, appended.Load(), int64(120), "appended turns")
	require.Zero(t, sessionStatsDrift(t, st, tenant), "after concurrent appends")
	var turns int64
	require.NoError(t, st.DB().NewRaw("SELECT sum(turns) FROM session_stats WHERE tenant_id = ?", tenant).Scan(ctx, &turns))
	require.Equal(t, appended.Load(), turns)

	// A rolled-back append leaves no trace.
	tx, err := st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO sessions (tenant_id, id, user_id, turn_count) VALUES (?, 'u1-rolled', 'u1', 3)", tenant)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE sessions SET turn_count = turn_count + 1 WHERE tenant_id = ? AND user_id = 'u2'", tenant)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.Zero(t, sessionStatsDrift(t, st, tenant), "after a rollback")

	// A session created without a user and given one moves to that user's counts.
	_, err = st.DB().ExecContext(ctx, "INSERT INTO sessions (tenant_id, id, turn_count) VALUES (?, 'anon', 2)", tenant)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, "UPDATE sessions SET user_id = 'u3', turn_count = turn_count + 1 WHERE tenant_id = ? AND id = 'anon'", tenant)
	require.NoError(t, err)
	require.Zero(t, sessionStatsDrift(t, st, tenant), "after a session got its user")
	require.Zero(t, count(t, st, "session_stats", "tenant_id = ? AND user_id = ''", tenant))

	subj := storage.ErasureSubject{TenantID: tenant, UserID: "u1"}
	eraseAll(t, st, subj, 3)
	require.Zero(t, count(t, st, "session_stats", "tenant_id = ? AND user_id = 'u1'", tenant), "u1's counts after its erasure")
	require.Zero(t, sessionStatsDrift(t, st, tenant), "after erasure")
	require.NotZero(t, count(t, st, "session_stats", "tenant_id = ? AND user_id = 'u2'", tenant))
}
