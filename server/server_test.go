package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engramhq/engram/privacy"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tclient "go.temporal.io/sdk/client"

	"github.com/engramhq/engram/client"
	"github.com/engramhq/engram/config"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/actionserver"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/server/servertest"
	"github.com/engramhq/engram/storage"
)

// env is a real API server (httptest, h2c) over a fresh database, the Temporal dev
// server and an in-process worker on a queue of its own.
type env struct {
	t    *testing.T
	url  string
	st   *storage.Store
	keys map[string]string // name → API key
	// Tenants are unique per test: Temporal keeps workflows (whose ids derive from
	// tenant and key) across test databases.
	tA, tB string
	tc     tclient.Client
}

var protocols = []struct {
	name string
	opt  []client.Option
}{
	{"connect", nil},
	{"grpc", []client.Option{client.WithGRPC()}},
}

func newEnv(t *testing.T) *env {
	t.Helper()
	as, err := actionserver.Start()
	require.NoError(t, err)
	t.Cleanup(as.Close)
	stack := servertest.Start(t, func(cfg *config.Config) { cfg.ExtractAttempts, cfg.ActionURL = 2, as.URL() })
	st, tc := stack.Store, stack.Temporal
	// The API's reads run on a read-only pool (a write sent through it fails), as
	// `engram serve`'s do; its timeout is roomy for a busy test machine.
	reader := st.Reader(10*time.Second, 8)
	t.Cleanup(func() { reader.Close() })
	deps := stack.Deps()
	deps.ReadStore = reader
	h, err := server.New(deps)
	require.NoError(t, err)

	e := &env{t: t, url: servertest.Serve(t, h), st: st, keys: map[string]string{}, tA: "tA-" + testenv.RandomID(8), tB: "tB-" + testenv.RandomID(8), tc: tc}
	for name, k := range map[string]storage.APIKey{
		"agentA":    {TenantID: e.tA, Principal: "agent-a", Roles: []string{"agent"}, UserID: "u1", AllowedUsers: []string{"u1b"}},
		"anyA":      {TenantID: e.tA, Principal: "agent-any", Roles: []string{"agent"}},
		"reviewerA": {TenantID: e.tA, Principal: "alice", Roles: []string{"reviewer"}},
		"adminA":    {TenantID: e.tA, Principal: "root-a", Roles: []string{"admin"}},
		"agentB":    {TenantID: e.tB, Principal: "agent-b", Roles: []string{"agent"}},
		"reviewerB": {TenantID: e.tB, Principal: "bob", Roles: []string{"reviewer"}},
	} {
		k := k
		key, err := st.CreateAPIKey(context.Background(), &k)
		require.NoError(t, err)
		e.keys[name] = key
	}
	return e
}

func (e *env) client(key string, opts ...client.Option) *client.Client {
	return client.New(e.url, e.keys[key], append([]client.Option{client.WithRetry(1, 0)}, opts...)...)
}

func (e *env) count(table string) int {
	n, err := e.st.DB().NewSelect().Table(table).Count(context.Background())
	require.NoError(e.t, err)
	return int(n)
}

func codeOf(t *testing.T, err error) connect.Code {
	t.Helper()
	require.Error(t, err)
	return connect.CodeOf(err)
}

var base = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func TestHealthAndReflection(t *testing.T) {
	e := newEnv(t)
	hc := client.DefaultHTTPClient()
	for _, svc := range append([]string{""}, server.Services...) {
		check := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, e.url+"/grpc.health.v1.Health/Check", connect.WithGRPC())
		res, err := check.CallUnary(context.Background(), connect.NewRequest(&healthpb.HealthCheckRequest{Service: svc}))
		require.NoError(t, err, svc)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, res.Msg.Status, svc)
	}
	stream := grpcreflect.NewClient(hc, e.url).NewStream(context.Background())
	defer stream.Close()
	names, err := stream.ListServices()
	require.NoError(t, err)
	for _, s := range server.Services {
		assert.Contains(t, names, protoreflect.FullName(s))
	}
}

