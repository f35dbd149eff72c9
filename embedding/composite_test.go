package embedding

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeEmbedder returns a fixed unit vector per text, recording what it was asked.
type fakeEmbedder struct {
	name string
	dim  int
	vec  func(text string) []float32
	err  error

	mu    sync.Mutex
	calls [][]string
}

func (f *fakeEmbedder) Name() string { return f.name }
func (f *fakeEmbedder) Dim() int     { return f.dim }
func (f *fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	f.calls = append(f.calls, texts)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = f.vec(t)
	}
	return out, nil
}

func axis(dim, k int) []float32 {
	v := make([]float32, dim)
	v[k] = 1
	return v
}

func TestCJKShare(t *testing.T) {
	assert.Equal(t, 0.0, CJKShare(""))
	assert.Equal(t, 0.0, CJKShare("Book a flight to Paris"))
	assert.Equal(t, 0.0, CJKShare("Привет, мир"))
	assert.Equal(t, 1.0, CJKShare("我想订一张去北京的机票"))
	assert.Equal(t, 1.0, CJKShare("東京で寿司を食べたい。"))
	assert.Equal(t, 1.0, CJKShare("안녕하세요"))
	// two CJK characters and one word (counting two): one half.
	assert.InDelta(t, 0.5, CJKShare("上海 ticket"), 1e-9)
	assert.InDelta(t, 4.0/(4+8), CJKShare("Book 一张 ticket to 上海 tomorrow"), 1e-9)
}

func TestCompositeEmbedder(t *testing.T) {
	const dim = 8
	neural := &fakeEmbedder{name: "neural", dim: dim, vec: func(string) []float32 { return axis(dim, 0) }}
	ngram := &fakeEmbedder{name: "ngram", dim: dim, vec: func(string) []float32 { return axis(dim, 1) }}
	e, err := NewCompositeEmbedder(neural, ngram)
	require.NoError(t, err)
	var _ Embedder = e
	assert.Equal(t, dim, e.Dim())
	assert.Equal(t, "composite(neural+ngram;cjk-share;ngram=0.5)", e.Name())

	texts := []string{"plain English", "全是中文", "上海 ticket", ""}
	vecs, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, vecs, len(texts))
	for i, v := range vecs {
		assert.InDelta(t, 1, norm2(v), 1e-6, "vector %d is unit length", i)
	}
	// English: neural at 1, n-gram at λ.
	assert.InDelta(t, 1/math.Sqrt(1.25), vecs[0][0], 1e-6)
	assert.InDelta(t, 0.5/math.Sqrt(1.25), vecs[0][1], 1e-6)
	// All CJK: the n-gram vector alone, and the neural embedder never sees the text.
	assert.Equal(t, axis(dim, 1), vecs[1])
	for _, call := range neural.calls {
		assert.NotContains(t, call, "全是中文")
	}
	// Half CJK: neural 0.5, n-gram 0.75.
	n := math.Hypot(0.5, 0.75)
	assert.InDelta(t, 0.5/n, vecs[2][0], 1e-6)
	assert.InDelta(t, 0.75/n, vecs[2][1], 1e-6)
	assert.Equal(t, [][]string{texts}, ngram.calls)
}

func TestCompositeEmbedderErrors(t *testing.T) {
	ok := func(dim int) *fakeEmbedder {
		return &fakeEmbedder{name: "x", dim: dim, vec: func(string) []float32 { return axis(dim, 0) }}
	}
	_, err := NewCompositeEmbedder(ok(8), ok(16))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dimension")
	_, err = NewCompositeEmbedder(nil, ok(8))
	require.Error(t, err)

	boom := errors.New("boom")
	bad := ok(8)
	bad.err = boom
	e, err := NewCompositeEmbedder(bad, ok(8))
	require.NoError(t, err)
	_, err = e.Embed(context.Background(), []string{"english text"})
	assert.ErrorIs(t, err, boom)
	// Only CJK: the failing neural part is not called.
	v, err := e.Embed(context.Background(), []string{"中文"})
	require.NoError(t, err)
	assert.Len(t, v, 1)

	e, err = NewCompositeEmbedder(ok(8), bad)
	require.NoError(t, err)
	_, err = e.Embed(context.Background(), []string{"中文"})
	assert.ErrorIs(t, err, boom)

	short := &fakeEmbedder{name: "short", dim: 8, vec: func(string) []float32 { return []float32{1} }}
	e, err = NewCompositeEmbedder(short, ok(8))
	require.NoError(t, err)
	_, err = e.Embed(context.Background(), []string{"text"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "dimension"))
}
