package recall_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/turntext"
)

// convo writes turns of one user as evidence (the turn before each at weight C,
// as write.Record does), in order, a minute apart, each with its n-gram vector.
type convo struct {
	t    *testing.T
	st   *storage.Store
	emb  embedding.Embedder
	at   time.Time
	prev map[string]string // user → the user's previous turn
}

// newConvo is a conversation on a fresh store from at, with the n-gram embedder.
func newConvo(t *testing.T, at time.Time) *convo {
	return &convo{t: t, st: testenv.Store(t), emb: embedding.NewNGramEmbedder(storage.EmbeddingDim), at: at, prev: map[string]string{}}
}

func (c *convo) say(tenant, user, session, text string) *storage.Evidence {
	c.t.Helper()
	return c.sayIn(tenant, user, session, "", text)
}

// sayIn is say within a task.
func (c *convo) sayIn(tenant, user, session, task, text string) *storage.Evidence {
	c.t.Helper()
	ctx := context.Background()
	c.at = c.at.Add(time.Minute)
	ev, _, err := c.st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: uuid.NewString(), ActorType: "USER", UserID: user,
		SessionID: session, TaskID: task, EventType: "MESSAGE", Content: text, OccurredAt: c.at})
	if err != nil {
		c.t.Fatal(err)
	}
	vs, err := c.emb.Embed(ctx, []string{text})
	if err != nil {
		c.t.Fatal(err)
	}
	v := pgvector.NewVector(vs[0])
	evd, err := c.st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: text, UserID: user, SessionID: session,
		TaskID: task, OccurredAt: c.at, Embedding: &v}, storage.SearchText(text), storage.SearchText(c.prev[user]))
	if err != nil {
		c.t.Fatal(err)
	}
	c.prev[user] = text
	return evd
}

// firstByKeyword is the first item of a keyword-only recall of the user's turns
// by an engine with fusion f; the recall must find at least two.
func (c *convo) firstByKeyword(tenant, user string, f recall.Fusion, query string) string {
	c.t.Helper()
	eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff, Fusion: f})
	defer eng.Close()
	resp, err := eng.Recall(context.Background(), recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: user}, Query: query,
		K: 5, Retrievers: []string{recall.RetrieverKeyword}})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(resp.Items) < 2 {
		c.t.Fatalf("%q: %d items, want at least two", query, len(resp.Items))
	}
	return resp.Items[0].ID
}

// sentences stores the sentence vectors of a long turn, as write.Record does.
func (c *convo) sentences(tenant string, evd *storage.Evidence) {
	c.t.Helper()
	ctx := context.Background()
	ss := turntext.Sentences(evd.Content)
	if len(ss) < 2 {
		c.t.Fatalf("%q: %d sentences", evd.Content, len(ss))
	}
	vs, err := c.emb.Embed(ctx, ss)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []*pgvector.Vector
	for _, v := range vs {
		x := pgvector.NewVector(v)
		out = append(out, &x)
	}
	if err := c.st.InsertEvidenceSentences(ctx, tenant, evd.ID, evd.UserID, out); err != nil {
		c.t.Fatal(err)
	}
	// A retry writes nothing twice.
	if err := c.st.InsertEvidenceSentences(ctx, tenant, evd.ID, evd.UserID, out); err != nil {
		c.t.Fatal(err)
	}
}

func rankOf(items []recall.Item, id string) int {
	for i, it := range items {
		if it.ID == id {
			return i + 1
		}
	}
	return 0
}