// The write path through the API with each protocol: a stated budget commits, an
// inferred preference waits for review, a reviewer confirms it, the fact is ACTIVE.
func TestIngestReviewAndRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent := e.client("agentA", p.opt...)
			reviewer := e.client("reviewerA", p.opt...)
			user := "u1"
			if p.name == "grpc" {
				user = "u1b" // an allowed user named explicitly
			}
			key := "budget-" + p.name
			ev := &engramv1.Event{IdempotencyKey: key, UserId: user, Content: "预算不超过8000元", Schema: "travel", OccurredAt: timestamppb.New(base)}
			r, err := agent.Ingest(ctx, ev, client.Wait())
			require.NoError(t, err)
			require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, r.Reason)
			require.Len(t, r.Outcomes, 1)
			factID := r.Outcomes[0].FactId

			// A retry is the same write; the same key with other content is refused.
			again, err := agent.Ingest(ctx, &engramv1.Event{IdempotencyKey: key, UserId: user, Content: "预算不超过8000元", Schema: "travel", OccurredAt: timestamppb.New(base)}, client.Wait())
			require.NoError(t, err)
			assert.Equal(t, r.RunId, again.RunId)
			assert.Equal(t, r.EventId, again.EventId)
			_, err = agent.Ingest(ctx, &engramv1.Event{IdempotencyKey: key, UserId: user, Content: "预算不超过9000元", Schema: "travel", OccurredAt: timestamppb.New(base)})
			assert.Equal(t, connect.CodeAlreadyExists, codeOf(t, err))

			f, err := agent.GetFact(ctx, factID)
			require.NoError(t, err)
			assert.Equal(t, "8000 CNY", f.Object)
			assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status)
			assert.NotEmpty(t, f.EvidenceIds)
			h, err := agent.FactHistory(ctx, f.MemoryKey)
			require.NoError(t, err)
			assert.Len(t, h, 1)

			r, err = agent.Ingest(ctx, &engramv1.Event{UserId: user, Content: "我上次坐了靠窗的位置，挺好", Schema: "travel", OccurredAt: timestamppb.New(base.Add(time.Hour))}, client.Wait())
			require.NoError(t, err)
			require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, r.Status)
			require.Len(t, r.Pending, 1)
			cand := r.Pending[0]
			assert.Equal(t, engramv1.Origin_ORIGIN_INFERRED, cand.Origin)

			pending, err := reviewer.ListPending(ctx, user, 0)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, cand.CandidateId, pending[0].CandidateId)

			d, err := reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: cand.CandidateId, Decision: engramv1.Decision_DECISION_CONFIRM, Note: "ok", Wait: true})
			require.NoError(t, err)
			require.True(t, d.Committed)
			assert.Equal(t, engramv1.CandidateStatus_CANDIDATE_STATUS_ACCEPTED, d.Status)
			f, err = agent.GetFact(ctx, d.FactId)
			require.NoError(t, err)
			assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status)
			assert.Contains(t, f.Reason, "alice", "the reviewer is the key's principal")
			_, err = reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: cand.CandidateId, Decision: engramv1.Decision_DECISION_REJECT})
			assert.Equal(t, connect.CodeFailedPrecondition, codeOf(t, err), "a decided candidate cannot be decided again")

			rc, err := agent.Recall(ctx, &engramv1.RecallRequest{UserId: user, Query: "预算"})
			require.NoError(t, err)
			assert.Contains(t, rc.Context, "8000")

			inv, err := reviewer.InvalidateFact(ctx, f.Id, "user withdrew it")
			require.NoError(t, err)
			assert.Equal(t, engramv1.FactStatus_FACT_STATUS_INVALIDATED, inv.Status)
			_, err = reviewer.InvalidateFact(ctx, f.Id, "again")
			require.NoError(t, err, "invalidating twice is idempotent")
		})
	}
}

// Concurrent retries of one key, each waiting, are one write: one event, one
// workflow run, and every caller gets the same answer.
func TestIngestConcurrentRetriesWait(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agent := e.client("agentA")
	const n = 6
	results := make([]*engramv1.IngestResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &engramv1.Event{IdempotencyKey: "same-key", UserId: "u1", Content: "我以后尽量都坐直飞", Schema: "travel", OccurredAt: timestamppb.New(base)}
			results[i], errs[i] = agent.Ingest(ctx, ev, client.WaitFor(time.Minute))
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, results[i].Status, results[i].Reason)
		assert.Equal(t, results[0].RunId, results[i].RunId)
		assert.Equal(t, results[0].EventId, results[i].EventId)
		assert.Equal(t, results[0].Outcomes[0].FactId, results[i].Outcomes[0].FactId)
	}
	assert.NotEmpty(t, results[0].RunId)
	assert.Equal(t, 1, e.count("events"))
	assert.Equal(t, 1, e.count("facts"))
}

func TestBatchIngest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agent := e.client("anyA")
	var evs []*engramv1.Event
	for i, text := range []string{"预算不超过8000元", "我以后尽量都坐直飞", "以后预算不超过9000元"} {
		for _, u := range []string{"ua", "ub"} {
			evs = append(evs, &engramv1.Event{UserId: u, Content: text, Schema: "travel", OccurredAt: timestamppb.New(base.Add(time.Duration(i) * time.Hour))})
		}
	}
	res, err := agent.IngestBatch(ctx, evs, client.WaitFor(2*time.Minute))
	require.NoError(t, err)
	require.Len(t, res.Results, 6)
	for _, r := range res.Results {
		assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status)
	}
	again, err := agent.IngestBatch(ctx, evs, client.WaitFor(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, res.BatchWorkflowId, again.BatchWorkflowId, "a retried batch joins the same workflow")
	assert.Equal(t, 6, e.count("events"))
	facts, err := agent.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "ua", Predicate: "budget", Statuses: []engramv1.FactStatus{engramv1.FactStatus_FACT_STATUS_ACTIVE}})
	require.NoError(t, err)
	require.Len(t, facts, 1)
	assert.Equal(t, "9000 CNY", facts[0].Object)
}

func TestTaskLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent := e.client("agentA", p.opt...)
			id := "trip-" + p.name
			tk, err := agent.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: id, SessionId: "s1"})
			require.NoError(t, err)
			assert.Equal(t, engramv1.TaskState_TASK_STATE_CREATED, tk.State)
			assert.Equal(t, "u1", tk.UserId)
			_, err = agent.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: id})
			assert.Equal(t, connect.CodeAlreadyExists, codeOf(t, err))
			_, err = agent.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: id, Op: &engramv1.UpdateTaskRequest_Confirm{Confirm: &engramv1.ConfirmOp{}}})
			assert.Equal(t, connect.CodeFailedPrecondition, codeOf(t, err))
			tk, err = agent.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: id, Op: &engramv1.UpdateTaskRequest_Plan{Plan: &engramv1.PlanOp{
				Goal: "book the Paris trip", Steps: []*engramv1.TaskStep{{Name: "hotel", Action: "book_hotel"}}}}})
			require.NoError(t, err)
			assert.Equal(t, engramv1.TaskState_TASK_STATE_PLANNING, tk.State)
			_, err = agent.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: id, Op: &engramv1.UpdateTaskRequest_RequestConfirmation{RequestConfirmation: &engramv1.RequestConfirmationOp{Reason: "costs money"}}})
			require.NoError(t, err)
			_, err = agent.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: id, Op: &engramv1.UpdateTaskRequest_Confirm{Confirm: &engramv1.ConfirmOp{Reason: "user said yes"}}})
			require.NoError(t, err)
			tk, err = agent.RunStep(ctx, id, "")
			require.NoError(t, err)
			assert.Equal(t, []string{"hotel"}, tk.Done)
			tk, err = agent.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: id, Op: &engramv1.UpdateTaskRequest_Complete{Complete: &engramv1.CompleteOp{}}})
			require.NoError(t, err)
			assert.Equal(t, engramv1.TaskState_TASK_STATE_COMPLETED, tk.State)
			tk, err = agent.GetTask(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, engramv1.TaskState_TASK_STATE_COMPLETED, tk.State)
			assert.GreaterOrEqual(t, len(tk.Transitions), 5)
		})
	}
}

func TestSchemas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client("adminA")
	got, err := e.client("agentA").GetSchema(ctx, "travel", 0)
	require.NoError(t, err)
	assert.True(t, got.Schema.Builtin)
	src := strings.Replace(got.Schema.Source, "A travel-planning agent", "Our travel agent", 1)
	v2, err := admin.PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "travel", Source: src})
	require.NoError(t, err)
	assert.Equal(t, int32(got.Schema.Version+1), v2.Version)
	assert.Equal(t, "root-a", v2.CreatedBy)
	stale := int32(0)
	_, err = admin.PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "travel", Source: src, ExpectedVersion: &stale})
	assert.Equal(t, connect.CodeFailedPrecondition, codeOf(t, err))
	latest, err := e.client("agentA").GetSchema(ctx, "travel", 0)
	require.NoError(t, err)
	assert.Equal(t, v2.Version, latest.Schema.Version)
	assert.Equal(t, []int32{v2.Version}, latest.Versions)
	// Tenant B still sees the built-in schema.
	b, err := e.client("agentB").GetSchema(ctx, "travel", 0)
	require.NoError(t, err)
	assert.True(t, b.Schema.Builtin)
	sug, err := e.client("reviewerA").Schema.SuggestSchemaChanges(ctx, connect.NewRequest(&engramv1.SuggestSchemaChangesRequest{Name: "travel"}))
	require.NoError(t, err)
	assert.Empty(t, sug.Msg.Suggestions)
	assert.NotEmpty(t, sug.Msg.Note)
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			none := client.New(e.url, "", append([]client.Option{client.WithRetry(1, 0)}, p.opt...)...)
			_, err := none.ListFacts(ctx, &engramv1.ListFactsRequest{})
			assert.Equal(t, connect.CodeUnauthenticated, codeOf(t, err))
			bad := client.New(e.url, "egk_000000000000_nope", append([]client.Option{client.WithRetry(1, 0)}, p.opt...)...)
			_, err = bad.ListFacts(ctx, &engramv1.ListFactsRequest{})
			assert.Equal(t, connect.CodeUnauthenticated, codeOf(t, err))

			_, err = e.client("agentA", p.opt...).ListPending(ctx, "", 0)
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err), "agents do not review")
			_, err = e.client("reviewerA", p.opt...).Ingest(ctx, &engramv1.Event{UserId: "u1", Content: "hi"})
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err), "reviewers do not ingest")
			_, err = e.client("agentA", p.opt...).PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "x", Source: "name: x"})
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err), "only admins put schemas")
			_, err = e.client("agentA", p.opt...).Ingest(ctx, &engramv1.Event{UserId: "u9", Content: "预算不超过8000元"})
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err), "a key bound to u1 (+u1b) may not write for u9")
			_, err = e.client("agentA", p.opt...).Recall(ctx, &engramv1.RecallRequest{UserId: "u9", Query: "budget"})
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err))
			_, err = e.client("agentA", p.opt...).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u9"})
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err))
			_, err = e.client("agentA", p.opt...).InvalidateFact(ctx, "00000000-0000-0000-0000-000000000000", "x")
			assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err))
		})
	}
	// A revoked key stops working at once.
	k := storage.APIKey{TenantID: e.tA, Principal: "temp", Roles: []string{"agent"}}
	key, err := e.st.CreateAPIKey(ctx, &k)
	require.NoError(t, err)
	c := client.New(e.url, key, client.WithRetry(1, 0))
	_, err = c.ListFacts(ctx, &engramv1.ListFactsRequest{})
	require.NoError(t, err)
	_, err = e.st.RevokeAPIKey(ctx, e.tA, k.Prefix)
	require.NoError(t, err)
	_, err = c.ListFacts(ctx, &engramv1.ListFactsRequest{})
	assert.Equal(t, connect.CodeUnauthenticated, codeOf(t, err))
}

