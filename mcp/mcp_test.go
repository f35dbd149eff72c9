package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/mcp"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/server/servertest"
	"github.com/engramhq/engram/storage"
)

// env is the API and the MCP endpoint on one real HTTP server (as `engram serve`
// mounts them) over a fresh database, the Temporal dev server and a worker.
type env struct {
	url  string
	opts mcp.Options
	keys map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	stack := servertest.Start(t, nil)
	st := stack.Store
	deps := stack.Deps()
	api, err := server.New(deps)
	require.NoError(t, err)
	hs, err := server.NewHandlers(deps)
	require.NoError(t, err)
	opts := mcp.Options{Handlers: hs, Keys: st, Logger: stack.Log}
	mh, err := mcp.NewHTTPHandler(opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle("/mcp", mh)

	tA, tB := "mA-"+testenv.RandomID(8), "mB-"+testenv.RandomID(8)
	e := &env{url: servertest.Serve(t, mux), opts: opts, keys: map[string]string{}}
	for name, k := range map[string]storage.APIKey{
		"agentA":    {TenantID: tA, Principal: "agent-a", Roles: []string{"agent"}, UserID: "u1"},
		"reviewerA": {TenantID: tA, Principal: "alice", Roles: []string{"reviewer"}},
		"agentB":    {TenantID: tB, Principal: "agent-b", Roles: []string{"agent"}},
		"reviewerB": {TenantID: tB, Principal: "bob", Roles: []string{"reviewer"}},
	} {
		k := k
		key, err := st.CreateAPIKey(context.Background(), &k)
		require.NoError(t, err)
		e.keys[name] = key
	}
	return e
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) httpSession(t *testing.T, key string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "engram-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// call calls a tool and returns its structured content and its text.
func call(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "a tool error is a result, never a protocol error")
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	var m map[string]any
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &m))
	}
	return m, strings.Join(text, "\n"), res.IsError
}

