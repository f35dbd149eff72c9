package fakeopenai_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/fakeopenai"
)

func client(base, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = base
	return openai.NewClientWithConfig(cfg)
}

func chat(t *testing.T, c *openai.Client, text string) (string, error) {
	t.Helper()
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    "m",
		Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "rules"}, {Role: "user", Content: text}},
	})
	if err != nil {
		return "", err
	}
	return resp.Choices[0].Message.Content, nil
}

func TestQueueRulesDefault(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{
		Queue:   []fakeopenai.Response{fakeopenai.Raw(`{"broken`), fakeopenai.JSON(map[string]any{"candidates": []any{}})},
		Rules:   []fakeopenai.Rule{{Contains: "预算", Responses: []fakeopenai.Response{fakeopenai.Raw("first"), fakeopenai.Raw("second")}}},
		Default: fakeopenai.Raw("default"),
	})
	defer srv.Close()
	c := client(srv.BaseURL(), "k")

	for _, want := range []struct{ text, content string }{
		{"预算8000", `{"broken`}, // the queue comes first
		{"预算8000", `{"candidates":[]}`},
		{"预算8000", "first"}, // then rules, in order, the last repeating
		{"hello", "default"},
		{"预算8000", "second"},
		{"预算8000", "second"},
	} {
		got, err := chat(t, c, want.text)
		require.NoError(t, err)
		assert.Equal(t, want.content, got)
	}
	srv.Enqueue(fakeopenai.Raw("enqueued"))
	got, err := chat(t, c, "hello")
	require.NoError(t, err)
	assert.Equal(t, "enqueued", got)

	assert.Equal(t, 7, srv.ChatCalls())
	reqs := srv.ChatRequests()
	require.Len(t, reqs, 7)
	assert.Equal(t, "预算8000", reqs[0].UserText())
	assert.Contains(t, reqs[0].Prompt(), "rules")
	assert.Equal(t, "Bearer k", reqs[0].Header.Get("Authorization"))
	assert.Equal(t, http.StatusOK, reqs[0].Answered)
}

func TestEmptyDefaultIsNoCandidates(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{})
	defer srv.Close()
	got, err := chat(t, client(srv.BaseURL(), ""), "x")
	require.NoError(t, err)
	assert.Equal(t, fakeopenai.EmptyCandidates, got)
}

func TestErrorsAndRetryAfter(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{Queue: []fakeopenai.Response{fakeopenai.RateLimited(1500 * time.Millisecond), fakeopenai.Status(500)}})
	defer srv.Close()

	body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	resp, err := http.Post(srv.BaseURL()+"/chat/completions", "application/json", stringsReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"), "rounded up to whole seconds")

	_, err = chat(t, client(srv.BaseURL(), ""), "x")
	var apiErr *openai.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, 500, apiErr.HTTPStatusCode)
	assert.Equal(t, "server_error", apiErr.Type)
}

func TestAPIKeyAndUnknownPath(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{APIKey: "secret"})
	defer srv.Close()
	_, err := chat(t, client(srv.BaseURL(), "wrong"), "x")
	var apiErr *openai.APIError
	require.True(t, errors.As(err, &apiErr))
	assert.Equal(t, 401, apiErr.HTTPStatusCode)

	resp, err := http.Get(srv.BaseURL() + "/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 404, resp.StatusCode)
}

func TestDelayEndsWhenClientGivesUp(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{Default: fakeopenai.Delayed(time.Minute, fakeopenai.Response{})})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := client(srv.BaseURL(), "").CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	start := time.Now()
	srv.Close()
	assert.Less(t, time.Since(start), 5*time.Second, "Close does not wait for the scripted minute")
}

func TestEmbeddings(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{})
	defer srv.Close()
	c := client(srv.BaseURL(), "")
	resp, err := c.CreateEmbeddings(context.Background(), openai.EmbeddingRequestStrings{Input: []string{"a", "b", "a"}, Model: "e", Dimensions: 64})
	require.NoError(t, err)
	require.Len(t, resp.Data, 3)
	assert.Len(t, resp.Data[0].Embedding, 64)
	assert.Equal(t, resp.Data[0].Embedding, resp.Data[2].Embedding, "deterministic")
	assert.NotEqual(t, resp.Data[0].Embedding, resp.Data[1].Embedding)
	assert.Equal(t, fakeopenai.Vector("b", 64), resp.Data[1].Embedding)

	resp, err = c.CreateEmbeddings(context.Background(), openai.EmbeddingRequest{Input: "single", Model: "e"})
	require.NoError(t, err)
	assert.Len(t, resp.Data[0].Embedding, fakeopenai.DefaultEmbeddingDim)

	_, err = c.CreateEmbeddings(context.Background(), openai.EmbeddingRequestStrings{Input: []string{""}, Model: "e"})
	assert.Error(t, err, "empty input is rejected as by the real API")

	srv.EnqueueEmbedding(fakeopenai.Status(503))
	_, err = c.CreateEmbeddings(context.Background(), openai.EmbeddingRequestStrings{Input: []string{"x"}, Model: "e"})
	assert.Error(t, err)
	assert.Equal(t, 4, srv.EmbeddingCalls())
	assert.Equal(t, []string{"a", "b", "a"}, srv.Requests()[0].Embedding.Input)
}

func TestForcedEmbeddingDim(t *testing.T) {
	srv := fakeopenai.New(fakeopenai.Script{EmbeddingDim: 8})
	defer srv.Close()
	resp, err := client(srv.BaseURL(), "").CreateEmbeddings(context.Background(), openai.EmbeddingRequestStrings{Input: []string{"a"}, Model: "e", Dimensions: 512})
	require.NoError(t, err)
	assert.Len(t, resp.Data[0].Embedding, 8)
}

func TestServeStandalone(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	go func() { _ = fakeopenai.Serve(addr, fakeopenai.Script{Default: fakeopenai.Raw("standalone")}) }()

	c := client("http://"+addr+"/v1", "")
	var got string
	require.Eventually(t, func() bool {
		got, err = chat(t, c, "x")
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "standalone", got)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
