package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/engramhq/engram/internal/testenv"
)

const stackFix = `eval "$(scripts/stack env)"`

// withEnv is env with each NAME=value of set replacing (or, with an empty value
// after "-", removing) the variable.
func withEnv(env []string, set ...string) []string {
	out := append([]string{}, env...)
	for _, kv := range set {
		name, _, _ := strings.Cut(strings.TrimPrefix(kv, "-"), "=")
		kept := out[:0]
		for _, e := range out {
			if n, _, _ := strings.Cut(e, "="); n != name {
				kept = append(kept, e)
			}
		}
		out = kept
		if !strings.HasPrefix(kv, "-") {
			out = append(out, kv)
		}
	}
	return out
}

// Every command that reaches Postgres or Temporal itself, run with that backend
// down or its setting missing: an unreachable backend exits 6 naming the address
// tried, the variable that sets it and the command that sets it for the local
// stack; a missing ENGRAM_DATABASE_URL exits 2 naming it and the same command.
func TestCLIErrorsNameTheFix(t *testing.T) {
	bin := testenv.Build(t, "./cmd/engram")
	env := append(freshEnv(t), "ENGRAM_EMBEDDER=ngram", "ENGRAM_API_KEY=egk_unused_0")
	run(t, bin, env, "", "migrate").ok(t, "migrate")
	pgDown, temporalDown := freePort(t), freePort(t)

	dbCommands := [][]string{
		{"migrate"}, {"migrate", "--status"},
		{"keys", "create", "--tenant", "t1", "--principal", "p1", "--role", "agent"},
		{"keys", "list"}, {"keys", "revoke", "egk_nothing"}, {"keys", "data-status"},
		{"audit", "--tenant", "t1"}, {"audit", "--tenant", "t1", "--erasures"},
		{"schema", "suggest"},
		{"serve", "--addr", "127.0.0.1:0"}, {"worker"}, {"mcp"},
		{"bench", "recall", "--facts", "10", "--evidence", "10", "--queries", "1"},
		{"eval", "--suite", "seed_en", "--out", ""},
	}
	temporalCommands := [][]string{
		{"erase", "--tenant", "t1", "--user", "u1", "--requested-by", "dpo"},
		{"maintenance", "schedules"}, {"maintenance", "run", "expiry"},
		{"keys", "rotate-data"},
		{"serve", "--addr", "127.0.0.1:0"}, {"worker"}, {"mcp"},
	}
	check := func(t *testing.T, env []string, args []string, code int, want ...string) {
		t.Helper()
		r := run(t, bin, env, "", args...)
		what := "engram " + strings.Join(args, " ")
		assert.Equal(t, code, r.code, "%s: exit code\nstderr: %s", what, r.stderr)
		for _, w := range want {
			assert.Contains(t, r.stderr, w, what)
		}
		assert.True(t, strings.HasPrefix(r.stderr, "engram: ") && strings.Count(strings.TrimSpace(r.stderr), "\n") == 0, "%s: one line: %q", what, r.stderr)
		t.Logf("%s: %s", what, strings.TrimSpace(r.stderr))
	}
	t.Run("postgres unreachable", func(t *testing.T) {
		down := withEnv(env, "ENGRAM_DATABASE_URL=postgres://engram:engram@"+pgDown+"/engram?sslmode=disable")
		for _, args := range dbCommands {
			check(t, down, args, 6, "cannot reach Postgres at "+pgDown, "ENGRAM_DATABASE_URL", stackFix)
		}
	})
	t.Run("database url missing", func(t *testing.T) {
		missing := withEnv(env, "-ENGRAM_DATABASE_URL=")
		for _, args := range dbCommands {
			check(t, missing, args, 2, "ENGRAM_DATABASE_URL is not set", stackFix)
		}
	})
	t.Run("temporal unreachable", func(t *testing.T) {
		down := withEnv(env, "TEMPORAL_ADDRESS="+temporalDown)
		for _, args := range temporalCommands {
			check(t, down, args, 6, "cannot reach Temporal at "+temporalDown+" (TEMPORAL_ADDRESS)", stackFix)
		}
	})
	t.Run("the API unreachable", func(t *testing.T) {
		down := withEnv(env, "ENGRAM_ADDR="+pgDown)
		for _, args := range [][]string{{"recall", "--user", "u1"}, {"facts", "list"}, {"review", "list"}, {"task", "get", "t1"}, {"schema", "get", "travel"}} {
			check(t, down, args, 6, "cannot reach Engram at http://"+pgDown, "ENGRAM_ADDR", "make dev")
		}
	})
	t.Run("configuration invalid", func(t *testing.T) {
		check(t, withEnv(env, "ENGRAM_EMBEDDER=bert"), []string{"migrate"}, 2, "ENGRAM_EMBEDDER")
	})
}

