package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// After consolidation recall answers the same question with fewer items: the ten
// inquiry facts give way to one summary that still names the order and keeps every
// source as its evidence.
func TestRecallAfterConsolidationNeedsFewerItems(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	start := time.Now().UTC().Add(-96 * time.Hour).Truncate(time.Second)
	seedInquiries(t, st, "t1", "u1", 10, start)
	eng := recall.New(st, embedding.NewNGramEmbedder(storage.EmbeddingDim), recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	t.Cleanup(func() { _ = eng.Close() })
	ask := func() (facts int, top recall.Item, context string) {
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "t1", ID: "test", UserID: "u1"}, Schema: "customer_service", Query: "我的订单12345怎么样了", K: 20})
		require.NoError(t, err)
		require.NotEmpty(t, resp.Items)
		for _, it := range resp.Items {
			if it.Kind == recall.KindFact {
				facts++
			}
		}
		return facts, resp.Items[0], resp.Context
	}
	beforeFacts, beforeTop, _ := ask()

	env := timeSkippingEnv(t, st)
	env.SetStartTime(start.Add(96 * time.Hour))
	env.ExecuteWorkflow(afterSleep, time.Minute, lifecycle.MaintenanceConsolidateName, lifecycle.MaintenanceConsolidateInput{MinFacts: 5, MinAge: 24 * time.Hour})
	require.NoError(t, env.GetWorkflowError())

	afterFacts, afterTop, ctxText := ask()
	t.Logf("fact items before %d, after %d; top before %q, after %q", beforeFacts, afterFacts, beforeTop.Content, afterTop.Content)
	assert.GreaterOrEqual(t, beforeFacts, 10, "before: every inquiry is its own fact")
	assert.Equal(t, 1, afterFacts, "after: one summary fact")
	assert.Equal(t, recall.KindFact, afterTop.Kind)
	assert.True(t, strings.Contains(afterTop.Content, "12345"), "the summary still answers about order 12345")
	assert.NotEmpty(t, afterTop.EvidenceIDs, "the summary is traceable to its sources")
	assert.Contains(t, ctxText, "12345")
}
