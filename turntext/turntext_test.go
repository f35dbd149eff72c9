package turntext

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

func TestSplitAsked(t *testing.T) {
	cases := []struct{ in, told, asked string }{
		{"So?? How did the 10k go? I've been dying to ask all week.", "I've been dying to ask all week.", "So?? How did the 10k go?"},
		{"I finished! 58 minutes and 40 seconds.", "I finished! 58 minutes and 40 seconds.", ""},
		{"Did you hear about the job?!", "", "Did you hear about the job?!"},
		{"She said \"really?\" and laughed. Want to come?", "She said \"really?\" and laughed.", "Want to come?"},
		{"你去过杭州吗？我去过两次。", "我去过两次。", "你去过杭州吗？"},
		{"no punctuation at all", "no punctuation at all", ""},
		{"", "", ""},
	}
	for _, c := range cases {
		if told, asked := SplitAsked(c.in); told != c.told || asked != c.asked {
			t.Errorf("SplitAsked(%q) = %q, %q; want %q, %q", c.in, told, asked, c.told, c.asked)
		}
	}
}
