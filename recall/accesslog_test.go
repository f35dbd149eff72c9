package recall_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

// Recall logs through the store's one access-log writer: a long Chinese query (up
// to recall's 4,096-byte limit) is logged whole and valid UTF-8 (it used to be cut
// at 1,000 bytes, inside a character), the facts returned are counted as read, and
// an audit read (LogAccess) is logged by the same rules, cut at
// storage.MaxLoggedQuery characters, without counting.
func TestAccessLogOneWriter(t *testing.T) {
	st, emb, w := loadWorld(t, recallbench.Config{Tenants: 1, Facts: 200, Evidence: 50})
	ctx := context.Background()
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogSync})
	defer eng.Close()
	req := recallbench.Queries(w, 1, 5)[0]
	req.Query += " " + strings.Repeat("订单", 600) // 3 bytes a character: 3,600 bytes more
	resp, err := eng.Recall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	tenant := req.Principal.TenantID
	log, err := st.ListAccess(ctx, tenant, storage.AccessFilter{UserID: req.Principal.UserID})
	if err != nil || len(log) != 1 {
		t.Fatalf("access log: %v, %d entries, want 1", err, len(log))
	}
	q := log[0].Query
	if !utf8.ValidString(q) || q != req.Query {
		t.Fatalf("logged query: valid UTF-8 %v, %d of %d bytes", utf8.ValidString(q), len(q), len(req.Query))
	}
	var facts []string
	for _, it := range resp.Items {
		if it.Kind == recall.KindFact {
			facts = append(facts, it.ID)
		}
	}
	if len(facts) == 0 || len(log[0].FactIDs) != len(facts) {
		t.Fatalf("logged fact ids %v, returned %v", log[0].FactIDs, facts)
	}
	count := func(id string) int {
		n, at, err := st.FactReads(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if (n > 0) != (at != nil) {
			t.Fatalf("fact reads %d, last read %v", n, at)
		}
		return int(n)
	}
	if n := count(facts[0]); n != 1 {
		t.Fatalf("access_count after one recall = %d, want 1", n)
	}
	if err := st.LogAccess(ctx, tenant, "admin:audit", "audit", req.Principal.UserID, strings.Repeat("é", 3000), facts[:1], nil); err != nil {
		t.Fatal(err)
	}
	if n := count(facts[0]); n != 1 {
		t.Fatalf("an audit read counted as use: access_count = %d, want 1", n)
	}
	log, err = st.ListAccess(ctx, tenant, storage.AccessFilter{Principal: "admin:audit"})
	if err != nil || len(log) != 1 || utf8.RuneCountInString(log[0].Query) != storage.MaxLoggedQuery {
		t.Fatalf("audit entry: %v %+v", err, log)
	}
}
