package llm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/fakeopenai"
)

func newEmbedder(t *testing.T, srv *fakeopenai.Server, dim, batch int) *OpenAIEmbedder {
	t.Helper()
	e, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{BaseURL: srv.BaseURL(), APIKey: "k", Model: "text-embedding-3-small", Dim: dim, BatchSize: batch, Timeout: 2 * time.Second})
	require.NoError(t, err)
	return e
}

func TestOpenAIEmbedder(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{APIKey: "k"})
	e := newEmbedder(t, srv, 0, 2)
	var _ embedding.Embedder = e
	assert.Equal(t, 512, e.Dim())
	assert.Equal(t, "openai:text-embedding-3-small", e.Name())

	texts := []string{"我的订单12345没收到", "I prefer direct flights", "", "预算不超过8000元", "fifth"}
	vs, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, vs, len(texts))
	for i, v := range vs {
		assert.Len(t, v, 512)
		if texts[i] != "" {
			assert.Equal(t, fakeopenai.Vector(texts[i], 512), v, "vector %d belongs to its input", i)
		}
	}
	assert.Equal(t, 3, srv.EmbeddingCalls(), "five inputs in batches of two")
	for _, r := range srv.Requests() {
		require.NotNil(t, r.Embedding)
		assert.Equal(t, 512, r.Embedding.Dimensions, "the configured dimension is requested")
		assert.Equal(t, "text-embedding-3-small", r.Embedding.Model)
	}
}

func TestOpenAIEmbedderDimensionMismatch(t *testing.T) {
	// The endpoint ignores "dimensions" and answers its native size.
	srv := newFake(t, fakeopenai.Script{EmbeddingDim: 1536})
	e := newEmbedder(t, srv, 512, 0)
	_, err := e.Embed(context.Background(), []string{"a", "b"})
	require.Error(t, err)
	var de *DimensionError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1536, de.Got)
	assert.Equal(t, 512, de.Want)
	assert.Contains(t, err.Error(), "1536 dimensions")
	assert.Contains(t, err.Error(), "configured 512")
}

func TestOpenAIEmbedderOtherDimension(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{})
	e := newEmbedder(t, srv, 256, 0)
	vs, err := e.Embed(context.Background(), []string{"a"})
	require.NoError(t, err)
	assert.Len(t, vs[0], 256)
}

func TestOpenAIEmbedderCallErrors(t *testing.T) {
	for _, tc := range []struct {
		resp      fakeopenai.Response
		kind      string
		retryable bool
	}{
		{fakeopenai.RateLimited(time.Second), KindRateLimited, true},
		{fakeopenai.Status(502), KindServer, true},
		{fakeopenai.Status(401), KindAuth, false},
		{fakeopenai.Delayed(3*time.Second, fakeopenai.Response{}), KindTimeout, true},
	} {
		t.Run(fmt.Sprint(tc.kind, tc.resp.Status), func(t *testing.T) {
			srv := newFake(t, fakeopenai.Script{EmbeddingQueue: []fakeopenai.Response{tc.resp}})
			e, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{BaseURL: srv.BaseURL(), Model: "m", Timeout: 200 * time.Millisecond})
			require.NoError(t, err)
			_, err = e.Embed(context.Background(), []string{"x"})
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.kind, ce.Kind)
			assert.Equal(t, tc.retryable, ce.Retryable)
			assert.Equal(t, "embeddings", ce.Op)
		})
	}
}

func TestNewOpenAIEmbedderValidates(t *testing.T) {
	_, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{})
	assert.Error(t, err)
	_, err = NewOpenAIEmbedder(OpenAIEmbedderConfig{Model: "m", Dim: -1})
	assert.Error(t, err)
}
