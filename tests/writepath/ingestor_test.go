package writepath

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// The Ingestor on its own, against the real stack (no API in front): a waited
// write is committed with its event, run and candidate outcomes; the same event
// again, sent without a time, joins the stored write (same event, same run); the
// key with other content is a KeyConflictError, which is an idempotency
// conflict; a batch reusing that key names the event's place; an
// acknowledgement handed to the Starter is durable and its write runs.
func TestIngestorRecordsStartsAndRefuses(t *testing.T) {
	c := testenv.Temporal(t)
	st := testenv.Store(t)
	q := startWriteWorker(t, c, st, llm.NewRuleExtractor(), embedding.NewNGramEmbedder(storage.EmbeddingDim))
	starter := write.NewStarter(c, q, nil, write.StarterOptions{Workers: 1})
	t.Cleanup(func() { starter.Close(10 * time.Second) })
	ing := write.NewIngestor(st, c, write.IngestorOptions{TaskQueue: q, ReviewTimeout: 5 * time.Second, Starter: starter})
	ctx := context.Background()
	tenant, user := "ing-"+testenv.RandomID(6), "u-"+testenv.RandomID(6)
	valid := func(e memory.IngestEvent) memory.IngestEvent { // as the API hands them over
		require.NoError(t, e.Validate())
		return e
	}

	ev := valid(writetest.Event(tenant, user, "travel", "预算不超过8000元", base))
	got, err := ing.Ingest(ctx, ev, false, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, write.WriteCommitted, got.Status)
	assert.Equal(t, write.MemoryWriteWorkflowID(tenant, ev.IdempotencyKey), got.WorkflowID)
	assert.NotEmpty(t, got.RunID)
	assert.NotEmpty(t, got.EventID)
	require.Len(t, got.Outcomes, 1)
	assert.NotEmpty(t, got.Outcomes[0].FactID)

	retry := ev
	retry.OccurredAt = time.Now().UTC().Truncate(time.Microsecond) // as a retry sent without a time defaults it
	again, err := ing.Ingest(ctx, retry, true, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, got.EventID, again.EventID, "the retry is the stored event")
	assert.Equal(t, got.RunID, again.RunID, "and joins its write")
	assert.Equal(t, write.WriteCommitted, again.Status)

	other := ev
	other.Content = "预算不超过9000元"
	_, err = ing.Ingest(ctx, other, false, 30*time.Second)
	var kc *write.KeyConflictError
	require.ErrorAs(t, err, &kc)
	assert.Equal(t, -1, kc.Index)
	assert.True(t, errors.Is(err, storage.ErrIdempotencyConflict))

	fresh := valid(writetest.Event(tenant, user, "travel", "我喜欢靠过道的座位", base.Add(time.Hour)))
	_, err = ing.IngestBatch(ctx, write.Batch{TenantID: tenant, Events: []memory.IngestEvent{fresh, other}}, 30*time.Second)
	require.ErrorAs(t, err, &kc)
	assert.Equal(t, 1, kc.Index, "the batch's second event reuses the key")

	ack, err := ing.Ingest(ctx, fresh, false, 0)
	require.NoError(t, err)
	assert.Equal(t, write.WriteRunning, ack.Status)
	assert.Empty(t, ack.RunID, "the start was handed to the Starter")
	testenv.Eventually(t, 30*time.Second, "the acknowledged write settles", func() bool {
		rows, err := st.EventsByKey(ctx, tenant, []string{fresh.IdempotencyKey})
		return err == nil && len(rows) == 1 && (rows[0].Status == memory.EventCommitted || rows[0].Status == memory.EventPendingReview)
	})
}
