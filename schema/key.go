package schema

import (
	"strings"

	"github.com/engramhq/engram/memory"
)

// MemoryKey is the stable identity of a memory across its revisions: the scope key
// (e.g. TASK:trip-1), the subject and the predicate, plus the normalised value for a
// predicate of cardinality many (or its key attribute, when the predicate names one),
// so several preferences coexist while a new budget supersedes the old one. ref gives
// the scope's ids; its scope defaults to the candidate's.
//
// A retraction of a many-valued predicate with an empty object yields the key with an
// empty value; callers treat it as "every value of this predicate".
func (s *Schema) MemoryKey(c memory.Candidate, ref memory.ScopeRef) string {
	if ref.Scope == "" {
		ref.Scope = c.Scope
	}
	parts := []string{ref.Key(), normalizeSubject(c.Subject), c.Predicate}
	if p, ok := s.predicates[c.Predicate]; ok && p.Cardinality == Many {
		v := c.Object
		if p.KeyAttribute != "" {
			if a, ok := c.Attributes[p.KeyAttribute].(string); ok && strings.TrimSpace(a) != "" {
				v = a
			}
		}
		parts = append(parts, NormalizeValue(v))
	}
	return strings.Join(parts, "|")
}

// NormalizeValue folds case, full-width ASCII and runs of white space, so "Flink SQL"
// and "flink  ｓｑｌ" are one value.
func NormalizeValue(v string) string {
	v = strings.Map(func(r rune) rune {
		if r >= 0xFF01 && r <= 0xFF5E { // full-width ASCII forms
			return r - 0xFEE0
		}
		if r == 0x3000 {
			return ' '
		}
		return r
	}, v)
	return strings.Join(strings.Fields(strings.ToLower(v)), " ")
}

// normalizeSubject lower-cases a plain subject ("User" → "user") but keeps entity
// references ("Order:AB12") as they are, since ids may be case-sensitive.
func normalizeSubject(s string) string {
	s = strings.TrimSpace(s)
	if strings.Contains(s, ":") {
		return s
	}
	return strings.ToLower(s)
}
