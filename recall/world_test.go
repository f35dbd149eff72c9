package recall_test

import (
	"context"
	"testing"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// loadWorld loads the synthetic data set cfg describes (recallbench) into a fresh
// database with n-gram embeddings: the store, the embedder and the world.
func loadWorld(t *testing.T, cfg recallbench.Config) (*storage.Store, *embedding.NGramEmbedder, *recallbench.World) {
	t.Helper()
	st := testenv.Store(t)
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	w := recallbench.NewWorld(cfg)
	if _, err := recallbench.Load(context.Background(), st, w, emb, nil); err != nil {
		t.Fatal(err)
	}
	return st, emb, w
}
