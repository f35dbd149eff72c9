package eval

import (
	"testing"
	"time"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/schema"
)

// The development suite of open conversation is big enough to measure: at least
// three conversations of ten dated sessions, 900 turns, 250 questions in the four
// answerable categories, gold facts on the turns worth keeping.
func TestOpenConversationSuiteShape(t *testing.T) {
	s, st, err := OpenConversation()
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples < 3 || st.Turns < 900 || st.Questions < 250 || st.GoldFacts < 100 {
		t.Fatalf("too small: %+v", st)
	}
	if st.Unresolved+st.Unreadable+st.NoEvidence+st.UnreadableDates > 0 {
		t.Fatalf("the suite's own evidence ids and dates must all resolve: %+v", st)
	}
	for _, sc := range s.Scenarios {
		if len(sc.Sessions) < 10 {
			t.Errorf("%s: %d sessions, want at least 10", sc.Name, len(sc.Sessions))
		}
	}
}

// The test split is another style of conversation: at least three conversations, one of
// three people and one of four, gaps of months between sessions, over 300 turns
// and 130 questions in each of the four categories, every evidence id resolved.
func TestHeldOutConversationSuiteShape(t *testing.T) {
	s, st, err := HeldOutConversation()
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples < 3 || st.Turns < 300 || st.Questions < 130 {
		t.Fatalf("too small: %+v", st)
	}
	if st.Unresolved+st.Unreadable+st.NoEvidence+st.UnreadableDates > 0 {
		t.Fatalf("the suite's own evidence ids and dates must all resolve: %+v", st)
	}
	most := 0
	for _, sc := range s.Scenarios {
		people := map[string]bool{}
		for _, tu := range sc.Turns {
			people[tu.Person] = true
		}
		most = max(most, len(people))
		cats := map[string]int{}
		for _, p := range sc.Probes {
			cats[p.Category]++
		}
		if len(cats) != 4 {
			t.Errorf("%s: categories %v, want all four of 1-4", sc.Name, cats)
		}
		var gaps int
		for i := 1; i < len(sc.Turns); i++ {
			a, b := sc.Turns[i-1].Time, sc.Turns[i].Time
			if ta, tb := parseRFC(t, a), parseRFC(t, b); tb.Sub(ta) > 60*24*time.Hour {
				gaps++
			}
		}
		if gaps < 3 {
			t.Errorf("%s: %d gaps of two months or more between sessions, want 3", sc.Name, gaps)
		}
	}
	if most < 4 {
		t.Errorf("the most people in one conversation is %d, want 4", most)
	}
}

func parseRFC(t *testing.T, s string) time.Time {
	t.Helper()
	x, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// The rule extractor against the suite's gold facts, without the pipeline: what it
// proposes must be right (precision ≥ 0.95) and must be about the speaker.
func TestRuleExtractionPrecisionOnOpenConversation(t *testing.T) {
	s, _, err := OpenConversation()
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Builtin("general")
	if err != nil {
		t.Fatal(err)
	}
	r := llm.NewRuleExtractor()
	var matched, extracted, gold int
	for _, sc := range s.Scenarios {
		for _, tr := range sc.Turns {
			if tr.Gold == nil {
				t.Fatalf("%s: turn %s is not judged", sc.Name, tr.ID)
			}
			cands := r.Candidates(sch, llm.ExtractInput{Text: tr.Text, OccurredAt: tr.At(), Speaker: tr.Person, UserID: tr.Speaker})
			var got, want []goldKey
			for _, c := range cands {
				if c.Subject != tr.Person {
					t.Errorf("%s %s: subject %q, want the speaker %q", sc.Name, tr.ID, c.Subject, tr.Person)
				}
				got = append(got, goldKey{Subject: subjectKey(c.Subject), Predicate: c.Predicate, Object: normObject(c.Object), Retraction: c.Retraction})
			}
			for _, g := range *tr.Gold {
				want = append(want, goldKey{Subject: subjectKey(g.Subject), Predicate: g.Predicate, Object: normObject(g.Object)})
			}
			m := matchGold(got, want)
			if m < len(got) {
				t.Logf("false: %s %s %q → %v (gold %v)", sc.Name, tr.ID, tr.Text, keyStrings(got), keyStrings(want))
			}
			matched, extracted, gold = matched+m, extracted+len(got), gold+len(want)
		}
	}
	p, rc := ratio(matched, extracted, 1), ratio(matched, gold, 1)
	t.Logf("rule extraction on open_conversation: precision %.3f (%d/%d), recall %.3f (%d gold)", p, matched, extracted, rc, gold)
	if p < 0.95 {
		t.Errorf("precision %.3f is below 0.95", p)
	}
}
