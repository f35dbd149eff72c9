package embedding

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// CachedEmbedder puts a bounded cache of vectors, keyed by the exact text, in
// front of an embedder: recall embeds every question, and agents ask the same
// ones again and again (a USE-lite forward pass costs milliseconds, a lookup
// nanoseconds). The least recently used entry goes when the cache is full. It is
// safe for concurrent use when the embedder is; two callers missing the same text
// at once both embed it (the vectors are the same).
type CachedEmbedder struct {
	inner Embedder
	size  int

	mu  sync.Mutex
	lru *list.List // of *cacheEntry, most recent first
	m   map[string]*list.Element

	hits, misses atomic.Int64
}

type cacheEntry struct {
	text string
	vec  []float32
}

// NewCachedEmbedder caches up to size vectors of inner's (size > 0).
func NewCachedEmbedder(inner Embedder, size int) (*CachedEmbedder, error) {
	if inner == nil {
		return nil, fmt.Errorf("llm: cached embedder needs an embedder")
	}
	if size <= 0 {
		return nil, fmt.Errorf("llm: cached embedder size %d must be positive", size)
	}
	return &CachedEmbedder{inner: inner, size: size, lru: list.New(), m: make(map[string]*list.Element, size)}, nil
}

// Name is the inner embedder's: the vectors are its vectors.
func (c *CachedEmbedder) Name() string { return c.inner.Name() }

// Dim is the inner embedder's.
func (c *CachedEmbedder) Dim() int { return c.inner.Dim() }

// Stats returns the hits and misses so far, and the entries held.
func (c *CachedEmbedder) Stats() (hits, misses int64, entries int) {
	c.mu.Lock()
	n := c.lru.Len()
	c.mu.Unlock()
	return c.hits.Load(), c.misses.Load(), n
}

// Embed returns the cached vectors and embeds the rest in one call to the inner
// embedder. Every vector returned is the caller's own copy.
func (c *CachedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var missIdx []int
	var missTexts []string
	c.mu.Lock()
	for i, t := range texts {
		if el, ok := c.m[t]; ok {
			c.lru.MoveToFront(el)
			out[i] = slices.Clone(el.Value.(*cacheEntry).vec)
			continue
		}
		missIdx = append(missIdx, i)
		missTexts = append(missTexts, t)
	}
	c.mu.Unlock()
	c.hits.Add(int64(len(texts) - len(missIdx)))
	c.misses.Add(int64(len(missIdx)))
	if len(missTexts) == 0 {
		return out, nil
	}
	vecs, err := c.inner.Embed(ctx, missTexts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(missTexts) {
		return nil, fmt.Errorf("llm: %s returned %d vectors for %d texts", c.inner.Name(), len(vecs), len(missTexts))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, i := range missIdx {
		out[i] = vecs[k]
		t := missTexts[k]
		if el, ok := c.m[t]; ok { // embedded by another caller meanwhile
			c.lru.MoveToFront(el)
			continue
		}
		c.m[t] = c.lru.PushFront(&cacheEntry{text: t, vec: slices.Clone(vecs[k])})
		if c.lru.Len() > c.size {
			old := c.lru.Back()
			c.lru.Remove(old)
			delete(c.m, old.Value.(*cacheEntry).text)
		}
	}
	return out, nil
}
