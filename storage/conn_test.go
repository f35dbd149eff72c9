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
