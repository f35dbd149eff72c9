package recall_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
)

type countingEmbedder struct {
	embedding.Embedder
	texts atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

// The engine embeds a question once: asked again, it is answered from the query
// embedding cache with the same items; with the cache off, every recall embeds.
func TestQueryEmbeddingCache(t *testing.T) {
	st, ng, w := loadWorld(t, recallbench.Config{Tenants: 1, Facts: 200, Evidence: 200})
	ctx := context.Background()
	req := recallbench.Queries(w, 1, 3)[0]
	for _, tc := range []struct {
		name  string
		size  int
		texts int64
	}{{"default cache", 0, 1}, {"cache off", -1, 3}} {
		emb := &countingEmbedder{Embedder: ng}
		eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, QueryEmbeddingCache: tc.size})
		var first []recall.Item
		for i := 0; i < 3; i++ {
			resp, err := eng.Recall(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = resp.Items
			} else if !reflect.DeepEqual(ids(first), ids(resp.Items)) {
				t.Fatalf("%s: recall %d returned other items", tc.name, i)
			}
		}
		_ = eng.Close()
		if got := emb.texts.Load(); got != tc.texts {
			t.Errorf("%s: embedded %d texts for 3 recalls of one question, want %d", tc.name, got, tc.texts)
		}
	}
}

func ids(items []recall.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Kind) + ":" + it.ID
	}
	return out
}
