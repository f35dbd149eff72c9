package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/fakeopenai"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// budgetDoc is what a model following the travel schema answers for
// "这次旅行预算调整到10000元" in a task: a TASK-scope budget of 10000 CNY.
func budgetDoc() map[string]any {
	return map[string]any{"candidates": []any{map[string]any{
		"memory_type":       "CONSTRAINT",
		"scope":             "TASK",
		"subject":           "user",
		"predicate":         "budget",
		"object":            "10000 CNY",
		"content":           "这次旅行的预算调整为10000元",
		"entity_type":       nil,
		"entity_id":         nil,
		"attributes":        map[string]any{"max": 10000, "currency": "CNY"},
		"confidence":        0.95,
		"origin":            "STATED",
		"retraction":        false,
		"valid_from":        nil,
		"valid_until":       nil,
		"relations":         []any{},
		"extractor":         nil,
		"extractor_version": nil,
	}}}
}

func travel(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Builtin("travel")
	require.NoError(t, err)
	return s
}

func newFake(t *testing.T, script fakeopenai.Script) *fakeopenai.Server {
	t.Helper()
	srv := fakeopenai.New(script)
	t.Cleanup(srv.Close)
	return srv
}

func newExtractor(t *testing.T, srv *fakeopenai.Server, timeout time.Duration) *OpenAIExtractor {
	t.Helper()
	x, err := NewOpenAIExtractor(OpenAIConfig{BaseURL: srv.BaseURL(), APIKey: "test-key", Model: "fake-model", Timeout: timeout})
	require.NoError(t, err)
	return x
}

var tripInput = ExtractInput{
	Text:       "这次旅行预算调整到10000元",
	OccurredAt: time.Date(2025, 3, 14, 10, 30, 0, 0, time.FixedZone("CST", 8*3600)),
	Speaker:    "user",
	UserID:     "u1",
	SessionID:  "s1",
	TaskID:     "trip-1",
	Recent:     []string{"帮我规划去东京的旅行", "好的，预算是多少？"},
	Known:      []memory.EntityRef{{Type: "Trip", ID: "trip-1", State: "PLANNING"}},
}

func TestOpenAIExtractorGoodOutputParses(t *testing.T) {
	s := travel(t)
	srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.JSON(budgetDoc())}})
	x := newExtractor(t, srv, 5*time.Second)

	out, err := x.Extract(context.Background(), s, tripInput)
	require.NoError(t, err)
	assert.Equal(t, "openai:fake-model", out.Extractor)
	assert.Equal(t, "openai:fake-model", x.Name())
	assert.Equal(t, OpenAIPromptVersion, out.Version)

	cands, errs := s.ParseCandidates([]byte(out.Raw))
	require.Empty(t, errs)
	require.Len(t, cands, 1)
	c := cands[0]
	assert.Equal(t, memory.TypeConstraint, c.MemoryType)
	assert.Equal(t, memory.ScopeTask, c.Scope)
	assert.Equal(t, "budget", c.Predicate)
	assert.Equal(t, "10000 CNY", c.Object)
	assert.Equal(t, memory.OriginStated, c.Origin)
	assert.Equal(t, 1, srv.ChatCalls())
}

func TestOpenAIExtractorRequest(t *testing.T) {
	s := travel(t)
	srv := newFake(t, fakeopenai.Script{APIKey: "test-key"})
	x := newExtractor(t, srv, 5*time.Second)

	_, err := x.Extract(context.Background(), s, tripInput)
	require.NoError(t, err)

	reqs := srv.ChatRequests()
	require.Len(t, reqs, 1)
	req := reqs[0].Chat
	assert.Equal(t, "fake-model", req.Model)
	assert.Less(t, req.Temperature, float32(1e-6), "temperature must be sent as (practically) 0")
	assert.Contains(t, string(reqs[0].Body), `"temperature"`, "a zero temperature must not be omitted")

	require.NotNil(t, req.ResponseFormat)
	assert.Equal(t, openai.ChatCompletionResponseFormatTypeJSONSchema, req.ResponseFormat.Type)
	require.NotNil(t, req.ResponseFormat.JSONSchema)
	assert.True(t, req.ResponseFormat.JSONSchema.Strict)
	assert.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, req.ResponseFormat.JSONSchema.Name)
	sent, err := json.Marshal(req.ResponseFormat.JSONSchema.Schema)
	require.NoError(t, err)
	want, err := json.Marshal(s.JSONSchema())
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(sent))

	require.Len(t, req.Messages, 2)
	assert.Equal(t, openai.ChatMessageRoleSystem, req.Messages[0].Role)
	assert.Contains(t, req.Messages[0].Content, s.Prompt(), "system prompt carries the schema's descriptions and examples")
	for _, rule := range []string{"STATED", "INFERRED", "this trip", "from now on", "retraction", "昨天", "next Friday", "known entities"} {
		assert.Contains(t, req.Messages[0].Content, rule)
	}
	user := req.Messages[1].Content
	assert.Contains(t, user, "2025-03-14T10:30:00+08:00 (Friday)")
	assert.Contains(t, user, "yesterday was 2025-03-13")
	assert.Contains(t, user, "这次旅行预算调整到10000元")
	assert.Contains(t, user, "Trip:trip-1 (state PLANNING)")
	assert.Contains(t, user, "帮我规划去东京的旅行")
	assert.Contains(t, user, "user id u1")
	assert.Contains(t, user, "Current task: trip-1")
	assert.NotContains(t, user, "rejected by validation")
}

