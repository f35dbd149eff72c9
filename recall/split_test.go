package recall_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
)

// failingEmbedder fails every call.
type failingEmbedder struct{ embedding.Embedder }

func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("embedder down")
}

// A recall run alone splits its statement in two and runs the lexical part while
// the query is embedded: it answers exactly what the one statement answers (the
// same items in the same order with the same scores), and an embedder's failure
// fails the recall, naming the query's embedding.
func TestSplitStatementAnswersAsOne(t *testing.T) {
	st, emb, w := loadWorld(t, recallbench.Config{Tenants: 2, Facts: 300, Evidence: 300})
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	one := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, OneStatement: true, QueryEmbeddingCache: -1, Now: clock})
	defer one.Close()
	split := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, QueryEmbeddingCache: -1, Now: clock})
	defer split.Close()
	reqs := recallbench.Queries(w, 60, 11)
	nonEmpty := 0
	for i, req := range reqs {
		a, err := one.Recall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := split.Recall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Items) > 0 {
			nonEmpty++
		}
		if a.Context != b.Context || len(a.Items) != len(b.Items) {
			t.Fatalf("recall %d (%q): split answered\n%s\none statement\n%s", i, req.Query, b.Context, a.Context)
		}
		for j := range a.Items {
			if a.Items[j].ID != b.Items[j].ID || a.Items[j].Score != b.Items[j].Score {
				t.Fatalf("recall %d (%q) item %d: split %s %.6f, one statement %s %.6f", i, req.Query, j, b.Items[j].ID, b.Items[j].Score, a.Items[j].ID, a.Items[j].Score)
			}
		}
		if _, ok := b.Timings["embed"]; !ok && strings.TrimSpace(req.Query) != "" {
			t.Fatalf("recall %d: no embed step in the split recall's timings %v", i, b.Timings)
		}
	}
	if nonEmpty < len(reqs)/2 {
		t.Fatalf("only %d of %d recalls found anything: the comparison shows little", nonEmpty, len(reqs))
	}

	broken := recall.New(st, failingEmbedder{emb}, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, QueryEmbeddingCache: -1, Now: clock})
	defer broken.Close()
	if _, err := broken.Recall(ctx, reqs[0]); err == nil || !strings.Contains(err.Error(), "embed query") || !strings.Contains(err.Error(), "embedder down") {
		t.Fatalf("recall with a failing embedder: got %v, want the query's embedding error", err)
	}
}
