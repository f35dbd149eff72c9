package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
)

// actionEndpoint answers every step APPLIED once per key (activities/TASK_ACTIONS.md).
func actionEndpoint(t *testing.T) (string, func() int) {
	var mu sync.Mutex
	applied := map[string]bool{}
	answer := func(w http.ResponseWriter, ok bool) {
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			fmt.Fprint(w, `{"status":"NOT_APPLIED"}`)
			return
		}
		fmt.Fprint(w, `{"status":"APPLIED","result":{"booking":"B-1"}}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /actions", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		applied[r.Header.Get("Idempotency-Key")] = true
		mu.Unlock()
		answer(w, true)
	})
	mux.HandleFunc("GET /actions/status/{key}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := applied[r.PathValue("key")]
		mu.Unlock()
		answer(w, ok)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/actions", func() int { mu.Lock(); defer mu.Unlock(); return len(applied) }
}

func TestCLI(t *testing.T) {
	actions, effects := actionEndpoint(t)
	s := startServe(t, "ENGRAM_ACTION_URL="+actions)
	tenant := "cli-" + testenv.RandomID(6)
	agent := s.key(tenant, "travel-agent", "agent")
	reviewer := s.key(tenant, "alice", "reviewer")
	admin := s.key(tenant, "root", "admin")
	ctx := context.Background()

	t.Run("ingest one event and recall it", func(t *testing.T) {
		out := s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--text", "预算不超过8000元", "--wait").ok(t, "ingest")
		assert.Contains(t, out, "COMMITTED")
		assert.Contains(t, out, "budget 8000 CNY")
		assert.Contains(t, out, "CANDIDATE")

		m := decode(t, s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--task", "trip-1",
			"--text", "这次旅行预算调整到10000元", "--wait", "--json", "--idempotency-key", "trip-budget-1"), "ingest --json")
		assert.Equal(t, "WRITE_STATUS_COMMITTED", str(m, "status"))
		assert.Equal(t, "trip-budget-1", str(m, "idempotencyKey"))
		assert.Equal(t, "CREATE", str(m, "outcomes", 0, "action"))

		// The same key again joins the same write: nothing is written twice.
		again := decode(t, s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--task", "trip-1",
			"--text", "这次旅行预算调整到10000元", "--wait", "--json", "--idempotency-key", "trip-budget-1"), "ingest again")
		assert.Equal(t, str(m, "eventId"), str(again, "eventId"))

		out = s.as(agent, "recall", "--user", "u1", "--schema", "travel", "--task", "trip-1", "--query", "这次旅行的预算是多少").ok(t, "recall")
		assert.Contains(t, out, "## constraints")
		assert.Contains(t, out, "RETRIEVERS")
		i10, i8 := strings.Index(out, "10000 CNY"), strings.Index(out, "8000 CNY (USER")
		require.True(t, i10 >= 0 && i8 >= 0, out)
		assert.Less(t, i10, i8, "this trip's budget leads")

		rc := decode(t, s.as(agent, "recall", "--user", "u1", "--schema", "travel", "--query", "预算", "--k", "3", "--json"), "recall --json")
		assert.Contains(t, str(rc, "context"), "8000")
		assert.LessOrEqual(t, len(testenv.Dig(rc, "items").([]any)), 3)
	})

	t.Run("ingest a JSONL file in batches, twice", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "history.jsonl")
		lines := []string{
			`{"content": "我以后尽量都坐直飞", "occurred_at": "2026-01-02T10:00:00Z"}`,
			`# a comment line is skipped`,
			`{"content": "我的订单12345没收到", "schema": "customer_service", "session_id": "s1"}`,
			``,
			`{"content": "我喜欢靠过道的座位", "user_id": "u2"}`,
		}
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		r := s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--file", file, "--batch-size", "2", "--wait")
		out := r.ok(t, "ingest --file")
		assert.Contains(t, out, "3 event(s) in 2 batch(es)")
		assert.Contains(t, r.stderr, "ingest", "a progress bar on stderr")
		assert.Contains(t, r.stderr, "3/3")

		facts, err := s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "flight_type"})
		require.NoError(t, err)
		require.Len(t, facts, 1)
		assert.Equal(t, "direct", facts[0].Object)
		orders, err := s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "order_not_received"})
		require.NoError(t, err)
		assert.Len(t, orders, 1, "the line's own schema is used")

		// Importing the same file again writes nothing new: the keys derive from the file.
		m := decode(t, s.as(agent, "ingest", "--user", "u1", "--schema", "travel", "--file", file, "--wait", "--json"), "ingest --file again")
		assert.Len(t, testenv.Dig(m, "results").([]any), 3)
		all, err := s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
		require.NoError(t, err)
		n := len(all)
		facts, err = s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "flight_type"})
		require.NoError(t, err)
		assert.Len(t, facts, 1)
		all, err = s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
		require.NoError(t, err)
		assert.Equal(t, n, len(all))

		// stdin works too.
		r = run(t, s.bin, append(append([]string{}, s.env...), "ENGRAM_ADDR="+s.url, "ENGRAM_API_KEY="+agent),
			`{"content": "hello from stdin"}`+"\n", "ingest", "--user", "u3", "--file", "-", "--no-progress")
		assert.Contains(t, r.ok(t, "ingest --file -"), "1 event(s)")
	})

	var budgetKey string
	t.Run("facts list, history, get", func(t *testing.T) {
		out := s.as(agent, "facts", "list", "--user", "u1").ok(t, "facts list")
		assert.Contains(t, out, "FACT")
		assert.Contains(t, out, "8000 CNY")
		assert.Contains(t, out, "task:trip-1")
		m := decode(t, s.as(agent, "facts", "list", "--user", "u1", "--predicate", "budget", "--scope", "user", "--json"), "facts list --json")
		require.Len(t, testenv.Dig(m, "facts").([]any), 1)
		budgetKey = str(m, "facts", 0, "memoryKey")
		factID := str(m, "facts", 0, "id")
		require.NotEmpty(t, budgetKey)

		out = s.as(agent, "facts", "history", budgetKey).ok(t, "facts history")
		assert.Contains(t, out, "ACTIVE")
		assert.Contains(t, out, budgetKey)
		out = s.as(agent, "facts", "get", factID).ok(t, "facts get")
		assert.Contains(t, out, "evidence:")
		out = s.as(agent, "facts", "list", "--user", "u1", "--status", "superseded").ok(t, "facts list --status")
		assert.Contains(t, out, "no facts")
	})

	t.Run("review list, confirm, edit, reject", func(t *testing.T) {
		pendingOf := func(text string) string {
			m := decode(t, s.as(agent, "ingest", "--user", "u9", "--schema", "travel", "--text", text, "--wait", "--json"), "ingest inferred")
			require.Equal(t, "WRITE_STATUS_PENDING_REVIEW", str(m, "status"), "%v", m)
			return str(m, "pending", 0, "candidateId")
		}
		seat := pendingOf("我上次坐了靠窗的位置，挺好")
		out := s.as(reviewer, "review", "list", "--user", "u9").ok(t, "review list")
		assert.Contains(t, out, seat)
		assert.Contains(t, out, "inferred")
		out = s.as(reviewer, "review", "confirm", seat, "--note", "asked the user").ok(t, "review confirm")
		assert.Contains(t, out, "committed")
		facts, err := s.client(admin).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u9", Predicate: "seat"})
		require.NoError(t, err)
		require.Len(t, facts, 1)
		assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, facts[0].Status)

		// A decided candidate cannot be decided again.
		r := s.as(reviewer, "review", "reject", seat)
		assert.NotEqual(t, 0, r.code)
		assert.Contains(t, r.stderr, "engram:")

		out = s.as(reviewer, "review", "list", "--json").ok(t, "review list --json")
		assert.NotContains(t, out, seat)
	})

	t.Run("task start, plan, confirm, step, get, complete", func(t *testing.T) {
		out := s.as(agent, "task", "start", "trip-9", "--user", "u1").ok(t, "task start")
		assert.Contains(t, out, "CREATED")
		out = s.as(agent, "task", "plan", "trip-9", "--goal", "Lisbon", "--step", `hotel:book_hotel:{"city":"Lisbon"}`, "--step", "car:rent_car").ok(t, "task plan")
		assert.Contains(t, out, "WAITING_CONFIRMATION")
		assert.Contains(t, out, "book_hotel")
		r := s.as(agent, "task", "step", "trip-9")
		assert.Equal(t, 5, r.code, "a step before confirmation is refused: %s", r.stderr)
		assert.Contains(t, r.stderr, "confirm it first")
		out = s.as(agent, "task", "confirm", "trip-9", "--reason", "ok").ok(t, "task confirm")
		assert.Contains(t, out, "EXECUTING")
		out = s.as(agent, "task", "step", "trip-9").ok(t, "task step")
		assert.Contains(t, out, "DONE")
		out = s.as(agent, "task", "step", "trip-9", "car").ok(t, "task step car")
		assert.Contains(t, out, "rent_car")
		m := decode(t, s.as(agent, "task", "get", "trip-9", "--json"), "task get --json")
		assert.Equal(t, "TASK_STATE_EXECUTING", str(m, "state"))
		assert.Len(t, testenv.Dig(m, "done").([]any), 2)
		out = s.as(agent, "task", "complete", "trip-9").ok(t, "task complete")
		assert.Contains(t, out, "COMPLETED")
		assert.Equal(t, 2, effects())
		out = s.as(agent, "task", "get", "trip-9").ok(t, "task get")
		assert.Contains(t, out, "COMPLETED")
		assert.Contains(t, out, "SEQ")
	})

	t.Run("schema get and put", func(t *testing.T) {
		out := s.as(agent, "schema", "get", "travel").ok(t, "schema get")
		assert.Contains(t, out, "built-in")
		src := s.as(agent, "schema", "get", "travel", "--source").ok(t, "schema get --source")
		require.Contains(t, src, "name: travel")
		file := filepath.Join(t.TempDir(), "travel.yaml")
		require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
		r := s.as(agent, "schema", "put", "--file", file)
		assert.Equal(t, 3, r.code, "agents may not store schemas: %s", r.stderr)
		assert.Contains(t, r.stderr, "permission denied")
		m := decode(t, s.as(admin, "schema", "put", "--file", file, "--expected-version", "0", "--json"), "schema put")
		assert.Equal(t, "travel", str(m, "name"))
		v := testenv.Dig(m, "version").(float64)
		r = s.as(admin, "schema", "put", "--file", file, "--expected-version", "0")
		assert.Equal(t, 5, r.code, "a stale expected version is a conflict: %s", r.stderr)
		g := decode(t, s.as(admin, "schema", "get", "travel", "--json"), "schema get --json")
		assert.Equal(t, v, testenv.Dig(g, "schema", "version"))
		assert.Equal(t, []any{v}, testenv.Dig(g, "versions"))
	})
}

