package recall_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/engramhq/engram/recall"
)

// With SemanticAll the turns only the keyword retriever returned are scored by
// their similarity to the question as well, read after the statement: a turn
// beyond the semantic retriever's few scores more than without it.
func TestSemanticAllReadsTheSimilarity(t *testing.T) {
	ctx := context.Background()
	c := newConvo(t, time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC))
	const tenant = "acme"
	for i := 0; i < 6; i++ {
		c.say(tenant, "maya", "s1", "What did you think about the trip to the lake?")
	}
	word := c.say(tenant, "maya", "s1", "I booked the ferry tickets for Lisbon in June")
	score := func(all bool) (float64, []string) {
		t.Helper()
		f := recall.DefaultFusion()
		f.SemanticAll, f.Adjacent = all, 0
		eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f, CandidateLimit: 2})
		defer eng.Close()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: "What did Maya think about the ferry?", K: 10, AsOf: c.at})
		if err != nil {
			t.Fatal(err)
		}
		r := rankOf(resp.Items, word.ID)
		if r == 0 {
			t.Fatalf("the ferry turn was not found (%+v)", resp.Items)
		}
		return resp.Items[r-1].Score, resp.Items[r-1].Retrievers
	}
	before, retr := score(false)
	if slices.Contains(retr, recall.RetrieverSemantic) {
		t.Fatalf("the ferry turn was among the semantic retriever's 2 (%v): the test needs it outside", retr)
	}
	after, _ := score(true)
	if after <= before {
		t.Fatalf("the ferry turn scored %.3f with SemanticAll, %.3f without: its similarity was not counted", after, before)
	}
}
