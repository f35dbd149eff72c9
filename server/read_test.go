package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	"github.com/engramhq/engram/config"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/server/servertest"
	"github.com/engramhq/engram/storage"
)

// The API's reads run on the read store (Deps.ReadStore): a read whose statement
// cannot finish (its table is locked by another transaction) ends at the read
// store's timeout with deadline_exceeded naming the read and the limit, never a
// driver's "i/o timeout" or an internal error, and Postgres cancelled its
// statement: none of it runs afterwards. Once the lock is gone, each read
// answers again (the pool recovered).
func TestReadDeadlineCancelsStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testenv.Store(t)
	const limit = 300 * time.Millisecond
	reader := st.Reader(limit, 4)
	t.Cleanup(func() { reader.Close() })
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	cfg.TaskQueue = testenv.TaskQueue(t)
	h, err := server.New(server.Deps{Store: st, ReadStore: reader, Temporal: testenv.Temporal(t), Config: cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	url := servertest.Serve(t, h)

	tenant := "tR-" + testenv.RandomID(8)
	key, err := st.CreateAPIKey(ctx, &storage.APIKey{TenantID: tenant, Principal: "rita", Roles: []string{"agent", "reviewer"}})
	require.NoError(t, err)
	c := client.New(url, key, client.WithRetry(1, 0))
	f, err := st.WriteFact(ctx, tenant, &storage.Fact{
		MemoryKey: "USER:u1/budget", Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeConstraint,
		Subject: "user", Predicate: "budget", Object: "6000 CNY", Content: "budget at most 6000 CNY",
		Confidence: 0.9, ValidFrom: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	}, storage.WriteCurrent, "")
	require.NoError(t, err)

	reads := []struct {
		op, table string
		call      func(ctx context.Context) error
	}{
		{"list facts", "facts", func(ctx context.Context) error {
			_, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
			return err
		}},
		{"get fact", "facts", func(ctx context.Context) error { _, err := c.GetFact(ctx, f.ID); return err }},
		{"fact history", "facts", func(ctx context.Context) error { _, err := c.FactHistory(ctx, f.MemoryKey); return err }},
		{"list pending", "candidates", func(ctx context.Context) error { _, err := c.ListPending(ctx, "", 10); return err }},
		{"get task", "tasks", func(ctx context.Context) error { _, err := c.GetTask(ctx, "no-such-task"); return err }},
		{"get schema", "schemas", func(ctx context.Context) error { _, err := c.GetSchema(ctx, "no-such-schema", 0); return err }},
	}
	answers := func(what string) {
		t.Helper()
		for _, r := range reads {
			if err := r.call(ctx); err != nil && connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("%s %s: %v", r.op, what, err)
			}
		}
	}
	answers("before the lock")

	tx, err := st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	_, err = tx.ExecContext(ctx, "LOCK TABLE facts, candidates, tasks, schemas IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	for _, r := range reads {
		start := time.Now()
		err := r.call(ctx)
		took := time.Since(start)
		require.Error(t, err, "%s answered while %s was locked", r.op, r.table)
		assert.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(err), "%s: %v", r.op, err)
		assert.Contains(t, err.Error(), r.op+" did not finish within 300ms", "%s: want the read and its limit", r.op)
		assert.NotContains(t, err.Error(), "i/o timeout", r.op)
		assert.Less(t, took, limit+200*time.Millisecond, "%s: answered after %s, want within its %s + 200ms", r.op, took, limit)
		// Postgres ended the statement (the lock is still held: only its
		// statement_timeout could end it).
		deadline := time.Now().Add(time.Second)
		for {
			var running []string
			require.NoError(t, st.DB().NewRaw(`SELECT query FROM pg_stat_activity WHERE datname = current_database()
				AND state = 'active' AND pid <> pg_backend_pid()`).Scan(ctx, &running))
			if len(running) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: a statement still runs in Postgres a second after the read returned: %s", r.op, strings.Join(running, " | "))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	require.NoError(t, tx.Rollback())
	answers("after the lock")
}
