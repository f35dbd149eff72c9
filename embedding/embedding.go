// Package embedding holds the embedders that need no network: character n-grams
// (NGramEmbedder), the USE-lite neural model blended with them (CompositeEmbedder,
// the default), a bounded cache for repeated texts (CachedEmbedder), and the
// Embedder interface every embedder implements, including llm's OpenAI-compatible
// one. The USE-lite TF.js graph interpreter is embedding/use.
//
// It imports only the standard library, x/text and embedding/use; nothing in
// Engram's domain.
package embedding

import (
	"context"
	"math"
)

// DefaultEmbeddingDim is the dimension both embedders produce unless told otherwise.
// It equals storage.EmbeddingDim, the dimension of every vector column: a database
// is created for one dimension and checks it at start, so an embedder of another
// dimension is a configuration error caught there.
const DefaultEmbeddingDim = 512

// Embedder turns texts into vectors for semantic recall. Implementations are safe for
// concurrent use and return one vector of Dim() values per text, in input order.
type Embedder interface {
	// Name identifies the embedder and its model, e.g. "ngram-v1" or
	// "openai:text-embedding-3-small"; vectors of different names are not comparable.
	Name() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Cosine is the cosine of two vectors of one length (0 when either is zero).
func Cosine(x, y []float32) float64 {
	var dot, nx, ny float64
	for i := range x {
		dot += float64(x[i]) * float64(y[i])
		nx += float64(x[i]) * float64(x[i])
		ny += float64(y[i]) * float64(y[i])
	}
	if nx == 0 || ny == 0 {
		return 0
	}
	return dot / math.Sqrt(nx*ny)
}
