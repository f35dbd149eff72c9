// Package turntext decides what of a turn's text is embedded and indexed: its
// sentences (each embedded on its own when a turn is long enough) and the words
// of its questions apart from what it tells. The write path stores what it
// decides; recall's keyword score weights a turn's questions apart.
package turntext

import (
	"strings"
	"unicode"
)

// MinSentenceWords is the least number of words a turn must have for its
// sentences to be embedded one by one (see Sentences).
const MinSentenceWords = 12

// Sentences splits a long turn into its sentences (ended by . ! ? or a line
// break, closing quotes and brackets kept): nil when the turn has fewer than
// MinSentenceWords words or one sentence, for it is then its own best sentence.
func Sentences(text string) []string {
	if len(strings.Fields(text)) < MinSentenceWords {
		return nil
	}
	var out []string
	start := 0
	rs := []rune(text)
	// flush ends a sentence at end; a fragment of one word ("Wow!") joins the
	// next sentence, or the last one at the end of the turn.
	flush := func(end int, last bool) {
		s := strings.TrimSpace(string(rs[start:end]))
		switch {
		case s == "":
		case len(strings.Fields(s)) >= 2:
			out = append(out, s)
		case !last:
			return
		case len(out) > 0:
			out[len(out)-1] += " " + s
		default:
			out = append(out, s)
		}
		start = end
	}
	for _, end := range sentenceEnds(rs) {
		flush(end, false)
	}
	flush(len(rs), true)
	if len(out) < 2 {
		return nil
	}
	return out
}

// sentenceEnds are the offsets in rs where a sentence ends: after a newline, or
// after a stop (with its closing quotes and brackets) at the end, before a space
// and a word that does not start in lower case (`"no way!" and left` goes on), or
// at a CJK stop.
func sentenceEnds(rs []rune) []int {
	var out []int
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\n':
			out = append(out, i+1)
		case '.', '!', '?', '。', '！', '？':
			j := i + 1
			for j < len(rs) && strings.ContainsRune(".!?\"')]”’", rs[j]) {
				j++
			}
			k := j
			for k < len(rs) && rs[k] == ' ' {
				k++
			}
			if j == len(rs) || rs[i] > 0x3000 || (k > j && k < len(rs) && !unicode.IsLower(rs[k])) || rs[j] == '\n' {
				out = append(out, j)
				i = j - 1
			}
		}
	}
	return out
}

// SplitAsked parts text into the sentences that tell (told) and those that ask
// (asked: ending in a question mark), each joined by spaces in their order. A
// question asks about what it names rather than saying it ("So how did the 10k
// go?"), so its words weigh less when a turn is scored against a question (see
// EvidenceSearch).
func SplitAsked(text string) (told, asked string) {
	var t, a []string
	rs := []rune(text)
	start := 0
	flush := func(end int) {
		sn := strings.TrimSpace(string(rs[start:end]))
		start = end
		if sn == "" {
			return
		}
		if end := strings.TrimRight(sn, "\"')]”’!.。！"); strings.HasSuffix(end, "?") || strings.HasSuffix(end, "？") {
			a = append(a, sn)
		} else {
			t = append(t, sn)
		}
	}
	for _, end := range sentenceEnds(rs) {
		flush(end)
	}
	flush(len(rs))
	return strings.Join(t, " "), strings.Join(a, " ")
}
