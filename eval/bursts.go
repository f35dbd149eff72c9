package eval

import (
	"hash/fnv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/engramhq/engram/turntext"
)

// Bursts re-tells a conversation the way people chat, to check that what recall
// learns on LoCoMo's paragraph-long turns carries to real chat (engram eval
// --locomo FILE --bursts): each turn becomes a burst of short messages, one per
// sentence (turntext.Sentences) and its photo as a message of its own; most
// messages are lower-cased and lose their final full stop; some words of five
// letters or more get a typo (two letters swapped); some messages end with an
// emoji. The questions stay as they are. A message of an evidence turn counts
// as the turn (Turn.Part). Every choice is a hash of the turn's id and the
// message's place, so each run re-tells it the same way.
//
// Shares, each of a message or word, chosen to look like chat, not tuned:
const (
	burstLower = 0.7  // messages lower-cased
	burstTypo  = 0.05 // words of five letters or more with two letters swapped
	burstEmoji = 0.15 // messages ending with an emoji
)

var burstEmojis = []string{"🙂", "😂", "👍", "❤️", "🎉", "😅", "🙌"}

// burst returns the messages of a turn's text and photo caption.
func burst(id, text, caption string) []string {
	parts := turntext.Sentences(text)
	if len(parts) == 0 {
		parts = []string{text}
	}
	var out []string
	for i, p := range parts {
		if m := noisy(id, i, p); m != "" {
			out = append(out, m)
		}
	}
	if caption != "" {
		out = append(out, "[shares a photo: "+caption+"]")
	}
	return out
}

// noisy is message i of turn id as typed in a hurry.
func noisy(id string, i int, s string) string {
	s = strings.TrimSpace(s)
	if chance(id, i, "lower") < burstLower {
		s = strings.ToLower(s)
		s = strings.TrimSuffix(s, ".")
	}
	words := strings.Fields(s)
	for w, word := range words {
		if utf8.RuneCountInString(word) >= 5 && chance(id, i*1000+w, "typo") < burstTypo {
			words[w] = swapLetters(word)
		}
	}
	s = strings.Join(words, " ")
	if chance(id, i, "emoji") < burstEmoji {
		s += " " + burstEmojis[int(chance(id, i, "which")*float64(len(burstEmojis)))%len(burstEmojis)]
	}
	return s
}

// swapLetters swaps the first two adjacent letters inside word that differ
// ("because" → "bceause"), leaving its first letter and any punctuation.
func swapLetters(word string) string {
	rs := []rune(word)
	for j := 1; j+1 < len(rs); j++ {
		if unicode.IsLetter(rs[j]) && unicode.IsLetter(rs[j+1]) && rs[j] != rs[j+1] {
			rs[j], rs[j+1] = rs[j+1], rs[j]
			return string(rs)
		}
	}
	return word
}

// chance is a number in [0, 1) fixed by id, n and what.
func chance(id string, n int, what string) float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0})
	h.Write([]byte(what))
	return float64(h.Sum64()>>11) / float64(1<<53)
}