// TestCLIBadInput runs every command with bad input: each fails with a message
// naming the flag or argument and the documented exit code, and nothing is written.
func TestCLIBadInput(t *testing.T) {
	s := startServe(t)
	tenant := "bad-" + testenv.RandomID(6)
	agent := s.key(tenant, "agent", "agent")
	bound := s.key(tenant, "bound-agent", "agent", "--user", "u1")
	reviewer := s.key(tenant, "rev", "reviewer")
	admin := s.key(tenant, "root", "admin")
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	goodJSONL := write("good.jsonl", `{"content": "预算不超过8000元"}`+"\n")
	badJSONL := write("bad.jsonl", `{"content": "预算不超过8000元"}`+"\n"+`{"content": 42}`+"\n")
	emptyLine := write("empty.jsonl", `{"content": "预算不超过8000元"}`+"\n"+`{"content": "  "}`+"\n")
	unknownField := write("unknown.jsonl", `{"content": "hi", "colour": "red"}`+"\n")
	noEvents := write("none.jsonl", "\n# nothing\n")
	badSchema := write("bad.yaml", "name: travel\nversion: x\npredicates: 7\n")
	src := s.as(agent, "schema", "get", "travel", "--source").ok(t, "schema get --source")
	goodSchema := write("travel.yaml", src)
	down := "127.0.0.1:" + strings.Split(freePort(t), ":")[1]
	long := strings.Repeat("k", 201)
	uuid := "0b0e5b36-3a0a-4d4c-9d1e-1b2c3d4e5f60"

	cases := []struct {
		name string
		key  string
		args []string
		code int
		want string
	}{
		{"ingest without text", agent, []string{"ingest", "--user", "u1"}, 2, "--text: is required"},
		{"ingest empty text", agent, []string{"ingest", "--user", "u1", "--text", " "}, 2, "--text: is empty"},
		{"ingest text and file", agent, []string{"ingest", "--user", "u1", "--text", "x", "--file", goodJSONL}, 2, "--text: give either --text or --file"},
		{"ingest without user", agent, []string{"ingest", "--text", "预算不超过8000元"}, 2, "--user: is empty"},
		{"ingest for a user the key does not allow", bound, []string{"ingest", "--user", "u2", "--text", "预算不超过8000元"}, 3, "permission denied"},
		{"ingest bad time", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--at", "yesterday"}, 2, "--at: \"yesterday\" is not an RFC 3339 time"},
		{"ingest far future", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--at", "2999-01-01T00:00:00Z"}, 2, "--at: "},
		{"ingest unknown schema", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--schema", "nope"}, 2, "--schema: unknown schema \"nope\""},
		{"ingest long key", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--idempotency-key", long}, 2, "--idempotency-key: is 201 characters"},
		{"ingest wait timeout too long", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--wait", "--wait-timeout", "10m"}, 2, "--wait-timeout: 10m0s is outside"},
		{"ingest wait timeout without wait", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--wait-timeout", "10s"}, 2, "--wait-timeout: only makes sense with --wait"},
		{"ingest unknown flag", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--colour", "red"}, 2, "unknown flag: --colour"},
		{"ingest positional", agent, []string{"ingest", "hello"}, 2, "unknown command \"hello\""},
		{"ingest file missing", agent, []string{"ingest", "--user", "u1", "--file", filepath.Join(dir, "missing.jsonl")}, 2, "--file: open"},
		{"ingest file bad line", agent, []string{"ingest", "--user", "u1", "--file", badJSONL}, 2, "bad.jsonl:2: not an engram.v1.Event"},
		{"ingest file empty content", agent, []string{"ingest", "--user", "u1", "--file", emptyLine}, 2, "empty.jsonl:2: content is empty"},
		{"ingest file unknown field", agent, []string{"ingest", "--user", "u1", "--file", unknownField}, 2, "unknown.jsonl:1: not an engram.v1.Event"},
		{"ingest file without events", agent, []string{"ingest", "--user", "u1", "--file", noEvents}, 2, "holds no events"},
		{"ingest file batch size", agent, []string{"ingest", "--user", "u1", "--file", goodJSONL, "--batch-size", "501"}, 2, "--batch-size: 501 is outside [1, 500]"},
		{"ingest file without user", agent, []string{"ingest", "--file", goodJSONL}, 2, "--user (events[0]): is empty"},
		{"ingest no key", "", []string{"ingest", "--user", "u1", "--text", "hi"}, 3, "--api-key: no API key"},
		{"ingest unknown key", "egk_000000000000_00", []string{"ingest", "--user", "u1", "--text", "hi"}, 3, "the API key was refused"},
		{"ingest bad addr", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--addr", "ftp://x"}, 2, "--addr: \"ftp://x\" is not an http(s) URL"},
		{"ingest server down", agent, []string{"ingest", "--user", "u1", "--text", "hi", "--addr", down}, 6, "cannot reach Engram at http://" + down},

		{"recall k", agent, []string{"recall", "--user", "u1", "--k", "500"}, 2, "--k: 500 is outside"},
		{"recall k not a number", agent, []string{"recall", "--user", "u1", "--k", "many"}, 2, "\"--k\""},
		{"recall budget", agent, []string{"recall", "--user", "u1", "--budget", "9000"}, 2, "--budget: 9000 is outside"},
		{"recall as-of", agent, []string{"recall", "--user", "u1", "--as-of", "2020"}, 2, "--as-of: \"2020\" is not an RFC 3339 time"},
		{"recall schema", agent, []string{"recall", "--user", "u1", "--schema", "nope"}, 2, "--schema: unknown schema"},
		{"recall without user", agent, []string{"recall", "--query", "budget"}, 2, "--user: is empty"},
		{"recall other user", bound, []string{"recall", "--user", "u2"}, 3, "permission denied"},

		{"facts list status", agent, []string{"facts", "list", "--status", "weird"}, 2, "--status: \"weird\" is not one of active, expired, invalidated, superseded"},
		{"facts list scope", agent, []string{"facts", "list", "--scope", "planet"}, 2, "--scope: \"planet\" is not one of"},
		{"facts list limit", agent, []string{"facts", "list", "--limit", "5000"}, 2, "--limit: 5000 is outside"},
		{"facts list all and status", agent, []string{"facts", "list", "--all", "--status", "active"}, 2, "--all: give either --all or --status"},
		{"facts history without key", agent, []string{"facts", "history"}, 2, "accepts 1 arg(s), received 0"},
		{"facts history unknown key", agent, []string{"facts", "history", "USER:u1|user|nothing"}, 4, "USER:u1|user|nothing"},
		{"facts get not a uuid", agent, []string{"facts", "get", "f1"}, 2, "FACT_ID: \"f1\" is not a UUID"},
		{"facts get unknown", agent, []string{"facts", "get", uuid}, 4, "not found"},

		{"review list limit", reviewer, []string{"review", "list", "--limit", "-1"}, 2, "--limit: -1 is outside"},
		{"review confirm without id", reviewer, []string{"review", "confirm"}, 2, "accepts 1 arg(s), received 0"},
		{"review confirm not a uuid", reviewer, []string{"review", "confirm", "c1"}, 2, "CANDIDATE_ID: \"c1\" is not a UUID"},
		{"review confirm unknown", reviewer, []string{"review", "confirm", uuid}, 4, "not found"},
		{"review edit without value", reviewer, []string{"review", "edit", uuid}, 2, "--value: is required"},
		{"review reject as agent", agent, []string{"review", "reject", uuid}, 3, "permission denied"},
		{"review list as agent", agent, []string{"review", "list"}, 3, "permission denied"},

		{"task start bad id", agent, []string{"task", "start", "bad id", "--user", "u1"}, 2, "TASK_ID \"bad id\" must be"},
		{"task start without user", agent, []string{"task", "start", "t-1"}, 2, "--user: is empty"},
		{"task start default", agent, []string{"task", "start", "t-1", "--user", "u1", "--confirmation-default", "maybe"}, 2, "--confirmation-default: \"maybe\" is neither cancel nor confirm"},
		{"task start negative timeout", agent, []string{"task", "start", "t-1", "--user", "u1", "--confirmation-timeout", "-1h"}, 2, "--confirmation-timeout: is negative"},
		{"task plan without steps", agent, []string{"task", "plan", "t-1", "--goal", "g"}, 2, "--step: is required"},
		{"task plan without goal", agent, []string{"task", "plan", "t-1", "--step", "a:b"}, 2, "--goal: is required"},
		{"task plan bad step", agent, []string{"task", "plan", "t-1", "--goal", "g", "--step", "nocolon"}, 2, "--step: \"nocolon\" is not NAME:ACTION"},
		{"task plan bad input", agent, []string{"task", "plan", "t-1", "--goal", "g", "--step", "a:b:{bad"}, 2, "--step: input of step \"a\" is not a JSON object"},
		{"task plan twice the same step", agent, []string{"task", "plan", "t-1", "--goal", "g", "--step", "a:b", "--step", "a:c"}, 2, "--step: step name \"a\" is used twice"},
		{"task plan unknown task", agent, []string{"task", "plan", "t-1", "--goal", "g", "--step", "a:b"}, 4, "not found"},
		{"task confirm without id", agent, []string{"task", "confirm"}, 2, "accepts 1 arg(s), received 0"},
		{"task step unknown task", agent, []string{"task", "step", "t-1"}, 4, "not found"},
		{"task step too many args", agent, []string{"task", "step", "t-1", "a", "b"}, 2, "accepts between 1 and 2 arg(s)"},
		{"task get unknown", agent, []string{"task", "get", "t-1"}, 4, "no task \"t-1\""},

		{"schema get without name", agent, []string{"schema", "get"}, 2, "accepts 1 arg(s), received 0"},
		{"schema get unknown", agent, []string{"schema", "get", "nope"}, 4, "no schema \"nope\""},
		{"schema get negative version", agent, []string{"schema", "get", "travel", "--version", "-1"}, 2, "--version: is negative"},
		{"schema put without file", admin, []string{"schema", "put"}, 2, "--file: is required"},
		{"schema put invalid", admin, []string{"schema", "put", "--file", badSchema}, 2, "--file: " + badSchema + " is not a valid schema"},
		{"schema put other name", admin, []string{"schema", "put", "--file", goodSchema, "--name", "other"}, 2, "--name: \"other\" does not match the document's name \"travel\""},
		{"schema put negative expected", admin, []string{"schema", "put", "--file", goodSchema, "--expected-version", "-1"}, 2, "--expected-version: is negative"},
		{"schema put as reviewer", reviewer, []string{"schema", "put", "--file", goodSchema}, 3, "permission denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.engram([]string{"ENGRAM_API_KEY=" + c.key}, c.args...)
			assert.Equal(t, c.code, r.code, "exit code of engram %s\nstderr: %s", strings.Join(c.args, " "), r.stderr)
			assert.Contains(t, r.stderr, c.want)
			assert.True(t, strings.HasPrefix(r.stderr, "engram: "), "one clear line: %q", r.stderr)
			assert.NotContains(t, r.stderr, "goroutine", "no stack trace")
			assert.Empty(t, r.stdout, "nothing on stdout")
		})
	}

	t.Run("nothing was written", func(t *testing.T) {
		c := client.New(s.url, admin)
		facts, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{})
		require.NoError(t, err)
		assert.Empty(t, facts)
		pending, err := c.ListPending(ctx, "", 0)
		require.NoError(t, err)
		assert.Empty(t, pending)
		_, err = c.GetTask(ctx, "t-1")
		assert.Equal(t, "not_found", client.Code(err).String())
		sc, err := c.GetSchema(ctx, "travel", 0)
		require.NoError(t, err)
		assert.True(t, sc.Schema.Builtin)
		assert.Empty(t, sc.Versions)
		b, _ := json.Marshal(facts)
		t.Logf("facts of the tenant after every bad command: %s", b)
	})
}
