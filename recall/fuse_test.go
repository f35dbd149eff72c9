package recall

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/memory"
)

func fptr(f float64) *float64 { return &f }

// fuse is a pure function of the fusion config and what the retrievers found.
func TestFuse(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	vis := Visibility{TenantID: "t", UserID: "u", TaskID: "trip", AsOf: now}
	p := plan{vis: vis, parsed: &ParsedQuery{}}
	fact := func(id, key string, sc memory.Scope, status memory.FactStatus, rev int, src string, d *float64) factRow {
		return factRow{ID: id, MemoryKey: key, Revision: rev, Scope: sc, UserID: "u", TaskID: map[bool]string{true: "trip"}[sc == memory.ScopeTask],
			Subject: "Maya", Predicate: "budget", Status: status, Confidence: 1, ValidFrom: now.Add(-time.Duration(rev) * time.Hour), ObservedAt: now.Add(-time.Hour), Src: src, Rk: 1, D: d}
	}
	ev := func(id, src string, rk int, d *float64) evidenceRow {
		return evidenceRow{ID: id, UserID: "u", SessionID: "s1", OccurredAt: now.Add(-time.Hour), Src: src, Rk: rk, D: d}
	}
	facts := []factRow{
		fact("f-user", "k-user", memory.ScopeUser, memory.FactActive, 1, RetrieverKeyword, fptr(0.5)),
		fact("f-task", "k-task", memory.ScopeTask, memory.FactActive, 1, RetrieverKeyword, fptr(0.1)),
		// Two revisions of one key: the ACTIVE one is kept, with the better score.
		fact("f-old", "k-rev", memory.ScopeUser, memory.FactSuperseded, 2, RetrieverKeyword, fptr(0.4)),
		fact("f-new", "k-rev", memory.ScopeUser, memory.FactActive, 1, RetrieverKeyword, fptr(0.01)),
	}
	evs := []evidenceRow{
		ev("e-word", RetrieverKeyword, 1, fptr(2.0)),
		// Near in meaning, but below SemanticMatch: it never leads a turn that matched.
		ev("e-near", RetrieverSemantic, 1, fptr(0.6)),
	}
	fw := DefaultFusion()
	items := fuse(fw, p, facts, evs, nil)
	pos := map[string]int{}
	for i, it := range items {
		pos[it.ID] = i
	}
	if _, ok := pos["f-old"]; ok {
		t.Errorf("both revisions of a key kept: %v", pos)
	}
	if _, ok := pos["f-new"]; !ok {
		t.Fatalf("the ACTIVE revision is gone: %v", pos)
	}
	if pos["f-task"] > pos["f-user"] {
		t.Errorf("the task's fact must lead the user's of the same predicate: %v", pos)
	}
	if !strings.Contains(items[pos["f-task"]].Why, "task scope leads") {
		t.Errorf("why of the task's fact: %q", items[pos["f-task"]].Why)
	}
	if pos["e-near"] != len(items)-1 {
		t.Errorf("an item no retriever matched must come last: %v", pos)
	}
	if !strings.Contains(items[pos["e-near"]].Why, "by no word") {
		t.Errorf("e-near: %+v", items[pos["e-near"]])
	}
	// The same input gives the same list.
	again := fuse(fw, p, facts, evs, nil)
	for i := range items {
		if again[i].ID != items[i].ID || again[i].Score != items[i].Score {
			t.Fatalf("fuse is not deterministic at %d: %s %v, %s %v", i, items[i].ID, items[i].Score, again[i].ID, again[i].Score)
		}
	}
	// Weights drive it: with no keyword weight the turn found by its words
	// scores only by its boosts.
	fw.Keyword = 0
	for _, it := range fuse(fw, p, facts, evs, nil) {
		if it.ID == "e-word" && it.Score != 0 {
			t.Errorf("keyword weight 0: e-word scored %v", it.Score)
		}
	}
}

