package eval

import (
	"testing"

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
