package storage

import (
	"strings"
	"unicode"
)

// SearchText prepares text for Postgres full-text search. The english parser keeps
// a run of Chinese characters as one word, which a query would then have to match
// whole; splitting CJK runs into single characters and overlapping bigrams makes
// "订单12345没收到" findable by "订单" or "没收到". Other text passes through so the
// english configuration still stems it.
func SearchText(s string) string {
	var b strings.Builder
	var run []rune
	flush := func() {
		if len(run) == 0 {
			return
		}
		b.WriteByte(' ')
		for i, r := range run {
			b.WriteRune(r)
			b.WriteByte(' ')
			if i+1 < len(run) {
				b.WriteRune(r)
				b.WriteRune(run[i+1])
				b.WriteByte(' ')
			}
		}
		run = run[:0]
	}
	for _, r := range s {
		if isCJK(r) {
			run = append(run, r)
			continue
		}
		flush()
		b.WriteRune(r)
	}
	flush()
	return b.String()
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}
