package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// The write path's prepared selects (prepared.go) return what the bun queries they
// replace returned: every shape of RecentTurns, Revisions through the pool and
// inside a transaction (prepared on the transaction's connection), and
// ActiveBySubjectPredicate, each for its own tenant only, called often enough that
// Postgres switches to its generic plan (after five calls on a connection).
func TestPreparedSelectsMatchTheirQueries(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	turns := map[string][]string{} // tenant → texts, oldest first
	var ids = map[string][]string{}
	for _, tenant := range []string{"tA", "tB"} {
		for i := range 6 {
			ev := newEvent(fmt.Sprintf("k%d", i), fmt.Sprintf("%s turn %d", tenant, i))
			ev.SessionID = []string{"s1", "s2"}[i%2]
			ev.OccurredAt = t0.Add(time.Duration(i) * time.Minute)
			stored, _, err := st.InsertEvent(ctx, tenant, ev)
			require.NoError(t, err)
			evd, err := st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: stored.ID, Kind: "TURN", Content: ev.Content,
				UserID: "u1", SessionID: ev.SessionID, OccurredAt: ev.OccurredAt}, ev.Content)
			require.NoError(t, err)
			turns[tenant] = append(turns[tenant], ev.Content)
			ids[tenant] = append(ids[tenant], evd.ID)
		}
	}
	for range 8 { // past the generic plan
		got, err := st.RecentTurns(ctx, "tA", storage.TurnQuery{UserID: "u1", Before: t0.Add(4 * time.Minute), Limit: 2})
		require.NoError(t, err)
		assert.Equal(t, []string{"tA turn 3", "tA turn 2"}, got)
		got, err = st.RecentTurns(ctx, "tA", storage.TurnQuery{UserID: "u1", Before: t0.Add(4 * time.Minute), Inclusive: true, ExcludeID: ids["tA"][3]})
		require.NoError(t, err)
		assert.Equal(t, []string{"tA turn 4", "tA turn 2", "tA turn 1", "tA turn 0"}, got, "no limit, inclusive, one excluded")
		got, err = st.RecentTurns(ctx, "tB", storage.TurnQuery{UserID: "u1", SessionID: "s2", Before: t0.Add(time.Hour), Limit: 5})
		require.NoError(t, err)
		assert.Equal(t, []string{"tB turn 5", "tB turn 3", "tB turn 1"}, got)
		got, err = st.RecentTurns(ctx, "tB", storage.TurnQuery{UserID: "u2", Before: t0.Add(time.Hour), Limit: 5})
		require.NoError(t, err)
		assert.Empty(t, got)
	}

	key := "USER:u1/budget"
	for i, obj := range []string{"100 CNY", "200 CNY", "300 CNY"} {
		_, err := st.WriteFact(ctx, "tA", userFact(key, obj, t0.Add(time.Duration(i)*time.Hour)), storage.WriteCurrent, "budget")
		require.NoError(t, err)
	}
	_, err := st.WriteFact(ctx, "tB", userFact(key, "999 CNY", t0), storage.WriteCurrent, "budget")
	require.NoError(t, err)
	for range 8 {
		revs, err := storage.Revisions(ctx, st.DB(), "tA", key)
		require.NoError(t, err)
		require.Len(t, revs, 3)
		for i, f := range revs {
			assert.Equal(t, i+1, f.Revision)
			assert.Equal(t, "tA", f.TenantID)
		}
		assert.Equal(t, "300 CNY", revs[2].Object)
		require.NoError(t, st.DB().RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			in, err := storage.Revisions(ctx, tx, "tB", key)
			if err == nil {
				assert.Len(t, in, 1)
				assert.Equal(t, "999 CNY", in[0].Object)
			}
			return err
		}))
		active, err := storage.ActiveBySubjectPredicate(ctx, st.DB(), "tA", "u1", "USER", "budget")
		require.NoError(t, err)
		require.Len(t, active, 1, "subject compared without case")
		assert.Equal(t, "300 CNY", active[0].Object)
		other, err := storage.ActiveBySubjectPredicate(ctx, st.DB(), "tA", "u9", "user", "budget")
		require.NoError(t, err)
		assert.Empty(t, other, "another user's USER-scope fact")
	}
}

