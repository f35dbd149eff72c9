package recall

import (
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// ParsedQuery is what the offline parser understood of a question, under the
// request's schema: the structured conditions candidate generation adds to the
// semantic and keyword searches.
type ParsedQuery struct {
	EntityIDs   []string            `json:"entity_ids,omitempty"`   // ids named in the question (12345)
	EntityTypes []string            `json:"entity_types,omitempty"` // Order, ServiceTicket, …
	States      []string            `json:"states,omitempty"`       // NOT_RECEIVED, …
	Predicates  []string            `json:"predicates,omitempty"`   // budget, flight_type, …
	MemoryTypes []memory.MemoryType `json:"memory_types,omitempty"` // PREFERENCE, CONSTRAINT, …
	Scopes      []memory.Scope      `json:"scopes,omitempty"`       // scope cues: 这次 → TASK
	From        *time.Time          `json:"from,omitempty"`         // time words: a window to favour
	To          *time.Time          `json:"to,omitempty"`
	Latest      bool                `json:"latest,omitempty"`    // "上次", "last time": favour the newest
	Terms       []string            `json:"terms,omitempty"`     // keyword terms (words, CJK bigrams)
	AsksWhen    bool                `json:"asks_when,omitempty"` // "when", "how long", "哪年": a turn naming a time answers (Fusion.TimeAnswer)
	// lower is the question, lower-cased: who it names (Fusion.SpeakerNamed).
	lower string
}

func (p *ParsedQuery) structured() bool {
	return len(p.Predicates) > 0 || len(p.MemoryTypes) > 0 || len(p.EntityIDs) > 0
}

func addUnique[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

var (
	entityIDRe = regexp.MustCompile(`\b[A-Za-z0-9-]*[0-9][A-Za-z0-9-]*\b`)

	// Words that name a memory type, whatever the schema.
	memoryTypeWords = []struct {
		t  memory.MemoryType
		re *regexp.Regexp
	}{
		{memory.TypePreference, regexp.MustCompile(`(?i)喜欢|偏好|偏爱|喜好|爱好|习惯|口味|\b(?:prefers?|preferences?|preferred|likes?|liked|favou?rites?|enjoys?|love)\b`)},
		{memory.TypeConstraint, regexp.MustCompile(`(?i)预算|限制|约束|不能|必须|不可以|要求|规定|过敏|上限|\b(?:budgets?|limits?|constraints?|must|cannot|allerg\w*|rules?|restrictions?|requirements?)\b`)},
		{memory.TypeDecision, regexp.MustCompile(`(?i)决定|决策|定了|选定|\b(?:decided|decisions?|chose|chosen)\b`)},
		{memory.TypeExperience, regexp.MustCompile(`(?i)经历|体验|去过|\b(?:experiences?|been to|went to)\b`)},
	}

	// Entity type words in Chinese for the built-in schemas' entities; English names
	// come from the schema itself (ServiceTicket → "ticket", "service ticket").
	entityWords = map[string][]string{
		"Order":         {"订单", "包裹", "快递"},
		"ServiceTicket": {"工单", "投诉", "售后"},
		"Trip":          {"旅行", "行程", "出行", "旅游"},
	}

	latestRe = regexp.MustCompile(`(?i)上次|上一次|最近一次|刚才|\blast (?:time|trip|one)\b|\bprevious\b|\blatest\b`)

	timeWords = []struct {
		re       *regexp.Regexp
		from, to func(now time.Time) time.Time
	}{
		{regexp.MustCompile(`(?i)今天|\btoday\b`), func(n time.Time) time.Time { return day(n) }, func(n time.Time) time.Time { return n }},
		{regexp.MustCompile(`(?i)昨天|\byesterday\b`), func(n time.Time) time.Time { return day(n).AddDate(0, 0, -1) }, func(n time.Time) time.Time { return day(n) }},
		{regexp.MustCompile(`(?i)这周|本周|\bthis week\b`), func(n time.Time) time.Time { return day(n).AddDate(0, 0, -7) }, func(n time.Time) time.Time { return n }},
		{regexp.MustCompile(`(?i)上周|上个星期|\blast week\b`), func(n time.Time) time.Time { return day(n).AddDate(0, 0, -14) }, func(n time.Time) time.Time { return day(n).AddDate(0, 0, -6) }},
		{regexp.MustCompile(`(?i)最近|近期|\brecent(?:ly)?\b|\blately\b`), func(n time.Time) time.Time { return n.AddDate(0, 0, -14) }, func(n time.Time) time.Time { return n }},
		{regexp.MustCompile(`(?i)上个月|\blast month\b`), func(n time.Time) time.Time { return day(n).AddDate(0, -2, 0) }, func(n time.Time) time.Time { return day(n).AddDate(0, -1, 1) }},
	}

	// Chinese bigrams and English words that say nothing about what to find.
	stopTerms = map[string]bool{
		"什么": true, "怎么": true, "一下": true, "帮我": true, "我的": true, "那个": true, "这个": true, "多少": true,
		"哪些": true, "我们": true, "可以": true, "现在": true, "样的": true, "么样": true, "了吗": true, "是什": true,
		"用户": true, "请问": true, "有没": true, "没有": true, "是不": true, "不是": true, "的是": true,
	}
)

func day(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// parseQuery reads a question with the schema's own vocabulary: predicate
// mentions, patterns and enum aliases, event-type patterns (an entity type and the
// state it resolves to), entity states, entity ids, memory-type words, scope cues
// and time words. It never calls a model and never fails; what it does not
// recognise is left to the semantic and keyword retrievers.
func parseQuery(s *schema.Schema, q string, now time.Time) *ParsedQuery {
	p := &ParsedQuery{}
	if strings.TrimSpace(q) == "" {
		return p
	}
	lower := strings.ToLower(q)
	p.lower = lower
	folded := foldKey(q) // for the patterns' prefilters (prefilter.go)
	if s != nil {
		for _, pred := range s.AllPredicates() {
			p.predicate(pred, q, lower, folded)
		}
		p.entities(s, lower)
		for sc, re := range s.Cues.ScopeRes {
			if re != nil && matchString(re, q, folded) {
				p.Scopes = addUnique(p.Scopes, sc)
			}
		}
		slices.Sort(p.Scopes)
	}
	for _, m := range entityIDRe.FindAllString(q, 8) {
		if len(m) >= 3 && len(m) <= 64 {
			p.EntityIDs = addUnique(p.EntityIDs, m)
		}
	}
	for _, w := range memoryTypeWords {
		if matchString(w.re, q, folded) {
			p.MemoryTypes = addUnique(p.MemoryTypes, w.t)
		}
	}
	// The predicate and event scans leave EVENT and FACT types from fallback
	// patterns; only the words above and matched predicates should narrow.
	if matchString(latestRe, q, folded) {
		p.Latest = true
	}
	if f, t, ok := dateWindow(q, now); ok {
		p.From, p.To = &f, &t
	}
	for _, tw := range timeWords {
		if p.From == nil && matchString(tw.re, q, folded) {
			f, t := tw.from(now), tw.to(now)
			p.From, p.To = &f, &t
			break
		}
	}
	p.Terms = keywordTerms(q, 24)
	p.AsksWhen = asksWhen(q)
	return p
}

// predicate adds what the question says of pred: the predicate and its memory
// type when one of its mentions, patterns or enum values matches (an event's
// entity type, id and state instead of the predicate), or only the memory type
// when only a generic fallback pattern does.
func (p *ParsedQuery) predicate(pred *schema.Predicate, q, lower, folded string) {
	matched := false
	for _, re := range pred.MentionRes {
		if matchString(re, q, folded) {
			matched = true
			break
		}
	}
	fallbackOnly := false
	for _, pt := range pred.Patterns {
		if pt.Re == nil {
			continue
		}
		if !matchString(pt.Re, q, folded) { // most do not match: no submatches to track for those
			continue
		}
		loc := pt.Re.FindStringSubmatchIndex(q)
		if pt.Fallback {
			fallbackOnly = true // generic ("喜欢 X"): a memory-type hint, not this predicate
			continue
		}
		matched = true
		if pred.Event != nil {
			p.EntityTypes = addUnique(p.EntityTypes, pred.Event.Entity)
			if i := pt.Re.SubexpIndex("entity"); i > 0 && loc[2*i] >= 0 {
				p.EntityIDs = addUnique(p.EntityIDs, q[loc[2*i]:loc[2*i+1]])
			}
			if pt.ResolveState != "" {
				p.States = addUnique(p.States, pt.ResolveState)
			} else if pred.Event.State != "" {
				p.States = addUnique(p.States, pred.Event.State)
			}
		}
		break
	}
	if !matched && pred.ValueType == schema.ValueEnum {
		for _, v := range pred.Enum {
			for _, w := range append([]string{v}, pred.Aliases[v]...) {
				if containsWord(lower, strings.ToLower(w)) {
					matched = true
				}
			}
		}
	}
	if matched {
		if pred.Event == nil {
			p.Predicates = addUnique(p.Predicates, pred.Name)
		}
		p.MemoryTypes = addUnique(p.MemoryTypes, pred.MemoryType)
	} else if fallbackOnly {
		p.MemoryTypes = addUnique(p.MemoryTypes, pred.MemoryType)
	}
}

// entities adds the entity types and states the question names by word.
func (p *ParsedQuery) entities(s *schema.Schema, lower string) {
	for _, e := range s.Entities {
		if e.Speaker {
			continue
		}
		words := append(slices.Clone(entityWords[e.Name]), entityNameWords(e.Name)...)
		for _, w := range words {
			if containsWord(lower, w) {
				p.EntityTypes = addUnique(p.EntityTypes, e.Name)
				break
			}
		}
		for _, st := range e.States {
			if containsWord(lower, strings.ToLower(strings.ReplaceAll(st, "_", " "))) {
				p.States = addUnique(p.States, st)
			}
		}
	}
}

// entityNameWords turns an entity name into English words: ServiceTicket →
// "service ticket", "ticket".
func entityNameWords(name string) []string {
	var words []string
	start := 0
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			words = append(words, strings.ToLower(name[start:i]))
			start = i
		}
	}
	words = append(words, strings.ToLower(name[start:]))
	out := []string{strings.Join(words, " ")}
	if len(words) > 1 {
		out = append(out, words[len(words)-1])
	}
	return out
}

// containsWord finds w in s; ASCII words must stand alone ("order" is not in
// "border"), CJK words are found anywhere.
func containsWord(s, w string) bool {
	if w == "" {
		return false
	}
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(w)
		okL := i == 0 || !isASCIIWord(s[i-1]) || !isASCIIWord(w[0])
		okR := j == len(s) || !isASCIIWord(s[j]) || !isASCIIWord(w[len(w)-1]) || (s[j] == 's' && (j+1 == len(s) || !isASCIIWord(s[j+1])))
		if okL && okR {
			return true
		}
		off = i + 1
	}
}

