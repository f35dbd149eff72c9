// Package writetest runs the write path as the tests on the real stack run it: its
// activities with the rule extractor, the n-gram embedder, the built-in schemas
// and the default governance (a test changes what it needs), a worker of them in
// the test's process, and writes started and awaited through Temporal.
package writetest

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// Activities are the write path's activities over st: the rule extractor, the
// n-gram embedder, the built-in schemas and the default governance.
func Activities(st *storage.Store) *write.MemoryActivities {
	return &write.MemoryActivities{
		Store: st, Extractor: llm.NewRuleExtractor(), Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim),
		Schemas: schema.Builtins, Gov: governance.DefaultConfig(),
	}
}

// Worker runs acts (and what more registers) on a worker of queue until the
// test ends.
func Worker(tb testing.TB, c client.Client, queue string, acts *write.MemoryActivities, more ...func(tworker.Worker)) {
	tb.Helper()
	w := tworker.New(c, queue, tworker.Options{})
	write.Register(w, acts)
	for _, register := range more {
		register(w)
	}
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
}

// Event is a message of user with a fresh idempotency key, in the session
// "s-"+user.
func Event(tenant, user, schemaName, text string, at time.Time) memory.IngestEvent {
	return memory.IngestEvent{TenantID: tenant, IdempotencyKey: "k-" + testenv.RandomID(10), UserID: user, Schema: schemaName, Content: text, OccurredAt: at, SessionID: "s-" + user}
}

// Start starts the write of in on queue.
func Start(tb testing.TB, c client.Client, queue string, in write.MemoryWriteInput) client.WorkflowRun {
	tb.Helper()
	run, err := write.Start(context.Background(), c, queue, in)
	if err != nil {
		tb.Fatal(err)
	}
	return run
}

// Wait returns the result of a write, failing the test after a minute.
func Wait(tb testing.TB, run client.WorkflowRun) write.MemoryWriteResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res write.MemoryWriteResult
	if err := run.Get(ctx, &res); err != nil {
		tb.Fatal(err)
	}
	return res
}
