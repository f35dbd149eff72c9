package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/privacy"
	"github.com/engramhq/engram/storage"
)

// A Reader reads what its store wrote, with the store's protection, on a pool of
// its own whose sessions are read-only and bounded by its statement timeout
// (Postgres cancels a statement past it: SQLSTATE 57014); closing it leaves the
// store and its prepared statements working.
func TestReaderBoundsItsStatementsAndOnlyReads(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1/budget"
	_, err := st.WriteFact(ctx, "tA", userFact(key, "6000 CNY", t0), storage.WriteCurrent, "")
	require.NoError(t, err)
	// The store's prepared statements exist before the reader's.
	_, err = st.GetSchema(ctx, "tA", "none", 0)
	require.ErrorIs(t, err, storage.ErrNotFound)

	rd := st.Reader(300*time.Millisecond, 2)
	assert.Equal(t, 300*time.Millisecond, rd.StatementTimeout())
	assert.Zero(t, st.StatementTimeout())

	facts, err := rd.ListFacts(ctx, "tA", storage.FactFilter{MemoryKey: key})
	require.NoError(t, err)
	require.Len(t, facts, 1)
	assert.Equal(t, "6000 CNY", facts[0].Object)
	_, err = rd.GetSchema(ctx, "tA", "none", 0) // a prepared statement of the reader's pool
	require.ErrorIs(t, err, storage.ErrNotFound)

	var timeout, readOnly string
	require.NoError(t, rd.DB().NewRaw("SELECT current_setting('statement_timeout'), current_setting('default_transaction_read_only')").Scan(ctx, &timeout, &readOnly))
	assert.Equal(t, "300ms", timeout)
	assert.Equal(t, "on", readOnly)

	_, err = rd.DB().ExecContext(ctx, "SELECT pg_sleep(1)")
	assert.Equal(t, "57014", storage.SQLState(err), "a statement past the reader's timeout: %v", err)
	_, err = rd.WriteFact(ctx, "tA", userFact(key, "8000 CNY", t0.Add(time.Hour)), storage.WriteCurrent, "")
	assert.Equal(t, "25006", storage.SQLState(err), "a write through the reader: %v", err)

	// Protection is the store's, whether set before or after the reader was made.
	kr, err := privacy.NewKeyring("k1", map[string][]byte{"k1": make([]byte, 32)})
	require.NoError(t, err)
	require.NoError(t, st.SetProtection(storage.Protection{Keyring: kr}))
	assert.Same(t, kr, rd.Protection().Keyring)
	later := st.Reader(time.Second, 1)
	defer later.Close()
	assert.Same(t, kr, later.Protection().Keyring)
	require.NoError(t, st.SetProtection(storage.Protection{}))
	assert.Nil(t, rd.Protection().Keyring)

	require.NoError(t, rd.Close())
	facts, err = st.ListFacts(ctx, "tA", storage.FactFilter{MemoryKey: key})
	require.NoError(t, err)
	assert.Len(t, facts, 1)
	_, err = st.GetSchema(ctx, "tA", "none", 0)
	require.ErrorIs(t, err, storage.ErrNotFound, "the store's prepared statement after the reader closed")
	_, err = st.DB().ExecContext(ctx, "SELECT pg_sleep(0.4)")
	require.NoError(t, err, "the store's statements have no timeout")
}
