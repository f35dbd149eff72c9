// Package lifecycle tests Engram's memory life cycle end to end on the real stack:
// erasure (with a worker SIGKILLed mid-erasure), maintenance workflows, redaction,
// encryption at rest and the access log.
package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

type env struct {
	t     *testing.T
	st    *storage.Store
	dsn   string
	c     client.Client
	queue string
}

func newEnv(t *testing.T) *env {
	st, dsn := testenv.StoreURL(t)
	return &env{t: t, st: st, dsn: dsn, c: testenv.Temporal(t), queue: testenv.TaskQueue(t)}
}

// inProcessWorker runs the write path and the life-cycle workflows in this process.
func (e *env) inProcessWorker(d lifecycle.Deps) {
	d.Store = e.st
	if d.Temporal == nil {
		d.Temporal = e.c
		d.Namespace = testenv.Namespace()
	}
	if d.Embedder == nil {
		d.Embedder = embedding.NewNGramEmbedder(storage.EmbeddingDim)
	}
	writetest.Worker(e.t, e.c, e.queue, writetest.Activities(e.st), func(w tworker.Worker) { lifecycle.Register(w, d) })
}

var base = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func (e *env) startWrite(in write.MemoryWriteInput) client.WorkflowRun {
	e.t.Helper()
	return writetest.Start(e.t, e.c, e.queue, in)
}

func (e *env) write(ev memory.IngestEvent) write.MemoryWriteResult {
	e.t.Helper()
	return writetest.Wait(e.t, e.startWrite(write.MemoryWriteInput{Event: ev}))
}

func (e *env) erase(in lifecycle.EraseSubjectInput) client.WorkflowRun {
	e.t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), lifecycle.EraseSubjectStartOptions(e.queue, in), lifecycle.EraseSubjectWorkflowName, in)
	require.NoError(e.t, err)
	return run
}

// tables lists every base table of the database, so a table added later is
// checked by the erasure tests without anyone remembering to add it.
func (e *env) tables() []string {
	e.t.Helper()
	var names []string
	require.NoError(e.t, e.st.DB().NewRaw(`SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`).Scan(context.Background(), &names))
	return names
}

func (e *env) hasColumn(table, col string) bool {
	var n int
	require.NoError(e.t, e.st.DB().NewRaw(`SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ? AND column_name = ?`, table, col).Scan(context.Background(), &n))
	return n == 1
}

// rowsMentioning counts, per table, the rows of tenant whose text contains any of
// needles (a user id, a fact id, an evidence id …). Tables without a tenant_id are
// searched whole.
func (e *env) rowsMentioning(tenant string, needles []string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, tb := range e.tables() {
		if tb == "bun_migrations" || tb == "bun_migration_locks" {
			continue
		}
		where := "true"
		args := []any{}
		if e.hasColumn(tb, "tenant_id") {
			where = "x.tenant_id = ?"
			args = append(args, tenant)
		}
		var ors []string
		for _, n := range needles {
			ors = append(ors, "x::text LIKE ?")
			args = append(args, "%"+n+"%")
		}
		if len(ors) == 0 {
			continue
		}
		var c int
		q := fmt.Sprintf("SELECT count(*) FROM %q x WHERE %s AND (%s)", tb, where, strings.Join(ors, " OR "))
		require.NoError(e.t, e.st.DB().NewRaw(q, args...).Scan(context.Background(), &c))
		if c > 0 {
			out[tb] = c
		}
	}
	return out
}

func (e *env) ids(q string, args ...any) []string {
	e.t.Helper()
	var out []string
	require.NoError(e.t, e.st.DB().NewRaw(q, args...).Scan(context.Background(), &out))
	return out
}
