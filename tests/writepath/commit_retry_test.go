package writepath

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// A Commit retried after its transaction committed (the worker died before
// reporting it) returns what the first attempt returned, fact ids included, so
// Index still runs and no ACTIVE fact is left without an embedding. On the fast
// path Govern runs again too (its local activity's result was never recorded):
// it keeps the committed decisions instead of re-deciding against the facts the
// first commit wrote (which made the fact a "duplicate" of itself, never indexed).
func TestCommitRetriedReturnsTheSameResult(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	a := writetest.Activities(st)
	tenant := "commit-" + testenv.RandomID(6)
	ev := writetest.Event(tenant, "u1", "travel", "预算不超过8000元", base)
	ev.SessionID = ""
	wfID := write.MemoryWriteWorkflowID(tenant, ev.IdempotencyKey)
	rec, err := a.Record(ctx, write.RecordInput{Event: ev, WorkflowID: wfID})
	require.NoError(t, err)
	ev.Schema = rec.Schema
	out, err := a.Extract(ctx, write.ExtractInput{Event: ev, Recent: rec.Recent, Known: rec.Known})
	require.NoError(t, err)
	v, err := a.Validate(ctx, write.ValidateInput{TenantID: tenant, Schema: ev.Schema, Raw: out.Raw})
	require.NoError(t, err)
	require.Empty(t, v.Errors)
	require.NotEmpty(t, v.Candidates)
	gov, err := a.Govern(ctx, write.GovernInput{Event: ev, EventID: rec.EventID, EvidenceID: rec.EvidenceID, WorkflowID: wfID, Candidates: v.Candidates})
	require.NoError(t, err)
	in := write.CommitInput{Event: ev, EventID: rec.EventID, EvidenceID: rec.EvidenceID, WorkflowID: wfID, Items: gov.Items}

	first, err := a.Commit(ctx, in)
	require.NoError(t, err)
	require.NotEmpty(t, first.FactIDs, "the first commit wrote facts")
	again, err := a.Commit(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	regov, err := a.Govern(ctx, write.GovernInput{Event: ev, EventID: rec.EventID, EvidenceID: rec.EvidenceID, WorkflowID: wfID, Candidates: v.Candidates})
	require.NoError(t, err)
	in.Items = regov.Items
	again, err = a.Commit(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	require.NoError(t, a.Index(ctx, write.IndexInput{TenantID: tenant, FactIDs: again.FactIDs}))
	e := &env{t: t, st: st}
	assert.Equal(t, len(first.FactIDs), e.count("facts", "tenant_id = ? AND status = ?", tenant, memory.FactActive))
	assert.Zero(t, e.count("facts", "tenant_id = ? AND status = ? AND embedding IS NULL", tenant, memory.FactActive))
}

// FailEvents marks what has not finished and leaves final statuses alone.
func TestFailEventsLeavesFinishedEvents(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	tenant := "fail-" + testenv.RandomID(6)
	var ids []string
	for _, k := range []string{"a", "b", "c"} {
		ids = append(ids, storeEvent(t, st, tenant, k))
	}
	require.NoError(t, st.SetEventStatus(ctx, tenant, ids[0], memory.EventCommitted, ""))

	n, err := st.FailEvents(ctx, tenant, []string{ids[1]}, []string{"a", "c"}, "the write failed: boom")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	counts, err := st.EventStatusCounts(ctx, tenant)
	require.NoError(t, err)
	assert.Equal(t, map[memory.EventStatus]int{memory.EventCommitted: 1, memory.EventFailed: 2}, counts)
	got, err := st.GetEvent(ctx, tenant, ids[2])
	require.NoError(t, err)
	assert.Equal(t, "the write failed: boom", got.StatusReason)
}

// storeEvent stores an event of key as Ingest does before any workflow runs
// (PROCESSING, naming its MemoryWrite's id) and returns its id.
func storeEvent(t *testing.T, st *storage.Store, tenant, key string) string {
	t.Helper()
	e := writetest.Event(tenant, "u1", "general", "hello "+key, base)
	e.IdempotencyKey = key
	require.NoError(t, e.Validate())
	row, _, err := st.InsertEvent(context.Background(), tenant, storage.NewEvent(e, write.MemoryWriteWorkflowID(tenant, key), storage.ProtectedContent{EventContent: e.Content, Stored: e.Content, Redacted: e.Content}))
	require.NoError(t, err)
	return row.ID
}
