package embedding

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// countingEmbedder counts the texts it embeds.
type countingEmbedder struct {
	Embedder
	n atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.n.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

func TestCachedEmbedder(t *testing.T) {
	ctx := context.Background()
	inner := &countingEmbedder{Embedder: NewNGramEmbedder(64)}
	c, err := NewCachedEmbedder(inner, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := inner.Embedder.Embed(ctx, []string{"a b", "c d", "e f"})

	got, err := c.Embed(ctx, []string{"a b", "c d", "a b"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) || !slices.Equal(got[2], want[0]) {
		t.Fatal("cached vectors differ from the embedder's")
	}
	if n := inner.n.Load(); n != 3 { // the repeat within one call is a miss too: both embedded in one call
		t.Fatalf("embedded %d texts, want 3", n)
	}
	got[0][0] = 42 // the caller's copy
	again, _ := c.Embed(ctx, []string{"a b"})
	if again[0][0] != want[0][0] {
		t.Fatal("a caller's change to a returned vector reached the cache")
	}
	if n := inner.n.Load(); n != 3 {
		t.Fatalf("a cached text was embedded again (%d texts)", n)
	}

	// Size 2, used order a b (most recent), c d: adding e f evicts c d.
	if _, err := c.Embed(ctx, []string{"e f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Embed(ctx, []string{"a b", "e f"}); err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 4 {
		t.Fatalf("embedded %d texts, want 4 (a b and e f cached)", n)
	}
	if _, err := c.Embed(ctx, []string{"c d"}); err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 5 {
		t.Fatalf("embedded %d texts, want 5 (c d was evicted)", n)
	}
	if _, _, entries := c.Stats(); entries != 2 {
		t.Fatalf("%d entries, want at most 2", entries)
	}
	if c.Name() != inner.Name() || c.Dim() != 64 {
		t.Fatal("the cache must keep the embedder's name and dimension")
	}
	if _, err := NewCachedEmbedder(inner, 0); err == nil {
		t.Fatal("size 0 must be refused")
	}
}

// Run with -race: many callers over a small cache.
func TestCachedEmbedderConcurrent(t *testing.T) {
	ctx := context.Background()
	ng := NewNGramEmbedder(64)
	c, _ := NewCachedEmbedder(ng, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				text := fmt.Sprintf("question %d", (i*7+g)%20)
				got, err := c.Embed(ctx, []string{text})
				if err != nil {
					errs <- err
					return
				}
				want, _ := ng.Embed(ctx, []string{text})
				if !slices.Equal(got[0], want[0]) {
					errs <- fmt.Errorf("%q: wrong vector", text)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, _, n := c.Stats(); n > 8 {
		t.Fatalf("%d entries in a cache of 8", n)
	}
}
