package storage

import (
	"slices"
	"testing"
)

func TestSentences(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Short turn. Two sentences.", nil}, // under MinSentenceWords
		{"Good and terrifying. The dining table is finished and delivered. Walnut, with a butterfly joint where the slab had a crack.",
			[]string{"Good and terrifying.", "The dining table is finished and delivered.", "Walnut, with a butterfly joint where the slab had a crack."}},
		{"I said \"no way!\" and left. Then Dr. Smith called me about the 3.5 km run, which was odd?",
			[]string{"I said \"no way!\" and left.", "Then Dr.", "Smith called me about the 3.5 km run, which was odd?"}},
		{"One long sentence without any stop at all that goes on and on and on for a while", nil},
		{"Wow! I really did not expect that the whole team would come. Then it rained all night, of course.",
			[]string{"Wow! I really did not expect that the whole team would come.", "Then it rained all night, of course."}},
	}
	for _, c := range cases {
		if got := Sentences(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Sentences(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