// Items of equal score rank the same however their random ids fall: the newer
// first, then by content, the id last (two ingestions of one conversation ranked
// their ties differently before).
func TestTiesRankWithoutTheirIDs(t *testing.T) {
	at := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	mk := func(id, content string, when time.Time) *cand {
		return &cand{matched: true, item: Item{Kind: KindEvidence, ID: id, Content: content, OccurredAt: when, Score: 1}}
	}
	for _, ids := range [][3]string{{"a", "b", "c"}, {"c", "b", "a"}, {"b", "c", "a"}} {
		cs := []*cand{mk(ids[0], "older", at), mk(ids[1], "newer", at.Add(time.Minute)), mk(ids[2], "also older", at)}
		rank(cs)
		var got []string
		for _, c := range cs {
			got = append(got, c.item.Content)
		}
		if strings.Join(got, ",") != "newer,also older,older" {
			t.Fatalf("ids %v: ranked %v, want newer, also older, older", ids, got)
		}
	}
}

// A turn by the speaker the question names leads a slightly better-scored turn by
// someone else (SpeakerNamed), and only the lead changes: the rest keep their
// order and every score stays as it was.
func TestSpeakerNamedLeads(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: parseQuery(nil, "What did Maya say about the move?", now)}
	ev := func(id, speaker string, d float64) evidenceRow {
		return evidenceRow{ID: id, UserID: "u", Speaker: speaker, SessionID: "s1", OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(d)}
	}
	evs := []evidenceRow{ev("e-tom", "USER:Tom", 2.0), ev("e-maya", "USER:Maya", 1.8), ev("e-tom2", "USER:Tom", 1.7), ev("e-mayan", "USER:Mayan", 1.9)}
	off := DefaultFusion()
	off.SpeakerNamed = 0
	before := fuse(off, p, nil, evs, nil)
	if got := itemIDs(before); got != "e-tom,e-mayan,e-maya,e-tom2" {
		t.Fatalf("without the lift: %s", got)
	}
	on := DefaultFusion()
	after := fuse(on, p, nil, evs, nil)
	if got := itemIDs(after); got != "e-maya,e-tom,e-mayan,e-tom2" {
		t.Fatalf("with SpeakerNamed %.2f: %s, want Maya's turn first and the rest in their order (Mayan is not Maya)", on.SpeakerNamed, got)
	}
	if !strings.Contains(after[0].Why, "said by maya, whom the question names") {
		t.Errorf("why: %q", after[0].Why)
	}
	score := map[string]float64{}
	for _, it := range before {
		score[it.ID] = it.Score
	}
	for _, it := range after {
		if it.Score != score[it.ID] {
			t.Errorf("%s scored %v, was %v: the lift decides the lead only", it.ID, it.Score, score[it.ID])
		}
	}
}

// itemIDs are the items' ids in their order, joined by commas.
func itemIDs(items []Item) string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return strings.Join(out, ",")
}

// When the question asks when, a turn that names a time leads a slightly
// better-scored turn that only tells what happened (TimeAnswer); the rest keep
// their order and scores. A question that does not ask when changes nothing.
func TestTimeAnswerLeads(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ev := func(id, content string, d float64) evidenceRow {
		return evidenceRow{ID: id, UserID: "u", Speaker: "USER:Maya", SessionID: "s1", Content: content, OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(d)}
	}
	evs := []evidenceRow{
		ev("e-told", "Rowing is my new thing, the club is great", 2.0),
		ev("e-when", "signed up for rowing two weeks ago!", 1.9),
		ev("e-other", "the club has a boat called Gull", 1.8),
	}
	fw := DefaultFusion()
	fw.TimeAnswer, fw.TimeAnswerAll = 0.2, false
	for _, c := range []struct{ q, want string }{
		{"When did Maya start rowing?", "e-when,e-told,e-other"},
		{"What does Maya row?", "e-told,e-when,e-other"},
	} {
		p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: parseQuery(nil, c.q, now)}
		off := fw
		off.TimeAnswer = 0
		before := fuse(off, p, nil, evs, nil)
		after := fuse(fw, p, nil, evs, nil)
		if got := itemIDs(before); got != "e-told,e-when,e-other" {
			t.Fatalf("%q without the lift: %s", c.q, got)
		}
		if got := itemIDs(after); got != c.want {
			t.Errorf("%q with TimeAnswer %.2f: %s, want %s", c.q, fw.TimeAnswer, got, c.want)
		}
		score := map[string]float64{}
		for _, it := range before {
			score[it.ID] = it.Score
		}
		for _, it := range after {
			if it.Score != score[it.ID] {
				t.Errorf("%q: %s scored %v, was %v: the lift decides the lead only", c.q, it.ID, it.Score, score[it.ID])
			}
		}
		// TimeAnswerAll lifts the score as well: the turn that says when by the
		// same share, the others not.
		all := fw
		all.TimeAnswerAll = true
		for _, it := range fuse(all, p, nil, evs, nil) {
			want := score[it.ID]
			if it.ID == "e-when" && c.want != "e-told,e-when,e-other" {
				want *= 1 + all.TimeAnswer
			}
			if math.Abs(it.Score-want) > 1e-9 {
				t.Errorf("%q with TimeAnswerAll: %s scored %v, want %v", c.q, it.ID, it.Score, want)
			}
		}
	}
}

