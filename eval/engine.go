package eval

import (
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/storage"
)

// DefaultRecaller builds the recall engine the runner measures.
func DefaultRecaller(st *storage.Store, em llm.Embedder) (Recaller, error) {
	return NewBaseline(st, em) // TODO(issue 7): recall.New once recall/ builds
}