// Tenant A's keys can never read, review or invalidate tenant B's data, whatever ids
// they send: B's ids are answered as if they did not exist.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentB := e.client("agentB")
	rb, err := agentB.Ingest(ctx, &engramv1.Event{UserId: "u1", Content: "预算不超过20000元", Schema: "travel"}, client.Wait())
	require.NoError(t, err)
	require.Len(t, rb.Outcomes, 1)
	bFact := rb.Outcomes[0].FactId
	pb, err := agentB.Ingest(ctx, &engramv1.Event{UserId: "u1", Content: "我上次坐了靠窗的位置，挺好", Schema: "travel"}, client.Wait())
	require.NoError(t, err)
	require.Len(t, pb.Pending, 1)
	bCand := pb.Pending[0].CandidateId
	_, err = agentB.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: "trip-b", UserId: "u1"})
	require.NoError(t, err)
	ra, err := e.client("agentA").Ingest(ctx, &engramv1.Event{UserId: "u1", Content: "预算不超过8000元", Schema: "travel"}, client.Wait())
	require.NoError(t, err)
	aFact := ra.Outcomes[0].FactId

	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, name := range []string{"agentA", "anyA", "reviewerA", "adminA"} {
				c := e.client(name, p.opt...)
				_, err := c.GetFact(ctx, bFact)
				assert.Equal(t, connect.CodeNotFound, codeOf(t, err), name)
				_, err = c.FactHistory(ctx, "USER:u1|user|budget")
				if err == nil {
					h, _ := c.FactHistory(ctx, "USER:u1|user|budget")
					for _, f := range h {
						assert.NotEqual(t, bFact, f.Id, name)
					}
				}
				facts, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{})
				require.NoError(t, err, name)
				for _, f := range facts {
					assert.NotEqual(t, bFact, f.Id, name)
					assert.NotEqual(t, "20000 CNY", f.Object, name)
				}
				assert.NotEmpty(t, facts, name)
				_, err = c.GetTask(ctx, "trip-b")
				assert.Equal(t, connect.CodeNotFound, codeOf(t, err), name)
				if name == "reviewerA" || name == "adminA" {
					_, err = c.Decide(ctx, &engramv1.DecideRequest{CandidateId: bCand, Decision: engramv1.Decision_DECISION_CONFIRM})
					assert.Equal(t, connect.CodeNotFound, codeOf(t, err), name)
					_, err = c.InvalidateFact(ctx, bFact, "not yours")
					assert.Equal(t, connect.CodeNotFound, codeOf(t, err), name)
					pending, err := c.ListPending(ctx, "", 0)
					require.NoError(t, err)
					for _, pc := range pending {
						assert.NotEqual(t, bCand, pc.CandidateId)
					}
				}
				rc, err := c.Recall(ctx, &engramv1.RecallRequest{UserId: "u1", Query: "预算"})
				if name == "reviewerA" {
					assert.Equal(t, connect.CodePermissionDenied, codeOf(t, err))
					continue
				}
				require.NoError(t, err, name)
				assert.NotContains(t, rc.Context, "20000", name)
				for _, it := range rc.Items {
					assert.NotEqual(t, bFact, it.Id, name)
				}
			}
		})
	}
	// B's data is untouched and still B's.
	f, err := agentB.GetFact(ctx, bFact)
	require.NoError(t, err)
	assert.Equal(t, engramv1.FactStatus_FACT_STATUS_ACTIVE, f.Status)
	pending, err := e.client("reviewerB").ListPending(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, bCand, pending[0].CandidateId)
	_, err = agentB.GetFact(ctx, aFact)
	assert.Equal(t, connect.CodeNotFound, codeOf(t, err))
}

