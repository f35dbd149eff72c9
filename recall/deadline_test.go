package recall_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/recall"
)

// activeQueries is how many statements other than its own run in the store's
// database now (pg_stat_activity).
func (c *convo) activeQueries(ctx context.Context) int {
	c.t.Helper()
	var n int
	if err := c.st.DB().NewRaw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()").Scan(ctx, &n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// waitNoActive waits, up to a second, until no other statement runs in the
// store's database, and fails the test if one still does.
func (c *convo) waitNoActive(ctx context.Context, what string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Second)
	for c.activeQueries(ctx) > 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: a statement still runs in Postgres a second after the recall returned", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A recall whose statement cannot finish (the turns are locked by another
// transaction) ends at its deadline, whichever sets it (the caller's context or
// the engine's Timeout), with a TimeoutError naming the limit; a caller that
// cancels gets context.Canceled. Either way, the statement is cancelled in
// Postgres: none of it runs afterwards.
func TestRecallDeadlineCancelsStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newConvo(t, time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC))
	for i := 0; i < 5; i++ {
		c.say("t1", "u1", "s1", fmt.Sprintf("turn %d about the garden and the tomatoes", i))
	}
	req := recall.Request{Principal: recall.Principal{TenantID: "t1", UserID: "u1"}, Query: "tomatoes in the garden", K: 5}
	// The limit is a second, not less: the first recall of an engine opens its
	// connections and prepares its statements under the same limit, and on a
	// loaded machine (CI runs packages side by side) that took over 300 ms.
	const limit = time.Second
	short := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Timeout: limit})
	defer short.Close()
	roomy := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer roomy.Close()
	// Both engines have prepared their statements: what blocks below is a run. A
	// first recall that ran out of its limit while preparing is tried again (its
	// connection was dropped), up to a deadline.
	for _, e := range []*recall.Engine{short, roomy} {
		for try := 1; ; try++ {
			_, err := e.Recall(ctx, req)
			var te *recall.TimeoutError
			if err == nil {
				break
			}
			if !errors.As(err, &te) || try == 5 {
				t.Fatal(err)
			}
		}
	}

	tx, err := c.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, "LOCK TABLE evidence IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		eng   *recall.Engine
		ctx   func() (context.Context, context.CancelFunc)
		limit time.Duration
	}{
		{"the caller's deadline", roomy, func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, limit) }, limit},
		{"the engine's timeout", short, func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, limit},
		{"the caller cancels", roomy, func() (context.Context, context.CancelFunc) {
			cc, cancel := context.WithCancel(ctx)
			time.AfterFunc(limit, cancel)
			return cc, cancel
		}, 0},
	}
	for _, tc := range cases {
		rc, cancel := tc.ctx()
		start := time.Now()
		_, err := tc.eng.Recall(rc, req)
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Fatalf("%s: the recall answered while its turns were locked", tc.name)
		}
		if took > limit+100*time.Millisecond {
			t.Errorf("%s: the recall returned after %s, want within its %s + 100ms", tc.name, took, limit)
		}
		var te *recall.TimeoutError
		if tc.limit > 0 {
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: %v (%T), want a TimeoutError", tc.name, err, err)
			}
			if !strings.Contains(err.Error(), "recall did not finish within "+limit.String()) || strings.Contains(err.Error(), "i/o timeout") {
				t.Errorf("%s: %q, want the operation and its limit", tc.name, err)
			}
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v, want context.Canceled", tc.name, err)
		}
		c.waitNoActive(ctx, tc.name)
	}

	// Once the lock is gone the engine answers again (its cancelled connections
	// were not put back in the pool).
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := roomy.Recall(ctx, req); err != nil {
		t.Fatalf("after the lock: %v", err)
	}
}

// A user's turns written and never analysed (autovacuum off on these tables, as
// right after a bulk import): the recall statement's plan looks each turn's
// sentences up by the primary key, never by scanning the user's sentences per
// turn (which made one recall of a 1,000-turn suite take 7 s), and a recall
// takes well under a second.
func TestRecallUnanalysed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newConvo(t, time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC))
	for _, tbl := range []string{"evidence", "evidence_sentences", "evidence_postings", "evidence_terms", "evidence_stats", "facts", "sessions"} {
		if _, err := c.st.DB().ExecContext(ctx, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = off)"); err != nil {
			t.Fatal(err)
		}
	}
	topics := []string{"the garden and the tomatoes", "a trip to Lisbon in May", "the new job at the bakery", "learning the violin", "the dog's vet visit"}
	for i := 0; i < 300; i++ {
		text := fmt.Sprintf("Turn %d is about %s. It has a second sentence on %s too.", i, topics[i%len(topics)], topics[(i+2)%len(topics)])
		ev := c.say("t1", "u1", fmt.Sprintf("s%d", i/20), text)
		var vecs []*pgvector.Vector
		for _, s := range []string{topics[i%len(topics)], topics[(i+2)%len(topics)]} {
			v, err := c.emb.Embed(ctx, []string{s})
			if err != nil {
				t.Fatal(err)
			}
			pv := pgvector.NewVector(v[0])
			vecs = append(vecs, &pv)
		}
		if err := c.st.InsertEvidenceSentences(ctx, "t1", ev.ID, "u1", vecs); err != nil {
			t.Fatal(err)
		}
	}
	var analysed int
	if err := c.st.DB().NewRaw("SELECT count(*) FROM pg_stat_user_tables WHERE relname IN ('evidence', 'evidence_sentences') AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)").Scan(ctx, &analysed); err != nil {
		t.Fatal(err)
	}
	if analysed > 0 {
		t.Fatal("the tables were analysed: this test is about tables that were not")
	}
	eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Timeout: 10 * time.Second})
	defer eng.Close()
	req := recall.Request{Principal: recall.Principal{TenantID: "t1", UserID: "u1"}, Query: "when was the trip to Lisbon", K: 10}
	var worst time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		resp, err := eng.Recall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Items) == 0 {
			t.Fatal("nothing recalled")
		}
		worst = max(worst, time.Since(start))
	}
	plan, err := eng.Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "evidence_sentences_user") || !strings.Contains(plan, "evidence_sentences_pkey") {
		t.Errorf("the sentences are not looked up by the turn:\n%s", plan)
	}
	if worst > time.Second {
		t.Errorf("a recall over never-analysed turns took %s, want well under a second", worst)
	}
	t.Logf("slowest of 5 recalls over 300 never-analysed turns: %s", worst)
}
