package eval

import (
	"slices"
	"testing"
)

func TestAnalyzedTokens(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Priya's running shoes", []string{"priya", "run", "shoe"}},
		{"When did she go to the climbing gym?", []string{"go", "climb", "gym"}},
		{"Daniel: I ran 10 km [shares a photo: a river at sunset]", []string{"daniel", "ran", "10", "km", "share", "photo", "river", "sunset"}},
		{"这次旅行预算", []string{"这次", "次旅", "旅行", "行预", "预算"}},
	}
	for _, c := range cases {
		if got := AnalyzedTokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("AnalyzedTokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The baseline finds a turn by another form of the question's word, and a turn
// that shares only stop words with the question does not match.
func TestBaselineStemsAndDropsStopWords(t *testing.T) {
	docs := [][]string{
		AnalyzedTokens("I have been hiking with my sister every weekend"),
		AnalyzedTokens("what is it that you do on the weekend"),
	}
	s := BM25(AnalyzedTokens("Who does she hike with?"), docs)
	if !(s[0] > 0 && s[1] == 0) {
		t.Fatalf("scores %v: want only the hiking turn to match", s)
	}
}

// A fold leaves out the conversation tuned on and averages the others' probes.
func TestFolds(t *testing.T) {
	p := func(conv, cat string, at1, at10 float64) ProbeResult {
		return ProbeResult{Scenario: conv, Category: cat, Score: ProbeScore{HasEvidence: true,
			EvidenceAt: map[int]float64{1: at1, 5: at10, 10: at10}, RecallAt: map[int]float64{}}}
	}
	engine := []ProbeResult{p("a", "x", 1, 1), p("b", "x", 1, 1), p("b", "y", 0, 1), p("c", "y", 0, 0)}
	base := []ProbeResult{p("a", "x", 0, 0), p("b", "x", 0, 1), p("b", "y", 0, 0), p("c", "y", 0, 0)}
	rows := Folds(engine, base, 10)
	got := map[string]FoldRow{}
	for _, r := range rows {
		got[r.TunedOn+"/"+r.Category] = r
	}
	if len(rows) != 9 { // per fold: (all), x, y
		t.Fatalf("%d rows, want 9: %+v", len(rows), rows)
	}
	r := got["a/(all)"]
	if r.Probes != 3 || !slices.Equal(r.Held, []string{"b", "c"}) {
		t.Fatalf("fold a: %+v", r)
	}
	if d := r.Engine["10"] - 2.0/3; d > 1e-9 || d < -1e-9 {
		t.Fatalf("fold a engine @10 = %v, want 2/3", r.Engine["10"])
	}
	if r.Baseline["10"] != 1.0/3 || r.Delta["1"] != 1.0/3 {
		t.Fatalf("fold a baseline/delta: %+v", r)
	}
	if _, ok := got["c/x"]; !ok {
		t.Fatalf("fold c has no category x (from a and b): %v", rows)
	}
	if Folds(engine[:1], base[:1], 10) != nil {
		t.Fatal("one conversation has no folds")
	}
}
