package recall_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// The semantic arm of current TENANT facts walks facts_embedding_tenant_hnsw
// however many tenants share the index: a generic plan takes a tenant's share
// for 1/(number of tenants), and with hundreds of them it must still walk the
// index, not read and sort every tenant's TENANT facts.
func TestTenantFactsWalkedWithManyTenants(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	now := time.Now().UTC()
	write := func(tenant string, i int) {
		content := fmt.Sprintf("%s rule %d: %s", tenant, i, historyWords[i%len(historyWords)])
		v := pgvector.NewVector(emb.Vector(content))
		f := &storage.Fact{MemoryKey: fmt.Sprintf("k%d", i), Scope: memory.ScopeTenant, MemoryType: memory.TypeConstraint,
			Subject: "company", Predicate: "rule", Object: content, Content: content, Confidence: 0.9, Importance: 0.5,
			ValidFrom: now.Add(-time.Hour), Embedding: &v}
		_, err := st.WriteFact(ctx, tenant, f, storage.WriteCurrent, content)
		require.NoError(t, err)
	}
	for i := range 400 {
		write("big", i)
	}
	for k := range 300 {
		for i := range 3 {
			write(fmt.Sprintf("small%d", k), i)
		}
	}
	_, err := st.DB().ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	plan, err := eng.Explain(ctx, recall.Request{Principal: recall.Principal{TenantID: "big", ID: "test", UserID: "u"}, Query: "the rule about hiking", K: 10, Explain: true})
	require.NoError(t, err)
	require.Contains(t, plan, "Function Scan on facts_tenant_walk", "the TENANT facts' walk\n%s", plan)
	walk := functionPlan(t, st, "facts_tenant_walk", "text, vector, timestamptz, int", "p_tenant p_q p_at p_k",
		"big", pgvector.NewVector(emb.Vector("the rule about hiking")), now, 20)
	require.Contains(t, walk, "Index Scan using facts_embedding_tenant_hnsw on facts", "the walk's plan\n%s", walk)
	require.NotContains(t, walk, "never executed", "the walk's plan\n%s", walk)
}