func isASCIIWord(b byte) bool {
	return b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isCJK(r rune) bool {
	if r < 0x1100 { // below Hangul Jamo, the first of these scripts' blocks
		return false
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// keywordTerms splits a question into search terms that match what
// storage.SearchText indexed: words (letters and digits) and, for CJK runs,
// overlapping bigrams (a single character only when the run is one character, as
// single characters match nearly every Chinese row). Terms are safe to join into a
// to_tsquery expression.
func keywordTerms(q string, max int) []string {
	var out []string
	add := func(t string) {
		if len(out) < max && !stopTerms[t] && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	var word []rune
	var run []rune
	flushWord := func() {
		if len(word) > 0 {
			add(strings.ToLower(string(word)))
			word = word[:0]
		}
	}
	flushRun := func() {
		if len(run) == 1 {
			add(string(run))
		}
		for i := 0; i+1 < len(run); i++ {
			add(string(run[i : i+2]))
		}
		run = run[:0]
	}
	for _, r := range q {
		switch {
		case isCJK(r):
			flushWord()
			run = append(run, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushRun()
			word = append(word, r)
		default:
			flushWord()
			flushRun()
		}
	}
	flushWord()
	flushRun()
	return out
}

// tsQueryText joins terms into an OR query for to_tsquery('english', …), which
// stems the English words and drops stop words.
func tsQueryText(terms []string) string {
	return strings.Join(terms, " | ")
}