// With SemanticAll a turn only the keyword retriever found counts its meaning
// too: the question's rare word and a fair likeness lead chat that is only like
// the question. Without it, it counted no meaning and came second.
func TestSemanticAllWeighsEveryTurn(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: &ParsedQuery{}}
	evs := []evidenceRow{
		{ID: "e-word", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(2.0), Sim: 0.4},
		{ID: "e-like", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: RetrieverSemantic, Rk: 1, D: fptr(0.4), Sim: 0.6},
	}
	fw := DefaultFusion()
	fw.SemanticAll = false
	if got := fuse(fw, p, nil, evs, nil); got[0].ID != "e-like" {
		t.Fatalf("without SemanticAll: %s first, want the turn found by meaning (the keyword turn counts none)", got[0].ID)
	}
	fw.SemanticAll = true
	got := fuse(fw, p, nil, evs, nil)
	if got[0].ID != "e-word" {
		t.Fatalf("with SemanticAll: %s first, want the turn with the question's word", got[0].ID)
	}
	if want := fw.Keyword*1 + fw.Semantic*0.4; got[0].Score < want {
		t.Fatalf("e-word scored %.3f, want at least keyword + semantic × 0.4 = %.3f", got[0].Score, want)
	}
	if slices.Contains(got[0].Retrievers, RetrieverSemantic) {
		t.Fatalf("e-word's retrievers %v: the semantic retriever did not return it", got[0].Retrievers)
	}
	// A similarity not known (noSim) counts as none.
	evs[0].Sim = noSim
	if got := fuse(fw, p, nil, evs, nil); got[0].ID != "e-like" {
		t.Fatalf("with no known similarity: %s first", got[0].ID)
	}
}

// A turn the feedback pass found is lifted in the list below the leader, never
// to the lead, however large the weight or its own similarity (Fusion.Feedback
// counts in the score below the leaders only, and a turn only the feedback pass
// found never leads); a turn it found that is not like the question gains nothing.
func TestFeedbackFillsBelowTheLead(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: &ParsedQuery{}}
	evs := []evidenceRow{
		{ID: "e-lead", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(2.0), Sim: 0.2},
		{ID: "e-other", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: RetrieverSemantic, Rk: 1, D: fptr(0.54), Sim: 0.46},
		{ID: "e-like", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: sourceFeedback, Rk: 1, D: fptr(0.2), Sim: 0.6},
		// Like the leaders, not the question: no lift, below what matched.
		{ID: "e-weak", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: sourceFeedback, Rk: 2, D: fptr(0.3), Sim: 0.3},
	}
	fw := DefaultFusion()
	fw.Adjacent = 0
	order := func(fw Fusion) string {
		var ids []string
		for _, it := range fuse(fw, p, nil, evs, nil) {
			ids = append(ids, it.ID)
		}
		return strings.Join(ids, " ")
	}
	fw.Feedback = 0
	if got := order(fw); got != "e-lead e-other e-like e-weak" {
		t.Fatalf("without feedback: %s", got)
	}
	for _, w := range []float64{0.4, 100} {
		fw.Feedback = w
		if got := order(fw); got != "e-lead e-like e-other e-weak" {
			t.Fatalf("with feedback %g: %s, want the leader first and the turn like it second", w, got)
		}
	}
}