// CLI input errors name the flag and exit 2 before anything is sent; recall
// without --query answers with the user's current facts.
func TestCLIInputErrorsAndRecallWithoutQuery(t *testing.T) {
	s := startServe(t)
	tenant := "in-" + testenv.RandomID(6)
	agent := s.key(tenant, "agent", "agent,reviewer")
	bad := string([]byte{'b', 'u', 'd', 'g', 'e', 't', ' ', 0xff, 0xfe})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ingest", "--user", "u1", "--text", bad}, "--text: is not valid UTF-8"},
		{[]string{"ingest", "--user", bad, "--text", "预算不超过8000元"}, "--user: is not valid UTF-8"},
		{[]string{"recall", "--user", "u1", "--query", bad}, "--query: is not valid UTF-8"},
		{[]string{"facts", "history", bad}, "argument 1 is not valid UTF-8"},
		{[]string{"recall", "--user", "u1", "--k", "0"}, "--k: 0 is outside [1, 100]"},
		{[]string{"recall", "--user", "u1", "--budget", "0"}, "--budget: 0 is outside [1, 8000] tokens"},
		{[]string{"facts", "list", "--limit", "0"}, "--limit: 0 is outside [1, 1000]"},
		{[]string{"review", "list", "--limit", "0"}, "--limit: 0 is outside [1, 1000]"},
		{[]string{"erase", "--tenant", tenant, "--requested-by", "dpo"}, "--user: is required"},
		{[]string{"erase", "--tenant", tenant, "--user", "u1", "--requested-by", "dpo", "--wait-timeout", "1m"}, "--wait-timeout: only makes sense with --wait"},
		{[]string{"keys", "create", "--principal", "p"}, "--tenant: is required"},
		{[]string{"keys", "rotate-data", "--batch", "0"}, "--batch: 0 is outside"},
		{[]string{"maintenance", "run", "vacuum"}, "\"vacuum\" is not a maintenance schedule"},
	}
	for _, c := range cases {
		r := s.as(agent, c.args...)
		what := strings.ToValidUTF8("engram "+strings.Join(c.args, " "), "?")
		assert.Equal(t, 2, r.code, "%s\nstderr: %s", what, r.stderr)
		assert.Contains(t, r.stderr, c.want, what)
		assert.Empty(t, r.stdout, what)
	}
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(envValue(s.env, "ENGRAM_DATABASE_URL"))))
	defer db.Close()
	var events int
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT count(*) FROM events WHERE tenant_id = $1", tenant).Scan(&events))
	assert.Zero(t, events, "nothing was stored for the refused commands")

	s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--text", "预算不超过8000元", "--wait").ok(t, "ingest")
	out := s.as(agent, "recall", "--user", "u1").ok(t, "recall without --query")
	assert.NotContains(t, out, "nothing to remember")
	assert.Contains(t, out, "8000 CNY", "the user's ACTIVE fact")
	m := decode(t, s.as(agent, "recall", "--user", "u1", "--json"), "recall --json without --query")
	assert.Equal(t, "fact", str(m, "items", 0, "kind"))
	assert.Contains(t, str(m, "items", 0, "content"), "8000 CNY")
	assert.Contains(t, s.as(agent, "recall", "--user", "u2").ok(t, "recall of another user"), "nothing to remember", "another user's facts stay theirs")
}

// dataMaps are --json members whose keys are data (table or step names), not
// field names.
var dataMaps = map[string]bool{"counts": true, "rows": true, "resealed": true}

// camelKeys reports every object key of v that is not lowerCamelCase.
func camelKeys(v any, path string, bad *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			r := []rune(k)
			if strings.Contains(k, "_") || len(r) == 0 || !unicode.IsLower(r[0]) {
				*bad = append(*bad, path+"."+k)
			}
			if !dataMaps[k] {
				camelKeys(e, path+"."+k, bad)
			}
		}
	case []any:
		for _, e := range x {
			camelKeys(e, path+"[]", bad)
		}
	}
}

