// Package api tests Engram's API end to end: the engram binary is built, migrates a
// fresh database, creates API keys and serves (with its worker) as a separate
// process against the real stack; the seed stories are driven through the Go client
// and through curl with Connect's JSON protocol.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

type stack struct {
	*testenv.Daemon // engram serve
	t               *testing.T
	bin             string
	env             []string
	url             string
	st              *storage.Store // the database engram serves
}

func (s *stack) run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(s.t, err, "engram %s: %s", strings.Join(args, " "), stderr.String())
	return strings.TrimSpace(string(out))
}

// start builds engram, migrates a fresh database and starts `engram serve` on a
// free port with a task queue of its own.
func start(t *testing.T) *stack {
	t.Helper()
	st, dsn := testenv.StoreURL(t)
	s := &stack{t: t, bin: testenv.Build(t, "./cmd/engram"), st: st}
	s.env = append(os.Environ(),
		"ENGRAM_DATABASE_URL="+dsn,
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE="+testenv.Namespace(),
		"ENGRAM_TASK_QUEUE="+testenv.TaskQueue(t),
		"ENGRAM_ADDR=127.0.0.1:0",
	)
	s.run("migrate")
	proc := exec.Command(s.bin, "serve")
	proc.Env = s.env
	s.Daemon, s.url = testenv.StartDaemon(t, proc, 60*time.Second, testenv.Listening)
	return s
}

func (s *stack) key(tenant, principal, role string, extra ...string) string {
	args := append([]string{"keys", "create", "--tenant", tenant, "--principal", principal, "--role", role}, extra...)
	k := s.run(args...)
	require.True(s.t, strings.HasPrefix(k, "egk_"), "key %q", k)
	return k
}

// curl posts JSON to an RPC with Connect's protocol and decodes the answer.
func (s *stack) curl(key, rpc, body string) (int, map[string]any) {
	s.t.Helper()
	args := []string{"-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data", body, s.url + "/" + rpc}
	if key != "" {
		args = append(args, "-H", "Authorization: Bearer "+key)
	}
	out, err := exec.Command("curl", args...).Output()
	require.NoError(s.t, err, "curl %s", rpc)
	text := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(text, '\n')
	require.Positive(s.t, i, "curl output %q", text)
	var code int
	fmt.Sscan(text[i+1:], &code)
	m := map[string]any{}
	require.NoError(s.t, json.Unmarshal([]byte(text[:i]), &m), "curl body %q", text[:i])
	return code, m
}

func factBy(facts []*engramv1.Fact, predicate string, scope engramv1.Scope) *engramv1.Fact {
	for _, f := range facts {
		if f.Predicate == predicate && f.Scope.GetScope() == scope && f.Status == engramv1.FactStatus_FACT_STATUS_ACTIVE {
			return f
		}
	}
	return nil
}