// A fact takes the feedback lift of the best turn it stands on, as it takes
// their keyword score: lifting turns alone would push facts below the turns
// they came from.
func TestFeedbackLiftsTheFactsOfATurn(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: &ParsedQuery{}}
	facts := []factRow{{ID: "f-budget", MemoryKey: "k", Revision: 1, Scope: memory.ScopeUser, UserID: "u", Subject: "user", Predicate: "budget",
		Status: memory.FactActive, Confidence: 1, ValidFrom: now.Add(-time.Hour), ObservedAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(0.5),
		Evidence: []string{"e-said"}}}
	evs := []evidenceRow{
		{ID: "e-said", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(2.0), Sim: 0.5},
		{ID: "e-said", UserID: "u", OccurredAt: now.Add(-time.Hour), Src: sourceFeedback, Rk: 1, D: fptr(0.2), Sim: 0.5},
	}
	scoreOf := func(w float64) float64 {
		fw := DefaultFusion()
		fw.Adjacent, fw.Feedback = 0, w
		for _, it := range fuse(fw, p, facts, evs, nil) {
			if it.ID == "f-budget" {
				return it.Score
			}
		}
		t.Fatal("the fact is not in the list")
		return 0
	}
	if off, on := scoreOf(0), scoreOf(0.4); on <= off {
		t.Fatalf("the fact scored %.3f with feedback, %.3f without: it did not take its turn's lift", on, off)
	}
}

func TestEndsAsking(t *testing.T) {
	for _, s := range []string{"How was the race?", "Loved it! How about you?? 😄", "Did you go? [shares a photo: a lake]", "你去了吗？", "wait what?!", "really?\"", "how was it? 👍🏽"} {
		if !endsAsking(s) {
			t.Errorf("%q: does not end by asking, it says", s)
		}
	}
	for _, s := range []string{"What a day. I won!", "Is it? No, it isn't.", "I asked why? and she laughed", "[a photo?]", ""} {
		if endsAsking(s) {
			t.Errorf("%q: ends by asking, it says", s)
		}
	}
}

// A turn that ends by asking gives the lead to a turn a little below it that
// tells (LeadAsking); the scores stay as they were.
func TestLeadAskingLeadsWithTheTellingTurn(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := plan{vis: Visibility{TenantID: "t", UserID: "u", AsOf: now}, parsed: parseQuery(nil, "What boat did Maya buy?", now)}
	ev := func(id, content string, d float64) evidenceRow {
		return evidenceRow{ID: id, UserID: "u", Speaker: "USER:Maya", SessionID: "s1", Content: content, OccurredAt: now.Add(-time.Hour), Src: RetrieverKeyword, Rk: 1, D: fptr(d)}
	}
	evs := []evidenceRow{ev("e-asks", "The boat show was fun. Did you ever buy a boat?", 2.0), ev("e-tells", "we bought the little red dinghy 🚣", 1.95)}
	off := DefaultFusion()
	off.LeadAsking = 0
	on := DefaultFusion()
	on.LeadAsking = 0.1
	if got := itemIDs(fuse(off, p, nil, evs, nil)); got != "e-asks,e-tells" {
		t.Fatalf("without LeadAsking: %s", got)
	}
	after := fuse(on, p, nil, evs, nil)
	if got := itemIDs(after); got != "e-tells,e-asks" {
		t.Fatalf("with LeadAsking %.2f: %s, want the telling turn first", on.LeadAsking, got)
	}
	if after[0].Score >= after[1].Score {
		t.Errorf("scores %v, %v: the lift decides the lead only", after[0].Score, after[1].Score)
	}
}
