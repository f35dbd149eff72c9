package writepath

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// A write of the current revision stores the turn's and the fact's vectors with
// their rows (Record and Commit embed them): no Index step in its history, and the
// vectors are the ones the Index step of a revision-0 write stores for the same
// texts, a named speaker's turn prefixed with the name.
func TestVectorsAreStoredWithTheRows(t *testing.T) {
	e := newEnv(t, llm.NewRuleExtractor())
	ctx := context.Background()
	text := "我以后尽量都坐直飞"
	ng := embedding.NewNGramEmbedder(storage.EmbeddingDim)

	// Revision 1, said by Maya in user u1's conversation.
	ev := writetest.Event("t1", "u-"+testenv.RandomID(6), "travel", text, base)
	ev.ActorID = "Maya"
	run := e.start(write.MemoryWriteInput{Event: ev})
	res := e.wait(run)
	require.Equal(t, write.WriteCommitted, res.Status)
	require.Len(t, res.Results, 1)
	require.NotEmpty(t, res.Results[0].FactID)

	// Revision 0 (started as an older binary did): the Index step embeds.
	old := writetest.Event("t1", "u-"+testenv.RandomID(6), "travel", text, base)
	old.ActorID = "Maya"
	orun, err := e.c.ExecuteWorkflow(ctx, write.StartOptions(e.queue, write.MemoryWriteWorkflowID(old.TenantID, old.IdempotencyKey)), write.MemoryWriteWorkflowName, write.MemoryWriteInput{Event: old})
	require.NoError(t, err)
	ores := e.wait(orun)
	require.Len(t, ores.Results, 1)

	var facts []struct {
		ID        string          `bun:"id"`
		Content   string          `bun:"content"`
		Embedding pgvector.Vector `bun:"embedding"`
	}
	require.NoError(t, e.st.DB().NewSelect().Table("facts").Column("id", "content", "embedding").
		Where("tenant_id = 't1' AND id IN (?, ?)", res.Results[0].FactID, ores.Results[0].FactID).Scan(ctx, &facts))
	require.Len(t, facts, 2)
	assert.Equal(t, facts[0].Content, facts[1].Content)
	assert.Equal(t, facts[0].Embedding.Slice(), facts[1].Embedding.Slice(), "the same vector either way")

	want, err := ng.Embed(ctx, []string{"Maya: " + text})
	require.NoError(t, err)
	for _, id := range []string{res.EvidenceID, ores.EvidenceID} {
		var turn pgvector.Vector
		require.NoError(t, e.st.DB().NewSelect().Table("evidence").Column("embedding").
			Where("tenant_id = 't1' AND id = ?", id).Scan(ctx, &turn))
		assert.Equal(t, want[0], turn.Slice(), "a named speaker's turn is embedded as \"Name: text\", either way")
	}

	// Write added the turn to its session.
	sess, err := e.st.GetSession(ctx, "t1", ev.SessionID)
	require.NoError(t, err)
	require.Len(t, sess.Recent, 1)
	assert.Equal(t, res.EvidenceID, sess.Recent[0].EvidenceID)

	// The history: one Write (revision 3); no Index, Extract or UpdateSession.
	count := func(id string) (local map[string]int) {
		local = map[string]int{}
		it := e.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			h, err := it.Next()
			require.NoError(t, err)
			if m := h.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
				local["any"]++
			}
		}
		return local
	}
	assert.Equal(t, 1, count(run.GetID())["any"], "Write: record, govern and commit in one step")
	assert.Less(t, count(run.GetID())["any"], count(orun.GetID())["any"], "fewer local activities than a revision-0 write")
}

// recordingEmbedder is the n-gram embedder, keeping every text it was given.
type recordingEmbedder struct {
	embedding.Embedder
	mu    sync.Mutex
	texts []string
}

func (r *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	r.mu.Lock()
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return r.Embedder.Embed(ctx, texts)
}

func (r *recordingEmbedder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.texts
	r.texts = nil
	return t
}

// A restated fact is a duplicate: it writes no revision, so its content is not
// embedded (only the turn is); the fact keeps the vector its first write stored.
func TestDuplicateIsNotEmbedded(t *testing.T) {
	rec := &recordingEmbedder{Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim)}
	e := newEnvWith(t, llm.NewRuleExtractor(), rec)
	ctx := context.Background()
	user := "u-" + testenv.RandomID(6)
	text := "我以后尽量都坐直飞"

	first := e.write(writetest.Event("t1", user, "travel", text, base))
	require.Equal(t, write.WriteCommitted, first.Status)
	require.Len(t, first.Results, 1)
	require.Equal(t, string(governance.ActionCreate), first.Results[0].Action)
	var f struct {
		Content   string          `bun:"content"`
		Embedding pgvector.Vector `bun:"embedding"`
	}
	require.NoError(t, e.st.DB().NewSelect().Table("facts").Column("content", "embedding").
		Where("tenant_id = 't1' AND id = ?", first.Results[0].FactID).Scan(ctx, &f))
	require.Len(t, f.Embedding.Slice(), storage.EmbeddingDim)
	assert.Contains(t, rec.take(), f.Content, "a new fact's content is embedded")

	again := e.write(writetest.Event("t1", user, "travel", text, base.Add(time.Hour)))
	require.Equal(t, write.WriteCommitted, again.Status)
	require.Len(t, again.Results, 1)
	require.Equal(t, string(governance.ActionDuplicate), again.Results[0].Action, again.Results[0].Reason)
	require.Equal(t, first.Results[0].FactID, again.Results[0].FactID)
	texts := rec.take()
	assert.False(t, slices.Contains(texts, f.Content), "a duplicate's content is not embedded: %q", texts)
	assert.Contains(t, texts, text, "the turn is")

	var revs int
	require.NoError(t, e.st.DB().NewSelect().Table("facts").ColumnExpr("count(*)").
		Where("tenant_id = 't1' AND user_id = ?", user).Scan(ctx, &revs))
	assert.Equal(t, 1, revs)
	var still pgvector.Vector
	require.NoError(t, e.st.DB().NewSelect().Table("facts").Column("embedding").
		Where("tenant_id = 't1' AND id = ?", first.Results[0].FactID).Scan(ctx, &still))
	assert.Equal(t, f.Embedding.Slice(), still.Slice())
}
