package recall_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// A recall known at a time answers with the memory as it held its revisions
// then: before a late statement was governed, the value it replaced; after, the
// late one; and as_of and known_at combine (what the memory believed at
// known_at about as_of).
func TestRecallKnownAt(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	key := "USER:u1|user|budget"
	base := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	h := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	fact := func(obj string, from time.Time) *storage.Fact {
		return &storage.Fact{MemoryKey: key, Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeConstraint,
			Subject: "user", Predicate: "budget", Object: obj, Content: "budget at most " + obj, Confidence: 0.9, ValidFrom: from}
	}
	a, err := st.WriteFact(ctx, "tK", fact("2319 CNY", h(0)), storage.WriteCurrent, "budget at most 2319 CNY")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteFact(ctx, "tK", fact("2385 CNY", h(4)), storage.WriteCurrent, "budget at most 2385 CNY"); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	// The late statement of 2100 at h(2): the revision of 2319 now ends there.
	if err := st.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := storage.LockMemoryKey(ctx, tx, "tK", key); err != nil {
			return err
		}
		if err := storage.TrimRevision(ctx, tx, "tK", a.ID, h(2)); err != nil {
			return err
		}
		f := fact("2100 CNY", h(2))
		until := h(4)
		f.ValidUntil = &until
		_, err := storage.WriteFactRevisionLocked(ctx, tx, "tK", f, storage.WriteHistorical, "budget at most 2100 CNY")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC()

	eng := recall.New(st, embedding.NewNGramEmbedder(storage.EmbeddingDim), recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	budget := func(asOf, knownAt time.Time) []string {
		t.Helper()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "tK", UserID: "u1"}, Query: "budget", AsOf: asOf, KnownAt: knownAt})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range resp.Items {
			if it.Kind == recall.KindFact && it.Predicate == "budget" {
				out = append(out, it.Object+" "+string(it.Status))
			}
		}
		return out
	}
	for _, c := range []struct {
		name          string
		asOf, knownAt time.Time
		want          string
	}{
		{"as of h3, now", h(3), time.Time{}, "2100 CNY SUPERSEDED"},
		{"as of h3, known before the late statement", h(3), before, "2319 CNY SUPERSEDED"},
		{"as of h3, known after it", h(3), after, "2100 CNY SUPERSEDED"},
		{"as of h1, known before", h(1), before, "2319 CNY SUPERSEDED"},
		{"known before, as of then (current then)", time.Time{}, before, "2385 CNY ACTIVE"},
		{"as of h5, known after", h(5), after, "2385 CNY ACTIVE"},
	} {
		got := budget(c.asOf, c.knownAt)
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %v, want [%s]", c.name, got, c.want)
		}
	}
	if got := budget(time.Time{}, a.RecordedAt.Add(-time.Second)); len(got) != 0 {
		t.Errorf("known before anything was recorded: got %v, want nothing", got)
	}
	_, err = eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "tK", UserID: "u1"}, Query: "budget", KnownAt: time.Now().Add(48 * time.Hour)})
	var fe memory.FieldError
	if !errors.As(err, &fe) || fe.Field != "known_at" {
		t.Errorf("known_at in the future: got %v, want a FieldError on known_at", err)
	}
}