func TestEndToEnd(t *testing.T) {
	began := time.Now()
	s := start(t)
	t.Logf("stack up (build, migrate, serve) in %s", time.Since(began).Round(time.Millisecond))
	tA, tB := "ta-"+testenv.RandomID(8), "tb-"+testenv.RandomID(8)
	agentA := s.key(tA, "travel-agent", "agent", "--user", "u1", "--allow-user", "u2")
	reviewerA := s.key(tA, "alice", "reviewer")
	agentB := s.key(tB, "other-agent", "agent")
	reviewerB := s.key(tB, "bob", "reviewer")
	listed := s.run("keys", "list", "--tenant", tA)
	assert.Contains(t, listed, "travel-agent")
	assert.NotContains(t, listed, agentA[4:], "keys are never listed")

	ctx := context.Background()
	a := client.New(s.url, agentA)
	ra := client.New(s.url, reviewerA)
	ingest := func(c *client.Client, ev *engramv1.Event) *engramv1.IngestResult {
		t.Helper()
		r, err := c.Ingest(ctx, ev, client.WaitFor(2*time.Minute))
		require.NoError(t, err)
		return r
	}

	t.Run("order 12345 never arrived", func(t *testing.T) {
		r := ingest(a, &engramv1.Event{Content: "我的订单12345没收到", Schema: "customer_service", SessionId: "s1"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, r.Reason)
		r = ingest(a, &engramv1.Event{Content: "我那个没到的订单怎么样了", Schema: "customer_service", SessionId: "s1"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, r.Reason)
		facts, err := a.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
		require.NoError(t, err)
		f := factBy(facts, "order_not_received", engramv1.Scope_SCOPE_USER)
		require.NotNil(t, f)
		assert.Equal(t, "12345", f.EntityId)
		rc, err := a.Recall(ctx, &engramv1.RecallRequest{Query: "我那个没到的订单怎么样了", Schema: "customer_service", SessionId: "s1"})
		require.NoError(t, err)
		assert.Contains(t, rc.Context, "12345")
	})

	t.Run("budget 8000, this trip 10000", func(t *testing.T) {
		r := ingest(a, &engramv1.Event{Content: "预算不超过8000元", Schema: "travel"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status)
		r = ingest(a, &engramv1.Event{Content: "这次旅行预算调整到10000元", Schema: "travel", TaskId: "trip-1"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status)
		facts, err := a.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "budget"})
		require.NoError(t, err)
		user := factBy(facts, "budget", engramv1.Scope_SCOPE_USER)
		task := factBy(facts, "budget", engramv1.Scope_SCOPE_TASK)
		require.NotNil(t, user)
		require.NotNil(t, task)
		assert.Equal(t, "8000 CNY", user.Object, "this trip's budget does not overwrite the user's")
		assert.Equal(t, "10000 CNY", task.Object)
		assert.Equal(t, "trip-1", task.Scope.TaskId)
		h, err := a.FactHistory(ctx, user.MemoryKey)
		require.NoError(t, err)
		assert.Len(t, h, 1)
		rc, err := a.Recall(ctx, &engramv1.RecallRequest{Query: "预算", Schema: "travel", TaskId: "trip-1"})
		require.NoError(t, err)
		assert.Contains(t, rc.Context, "10000")
	})

	t.Run("direct flights from now on", func(t *testing.T) {
		r := ingest(a, &engramv1.Event{Content: "我以后尽量都坐直飞", Schema: "travel"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status)
		facts, err := a.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1", Predicate: "flight_type"})
		require.NoError(t, err)
		f := factBy(facts, "flight_type", engramv1.Scope_SCOPE_USER)
		require.NotNil(t, f)
		assert.Equal(t, "direct", f.Object)
		assert.Equal(t, engramv1.MemoryType_MEMORY_TYPE_PREFERENCE, f.MemoryType)
	})

	var aCandidate, aFact string
	t.Run("inferred preference is reviewed", func(t *testing.T) {
		r := ingest(a, &engramv1.Event{Content: "我上次坐了靠窗的位置，挺好", Schema: "travel"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, r.Status)
		pending, err := ra.ListPending(ctx, "u1", 0)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		aCandidate = pending[0].CandidateId
		d, err := ra.Decide(ctx, &engramv1.DecideRequest{CandidateId: aCandidate, Decision: engramv1.Decision_DECISION_CONFIRM, Wait: true})
		require.NoError(t, err)
		require.True(t, d.Committed)
		f, err := a.GetFact(ctx, d.FactId)
		require.NoError(t, err)
		assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status)
		assert.Equal(t, "window", f.Object)
		aFact = f.Id
	})

	t.Run("curl with JSON", func(t *testing.T) {
		code, m := s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u2", "idempotencyKey": "curl-1", "content": "预算不超过8000元", "schema": "travel"}, "wait": true}`)
		require.Equal(t, 200, code, "%v", m)
		assert.Equal(t, "WRITE_STATUS_COMMITTED", testenv.Dig(m, "results", 0, "status"))
		// Same key and content: the same write; other content: ALREADY_EXISTS (409).
		code, m2 := s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"user_id": "u2", "idempotency_key": "curl-1", "content": "预算不超过8000元", "schema": "travel"}}`)
		require.Equal(t, 200, code, "%v", m2)
		assert.Equal(t, testenv.Dig(m, "results", 0, "runId"), testenv.Dig(m2, "results", 0, "runId"))
		code, m2 = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u2", "idempotencyKey": "curl-1", "content": "预算不超过9000元", "schema": "travel"}}`)
		assert.Equal(t, 409, code)
		assert.Equal(t, "already_exists", m2["code"])

		code, m = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u2", "content": "我以后尽量都坐直飞", "schema": "travel"}, "wait": true}`)
		require.Equal(t, 200, code, "%v", m)
		code, m = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u2", "content": "我上次坐了靠窗的位置，挺好", "schema": "travel"}, "wait": true}`)
		require.Equal(t, 200, code, "%v", m)
		assert.Equal(t, "WRITE_STATUS_PENDING_REVIEW", testenv.Dig(m, "results", 0, "status"))
		code, m = s.curl(reviewerA, "engram.v1.ReviewService/ListPending", `{"userId": "u2"}`)
		require.Equal(t, 200, code, "%v", m)
		cand, _ := testenv.Dig(m, "pending", 0, "candidateId").(string)
		require.NotEmpty(t, cand, "%v", m)
		code, m = s.curl(reviewerA, "engram.v1.ReviewService/Decide", fmt.Sprintf(`{"candidateId": %q, "decision": "DECISION_CONFIRM", "note": "seen it", "wait": true}`, cand))
		require.Equal(t, 200, code, "%v", m)
		assert.Equal(t, true, m["committed"])
		code, m = s.curl(agentA, "engram.v1.MemoryService/ListFacts", `{"userId": "u2", "statuses": ["FACT_STATUS_ACTIVE"]}`)
		require.Equal(t, 200, code, "%v", m)
		got := map[string]string{}
		for _, f := range m["facts"].([]any) {
			got[testenv.Dig(f, "predicate").(string)] = testenv.Dig(f, "object").(string)
		}
		assert.Equal(t, map[string]string{"budget": "8000 CNY", "flight_type": "direct", "seat": "window"}, got)
		code, m = s.curl(agentA, "engram.v1.MemoryService/Recall", `{"userId": "u2", "query": "预算", "schema": "travel"}`)
		require.Equal(t, 200, code, "%v", m)
		assert.Contains(t, m["context"], "8000")

		// Bad input and no key: clear errors with Connect's codes and HTTP statuses.
		code, m = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u2", "content": ""}}`)
		assert.Equal(t, 400, code)
		assert.Equal(t, "invalid_argument", m["code"])
		assert.Contains(t, m["message"], "event.content")
		code, m = s.curl("", "engram.v1.MemoryService/ListFacts", `{}`)
		assert.Equal(t, 401, code)
		assert.Equal(t, "unauthenticated", m["code"])
		code, m = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u3", "content": "hi"}}`)
		assert.Equal(t, 403, code)
		assert.Equal(t, "permission_denied", m["code"])
		code, m = s.curl(agentB, "engram.v1.MemoryService/GetFact", fmt.Sprintf(`{"factId": %q}`, aFact))
		assert.Equal(t, 404, code)
		assert.Equal(t, "not_found", m["code"])
		code, _ = s.curl(agentA, "engram.v1.MemoryService/Ingest", `{"event": {"userId": `)
		assert.Equal(t, 400, code, "malformed JSON")
	})

	t.Run("tenant isolation", func(t *testing.T) {
		b := client.New(s.url, agentB)
		rb := client.New(s.url, reviewerB)
		r := ingest(b, &engramv1.Event{UserId: "u1", Content: "预算不超过20000元", Schema: "travel"})
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status)
		_, err := b.GetFact(ctx, aFact)
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		_, err = rb.Decide(ctx, &engramv1.DecideRequest{CandidateId: aCandidate, Decision: engramv1.Decision_DECISION_REJECT})
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		_, err = rb.InvalidateFact(ctx, aFact, "not yours")
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		facts, err := b.ListFacts(ctx, &engramv1.ListFactsRequest{})
		require.NoError(t, err)
		require.Len(t, facts, 1, "tenant B sees only its own fact")
		assert.Equal(t, "20000 CNY", facts[0].Object)
		pending, err := rb.ListPending(ctx, "", 0)
		require.NoError(t, err)
		assert.Empty(t, pending)
		rc, err := b.Recall(ctx, &engramv1.RecallRequest{UserId: "u1", Query: "预算 直飞 订单12345"})
		require.NoError(t, err)
		assert.NotContains(t, rc.Context, "8000")
		assert.NotContains(t, rc.Context, "12345")
		// A's data is untouched.
		f, err := a.GetFact(ctx, aFact)
		require.NoError(t, err)
		assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status)
	})

	t.Run("revoked key", func(t *testing.T) {
		k := s.key(tA, "temp", "agent")
		c := client.New(s.url, k, client.WithRetry(1, 0))
		_, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{})
		require.NoError(t, err)
		s.run("keys", "revoke", k)
		_, err = c.ListFacts(ctx, &engramv1.ListFactsRequest{})
		assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	})

	t.Run("graceful shutdown", func(t *testing.T) {
		require.NoError(t, s.Cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-s.Done():
			assert.NoError(t, s.Err(), "engram serve exits cleanly on SIGTERM")
		case <-time.After(30 * time.Second):
			t.Fatal("engram serve did not stop within 30s of SIGTERM")
		}
	})
	t.Logf("end-to-end in %s", time.Since(began).Round(time.Millisecond))
}