// badCase is one bad call: through key's client it gets code, naming field.
type badCase struct {
	name  string
	key   string
	call  func(c *client.Client) error
	code  connect.Code
	field string
}

// Bad input through every RPC: the right code, the field named, nothing written.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tables := []string{"events", "evidence", "candidates", "facts", "tasks", "schemas", "outbox"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = e.count(tb)
	}
	cases := append(append(badIngests(ctx), badReads(ctx)...), badTaskAndSchemaCalls(ctx)...)
	for _, p := range protocols {
		for _, tc := range cases {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				err := tc.call(e.client(tc.key, p.opt...))
				require.Error(t, err)
				assert.Equal(t, tc.code, connect.CodeOf(err), err.Error())
				msg := err.Error()
				assert.NotContains(t, msg, "goroutine", "no stack traces")
				assert.NotContains(t, msg, "SQLSTATE", "no driver errors")
				if tc.field != "" {
					vs := client.FieldViolations(err)
					require.NotEmpty(t, vs, "a BadRequest detail names the field: %v", err)
					assert.True(t, strings.HasPrefix(vs[0].Field, tc.field), "field %q, want %q", vs[0].Field, tc.field)
					assert.Contains(t, msg, tc.field)
				}
			})
		}
	}
	for _, tb := range tables {
		assert.Equal(t, before[tb], e.count(tb), "nothing was written to %s", tb)
	}
}

// badIngests are bad Ingest calls.
func badIngests(ctx context.Context) []badCase {
	ev := func(mut func(*engramv1.Event)) *engramv1.Event {
		x := &engramv1.Event{IdempotencyKey: "k-" + testenv.RandomID(8), UserId: "u1", Content: "预算不超过8000元", Schema: "travel"}
		mut(x)
		return x
	}
	many := make([]*engramv1.Event, 501)
	for i := range many {
		many[i] = ev(func(*engramv1.Event) {})
	}
	dup := []*engramv1.Event{ev(func(x *engramv1.Event) { x.IdempotencyKey = "same" }), ev(func(x *engramv1.Event) { x.IdempotencyKey = "same" })}
	ingest := func(req *engramv1.IngestRequest) func(*client.Client) error {
		return func(c *client.Client) error { _, err := c.Memory.Ingest(ctx, connect.NewRequest(req)); return err }
	}
	return []badCase{
		{"Ingest without event", "agentA", ingest(&engramv1.IngestRequest{}), connect.CodeInvalidArgument, "event"},
		{"Ingest event and events", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(*engramv1.Event) {}), Events: []*engramv1.Event{ev(func(*engramv1.Event) {})}}), connect.CodeInvalidArgument, "events"},
		{"Ingest empty content", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Content = " " })}), connect.CodeInvalidArgument, "event.content"},
		{"Ingest content too long", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Content = strings.Repeat("a", 70<<10) })}), connect.CodeInvalidArgument, "event.content"},
		{"Ingest unknown schema", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Schema = "nope" })}), connect.CodeInvalidArgument, "event.schema"},
		{"Ingest long key", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.IdempotencyKey = strings.Repeat("k", 201) })}), connect.CodeInvalidArgument, "event.idempotency_key"},
		{"Ingest future time", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.OccurredAt = timestamppb.New(time.Now().Add(72 * time.Hour)) })}), connect.CodeInvalidArgument, "event.occurred_at"},
		{"Ingest bad actor type", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.ActorType = 99 })}), connect.CodeInvalidArgument, "event.actor_type"},
		{"Ingest no user on unbound key", "anyA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.UserId = "" })}), connect.CodeInvalidArgument, "event.user_id"},
		{"Ingest negative wait", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(*engramv1.Event) {}), Wait: true, WaitTimeout: durationpbNew(-time.Second)}), connect.CodeInvalidArgument, "wait_timeout"},
		{"Ingest batch too big", "agentA", ingest(&engramv1.IngestRequest{Events: many}), connect.CodeInvalidArgument, "events"},
		{"Ingest batch repeated key", "agentA", ingest(&engramv1.IngestRequest{Events: dup}), connect.CodeInvalidArgument, "events[1].idempotency_key"},
		{"Ingest batch bad event", "agentA", ingest(&engramv1.IngestRequest{Events: []*engramv1.Event{ev(func(*engramv1.Event) {}), ev(func(x *engramv1.Event) { x.Content = "" })}}), connect.CodeInvalidArgument, "events[1].content"},
		{"Ingest NUL in content", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Content = "a\x00b" })}), connect.CodeInvalidArgument, "event.content"},
		{"Ingest NUL schema", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Schema = "\x00" })}), connect.CodeInvalidArgument, "event.schema"},
		{"Ingest control character in user", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.UserId = "u1\n" })}), connect.CodeInvalidArgument, "event.user_id"},
		{"Ingest 3000-byte user", "anyA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.UserId = strings.Repeat("u", 3000) })}), connect.CodeInvalidArgument, "event.user_id"},
		{"Ingest 3000-byte locator", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Locator = strings.Repeat("l", 3000) })}), connect.CodeInvalidArgument, "event.locator"},
		{"Ingest NUL in locator", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Locator = "msg\x001" })}), connect.CodeInvalidArgument, "event.locator"},
		{"Ingest NUL in payload", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) {
			x.Payload, _ = structpb.NewStruct(map[string]any{"tool": map[string]any{"out": "a\x00"}})
		})}), connect.CodeInvalidArgument, "event.payload.tool.out"},
		{"Ingest batch NUL session", "agentA", ingest(&engramv1.IngestRequest{Events: []*engramv1.Event{ev(func(*engramv1.Event) {}), ev(func(x *engramv1.Event) { x.SessionId = "s\x00" })}}), connect.CodeInvalidArgument, "events[1].session_id"},
		{"Ingest over 1 MiB", "agentA", ingest(&engramv1.IngestRequest{Event: ev(func(x *engramv1.Event) { x.Content = strings.Repeat("a", 1<<20+10) })}), connect.CodeInvalidArgument, "body"},
	}
}