// A turn is found by the reply it got (the next turn's words), and a session that
// matches as a whole lifts its turns; a long turn is as near to the question as
// its best sentence, and only through a turn the principal may see.
func TestNeighbourSessionAndSentenceEvidence(t *testing.T) {
	c := newConvo(t, time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC))
	st, emb, ctx := c.st, c.emb, context.Background()
	const tenant = "acme"

	guess := c.say(tenant, "maya", "s1", "Guess what finally came in the post this morning!")
	c.say(tenant, "maya", "s1", "No way, the tickets for the Lumineers concert?")
	c.say(tenant, "maya", "s2", "The dentist moved my appointment again.")
	c.say(tenant, "maya", "s2", "Annoying. Mine is next week too.")
	long := c.say(tenant, "maya", "s3", "We walked for hours along the windswept cliffs and the weather kept changing all afternoon, sunshine then hail then drizzle. "+
		"My brand new waterproof boots are completely ruined and both of my legs still hurt terribly today. "+
		"Afterwards we queued forty minutes for fish and chips at the crowded harbour café near the ferry terminal. "+
		"The lighthouse keeper showed us the old foghorn mechanism.")
	short := c.say(tenant, "maya", "s3", "The lighthouse keeper waved at us.")
	other := c.say(tenant, "ben", "s9", "Weather and cliffs aside. The lighthouse keeper showed us the old foghorn mechanism. Then we had chips by the harbour.")
	c.sentences(tenant, other)

	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff,
		Fusion: func() recall.Fusion { f := recall.DefaultFusion(); f.Context, f.Session = 0.5, 0.3; return f }()})
	defer eng.Close()
	ask := func(q string, only ...string) recall.Response {
		t.Helper()
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "maya"}, Query: q, K: 10, Explain: true, Retrievers: only})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := ask("When did the Lumineers concert tickets arrive?")
	r := rankOf(resp.Candidates, guess.ID)
	if r == 0 {
		t.Fatalf("the turn the tickets reply answers was not found: %+v", resp.Candidates)
	}
	if why := resp.Candidates[r-1].Why; !strings.Contains(why, "context #") || !strings.Contains(why, "session matches") {
		t.Errorf("the turn before the reply: why %q, want the context retriever and its session", why)
	}

	q := "the lighthouse keeper showed us the old foghorn mechanism"
	before := ask(q, recall.RetrieverSemantic)
	if rb, rs := rankOf(before.Items, long.ID), rankOf(before.Items, short.ID); rs == 0 || (rb != 0 && rb < rs) {
		// The long turn's vector averages four sentences; without them, the short
		// turn about the keeper is the nearer. The check below needs that.
		t.Fatalf("before sentences: long %d, short %d; want the short turn first", rb, rs)
	}
	c.sentences(tenant, long)
	after := ask(q, recall.RetrieverSemantic)
	if rankOf(after.Items, long.ID) != 1 {
		t.Fatalf("with its sentences the long turn ranks %d (before %d), want 1: %+v", rankOf(after.Items, long.ID), rankOf(before.Items, long.ID), after.Items)
	}
	if rankOf(after.Items, other.ID) != 0 {
		t.Fatal("another user's turn came back through its sentences")
	}
}

// Turns of equal keyword score are taken the more recent first: with more of
// them than the retriever keeps, the same question always finds the same (the
// latest) turns, whatever ids they were given.
func TestKeywordTiesTakeTheLatestTurns(t *testing.T) {
	c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
	st, emb, ctx := c.st, c.emb, context.Background()
	const tenant = "acme"
	const limit = 40
	var turns []*storage.Evidence
	for range limit + 15 {
		turns = append(turns, c.say(tenant, "ola", "s1", "The blue heron nested by the old mill pond again."))
	}
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff, CandidateLimit: limit})
	defer eng.Close()
	latest := map[string]bool{}
	for _, e := range turns[len(turns)-limit:] {
		latest[e.ID] = true
	}
	resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "ola"}, Query: "heron by the mill pond",
		K: limit, Explain: true, Retrievers: []string{recall.RetrieverKeyword}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != limit {
		t.Fatalf("%d items, want %d", len(resp.Items), limit)
	}
	for i, it := range resp.Items {
		if !latest[it.ID] {
			t.Fatalf("item %d (%s, at %s) is not one of the %d latest turns", i+1, it.ID, it.OccurredAt, limit)
		}
	}
	if resp.Items[0].ID != turns[len(turns)-1].ID {
		t.Errorf("first item %s at %s, want the latest turn", resp.Items[0].ID, resp.Items[0].OccurredAt)
	}
}

