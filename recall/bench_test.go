package recall_test

import (
	"context"
	"testing"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// Benchmarks on a small synthetic data set (2 tenants × 5,000 facts + 5,000
// evidence) in a fresh database; `engram bench recall` measures the full size.
//
//	go test ./recall/ -run '^$' -bench . -benchtime 300x
func setupBench(b *testing.B) (*recallbench.Runner, []recall.Request) {
	st, dsn := testenv.StoreURL(b)
	ctx := context.Background()
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	w := recallbench.NewWorld(recallbench.Config{Tenants: 2, Facts: 5000, Evidence: 5000})
	if _, err := recallbench.Load(ctx, st, w, emb, nil); err != nil {
		b.Fatal(err)
	}
	if err := recallbench.EnsureBareIndex(ctx, dsn); err != nil {
		b.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{})
	b.Cleanup(func() { _ = eng.Close() })
	return &recallbench.Runner{Store: st, Engine: eng, Emb: emb}, recallbench.Queries(w, 500, 1)
}

func benchKind(b *testing.B, kind string) {
	r, reqs := setupBench(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := r.Measure(context.Background(), kind, reqs[i%len(reqs):i%len(reqs)+1], 1)
		if s.Errors > 0 {
			b.Fatal(s.FirstErr)
		}
	}
}

func BenchmarkRecall(b *testing.B)           { benchKind(b, recallbench.KindRecall) }
func BenchmarkBarePgvectorTopK(b *testing.B) { benchKind(b, recallbench.KindBareVec) }
func BenchmarkBareFullText(b *testing.B)     { benchKind(b, recallbench.KindBareText) }
