package eval

import (
	"testing"

	"github.com/engramhq/engram/recall"
)

// Each missed evidence turn lands in the first cause that fits it.
func TestMissCauses(t *testing.T) {
	s := &Suite{Scenarios: []Scenario{{Name: "c", Turns: []Turn{
		{ID: "D1:1", Person: "Mia", Session: "s1", Text: "Where did you go hiking last weekend?"},
		{ID: "D1:2", Person: "Leo", Session: "s1", Text: "Up in the Alps, near Chamonix."},
		{ID: "D1:3", Person: "Leo", Session: "s1", Text: "Totally unrelated remark."},
		{ID: "D1:4", Person: "Leo", Session: "s1", Text: "Look! [shares a photo: a golden retriever on a sofa]"},
		{ID: "D1:5", Person: "Mia", Session: "s1", Text: "I adopted a dog in 2022."},
		{ID: "D1:6", Person: "Mia", Session: "s1", Text: "Painting keeps me calm."},
		{ID: "D1:7", Person: "Mia", Session: "s1", Text: "I paint landscapes."},
	}}}}
	miss := func(cat, q string, at10 float64, turns ...string) ProbeResult {
		p := ProbeResult{Scenario: "c", Category: cat, Question: q, Score: ProbeScore{HasEvidence: true, EvidenceAt: map[int]float64{10: at10}}}
		for _, id := range turns {
			p.Misses = append(p.Misses, "evidence turn "+id+" (not in the list)")
		}
		return p
	}
	got := MissCauses(s, []ProbeResult{
		miss("1", "Which mountains did Leo hike in?", 0, "D1:2"),       // D1:1 shares "hike"
		miss("1", "What did Leo say about the weather?", 0, "D1:3"),    // only "Leo": speaker
		miss("2", "What colour is the retriever?", 0, "D1:4"),          // only the caption
		miss("2", "What did Mia say about Leo's painting?", 0, "D1:4"), // only Leo's name shared
		miss("4", "Was Mia ever in Greece?", 0, "D1:3"),                // not the speaker, no word
		miss("2", "When did Mia adopt a dog?", 0, "D1:5"),              // shares words, asks when
		miss("3", "What does Mia paint?", 0.5, "D1:7"),                 // another turn found
		miss("3", "Does Mia paint landscapes?", 0, "D1:7"),             // outranked
		miss("4", "What about quantum physics?", 0, "D1:6"),            // nothing shared
	})
	want := map[string]map[string]int{
		"1": {CauseNeighbour: 1, CauseSpeaker: 1},
		"2": {CausePhoto: 1, CauseTime: 1, CauseSpeaker: 1},
		"3": {CauseSpread: 1, CauseOutranked: 1},
		"4": {CauseNoWord: 2},
	}
	for cat, w := range want {
		for c, n := range w {
			if got[cat][c] != n {
				t.Errorf("category %s, %s: %d, want %d (all: %v)", cat, c, got[cat][c], n, got)
			}
		}
		total, want := 0, 0
		for _, n := range got[cat] {
			total += n
		}
		for _, n := range w {
			want += n
		}
		if total != want {
			t.Errorf("category %s: %v, want %v", cat, got[cat], w)
		}
	}
}

// Each half is tuned on itself and reported on the other; the setting best on a
// half is the one that half prefers, not the whole's.
func TestHalves(t *testing.T) {
	p := func(conv, cat string, at1, at10 float64) ProbeResult {
		return ProbeResult{Scenario: conv, Category: cat, Score: ProbeScore{HasEvidence: true,
			EvidenceAt: map[int]float64{1: at1, 5: at10, 10: at10}, RecallAt: map[int]float64{}}}
	}
	a, b := recall.DefaultFusion(), recall.DefaultFusion()
	b.Context = 0.5
	rows := []TuneRow{
		{Fusion: a, Default: true, probes: map[string][]ProbeResult{"s": {p("c1", "1", 1, 1), p("c2", "1", 0, 0), p("c3", "1", 0, 1), p("c4", "1", 1, 1), p("c4", "5", 0, 0)}}},
		{Fusion: b, probes: map[string][]ProbeResult{"s": {p("c1", "1", 0, 0), p("c2", "1", 0, 0), p("c3", "1", 1, 1), p("c4", "1", 1, 1), p("c4", "5", 1, 1)}}},
	}
	base := TuneRow{probes: map[string][]ProbeResult{"s": {p("c1", "1", 0, 0), p("c2", "1", 0, 0), p("c3", "1", 0, 0), p("c4", "1", 0, 1), p("c4", "5", 0, 1)}}}
	hs := Halves(rows, base, []string{"c1", "c2", "c3", "c4"})
	if len(hs) != 2 {
		t.Fatalf("%d halves", len(hs))
	}
	if hs[0].Best != a || hs[1].Best != b {
		t.Fatalf("best: first half %+v, second %+v", hs[0].Best, hs[1].Best)
	}
	// Tuned on c1, c2 (a); reported on c3, c4: a reaches @1 0.5, @10 1 on 1-4.
	f := hs[0].Figures["best"]
	if f.Probes != 2 || f.At1 != 0.5 || f.At10 != 1 {
		t.Fatalf("first half's best on the second: %+v", f)
	}
	if c5 := f.Categories["5"]; len(c5) != 2 || c5[1] != 0 {
		t.Fatalf("category 5 is reported, not tuned on: %+v", f.Categories)
	}
	if g := hs[1].Figures["baseline"]; g.At10 != 0 || g.Probes != 2 {
		t.Fatalf("baseline on the first half: %+v", g)
	}
}