func TestMCPOverHTTP(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// Without a key, or with a wrong one, the endpoint refuses before any MCP message.
	for _, key := range []string{"", "egk_not-a-key"} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "key %q: %s", key, body)
	}

	s := e.httpSession(t, e.keys["agentA"])
	tools, err := s.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		assert.NotEmpty(t, tl.Description, tl.Name)
		assert.NotNil(t, tl.InputSchema, tl.Name)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"fact_history", "forget_fact", "get_fact", "list_facts", "pending_reviews", "recall", "remember", "task_get", "task_start", "task_step"}, names)

	// remember waits for the write and returns the fact it produced.
	out, text, isErr := call(t, s, "remember", map[string]any{"content": "预算不超过8000元", "schema": "travel", "idempotency_key": "mcp-1"})
	require.False(t, isErr, text)
	assert.Equal(t, "WRITE_STATUS_COMMITTED", out["status"], text)
	outcomes, _ := out["outcomes"].([]any)
	require.NotEmpty(t, outcomes, text)
	factID, _ := outcomes[0].(map[string]any)["factId"].(string)
	require.NotEmpty(t, factID, text)

	// recall returns the context and the ranked items with their ids — the same
	// items as the same recall through Connect.
	out, text, isErr = call(t, s, "recall", map[string]any{"query": "预算是多少", "schema": "travel"})
	require.False(t, isErr, text)
	assert.Contains(t, out["context"], "8000")
	items, _ := out["items"].([]any)
	require.NotEmpty(t, items)
	var mcpIDs []string
	for _, it := range items {
		mcpIDs = append(mcpIDs, it.(map[string]any)["id"].(string))
	}
	assert.Contains(t, mcpIDs, factID)
	rc, err := client.New(e.url, e.keys["agentA"]).Recall(ctx, &engramv1.RecallRequest{Query: "预算是多少", Schema: "travel"})
	require.NoError(t, err)
	var connectIDs []string
	for _, it := range rc.Items {
		connectIDs = append(connectIDs, it.Id)
	}
	assert.Equal(t, connectIDs, mcpIDs, "MCP recall and Connect recall return the same items")

	// Facts: get, list, history.
	out, text, isErr = call(t, s, "get_fact", map[string]any{"fact_id": factID})
	require.False(t, isErr, text)
	fact := out["fact"].(map[string]any)
	assert.Equal(t, "FACT_STATUS_ACTIVE", fact["status"])
	out, text, isErr = call(t, s, "list_facts", map[string]any{"predicate": "budget", "statuses": []string{"active"}})
	require.False(t, isErr, text)
	assert.Len(t, out["facts"], 1)
	out, text, isErr = call(t, s, "fact_history", map[string]any{"memory_key": fact["memoryKey"]})
	require.False(t, isErr, text)
	assert.Len(t, out["revisions"], 1)

	// Bad arguments are tool errors that name the field; the session goes on.
	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"recall", map[string]any{"query": "x", "k": 500}, "k"},
		{"recall", map[string]any{}, "query"},
		{"recall", map[string]any{"query": "x", "as_of": "yesterday"}, "as_of"},
		{"get_fact", map[string]any{"fact_id": "nope"}, "fact_id"},
		{"remember", map[string]any{"content": "x", "schema": "nope"}, "schema"},
		{"remember", map[string]any{"content": "x", "colour": "red"}, "colour: unknown field; this tool takes content, user_id, schema"},
		{"list_facts", map[string]any{"statuses": []string{"alive"}}, "statuses[0]"},
		// Unknown keys (issue 50): named, with the closest key the tool takes.
		{"remember", map[string]any{"content": "这次旅行预算调整到10000元", "taskID": "trip-9", "occured_at": "2024-01-01T00:00:00Z"},
			"invalid_argument: occured_at: unknown field; did you mean `occurred_at`? (field: occured_at); taskID: unknown field; did you mean `task_id`? (field: taskID)"},
		{"recall", map[string]any{"query": "x", "budgetTokens": 500}, "budgetTokens: unknown field; did you mean `token_budget`?"},
		{"task_start", map[string]any{"task_id": "t-x", "goal": "g", "steps": []map[string]any{{"name": "s", "acton": "a", "input": map[string]any{"any": 1}}}},
			"steps[0].acton: unknown field; did you mean `action`?"},
	} {
		_, text, isErr := call(t, s, c.tool, c.args)
		assert.True(t, isErr, "%s %v", c.tool, c.args)
		assert.Contains(t, text, c.field, "%s %v", c.tool, c.args)
	}
	_, text, isErr = call(t, s, "list_facts", map[string]any{"predicate": "budget"})
	require.False(t, isErr, text)
	assert.NotContains(t, text, "10000", "a call with an unknown key writes nothing")

	// Another tenant's key: the fact does not exist for it.
	sb := e.httpSession(t, e.keys["agentB"])
	_, text, isErr = call(t, sb, "get_fact", map[string]any{"fact_id": factID})
	assert.True(t, isErr)
	assert.Contains(t, text, "not_found")
	_, text, isErr = call(t, e.httpSession(t, e.keys["reviewerB"]), "forget_fact", map[string]any{"fact_id": factID, "reason": "wrong"})
	assert.True(t, isErr)
	assert.Contains(t, text, "not_found")
	out, text, isErr = call(t, sb, "recall", map[string]any{"query": "预算是多少", "user_id": "u1", "schema": "travel"})
	require.False(t, isErr, text)
	assert.Empty(t, out["items"])

	// Reviews need a reviewer key.
	_, text, isErr = call(t, s, "pending_reviews", nil)
	assert.True(t, isErr)
	assert.Contains(t, text, "permission_denied")
	sr := e.httpSession(t, e.keys["reviewerA"])
	_, text, isErr = call(t, sr, "pending_reviews", map[string]any{"user_id": "u1"})
	assert.False(t, isErr, text)

	// Tasks.
	out, text, isErr = call(t, s, "task_start", map[string]any{"task_id": "trip-" + testenv.RandomID(6), "goal": "plan a trip", "steps": []map[string]any{{"name": "search", "action": "search_flights"}}})
	require.False(t, isErr, text)
	taskID := out["taskId"].(string)
	assert.Equal(t, "TASK_STATE_PLANNING", out["state"], text)
	out, text, isErr = call(t, s, "task_get", map[string]any{"task_id": taskID})
	require.False(t, isErr, text)
	assert.Equal(t, "plan a trip", out["goal"])
	_, text, isErr = call(t, sb, "task_get", map[string]any{"task_id": taskID})
	assert.True(t, isErr)
	assert.Contains(t, text, "not_found")

	// forget_fact (a reviewer's call) invalidates.
	_, text, isErr = call(t, s, "forget_fact", map[string]any{"fact_id": factID, "reason": "wrong"})
	assert.True(t, isErr)
	assert.Contains(t, text, "permission_denied")
	out, text, isErr = call(t, sr, "forget_fact", map[string]any{"fact_id": factID, "reason": "user asked"})
	require.False(t, isErr, text)
	assert.Equal(t, "FACT_STATUS_INVALIDATED", out["fact"].(map[string]any)["status"])
}

func TestMCPOverStdio(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A bad key is refused before any message.
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	err := mcp.ServeStdio(ctx, e.opts, "egk_wrong", sr, sw)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ENGRAM_API_KEY")
	require.Error(t, mcp.ServeStdio(ctx, e.opts, "", sr, sw))

	done := make(chan error, 1)
	go func() { done <- mcp.ServeStdio(ctx, e.opts, e.keys["agentA"], sr, sw) }()
	c := sdk.NewClient(&sdk.Implementation{Name: "engram-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.IOTransport{Reader: cr, Writer: cw}, nil)
	require.NoError(t, err)
	tools, err := s.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, tools.Tools, 10)
	out, text, isErr := call(t, s, "remember", map[string]any{"content": "预算不超过8000元", "schema": "travel"})
	require.False(t, isErr, text)
	assert.Equal(t, "WRITE_STATUS_COMMITTED", out["status"], text)
	out, text, isErr = call(t, s, "recall", map[string]any{"query": "预算是多少", "schema": "travel"})
	require.False(t, isErr, text)
	assert.NotEmpty(t, out["items"])
	_, text, isErr = call(t, s, "recall", map[string]any{"query": "x", "k": -1})
	assert.True(t, isErr)
	assert.Contains(t, text, "k")
	require.NoError(t, s.Close())
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stdio server did not stop when the client closed")
	}
}
