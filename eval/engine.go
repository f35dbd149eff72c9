package eval

import (
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// DefaultRecaller builds the recall engine the runner measures: Postgres full-text
// keywords, the run's embedder, the built-in schemas and default options.
func DefaultRecaller(st *storage.Store, em embedding.Embedder) (Recaller, error) {
	return recall.New(st, em, recall.NewPostgresKeyword(st), schema.Builtins, recall.Options{}), nil
}