// badReads are bad Recall, fact and Forget calls.
func badReads(ctx context.Context) []badCase {
	return []badCase{
		{"Recall NUL query", "agentA", func(c *client.Client) error {
			_, err := c.Recall(ctx, &engramv1.RecallRequest{Query: "where\x00"})
			return err
		}, connect.CodeInvalidArgument, "query"},
		{"Forget NUL user", "adminA", func(c *client.Client) error {
			_, err := c.Memory.Forget(ctx, connect.NewRequest(&engramv1.ForgetRequest{UserId: "u\x00"}))
			return err
		}, connect.CodeInvalidArgument, "user_id"},
		{"Recall k", "agentA", func(c *client.Client) error {
			_, err := c.Recall(ctx, &engramv1.RecallRequest{Query: "x", K: 101})
			return err
		}, connect.CodeInvalidArgument, "k"},
		{"Recall budget", "agentA", func(c *client.Client) error {
			_, err := c.Recall(ctx, &engramv1.RecallRequest{Query: "x", TokenBudget: -1})
			return err
		}, connect.CodeInvalidArgument, "token_budget"},
		{"Recall scope", "agentA", func(c *client.Client) error {
			_, err := c.Recall(ctx, &engramv1.RecallRequest{Query: "x", Scopes: []engramv1.Scope{99}})
			return err
		}, connect.CodeInvalidArgument, "scopes[0]"},
		{"Recall schema", "agentA", func(c *client.Client) error {
			_, err := c.Recall(ctx, &engramv1.RecallRequest{Query: "x", Schema: "nope"})
			return err
		}, connect.CodeInvalidArgument, "schema"},
		{"GetFact empty", "agentA", func(c *client.Client) error { _, err := c.GetFact(ctx, ""); return err }, connect.CodeInvalidArgument, "fact_id"},
		{"GetFact not uuid", "agentA", func(c *client.Client) error { _, err := c.GetFact(ctx, "12345"); return err }, connect.CodeInvalidArgument, "fact_id"},
		{"GetFact unknown", "agentA", func(c *client.Client) error {
			_, err := c.GetFact(ctx, "6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11")
			return err
		}, connect.CodeNotFound, ""},
		{"ListFacts limit", "agentA", func(c *client.Client) error {
			_, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{Limit: 5000})
			return err
		}, connect.CodeInvalidArgument, "limit"},
		{"ListFacts status", "agentA", func(c *client.Client) error {
			_, err := c.ListFacts(ctx, &engramv1.ListFactsRequest{Statuses: []engramv1.FactStatus{42}})
			return err
		}, connect.CodeInvalidArgument, "statuses[0]"},
		{"FactHistory empty", "agentA", func(c *client.Client) error { _, err := c.FactHistory(ctx, ""); return err }, connect.CodeInvalidArgument, "memory_key"},
		{"FactHistory unknown", "agentA", func(c *client.Client) error { _, err := c.FactHistory(ctx, "USER:u1|nope"); return err }, connect.CodeNotFound, ""},
		{"InvalidateFact bad id", "reviewerA", func(c *client.Client) error { _, err := c.InvalidateFact(ctx, "x", "why"); return err }, connect.CodeInvalidArgument, "fact_id"},
		{"InvalidateFact no reason", "reviewerA", func(c *client.Client) error {
			_, err := c.InvalidateFact(ctx, "6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11", "")
			return err
		}, connect.CodeInvalidArgument, "reason"},
		{"Forget no user", "adminA", func(c *client.Client) error {
			_, err := c.Memory.Forget(ctx, connect.NewRequest(&engramv1.ForgetRequest{}))
			return err
		}, connect.CodeInvalidArgument, "user_id"},
		{"Forget by agent", "agentA", func(c *client.Client) error {
			_, err := c.Memory.Forget(ctx, connect.NewRequest(&engramv1.ForgetRequest{UserId: "u1"}))
			return err
		}, connect.CodePermissionDenied, ""},
	}
}

