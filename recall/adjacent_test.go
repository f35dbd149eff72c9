package recall_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/privacy"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// The turns after the best one are brought in below it, even sharing no word with
// the question: the question "how did you first meet?" or its reply (found by the
// question's words stored with it) ranks first, and the burst of messages that
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
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: q, K: 10, AsOf: at})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	off := recall.DefaultFusion()
	off.Adjacent = 0
	on := off
	on.Adjacent, on.AdjacentFrom, on.AdjacentSpan = 0.7, 1, 2
	q := "How did Maya first meet Priya?"

	without := recallWith(off, q, asOf)
	with := recallWith(on, q, asOf)
	anchor := with.Items[0].ID
	if anchor != without.Items[0].ID || (anchor != ask.ID && anchor != reply.ID) {
		t.Fatalf("first %q, without adjacency %q: want the question or its reply, unmoved", with.Items[0].Content, without.Items[0].Content)
	}
	s1 := []string{ask.ID, reply.ID, burst.ID, burst2.ID, beyond.ID}
	at := slices.Index(s1, anchor)
	// The burst shares no word with the question: without adjacency, only meaning
	// could bring it, below the turns that share words.
	rb := rankOf(with.Items, burst.ID)
	if rb == 0 || rb > 6 {
		t.Fatalf("the burst after the reply at %d: want it right after the best turns (%+v)", rb, with.Items)
	}
	if r := rankOf(without.Items, burst.ID); r != 0 && r <= rb {
		t.Fatalf("without adjacency the burst ranks %d, with it %d: it was not lifted", r, rb)
	}
	it := with.Items[rb-1]
	want := fmt.Sprintf("adjacent #1: %d turn(s) after it", 2-at)
	if !strings.Contains(it.Why, want) || it.Score >= with.Items[0].Score || !slices.Contains(it.Retrievers, "adjacent") {
		t.Fatalf("%q: why %q score %.3f (anchor %.3f) retrievers %v, want %q below the anchor", it.Content, it.Why, it.Score, with.Items[0].Score, it.Retrievers, want)
	}
	for _, it := range with.Items {
		if it.ID == s1[at+3] && strings.Contains(it.Why, "adjacent #1") {
			t.Fatalf("a turn three after the anchor came back as its neighbour with a span of 2: %q", it.Why)
		}
	}
	if rankOf(with.Items, ask.ID) == 0 {
		t.Fatal("the question turn before the reply is gone")
	}
	for _, it := range with.Items {
		if it.ID == other.ID {
			t.Fatal("another user's turn came back")
		}
	}
	// A recall restricted to some retrievers gets no adjacent turns.
	eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: on})
	defer eng.Close()
	kwOnly, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: q, K: 10, AsOf: asOf,
		Retrievers: []string{recall.RetrieverKeyword}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range kwOnly.Items {
		if slices.Contains(it.Retrievers, "adjacent") {
			t.Fatalf("keyword-only recall: %q found by adjacency", it.Content)
		}
	}
	// As of the moment of the reply, the burst had not been said.
	early := recallWith(on, q, reply.OccurredAt)
	if rankOf(early.Items, burst.ID) != 0 || rankOf(early.Items, burst2.ID) != 0 {
		t.Fatal("a turn later than as_of came back as adjacent")
	}
}