// Every command's --json is the API's casing: each key lowerCamelCase (no
// underscore, a lower-case first letter), and it parses. The erasure reports its
// steps on stderr and its tombstone on stdout.
func TestCLIJSONIsCamelCase(t *testing.T) {
	actions, _ := actionEndpoint(t)
	s := startServe(t, "ENGRAM_ACTION_URL="+actions)
	tenant := "json-" + testenv.RandomID(6)
	admin := s.key(tenant, "root", "admin,agent,reviewer")
	dir := t.TempDir()
	file := filepath.Join(dir, "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"content": "我以后尽量都坐直飞"}`+"\n"), 0o644))
	schemaFile := filepath.Join(dir, "travel.yaml")
	require.NoError(t, os.WriteFile(schemaFile, []byte(s.as(admin, "schema", "get", "travel", "--source").ok(t, "schema get --source")), 0o644))

	parsed := map[string]any{}
	jsonOf := func(args ...string) any {
		t.Helper()
		r := s.as(admin, append(args, "--json")...)
		what := "engram " + strings.Join(args, " ") + " --json"
		var v any
		require.NoError(t, json.Unmarshal([]byte(r.ok(t, what)), &v), "%s: %s", what, r.stdout)
		var bad []string
		camelKeys(v, "", &bad)
		assert.Empty(t, bad, "%s: keys not in lowerCamelCase", what)
		parsed[strings.Join(args[:min(2, len(args))], " ")] = v
		return v
	}
	in := jsonOf("ingest", "--user", "u1", "--schema", "travel", "--text", "预算不超过8000元", "--wait")
	require.Equal(t, "WRITE_STATUS_COMMITTED", str(in, "status"))
	pending := jsonOf("ingest", "--user", "u1", "--schema", "travel", "--text", "我上次坐了靠窗的位置，挺好", "--wait")
	candidate := str(pending, "pending", 0, "candidateId")
	require.NotEmpty(t, candidate, "%v", pending)
	jsonOf("ingest", "--user", "u1", "--schema", "travel", "--file", file, "--wait")
	jsonOf("recall", "--user", "u1", "--query", "预算")
	facts := jsonOf("facts", "list", "--user", "u1", "--predicate", "budget")
	key, id := str(facts, "facts", 0, "memoryKey"), str(facts, "facts", 0, "id")
	require.NotEmpty(t, key)
	jsonOf("facts", "history", key)
	jsonOf("facts", "get", id)
	jsonOf("review", "list")
	jsonOf("review", "confirm", candidate)
	jsonOf("task", "start", "trip-1", "--user", "u1")
	jsonOf("task", "plan", "trip-1", "--goal", "Lisbon", "--step", "hotel:book_hotel")
	jsonOf("task", "confirm", "trip-1")
	jsonOf("task", "step", "trip-1")
	jsonOf("task", "get", "trip-1")
	jsonOf("task", "complete", "trip-1")
	jsonOf("schema", "get", "travel")
	jsonOf("schema", "put", "--file", schemaFile)
	jsonOf("schema", "suggest", "--tenant", tenant)
	created := jsonOf("keys", "create", "--tenant", tenant, "--principal", "temp", "--role", "agent")
	assert.True(t, strings.HasPrefix(str(created, "key"), "egk_"))
	assert.Equal(t, tenant, str(created, "tenantId"))
	list := jsonOf("keys", "list", "--tenant", tenant)
	assert.NotContains(t, s.as(admin, "keys", "list", "--tenant", tenant, "--json").stdout, "keyHash", "never the key's hash")
	assert.Len(t, testenv.Dig(list, "keys").([]any), 2)
	jsonOf("keys", "revoke", str(created, "prefix"))
	jsonOf("keys", "data-status")
	jsonOf("audit", "--tenant", tenant, "--user", "u1")
	jsonOf("migrate")
	st := jsonOf("migrate", "--status")
	assert.NotEmpty(t, testenv.Dig(st, "applied"))
	assert.Equal(t, []any{}, testenv.Dig(st, "pending"))
	v := jsonOf("version")
	assert.NotEmpty(t, str(v, "version"))
	jsonOf("maintenance", "schedules")
	trig := jsonOf("maintenance", "run", "expiry")
	assert.NotEmpty(t, str(trig, "triggered"))

	started := jsonOf("erase", "--tenant", tenant, "--user", "u-none", "--requested-by", "dpo")
	assert.Equal(t, "RUNNING", str(started, "status"))
	assert.NotEmpty(t, str(started, "workflowId"))

	r := s.as(admin, "erase", "--tenant", tenant, "--user", "u1", "--requested-by", "dpo", "--reason", "ticket 7", "--wait", "--json")
	var erased any
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, "erase --wait --json")), &erased), r.stdout)
	var bad []string
	camelKeys(erased, "", &bad)
	assert.Empty(t, bad)
	assert.Equal(t, "DONE", str(erased, "status"), "%v", erased)
	assert.NotZero(t, testenv.Dig(erased, "tombstoneId"))
	assert.NotZero(t, testenv.Dig(erased, "counts", "facts"), "%v", erased)
	assert.Contains(t, r.stderr, "erase: step ", "progress on stderr")
	assert.Contains(t, r.stderr, "erase: done in ")
	t.Logf("erase --wait stderr:\n%s", r.stderr)
	ers := jsonOf("audit", "--tenant", tenant, "--erasures")
	assert.NotEmpty(t, ers)
	t.Logf("commands checked: %d", len(parsed))
}
