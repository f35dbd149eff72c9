package recall_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/recall/recallbench"
)

// Options.MaxStatements: concurrent recalls never run more statements at once
// than the bound, answer what an unbounded engine answers, and a recall waiting
// for a slot gives up when its context ends.
func TestMaxStatements(t *testing.T) {
	st, emb, w := loadWorld(t, recallbench.Config{Tenants: 2, Facts: 400, Evidence: 400})
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	bounded := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, MaxStatements: 2, Now: clock})
	defer bounded.Close()
	free := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, MaxStatements: -1, Now: clock})
	defer free.Close()
	reqs := recallbench.Queries(w, 48, 7)

	want := make([]string, len(reqs))
	for i, req := range reqs {
		resp, err := free.Recall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = resp.Context
	}
	got := make([]string, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := bounded.Recall(ctx, reqs[i])
			got[i], errs[i] = resp.Context, err
		}()
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("recall %d: %v", i, errs[i])
		}
		if got[i] != want[i] {
			t.Errorf("recall %d (%q): the bounded engine answered\n%s\nthe unbounded one\n%s", i, reqs[i].Query, got[i], want[i])
		}
	}
	if p := bounded.PeakStatements(); p != 2 {
		t.Errorf("%d recalls at once ran %d statements at most, want the bound, 2", len(reqs), p)
	}

	// Every slot taken: a recall waits, then gives up with its context.
	r1, err := bounded.AcquireStatement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := bounded.AcquireStatement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = bounded.Recall(short, reqs[0])
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "statement slot") {
		t.Fatalf("recall with every slot taken: got %v, want the deadline while waiting for a statement slot", err)
	}
	r1()
	r2()
	resp, err := bounded.Recall(ctx, reqs[0])
	if err != nil || resp.Context != want[0] {
		t.Fatalf("after the slots are back: %v, context %q", err, resp.Context)
	}
}
