package embedding

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func norm2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestNGramEmbedderDefaults(t *testing.T) {
	e := NewNGramEmbedder(0)
	assert.Equal(t, 512, e.Dim())
	assert.Equal(t, DefaultEmbeddingDim, e.Dim())
	assert.Equal(t, "ngram-v1", e.Name())
	var _ Embedder = e

	vs, err := e.Embed(context.Background(), []string{"hello world", "", "   ", "订单12345"})
	require.NoError(t, err)
	require.Len(t, vs, 4)
	for i, v := range vs {
		assert.Len(t, v, 512)
		assert.InDelta(t, 1, norm2(v), 1e-5, "vector %d is unit length", i)
	}
	assert.Equal(t, vs[1], vs[2], "blank texts share the empty vector")
	assert.Equal(t, 64, len(NewNGramEmbedder(64).Vector("x")))
}

func TestNGramEmbedderDeterministic(t *testing.T) {
	a := NewNGramEmbedder(0).Vector("I prefer direct flights, 我以后尽量都坐直飞")
	b := NewNGramEmbedder(0).Vector("I prefer direct flights, 我以后尽量都坐直飞")
	assert.Equal(t, a, b)
}

// NFKC and lower-casing: full-width digits and letters, and case, do not matter.
func TestNGramEmbedderNormalises(t *testing.T) {
	e := NewNGramEmbedder(0)
	assert.InDelta(t, 1, Cosine(e.Vector("订单１２３４５"), e.Vector("订单12345")), 1e-6)
	assert.InDelta(t, 1, Cosine(e.Vector("Direct FLIGHTS"), e.Vector("direct flights")), 1e-6)
}

func TestNGramEmbedderSimilarity(t *testing.T) {
	e := NewNGramEmbedder(0)
	cases := []struct{ text, related, unrelated string }{
		{"我的订单12345没收到", "订单12345怎么还没到", "我喜欢直飞"},
		{"我以后尽量都坐直飞", "用户喜欢直飞航班", "我的订单12345没收到"},
		{"预算不超过8000元", "这次旅行预算调整到10000元", "我不喜欢红眼航班"},
		{"My order 12345 never arrived", "Where is order 12345? It has not arrived", "I prefer direct flights"},
		{"I prefer direct flights", "The user prefers a direct flight", "My order 12345 never arrived"},
		{"budget of 8000 yuan for the trip", "trip budget raised to 10000", "I like window seats"},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			v := e.Vector(c.text)
			rel := Cosine(v, e.Vector(c.related))
			unrel := Cosine(v, e.Vector(c.unrelated))
			t.Logf("related %.3f unrelated %.3f", rel, unrel)
			// Lexical similarity is modest in absolute terms (two short Chinese
			// sentences may share one word); what recall needs is the order, with a margin.
			assert.Greater(t, rel, unrel+0.05)
		})
	}
}

func TestNGramEmbedderConcurrent(t *testing.T) {
	e := NewNGramEmbedder(0)
	want := e.Vector("并发安全 concurrent use")
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if got := e.Vector("并发安全 concurrent use"); !assert.Equal(t, want, got) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNGramEmbedderHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewNGramEmbedder(0).Embed(ctx, []string{"a"})
	assert.ErrorIs(t, err, context.Canceled)
}

func BenchmarkNGramEmbed(b *testing.B) {
	e := NewNGramEmbedder(0)
	texts := []string{
		"我的订单12345没收到，已经等了一个星期了，能帮我查一下物流吗？",
		"I usually prefer direct flights and an aisle seat, and my budget for this trip is 10000 CNY.",
		"这次旅行预算调整到10000元，酒店最好离地铁站近一点。",
		"Remind me to renew my passport before the trip to Tokyo next Friday.",
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(texts)), "ns/text")
}