// Bad output is not an error of the extractor: it comes back as Raw, and the caller's
// validation turns it into feedback.
func TestOpenAIExtractorBadOutputIsRaw(t *testing.T) {
	s := travel(t)
	invalid := budgetDoc()
	invalid["candidates"].([]any)[0].(map[string]any)["scope"] = "FOREVER"
	broken := `{"candidates":[{"memory_type":"CONSTRAINT","scope":`
	srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.JSON(invalid), fakeopenai.Raw(broken)}})
	x := newExtractor(t, srv, 5*time.Second)

	out, err := x.Extract(context.Background(), s, tripInput)
	require.NoError(t, err)
	_, errs := s.ParseCandidates([]byte(out.Raw))
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[0].Field, "scope")

	out, err = x.Extract(context.Background(), s, tripInput)
	require.NoError(t, err)
	assert.Equal(t, broken, out.Raw)
	_, errs = s.ParseCandidates([]byte(out.Raw))
	require.NotEmpty(t, errs)
	assert.Equal(t, "$", errs[0].Field)
}

func TestOpenAIExtractorFeedbackInSecondPrompt(t *testing.T) {
	s := travel(t)
	invalid := budgetDoc()
	invalid["candidates"].([]any)[0].(map[string]any)["scope"] = "FOREVER"
	srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.JSON(invalid), fakeopenai.JSON(budgetDoc())}})
	x := newExtractor(t, srv, 5*time.Second)

	in := tripInput
	out, err := x.Extract(context.Background(), s, in)
	require.NoError(t, err)
	_, errs := s.ParseCandidates([]byte(out.Raw))
	require.NotEmpty(t, errs)
	for _, e := range errs {
		in.Feedback = append(in.Feedback, e.Error())
	}

	out, err = x.Extract(context.Background(), s, in)
	require.NoError(t, err)
	cands, errs := s.ParseCandidates([]byte(out.Raw))
	require.Empty(t, errs)
	require.Len(t, cands, 1)

	reqs := srv.ChatRequests()
	require.Len(t, reqs, 2)
	assert.NotContains(t, reqs[0].Prompt(), "rejected by validation")
	second := reqs[1].Prompt()
	assert.Contains(t, second, "rejected by validation")
	assert.Contains(t, second, "fixes every error")
	for _, f := range in.Feedback {
		assert.Contains(t, second, f)
	}
}

func TestOpenAIExtractorCallErrors(t *testing.T) {
	s := travel(t)
	cases := []struct {
		name       string
		resp       fakeopenai.Response
		kind       string
		retryable  bool
		status     int
		retryAfter time.Duration
	}{
		{"timeout", fakeopenai.Delayed(2*time.Second, fakeopenai.JSON(budgetDoc())), KindTimeout, true, 0, 0},
		{"rate limited", fakeopenai.RateLimited(3 * time.Second), KindRateLimited, true, 429, 3 * time.Second},
		{"server error", fakeopenai.Status(500), KindServer, true, 500, 0},
		{"unavailable", fakeopenai.Status(503), KindServer, true, 503, 0},
		{"unauthorized", fakeopenai.Status(401), KindAuth, false, 401, 0},
		{"forbidden", fakeopenai.Status(403), KindAuth, false, 403, 0},
		{"bad request", fakeopenai.Status(400), KindBadRequest, false, 400, 0},
		{"unknown model", fakeopenai.Status(404), KindBadRequest, false, 404, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{tc.resp}})
			x := newExtractor(t, srv, 200*time.Millisecond)
			start := time.Now()
			_, err := x.Extract(context.Background(), s, tripInput)
			require.Error(t, err)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.kind, ce.Kind)
			assert.Equal(t, tc.retryable, ce.Retryable)
			assert.Equal(t, tc.status, ce.Status)
			assert.Equal(t, tc.retryAfter, ce.RetryAfter)
			assert.Equal(t, "chat", ce.Op)
			assert.Less(t, time.Since(start), 1500*time.Millisecond, "the client timeout must cut the call short")
			assert.Equal(t, 1, srv.ChatCalls())
		})
	}
}

func TestOpenAIExtractorAuthKeyChecked(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{APIKey: "right"})
	x, err := NewOpenAIExtractor(OpenAIConfig{BaseURL: srv.BaseURL(), APIKey: "wrong", Model: "m"})
	require.NoError(t, err)
	_, err = x.Extract(context.Background(), travel(t), tripInput)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, KindAuth, ce.Kind)
	assert.False(t, ce.Retryable)
}