// An adjacent turn that no retriever found is read by the adjacent turns' own
// statement: with encryption at rest, its content comes back opened.
func TestAdjacentTurnOpened(t *testing.T) {
	c := newConvo(t, time.Date(2025, 5, 1, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	kr, err := privacy.NewKeyring("k1", map[string][]byte{"k1": key})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.SetProtection(storage.Protection{Keyring: kr}); err != nil {
		t.Fatal(err)
	}
	say := func(session, text string) *storage.Evidence {
		t.Helper()
		prot, err := c.st.ProtectContent(text)
		if err != nil {
			t.Fatal(err)
		}
		c.at = c.at.Add(time.Minute)
		ev, _, err := c.st.InsertEvent(ctx, "acme", &storage.Event{IdempotencyKey: uuid.NewString(), ActorType: "USER", UserID: "maya",
			SessionID: session, EventType: "MESSAGE", Content: prot.EventContent, OccurredAt: c.at})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := c.emb.Embed(ctx, []string{prot.Redacted})
		if err != nil {
			t.Fatal(err)
		}
		v := pgvector.NewVector(vs[0])
		evd, err := c.st.InsertEvidence(ctx, "acme", &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: prot.Stored, KeyID: prot.KeyID,
			UserID: "maya", SessionID: session, OccurredAt: c.at, Embedding: &v}, storage.SearchText(prot.Redacted), "")
		if err != nil {
			t.Fatal(err)
		}
		return evd
	}
	before := say("s1", "Zzz, long day.")
	answer := say("s1", "My cat is called Mochi.")
	for i := 0; i < 6; i++ {
		say(fmt.Sprintf("s%d", i+2), fmt.Sprintf("What is the name of the new bakery on the corner, number %d?", i))
	}
	var sealed int
	if err := c.st.DB().NewRaw("SELECT count(*) FROM evidence WHERE id = ? AND content LIKE 'ev1:%'", before.ID).Scan(ctx, &sealed); err != nil || sealed != 1 {
		t.Fatalf("the turn is not sealed at rest (%d, %v)", sealed, err)
	}
	f := recall.DefaultFusion()
	f.AdjacentFrom = 1
	eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f, CandidateLimit: 2})
	defer eng.Close()
	resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "acme", UserID: "maya"}, Query: "What is the name of my cat Mochi?", K: 10, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Items[0].ID != answer.ID {
		t.Fatalf("first %q, want the answer", resp.Items[0].Content)
	}
	r := rankOf(resp.Items, before.ID)
	if r == 0 {
		t.Fatalf("the turn before the answer was not brought: %+v", resp.Items)
	}
	it := resp.Items[r-1]
	if !slices.Equal(it.Retrievers, []string{"adjacent"}) || it.Content != "Zzz, long day." {
		t.Fatalf("the turn before the answer: retrievers %v, content %q: want found by adjacency alone, opened", it.Retrievers, it.Content)
	}
}

// In chat an answer comes as a burst of messages: counted in bursts
// (Fusion.AdjacentBursts), the neighbour of the question is the first message
// of the reply, though the asker went on typing ("sorry, nosy 😅") in between,
// and the rest of the asker's own burst is not lifted as the question's
// neighbour. Counted in messages, the asker's own burst fills the span and the
// reply is not reached.
func TestAdjacentBursts(t *testing.T) {
	c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	const tenant = "acme"
	at := c.at
	say := func(speaker, text string, after time.Duration) *storage.Evidence {
		t.Helper()
		at = at.Add(after)
		ev, _, err := c.st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: uuid.NewString(), ActorType: "USER", ActorID: speaker, UserID: "maya",
			SessionID: "s1", EventType: "MESSAGE", Content: text, OccurredAt: at})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := c.emb.Embed(ctx, []string{text})
		if err != nil {
			t.Fatal(err)
		}
		v := pgvector.NewVector(vs[0])
		evd, err := c.st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: text, Speaker: "USER:" + speaker, UserID: "maya",
			SessionID: "s1", OccurredAt: at, Embedding: &v}, storage.SearchText(text), "")
		if err != nil {
			t.Fatal(err)
		}
		return evd
	}
	say("maya", "Morning!", time.Hour)
	ask := say("maya", "So how did you and Priya first meet?", time.Minute)
	say("maya", "sorry, nosy 😅", 5*time.Second)
	say("maya", "just curious", 5*time.Second)
	reply := say("ben", "an engineering class in college", 20*time.Second)
	say("ben", "years ago now", 5*time.Second)
	for i := 0; i < 6; i++ {
		say("maya", "The weather is lovely today.", time.Hour)
	}

	recallWith := func(bursts bool) recall.Response {
		t.Helper()
		f := recall.DefaultFusion()
		f.Adjacent, f.AdjacentFrom, f.AdjacentSpan, f.AdjacentBursts = 0.7, 1, 2, bursts
		eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f})
		defer eng.Close()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: "How did Maya first meet Priya?", K: 10})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	with, without := recallWith(true), recallWith(false)
	if with.Items[0].ID != ask.ID {
		t.Fatalf("first %q: want the question", with.Items[0].Content)
	}
	r := rankOf(with.Items, reply.ID)
	if r == 0 || !strings.Contains(with.Items[r-1].Why, "adjacent #1: 1 turn(s) after it") {
		t.Fatalf("the reply at %d (%+v): want it lifted as the question's neighbour", r, with.Items)
	}
	for _, it := range with.Items {
		if it.Speaker == "maya" && it.ID != ask.ID && strings.Contains(it.Why, "adjacent #1") {
			t.Fatalf("%q, of the asker's own burst, lifted as the question's neighbour", it.Content)
		}
	}
	if r := rankOf(without.Items, reply.ID); r != 0 && strings.Contains(without.Items[r-1].Why, "adjacent #1") {
		t.Fatalf("counted in messages the reply, 3 messages on, came as the neighbour: %q", without.Items[r-1].Why)
	}
}