// badTaskAndSchemaCalls are bad review, task and schema calls.
func badTaskAndSchemaCalls(ctx context.Context) []badCase {
	badSchema := "name: travel\nversion: 1\npredicates:\n  - name: budget\n    value_type: nonsense\n"
	return []badCase{
		{"ListPending limit", "reviewerA", func(c *client.Client) error { _, err := c.ListPending(ctx, "", -1); return err }, connect.CodeInvalidArgument, "limit"},
		{"Decide bad id", "reviewerA", func(c *client.Client) error {
			_, err := c.Decide(ctx, &engramv1.DecideRequest{CandidateId: "x", Decision: engramv1.Decision_DECISION_CONFIRM})
			return err
		}, connect.CodeInvalidArgument, "candidate_id"},
		{"Decide no decision", "reviewerA", func(c *client.Client) error {
			_, err := c.Decide(ctx, &engramv1.DecideRequest{CandidateId: "6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11"})
			return err
		}, connect.CodeInvalidArgument, "decision"},
		{"Decide edit without value", "reviewerA", func(c *client.Client) error {
			_, err := c.Decide(ctx, &engramv1.DecideRequest{CandidateId: "6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11", Decision: engramv1.Decision_DECISION_EDIT})
			return err
		}, connect.CodeInvalidArgument, "edited_value"},
		{"Decide unknown candidate", "reviewerA", func(c *client.Client) error {
			_, err := c.Decide(ctx, &engramv1.DecideRequest{CandidateId: "6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11", Decision: engramv1.Decision_DECISION_CONFIRM})
			return err
		}, connect.CodeNotFound, ""},
		{"StartTask empty id", "agentA", func(c *client.Client) error { _, err := c.StartTask(ctx, &engramv1.StartTaskRequest{}); return err }, connect.CodeInvalidArgument, "task_id"},
		{"StartTask slash", "agentA", func(c *client.Client) error {
			_, err := c.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: "a/b"})
			return err
		}, connect.CodeInvalidArgument, "task_id"},
		{"StartTask default", "agentA", func(c *client.Client) error {
			_, err := c.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: "t1", ConfirmationDefault: "maybe"})
			return err
		}, connect.CodeInvalidArgument, "confirmation_default"},
		{"UpdateTask no op", "agentA", func(c *client.Client) error {
			_, err := c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: "t1"})
			return err
		}, connect.CodeInvalidArgument, "op"},
		{"UpdateTask plan without goal", "agentA", func(c *client.Client) error {
			_, err := c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: "t1", Op: &engramv1.UpdateTaskRequest_Plan{Plan: &engramv1.PlanOp{}}})
			return err
		}, connect.CodeInvalidArgument, "plan.goal"},
		{"UpdateTask step without action", "agentA", func(c *client.Client) error {
			_, err := c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: "t1", Op: &engramv1.UpdateTaskRequest_Plan{Plan: &engramv1.PlanOp{Goal: "g", Steps: []*engramv1.TaskStep{{Name: "s"}}}}})
			return err
		}, connect.CodeInvalidArgument, "plan.steps[0].action"},
		{"UpdateTask unknown task", "agentA", func(c *client.Client) error {
			_, err := c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: "t1", Op: &engramv1.UpdateTaskRequest_Cancel{Cancel: &engramv1.CancelOp{}}})
			return err
		}, connect.CodeNotFound, ""},
		{"RunStep empty id", "agentA", func(c *client.Client) error { _, err := c.RunStep(ctx, "", ""); return err }, connect.CodeInvalidArgument, "task_id"},
		{"GetTask unknown", "agentA", func(c *client.Client) error { _, err := c.GetTask(ctx, "nope"); return err }, connect.CodeNotFound, ""},
		{"GetSchema empty", "agentA", func(c *client.Client) error { _, err := c.GetSchema(ctx, "", 0); return err }, connect.CodeInvalidArgument, "name"},
		{"GetSchema unknown", "agentA", func(c *client.Client) error { _, err := c.GetSchema(ctx, "nope", 0); return err }, connect.CodeNotFound, ""},
		{"PutSchema empty source", "adminA", func(c *client.Client) error {
			_, err := c.PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "travel"})
			return err
		}, connect.CodeInvalidArgument, "source"},
		{"PutSchema invalid document", "adminA", func(c *client.Client) error {
			_, err := c.PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "travel", Source: badSchema})
			return err
		}, connect.CodeInvalidArgument, "source"},
		{"PutSchema name mismatch", "adminA", func(c *client.Client) error {
			src, _ := c.GetSchema(ctx, "travel", 0)
			_, err := c.PutSchema(ctx, &engramv1.PutSchemaRequest{Name: "other", Source: src.Schema.Source})
			return err
		}, connect.CodeInvalidArgument, "name"},
		{"SuggestSchemaChanges empty", "reviewerA", func(c *client.Client) error {
			_, err := c.Schema.SuggestSchemaChanges(ctx, connect.NewRequest(&engramv1.SuggestSchemaChangesRequest{}))
			return err
		}, connect.CodeInvalidArgument, "name"},
	}
}

