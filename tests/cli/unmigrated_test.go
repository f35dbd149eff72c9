package cli

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/engramhq/engram/internal/testenv"
)

// Every command that opens the database, and serve, worker and mcp, run against a
// fresh database that was never migrated: each exits 5 saying the database is not
// migrated and naming `engram migrate`, never a relation that does not exist, and
// leaves the database as empty as it found it. With one migration's record
// removed the same commands say how many are pending; migrated, they work.
func TestUnmigratedDatabase(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	dsn := testenv.EmptyDatabaseURL(t)
	env := append(cleanEnv(),
		"ENGRAM_DATABASE_URL="+dsn,
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+testenv.Namespace(),
		"ENGRAM_TASK_QUEUE="+testenv.TaskQueue(t),
		"ENGRAM_ADDR="+freePort(t),
		"ENGRAM_API_KEY=egk_unused",
	)
	commands := [][]string{
		{"keys", "create", "--tenant", "t1", "--principal", "p1", "--role", "agent"},
		{"keys", "list", "--tenant", "t1"},
		{"keys", "revoke", "egk_nothing"},
		{"keys", "data-status"},
		{"audit", "--tenant", "t1", "--user", "u1"},
		{"schema", "suggest"},
		{"serve"},
		{"worker"},
		{"mcp"},
	}
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	defer db.Close()
	tables := func() int {
		var n int
		require.NoError(t, db.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n))
		return n
	}
	check := func(want string) {
		t.Helper()
		for _, args := range commands {
			r := run(t, bin, env, "", args...)
			what := strings.Join(args, " ")
			assert.Equal(t, 5, r.code, "%s: exit code\nstderr: %s", what, r.stderr)
			assert.Contains(t, r.stderr, want, what)
			assert.Contains(t, r.stderr, "run `engram migrate`", what)
			assert.NotContains(t, r.stderr, "does not exist", what)
			if args[0] == "keys" && args[1] == "create" {
				t.Logf("engram %s: %s", what, strings.TrimSpace(r.stderr))
			}
		}
	}
	check("the database is not migrated (it has none of engram's tables)")
	assert.Equal(t, 0, tables(), "the checks create no table")

	run(t, bin, env, "", "migrate").ok(t, "migrate")
	// The last migration's record removed (as a database migrated by an older
	// engram), then put back.
	var last string
	var group int64
	require.NoError(t, db.QueryRowContext(context.Background(), "DELETE FROM bun_migrations WHERE id = (SELECT max(id) FROM bun_migrations) RETURNING name, group_id").Scan(&last, &group))
	check("1 of ")
	check("migrations pending (" + last)
	_, err := db.ExecContext(context.Background(), "INSERT INTO bun_migrations (name, group_id) VALUES ($1, $2)", last, group)
	require.NoError(t, err)

	assert.Contains(t, run(t, bin, env, "", "migrate").ok(t, "migrate again"), "database is up to date")
	key := run(t, bin, env, "", "keys", "create", "--tenant", "t1", "--principal", "p1", "--role", "agent").ok(t, "keys create")
	assert.True(t, strings.HasPrefix(strings.TrimSpace(key), "egk_"), key)
}
