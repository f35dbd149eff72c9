package recall_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/recall"
)

// The turns after the best one are brought in below it, even sharing no word with
// the question: the reply to "how did you first meet?" is found by the question's
// words stored with it (weight C) and ranks first, and the burst of messages that
// goes on with the answer is brought in after it. Turns beyond the span, of
// another session or user, or later than as_of are not; the first item keeps its
// place.
func TestAdjacentTurns(t *testing.T) {
	c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	const tenant = "acme"
	c.say(tenant, "maya", "s1", "Morning! Coffee time.")
	ask := c.say(tenant, "maya", "s1", "So how did you and Priya first meet?")
	reply := c.say(tenant, "maya", "s1", "In an engineering class at college, years ago.")
	burst := c.say(tenant, "maya", "s1", "then we shared a flat 🙂")
	burst2 := c.say(tenant, "maya", "s1", "for 3 yrs lol")
	beyond := c.say(tenant, "maya", "s1", "Anyway, the weather is lovely.")
	c.say(tenant, "maya", "s2", "Did Ben ever meet Priya?")
	other := c.say(tenant, "ben", "s1", "Right after that we travelled to Lisbon.")
	for i := 0; i < 8; i++ {
		c.say(tenant, "maya", "s3", "Priya says hi, she met the team today.")
	}
	asOf := c.at

	recallWith := func(f recall.Fusion, q string, at time.Time) recall.Response {
		t.Helper()
		eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f})
		defer eng.Close()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: q, K: 10, AsOf: at,
			Retrievers: []string{recall.RetrieverKeyword}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	off := recall.DefaultFusion()
	on := off
	on.Adjacent, on.AdjacentFrom, on.AdjacentSpan = 0.7, 1, 2
	q := "How did Maya first meet Priya?"

	without := recallWith(off, q, asOf)
	if without.Items[0].ID != reply.ID {
		t.Fatalf("first %q: want the reply, found by the question stored with it", without.Items[0].Content)
	}
	if rankOf(without.Items, burst.ID) != 0 || rankOf(without.Items, burst2.ID) != 0 {
		t.Fatalf("the messages after the reply share no word with the question, yet keyword recall found them: %+v", without.Items)
	}
	with := recallWith(on, q, asOf)
	if with.Items[0].ID != reply.ID {
		t.Fatalf("the first item moved: %q", with.Items[0].Content)
	}
	r1, r2 := rankOf(with.Items, burst.ID), rankOf(with.Items, burst2.ID)
	if r1 == 0 || r2 == 0 || r2 <= r1 {
		t.Fatalf("the burst after the reply at %d and %d: want both, in order (%+v)", r1, r2, with.Items)
	}
	for _, x := range []struct {
		rank int
		why  string
	}{{r1, "adjacent #1: 1 turn(s) after it"}, {r2, "adjacent #1: 2 turn(s) after it"}} {
		it := with.Items[x.rank-1]
		if !strings.Contains(it.Why, x.why) || it.Score >= with.Items[0].Score {
			t.Fatalf("%q: why %q score %.3f (anchor %.3f), want %q below the anchor", it.Content, it.Why, it.Score, with.Items[0].Score, x.why)
		}
	}
	if rankOf(with.Items, ask.ID) == 0 {
		t.Fatal("the question turn before the reply is gone")
	}
	if rankOf(with.Items, beyond.ID) != 0 {
		t.Fatal("a turn three after the anchor came back with a span of 2")
	}
	if rankOf(with.Items, other.ID) != 0 {
		t.Fatal("another user's turn came back as adjacent")
	}
	// As of the moment of the reply, the burst had not been said.
	early := recallWith(on, q, reply.OccurredAt)
	if rankOf(early.Items, burst.ID) != 0 || rankOf(early.Items, burst2.ID) != 0 {
		t.Fatal("a turn later than as_of came back as adjacent")
	}
}
