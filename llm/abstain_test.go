package llm

import (
	"testing"
	"time"

	"github.com/engramhq/engram/schema"
)

// Chit-chat of open conversation yields nothing; first-person statements with an
// explicit cue and a complete object yield a fact about the speaker.
func TestRuleExtractorAbstainsOnChitChat(t *testing.T) {
	s, err := schema.Builtin("general")
	if err != nil {
		t.Fatal(err)
	}
	r := NewRuleExtractor()
	at := time.Date(2024, 3, 3, 19, 0, 0, 0, time.UTC)
	for _, text := range []string{
		"Wow, that must have been so exciting!",
		"That must be awesome.",
		"I like them for that.",
		"I love it and that'll keep my confidence up.",
		"I prefer it.",
		"I love that!",
		"I like that idea a lot.",
		"Do you prefer tea or coffee?",
		"You must be so proud of her.",
		"You always liked spicy food.",
		"I bet you love living near the sea.",
		"I'd love to see them sometime.",
		"Sounds like you really enjoy your new job.",
		"I must go, talk soon!",
		"I love how you decorated the place.",
		"I love hearing about your kids.",
		"If I had the time I would love pottery.",
		"Haha I love you too.",
		"Do you like it there?",
		"What do you enjoy most about teaching?",
	} {
		got := r.Candidates(s, ExtractInput{Text: text, OccurredAt: at, Speaker: "Priya", UserID: "conv-1"})
		if len(got) > 0 {
			t.Errorf("%q: want no candidates, got %+v", text, got)
		}
	}
	for text, want := range map[string]string{
		"I really love rock climbing.":           "prefers=rock climbing",
		"I can't stand cilantro, honestly.":      "dislikes=cilantro",
		"I'm allergic to shellfish, sadly.":      "allergy=shellfish",
		"I work as a data analyst at a bank.":    "role=data analyst",
		"I'm a nurse now, on the night shift.":   "role=nurse",
		"We just moved to Leeds last month!":     "lives_in=Leeds",
		"My beagle Pickle chewed my shoe again.": "has_pet=beagle Pickle",
		"My sister Ana is a paramedic now.":      "family=sister Ana",
	} {
		got := r.Candidates(s, ExtractInput{Text: text, OccurredAt: at, Speaker: "Priya", UserID: "conv-1"})
		found := false
		for _, c := range got {
			if c.Predicate+"="+c.Object == want {
				found = true
				if c.Subject != "Priya" {
					t.Errorf("%q: subject %q, want the speaker Priya", text, c.Subject)
				}
			}
		}
		if !found {
			t.Errorf("%q: want %s, got %+v", text, want, got)
		}
	}
	// Without a named speaker the subject stays "user".
	got := r.Candidates(s, ExtractInput{Text: "I really love rock climbing.", OccurredAt: at, Speaker: "USER"})
	if len(got) != 1 || got[0].Subject != "user" {
		t.Errorf("want one candidate about the user, got %+v", got)
	}
}
