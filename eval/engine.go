package eval

import (
	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// EngineRecaller builds the recall engine the runner measures as serve builds its
// own (app.RecallEngine: serve's keyword index, stored schemas, limits) over the
// run's store and embedder; o carries what a variant measures differently (the
// fusion weights of a grid, the access log).
func EngineRecaller(serve config.Config, o recall.Options) RecallerFactory {
	return func(st *storage.Store, em embedding.Embedder) (Recaller, error) {
		return app.RecallEngine(serve, st, em, nil, o)
	}
}
