package recall_test

import (
	"context"
	"errors"
	"testing"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
)

// Request.Retrievers: unknown names are a FieldError before the database is
// touched; a chosen set runs only those retrievers; empty runs them all.
func TestRetrievers(t *testing.T) {
	st, emb, w := loadWorld(t, recallbench.Config{Tenants: 2, Facts: 400, Evidence: 400})
	ctx := context.Background()
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	reqs := recallbench.Queries(w, 60, 5)

	bad := reqs[0]
	bad.Retrievers = []string{"semantic", "telepathy"}
	_, err := eng.Recall(ctx, bad)
	var fe memory.FieldError
	if !errors.As(err, &fe) || fe.Field != "retrievers[1]" {
		t.Fatalf("unknown retriever: got %v, want a FieldError on retrievers[1]", err)
	}

	for _, only := range [][]string{{recall.RetrieverSemantic}, {recall.RetrieverKeyword}, {recall.RetrieverStructured, recall.RetrieverGraph}, {recall.RetrieverRecent}} {
		found := 0
		for _, req := range reqs {
			req.Retrievers = only
			req.Explain = true
			resp, err := eng.Recall(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range resp.Candidates {
				found++
				for _, r := range it.Retrievers {
					if !contains(only, r) {
						t.Fatalf("retrievers %v: item %s found by %s", only, it.ID, r)
					}
				}
			}
		}
		if found == 0 && only[0] != recall.RetrieverRecent {
			t.Errorf("retrievers %v found nothing in %d recalls", only, len(reqs))
		}
	}

	seen := map[string]bool{}
	for _, req := range reqs {
		req.Explain = true
		resp, err := eng.Recall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range resp.Candidates {
			for _, r := range it.Retrievers {
				seen[r] = true
			}
		}
	}
	for _, r := range []string{recall.RetrieverSemantic, recall.RetrieverKeyword, recall.RetrieverStructured} {
		if !seen[r] {
			t.Errorf("hybrid recall never used %s", r)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