// EventsByKey passes the keys as one text[] parameter: keys with quotes,
// backslashes, commas, braces or the word NULL come back as themselves.
func TestEventsByKeyOddKeys(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	keys := []string{`a"b`, `c\d`, `e,f`, `{g}`, `NULL`, `ünï 键`, ` sp `, `h\"i`}
	for _, k := range keys {
		_, _, err := st.InsertEvent(ctx, "tA", newEvent(k, "text of "+k))
		require.NoError(t, err)
	}
	_, _, err := st.InsertEvent(ctx, "tB", newEvent(`a"b`, "other tenant"))
	require.NoError(t, err)
	got, err := st.EventsByKey(ctx, "tA", append(keys, "missing"))
	require.NoError(t, err)
	var found []string
	for _, e := range got {
		found = append(found, e.IdempotencyKey)
	}
	assert.ElementsMatch(t, keys, found)
	one, err := st.EventsByKey(ctx, "tB", []string{`a"b`})
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.NotEqual(t, got[0].ID, one[0].ID)
}

// preparedOnConn is how many statements whose text ends with suffix the pool's one
// connection has prepared, and how often it ran them with a generic and a custom
// plan (pg_prepared_statements lists the session's own).
func preparedOnConn(t *testing.T, db *bun.DB, suffix string) (n, generic, custom int) {
	t.Helper()
	err := db.NewRaw("SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements WHERE right(statement, ?) = ?",
		len(suffix), suffix).Scan(context.Background(), &n, &generic, &custom)
	require.NoError(t, err)
	return n, generic, custom
}

// The one prepared-statement cache (storage.Conn): a statement is prepared once
// per connection, through the pool or in a transaction on it, and run with a
// generic plan; one the server lost (DEALLOCATE) is prepared again, and run
// again at once outside a transaction (inside one the transaction is aborted,
// and the next one prepares it); a connection keeps at most 256.
func TestStatementsPreparedOncePerConnection(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	stored, _, err := st.InsertEvent(ctx, "tA", newEvent("k1", "I live in Berlin"))
	require.NoError(t, err)
	key := "USER:u1/city"
	_, err = st.WriteFact(ctx, "tA", userFact(key, "Berlin", t0), storage.WriteCurrent, "city")
	require.NoError(t, err)

	rd := st.Reader(5*time.Second, 1) // one connection: every call below runs on it
	t.Cleanup(func() { _ = rd.Close() })
	const getEvent = `FROM "events" AS "event" WHERE (tenant_id = $1 AND id = $2)`
	const revisions = `WHERE (tenant_id = $1 AND memory_key = $2) ORDER BY "valid_from" ASC, "revision" ASC`
	for range 10 {
		e, err := rd.GetEvent(ctx, "tA", stored.ID)
		require.NoError(t, err)
		assert.Equal(t, "I live in Berlin", e.Content)
	}
	n, generic, custom := preparedOnConn(t, rd.DB(), getEvent)
	assert.Equal(t, []int{1, 10, 0}, []int{n, generic, custom}, "GetEvent: prepared once, ten generic plans")

	for range 3 {
		revs, err := storage.Revisions(ctx, rd.DB(), "tA", key)
		require.NoError(t, err)
		require.Len(t, revs, 1)
		require.NoError(t, rd.DB().RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			revs, err := storage.Revisions(ctx, tx, "tA", key)
			assert.Len(t, revs, 1)
			return err
		}))
	}
	n, generic, _ = preparedOnConn(t, rd.DB(), revisions)
	assert.Equal(t, []int{1, 6}, []int{n, generic}, "Revisions: one statement for the pool and the transactions")

	_, err = rd.DB().ExecContext(ctx, "DEALLOCATE ALL")
	require.NoError(t, err)
	e, err := rd.GetEvent(ctx, "tA", stored.ID)
	require.NoError(t, err, "a statement the server lost is prepared again")
	assert.Equal(t, stored.ID, e.ID)
	n, generic, _ = preparedOnConn(t, rd.DB(), getEvent)
	assert.Equal(t, []int{1, 1}, []int{n, generic})

	err = rd.DB().RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := storage.Revisions(ctx, tx, "tA", key)
		return err
	})
	require.ErrorContains(t, err, "does not exist", "lost inside a transaction: not run again")
	require.NoError(t, rd.DB().RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		_, err := storage.Revisions(ctx, tx, "tA", key)
		return err
	}), "the next transaction prepares it again")

	for i := range 300 {
		var got int
		require.NoError(t, rd.DB().DB.QueryRowContext(ctx, fmt.Sprintf("SELECT $1::int + %d", i), 1).Scan(&got))
		require.Equal(t, 1+i, got)
	}
	var kept int
	require.NoError(t, rd.DB().NewRaw("SELECT count(*) FROM pg_prepared_statements").Scan(ctx, &kept))
	assert.LessOrEqual(t, kept, 256)
	assert.Positive(t, kept)
}
