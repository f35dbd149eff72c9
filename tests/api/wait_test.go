package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
)

// Ingest with wait and a wait_timeout of 1, 10 and 100 ms, 8 callers at once, to
// engram serve on the real stack: no answer is an error (the start of a write is
// never bounded by the wait; a wait that ends first answers RUNNING with the
// write's ids), a retry of each request finds its write committed with the same
// event, and every write committed exactly once (one event, one evidence row, one
// fact revision); batches likewise. The client does not retry, so an error would
// show.
func TestShortWaitsNeverLoseAWrite(t *testing.T) {
	s := start(t)
	tenant := "tw-" + testenv.RandomID(8)
	key := s.key(tenant, "waiter", "agent")
	c := client.New(s.url, key, client.WithRetry(1, 0))
	ctx := context.Background()
	const callers, each = 8, 6
	type sent struct {
		ev    *engramv1.Event
		first *engramv1.IngestResult
	}
	var all []*sent
	for _, wait := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		batch := make([]*sent, callers*each)
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g * each; i < (g+1)*each; i++ {
					ev := &engramv1.Event{
						UserId: fmt.Sprintf("u-%s-%d", wait, i), Schema: "travel",
						Content: fmt.Sprintf("预算不超过%d元", 1000+i), IdempotencyKey: fmt.Sprintf("w-%s-%d", wait, i),
					}
					batch[i] = &sent{ev: ev}
					batch[i].first, errs[i] = c.Ingest(ctx, ev, client.WaitFor(wait))
				}
			}()
		}
		wg.Wait()
		running := 0
		for i, b := range batch {
			require.NoError(t, errs[i], "wait %s, write %d: code %s", wait, i, connect.CodeOf(errs[i]))
			r := b.first
			assert.Contains(t, []engramv1.WriteStatus{engramv1.WriteStatus_WRITE_STATUS_RUNNING, engramv1.WriteStatus_WRITE_STATUS_COMMITTED}, r.Status, "wait %s, write %d: %s", wait, i, r.Reason)
			assert.NotEmpty(t, r.WorkflowId)
			assert.NotEmpty(t, r.EventId)
			assert.NotEmpty(t, r.RunId, "the write was started before the answer")
			if r.Status == engramv1.WriteStatus_WRITE_STATUS_RUNNING {
				running++
			}
		}
		t.Logf("wait %s: %d of %d answered RUNNING, the rest COMMITTED", wait, running, len(batch))
		all = append(all, batch...)
	}
	// Batches the same way: 8 callers, a batch of 4 events each, at 1 and 10 ms.
	type sentBatch struct {
		evs   []*engramv1.Event
		first *engramv1.IngestResponse
	}
	var batches []*sentBatch
	for _, wait := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		bs := make([]*sentBatch, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for g := range callers {
			b := &sentBatch{}
			for i := range 4 {
				b.evs = append(b.evs, &engramv1.Event{
					UserId: fmt.Sprintf("b-%s-%d", wait, g), Schema: "travel", OccurredAt: timestamppb.New(time.Date(2026, 5, 1, 9, i, 0, 0, time.UTC)),
					Content: fmt.Sprintf("预算不超过%d元", 2000+100*i), IdempotencyKey: fmt.Sprintf("b-%s-%d-%d", wait, g, i),
				})
			}
			bs[g] = b
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.first, errs[g] = c.IngestBatch(ctx, b.evs, client.WaitFor(wait))
			}()
		}
		wg.Wait()
		for g, b := range bs {
			require.NoError(t, errs[g], "batch wait %s, caller %d: code %s", wait, g, connect.CodeOf(errs[g]))
			assert.NotEmpty(t, b.first.BatchWorkflowId)
			require.Len(t, b.first.Results, 4)
			for _, r := range b.first.Results {
				assert.Contains(t, []engramv1.WriteStatus{engramv1.WriteStatus_WRITE_STATUS_RUNNING, engramv1.WriteStatus_WRITE_STATUS_COMMITTED}, r.Status, r.Reason)
				assert.NotEmpty(t, r.RunId)
				if r.Status == engramv1.WriteStatus_WRITE_STATUS_COMMITTED {
					assert.NotEmpty(t, r.EventId) // a running batch records its events itself
				}
			}
		}
		batches = append(batches, bs...)
	}
	if t.Failed() {
		return
	}

	// The same requests again, waiting long enough: each finds its write.
	for _, b := range all {
		r, err := c.Ingest(ctx, b.ev, client.WaitFor(time.Minute))
		require.NoError(t, err)
		require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, r.Reason)
		assert.Equal(t, b.first.EventId, r.EventId)
		assert.Equal(t, b.first.RunId, r.RunId)
		require.Len(t, r.Outcomes, 1)
	}

	for _, b := range batches {
		r, err := c.IngestBatch(ctx, b.evs, client.WaitFor(time.Minute))
		require.NoError(t, err)
		assert.Equal(t, b.first.BatchWorkflowId, r.BatchWorkflowId)
		for i, x := range r.Results {
			require.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, x.Status, x.Reason)
			if id := b.first.Results[i].EventId; id != "" {
				assert.Equal(t, id, x.EventId)
			}
			assert.Equal(t, b.first.Results[i].RunId, x.RunId)
		}
	}

	// Exactly once: one event and one evidence row per event; one fact revision per
	// single write, four per batch (one user's budget restated four times).
	events := len(all) + 4*len(batches)
	for table, want := range map[string]int{"events": events, "evidence": events, "facts": events} {
		n, err := s.st.DB().NewSelect().Table(table).Where("tenant_id = ?", tenant).Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, int(n), table)
	}
	n, err := s.st.DB().NewSelect().Table("facts").Where("tenant_id = ? AND revision = 1 AND status = 'ACTIVE'", tenant).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(all), int(n), "every single write's fact is its key's first and only revision")
	n, err = s.st.DB().NewSelect().Table("facts").Where("tenant_id = ? AND status = 'ACTIVE'", tenant).Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(all)+len(batches), int(n), "one current revision per key")

	// The shortest wait over Connect's JSON, as the hostile-input run sent it.
	code, m := s.curl(key, "engram.v1.MemoryService/Ingest", `{"event": {"userId": "u-json", "idempotencyKey": "w-json", "content": "预算不超过7000元", "schema": "travel"}, "wait": true, "waitTimeout": "0.001s"}`)
	require.Equal(t, 200, code, "%v", m)
	assert.NotEmpty(t, testenv.Dig(m, "results", 0, "eventId"), "%v", m)
}