func TestOpenAIExtractorUnreachableIsRetryable(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{})
	base := srv.BaseURL()
	srv.Close()
	x, err := NewOpenAIExtractor(OpenAIConfig{BaseURL: base, Model: "m", Timeout: time.Second})
	require.NoError(t, err)
	_, err = x.Extract(context.Background(), travel(t), tripInput)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.Retryable)
	assert.Equal(t, KindServer, ce.Kind)
}

// A caller that gives up is not the endpoint's fault: no CallError to classify.
func TestOpenAIExtractorCancelled(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{Default: fakeopenai.Delayed(5*time.Second, fakeopenai.Response{})})
	x := newExtractor(t, srv, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := x.Extract(ctx, travel(t), tripInput)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled))
	var ce *CallError
	assert.False(t, errors.As(err, &ce))
}

func TestNewOpenAIExtractorNeedsModel(t *testing.T) {
	_, err := NewOpenAIExtractor(OpenAIConfig{BaseURL: "http://localhost"})
	assert.Error(t, err)
}

func TestExtractionUserPromptWithoutTimeOrTask(t *testing.T) {
	p := ExtractionUserPrompt(ExtractInput{Text: "I prefer aisle seats"})
	assert.Contains(t, p, "Event time: unknown")
	assert.Contains(t, p, "do not use TASK scope")
	assert.Contains(t, p, "Speaker: user")

	var recent []string
	for i := range 20 {
		recent = append(recent, "turn "+strings.Repeat("x", i))
	}
	p = ExtractionUserPrompt(ExtractInput{Text: "t", Recent: recent})
	assert.Equal(t, maxRecentTurns, strings.Count(p, "- turn"), "only the last few turns go into the prompt")
	assert.Contains(t, p, recent[len(recent)-1])
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, 7*time.Second, parseRetryAfter("7", now))
	assert.Equal(t, 1500*time.Millisecond, parseRetryAfter("1.5", now))
	assert.Equal(t, 30*time.Second, parseRetryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now))
	assert.Zero(t, parseRetryAfter("", now))
	assert.Zero(t, parseRetryAfter("soon", now))
}

func TestSchemaFormatName(t *testing.T) {
	s := travel(t)
	assert.Equal(t, "engram_travel_v1", schemaFormatName(s))
}

// A turn said by a named person in a conversation between several people tells the
// LLM who the subject is and what not to propose.
func TestExtractionUserPromptNamesTheSpeaker(t *testing.T) {
	p := ExtractionUserPrompt(ExtractInput{Text: "I love hiking", Speaker: "Maya", UserID: "conv-1"})
	assert.Contains(t, p, "Speaker: Maya (user id conv-1)")
	assert.Contains(t, p, `subject "Maya"`)
	assert.Contains(t, p, "propose nothing from questions, empathy")
	assert.NotContains(t, ExtractionUserPrompt(ExtractInput{Text: "x", Speaker: "USER"}), "Several people talk")
}

// An agent's turn is sent only when the schema lets the agent assert a key, and
// the prompt says that only those keys may come of it; a schema that lets the
// agent assert nothing is not asked (every candidate would be rejected).
func TestOpenAIExtractorAgentTurns(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.JSON(map[string]any{"candidates": []any{}})}})
	x := newExtractor(t, srv, 5*time.Second)
	agent := tripInput
	agent.Speaker, agent.Text = "AGENT", "Searching flights with what I remember: budget = 10000 CNY (task scope);"

	out, err := x.Extract(context.Background(), travel(t), agent)
	require.NoError(t, err)
	assert.Equal(t, 0, srv.ChatCalls(), "travel lets no agent assert a key: the model is not asked")
	cands, errs := travel(t).ParseCandidates([]byte(out.Raw))
	require.Empty(t, errs)
	assert.Empty(t, cands)
	assert.Equal(t, OpenAIPromptVersion, out.Version)

	s, err := schema.Load([]byte(`name: agent_trips
version: 1
extends: travel
predicates:
  - {name: trip_status, memory_type: FACT, value_type: enum, enum: [searching, booked], scopes: [TASK], asserted_by: [USER, AGENT]}
`))
	require.NoError(t, err)
	_, err = x.Extract(context.Background(), s, agent)
	require.NoError(t, err)
	require.Equal(t, 1, srv.ChatCalls(), "a schema with an agent key is asked")
	p := ExtractionUserPrompt(agent)
	assert.Contains(t, p, "This turn was said by the AGENT, not by the user")
	assert.Contains(t, p, `marks "Asserted by" AGENT`)
	assert.NotContains(t, p, "Several people talk")
	assert.Contains(t, ExtractionSystemPrompt(s), "Asserted by: USER, AGENT.")
	for _, sp := range []string{"user", "USER", "Maya", ""} {
		assert.NotContains(t, ExtractionUserPrompt(ExtractInput{Text: "x", Speaker: sp}), "not by the user", sp)
	}
}
