// Package suggest finds the known name a misspelt one was most likely meant to
// be, for "did you mean" hints on unknown JSON fields and keys.
//
// Names are compared case-insensitively; a name whose words are a known name's
// words in another order, casing or separator ("budgetTokens" and "token_budget")
// matches too; otherwise the closest by Damerau–Levenshtein distance (optimal
// string alignment: an insertion, deletion, substitution or swap of two adjacent
// letters each cost 1) within a bound that grows with the name's length.
package suggest

import (
	"sort"
	"strings"
	"unicode"
)

// Closest returns the name in known that name most likely meant, or "" when
// none is close. Of equally close names it prefers one written in name's style
// (snake_case when name has an underscore, else camelCase), then the earlier in
// known.
func Closest(name string, known []string) string {
	if name == "" {
		return ""
	}
	best, bestScore := "", maxDistance(name)+1
	lower, words, snake := strings.ToLower(name), wordKey(name), strings.Contains(name, "_")
	for _, k := range known {
		score := 2 * Distance(lower, strings.ToLower(k))
		if wordKey(k) == words && score > 1 {
			score = 1 // the same words, reordered or re-cased
		}
		if strings.Contains(k, "_") != snake {
			score++ // a tie goes to the client's own style
		}
		if score < bestScore {
			best, bestScore = k, score
		}
	}
	return best
}

// maxDistance is how many edits a misspelling of name may hold (in the doubled
// units Closest scores with, plus one for a change of style): one for a short
// name, up to three for a long one.
func maxDistance(name string) int {
	return 2*min(3, 1+len(name)/5) + 1
}

// Distance is the optimal-string-alignment distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: two back (for a swap), the previous one and the current one.
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// wordKey is name's words, lower-cased, without a plural s, sorted:
// "budgetTokens", "token_budget" and "TokenBudget" share one.
func wordKey(name string) string {
	var words []string
	var w []rune
	flush := func() {
		if len(w) > 0 {
			s := string(w)
			if len(s) > 3 && strings.HasSuffix(s, "s") {
				s = s[:len(s)-1]
			}
			words = append(words, s)
			w = w[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == ' ' || r == '.':
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])):
			flush()
		}
		w = append(w, unicode.ToLower(r))
	}
	flush()
	sort.Strings(words)
	return strings.Join(words, " ")
}
