package recall

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A question is read with dozens of unanchored patterns (each schema predicate's,
// its scope cues, the memory-type words) and most do not match. Go's regexp tries
// each from every position, about 100 µs a question in all, most of the engine's
// parsing. A pattern's prefilter is the set of literals one of which every match
// contains: when the question contains none, the pattern cannot match and is not
// run. It only ever skips patterns that cannot match (TestPrefilterNeverRejectsAMatch).

// lit is one literal a match may contain; fold: compared under Unicode simple case
// folding (the pattern's (?i)), key is then the literal's fold key.
type lit struct {
	key  string
	fold bool
}

// prefilter is nil when the pattern requires no literal (it is always run).
type prefilter []lit

var prefilters sync.Map // *regexp.Regexp → prefilter

// mayMatch reports whether re can match q; folded is foldKey(q).
func mayMatch(re *regexp.Regexp, q, folded string) bool {
	pf, ok := prefilters.Load(re)
	if !ok {
		pf = buildPrefilter(re.String())
		prefilters.Store(re, pf)
	}
	lits := pf.(prefilter)
	if lits == nil {
		return true
	}
	for _, l := range lits {
		if l.fold && strings.Contains(folded, l.key) || !l.fold && strings.Contains(q, l.key) {
			return true
		}
	}
	return false
}

// matchString is re.MatchString(q), skipping the run when the prefilter rules a
// match out.
func matchString(re *regexp.Regexp, q, folded string) bool {
	return mayMatch(re, q, folded) && re.MatchString(q)
}

func buildPrefilter(expr string) prefilter {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	lits, ok := required(re.Simplify())
	if !ok {
		return nil
	}
	return lits
}

// required returns literals one of which every match of re contains (ok false
// when there is no such set).
func required(re *syntax.Regexp) ([]lit, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return nil, false
		}
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 {
			return []lit{{key: foldKey(s), fold: true}}, true
		}
		return []lit{{key: s}}, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
		return nil, false
	case syntax.OpConcat:
		// Any part's literals are required of the whole; keep the part whose
		// shortest literal is longest (the most selective).
		var best []lit
		bestLen := 0
		for _, sub := range re.Sub {
			ls, ok := required(sub)
			if !ok {
				continue
			}
			short := -1
			for _, l := range ls {
				if n := utf8.RuneCountInString(l.key); short < 0 || n < short {
					short = n
				}
			}
			if short > bestLen {
				best, bestLen = ls, short
			}
		}
		return best, best != nil
	case syntax.OpAlternate:
		var all []lit
		for _, sub := range re.Sub {
			ls, ok := required(sub)
			if !ok {
				return nil, false
			}
			all = append(all, ls...)
		}
		return all, len(all) > 0
	}
	return nil, false
}

// foldKey maps each rune to the smallest rune of its simple case-folding orbit
// (what (?i) treats as equal), so two strings are equal under folding exactly
// when their keys are.
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// 'K' and 'k' fold with the Kelvin sign and 'S', 's' with 'ſ', all above
		// ASCII: the orbit's smallest rune is the upper-case letter.
		return strings.ToUpper(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(minFold(r))
	}
	return b.String()
}

func minFold(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < m {
			m = f
		}
	}
	return m
}