func durationpbNew(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// Forget starts the erasure workflow of the caller's tenant and user, and joins it
// when asked again.
func TestForgetStartsErasure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client("adminA")
	res, err := admin.Memory.Forget(ctx, connect.NewRequest(&engramv1.ForgetRequest{UserId: "u1", Reason: "user asked"}))
	require.NoError(t, err)
	assert.Equal(t, "erase/"+e.tA+"/u1", res.Msg.WorkflowId)
	t.Cleanup(func() { _ = e.tc.TerminateWorkflow(context.Background(), res.Msg.WorkflowId, "", "test done") })
	again, err := admin.Memory.Forget(ctx, connect.NewRequest(&engramv1.ForgetRequest{UserId: "u1"}))
	require.NoError(t, err)
	assert.Equal(t, res.Msg.WorkflowId, again.Msg.WorkflowId)
	d, err := e.tc.DescribeWorkflowExecution(ctx, res.Msg.WorkflowId, "")
	require.NoError(t, err)
	assert.Equal(t, "EraseSubject", d.WorkflowExecutionInfo.Type.Name)
}

// With encryption at rest on, fact rows hold sealed text; the API's reads (GetFact,
// ListFacts, FactHistory) return clear text, and a retried ingest with the same
// content is still recognised.
func TestReadsDecryptSealedFacts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	kr, err := privacy.NewKeyring("k1", map[string][]byte{"k1": key})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Keyring: kr}))
	agent := e.client("agentA")
	ev := &engramv1.Event{IdempotencyKey: "sealed-1", UserId: "u1", Content: "我以后尽量都坐直飞", Schema: "travel", OccurredAt: timestamppb.New(base)}
	r, err := agent.Ingest(ctx, ev, client.Wait())
	require.NoError(t, err)
	require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, r.Reason)
	again, err := agent.Ingest(ctx, ev, client.Wait())
	require.NoError(t, err, "a retry hashes the same sealed content")
	assert.Equal(t, r.EventId, again.EventId)

	var sealed int
	require.NoError(t, e.st.DB().NewRaw("SELECT count(*) FROM facts WHERE id = ? AND key_id = 'k1' AND content LIKE 'ev1:%'", r.Outcomes[0].FactId).Scan(ctx, &sealed))
	require.Equal(t, 1, sealed, "the row is sealed at rest")

	f, err := agent.GetFact(ctx, r.Outcomes[0].FactId)
	require.NoError(t, err)
	assert.NotContains(t, f.Content, "ev1:")
	assert.Contains(t, f.Content, "direct")
	list, err := agent.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
	require.NoError(t, err)
	require.NotEmpty(t, list)
	for _, x := range list {
		assert.NotContains(t, x.Content, "ev1:")
	}
	h, err := agent.FactHistory(ctx, f.MemoryKey)
	require.NoError(t, err)
	require.NotEmpty(t, h)
	assert.Equal(t, f.Content, h[len(h)-1].Content)
}

// A reply shorter than server.CompressMinBytes is sent uncompressed to a client
// that accepts gzip; a longer one (a schema's source) compressed.
func TestSmallRepliesAreNotCompressed(t *testing.T) {
	e := newEnv(t)
	call := func(path, body string) (*http.Response, []byte) {
		req, err := http.NewRequest("POST", e.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("Authorization", "Bearer "+e.keys["agentA"])
		tr := &http.Transport{DisableCompression: true} // show the encoding as sent
		res, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		return res, b
	}
	small, b := call("/engram.v1.MemoryService/ListFacts", `{"userId":"u1"}`)
	assert.Empty(t, small.Header.Get("Content-Encoding"), "a %d-byte reply", len(b))
	assert.Less(t, len(b), server.CompressMinBytes)

	large, b := call("/engram.v1.SchemaService/GetSchema", `{"name":"travel"}`)
	assert.Equal(t, "gzip", large.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Greater(t, len(plain), server.CompressMinBytes)
	assert.Contains(t, string(plain), "travel")
}