// How a turn's own words are weighed, each against the default and the setting
// it replaced: without length normalisation (Fusion.KeywordLengthNorm 0) a long
// turn that says the asked word twice leads a two-word reply that says it once,
// which Okapi's usual b = 0.75 puts first; the words of a turn's questions count at
// Fusion.Asked, so the turn that says the pottery class was fun leads the later one
// that asks how it went, which the same words put first at 1 (the later of equal
// scores; without LeadAsking, which would lower the asking turn as the lead).
func TestKeywordWeights(t *testing.T) {
	cases := []struct {
		name  string
		turns []string
		query string
		set   func(*recall.Fusion)
		// the turns (by index) the default and the other setting put first
		def, other int
	}{
		{"length", []string{
			"The heron is back at the mill pond, a grey heron standing in the shallows every morning before work, and the neighbours have started leaving the reeds uncut for it.",
			"Anyway, how was your weekend?", "Oh, a heron. Lovely.", "Yes, we went to the coast."},
			"heron", func(f *recall.Fusion) { f.KeywordLengthNorm = 0.75 }, 0, 2},
		{"asked", []string{"The pottery class was fun.", "Anyway, the weekend was quiet.", "How was the pottery class?", "We stayed in all Sunday."},
			"pottery class", func(f *recall.Fusion) { f.Asked, f.LeadAsking = 1, 0 }, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
			var ids []string
			for _, text := range tc.turns {
				ids = append(ids, c.say("acme", "ola", "s1", text).ID)
			}
			if got := c.firstByKeyword("acme", "ola", recall.DefaultFusion(), tc.query); got != ids[tc.def] {
				t.Errorf("default: first item %s, want %q", got, tc.turns[tc.def])
			}
			f := recall.DefaultFusion()
			tc.set(&f)
			if got := c.firstByKeyword("acme", "ola", f, tc.query); got != ids[tc.other] {
				t.Errorf("%+v: first item %s, want %q", f, got, tc.turns[tc.other])
			}
		})
	}
}

// Without length normalisation a pasted document would lead every question it
// shares words with; a turn longer than longTurn times the average is normalised
// by its length all the same, so the conversation's answer leads it.
func TestKeywordLongTurnNormalised(t *testing.T) {
	c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
	for i := range 20 {
		c.say("acme", "ola", "s1", fmt.Sprintf("Chat number %d about the weekend and the weather.", i))
	}
	answer := c.say("acme", "ola", "s1", "The heron is back at the mill pond, a grey heron in the shallows every morning.")
	var dump strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&dump, "field%dq ", i)
		if i%200 == 0 {
			dump.WriteString("heron ")
		}
	}
	c.say("acme", "ola", "s1", dump.String())
	if got := c.firstByKeyword("acme", "ola", recall.DefaultFusion(), "heron"); got != answer.ID {
		t.Fatalf("first item %s, want the answer turn %s ahead of the 1,000-word dump", got, answer.ID)
	}
}

// A turn said in another of the user's tasks is a lookalike of the task at hand:
// asked within task trip-1, trip-1's turn leads the later turn of trip-2 with the
// same words.
func TestOtherTaskTurnsFollow(t *testing.T) {
	c := newConvo(t, time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC))
	const tenant = "acme"
	mine := c.sayIn(tenant, "ola", "s1", "trip-1", "The budget for this trip is 900 euros.")
	other := c.sayIn(tenant, "ola", "s1", "trip-2", "The budget for this trip is 4000 euros.")
	eng := recall.New(c.st, c.emb, recall.NewPostgresKeyword(c.st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	for _, task := range []string{"trip-1", "trip-2", ""} {
		resp, err := eng.Recall(context.Background(), recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: "ola"}, TaskID: task,
			Query: "budget for this trip", K: 5, Retrievers: []string{recall.RetrieverKeyword}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"trip-1": mine.ID, "trip-2": other.ID, "": other.ID}[task]
		if len(resp.Items) != 2 || resp.Items[0].ID != want {
			t.Errorf("task %q: items %+v, want %s first of the two", task, resp.Items, want)
		}
	}
}
