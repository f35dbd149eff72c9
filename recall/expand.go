package recall

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Entity expansion, for questions whose answer spans turns (multi-hop): the names
// that the best-matching turns mention besides the question's own words (a sister's
// name, a dog's, a company's) lead to the other turns that mention them — two hops
// over the graph of what people said (question → turn → name → turn). The second
// hop is a keyword (BM25) search for those names; what it finds is added with the
// weight Fusion.Expand, so a turn reached only through a name never outranks one
// that answers the question's own words.

// sourceExpand is the retriever name of the second hop.
const sourceExpand = "expand"

// sourceContext is the retriever name of turns found by their neighbours' words
// (the keyword retriever's context, contextKeywordSQL).
const sourceContext = "context"

var capitalised = regexp.MustCompile(`\b\p{Lu}[\p{Ll}\p{Lu}'’-]{2,}\b`)

// Capitalised words that are not names.
var notNames = map[string]bool{
	"the": true, "and": true, "but": true, "yes": true, "yeah": true, "yep": true, "nope": true, "okay": true, "haha": true,
	"hah": true, "lol": true, "wow": true, "aww": true, "ooh": true, "hey": true, "hello": true, "thanks": true, "thank": true,
	"sure": true, "sorry": true, "well": true, "also": true, "just": true, "that": true, "this": true, "what": true, "when": true,
	"where": true, "who": true, "why": true, "how": true, "which": true, "you": true, "your": true, "she": true, "her": true,
	"his": true, "him": true, "they": true, "them": true, "their": true, "our": true, "we": true, "its": true, "it's": true,
	"i'm": true, "i've": true, "i'll": true, "i'd": true, "that's": true, "there": true, "then": true, "now": true, "not": true,
	"maybe": true, "honestly": true, "totally": true, "definitely": true, "good": true, "great": true, "nice": true, "love": true,
	"monday": true, "tuesday": true, "wednesday": true, "thursday": true, "friday": true, "saturday": true, "sunday": true,
	"january": true, "february": true, "march": true, "april": true, "may": true, "june": true, "july": true, "august": true,
	"september": true, "october": true, "november": true, "december": true, "christmas": true, "easter": true,
	"did": true, "does": true, "was": true, "were": true, "are": true, "is": true, "have": true, "has": true, "had": true,
	"can": true, "could": true, "would": true, "will": true, "should": true, "let's": true, "don't": true, "didn't": true,
	"so": true, "oh": true, "ah": true, "hmm": true, "ugh": true, "omg": true, "for": true, "with": true, "from": true,
}

// expansionNames are up to max names the top items mention that the question does
// not, nor are they a speaker of the conversation.
func expansionNames(query string, top []Item, max int) []string {
	inQuery := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
		inQuery[strings.TrimSuffix(w, "'s")] = true
	}
	speakers := map[string]bool{}
	for _, it := range top {
		if it.Speaker != "" {
			speakers[strings.ToLower(it.Speaker)] = true
		}
	}
	texts := make([]string, len(top))
	for i, it := range top {
		texts[i] = it.Content
		if it.Kind == KindFact {
			texts[i] = it.Object // a fact's content is a rendering; its object is what was said
		}
	}
	// A capitalised word is a name only where it stands inside a sentence in one of
	// the texts ("… and Domino finished"): at a sentence's start it may be any word
	// ("Actually, …").
	inside := map[string]bool{}
	for _, text := range texts {
		for _, loc := range capitalised.FindAllStringIndex(text, -1) {
			if !sentenceStart(text, loc[0]) {
				inside[strings.TrimSuffix(strings.TrimSuffix(text[loc[0]:loc[1]], "'s"), "’s")] = true
			}
		}
	}
	var out []string
	for _, text := range texts {
		for _, m := range capitalised.FindAllString(text, -1) {
			n := strings.TrimSuffix(strings.TrimSuffix(m, "'s"), "’s")
			if !inside[n] {
				continue
			}
			l := strings.ToLower(n)
			if len(l) < 3 || notNames[l] || inQuery[l] || speakers[l] || slices.Contains(out, n) {
				continue
			}
			if strings.ToUpper(n) == n { // shouting, not a name
				continue
			}
			out = append(out, n)
			if len(out) == max {
				return out
			}
		}
	}
	return out
}

// expand runs the second hop: keyword search for the names, over the same
// visibility, as rows of source "expand".
func (e *Engine) expand(ctx context.Context, p plan, names []string) ([]factRow, []evidenceRow, error) {
	terms := make([]string, 0, len(names))
	for _, n := range names {
		terms = append(terms, keywordTerms(n, 4)...)
	}
	if len(terms) == 0 {
		return nil, nil, nil
	}
	p2 := p
	p2.vec = nil
	p2.tsq = tsQueryText(terms)
	// Keyword only: no predicates, entities or types of the question (a copy, the
	// caller's parse is reported as it is).
	pq := *p.parsed
	pq.Predicates, pq.EntityIDs, pq.EntityTypes, pq.MemoryTypes, pq.States = nil, nil, nil, nil, nil
	p2.parsed = &pq
	var on retrieverSet = 1 << slices.Index(Retrievers, RetrieverKeyword)
	facts, evs, err := e.runPart(ctx, p2, stmtArgs(p2, on), partExpand, nil)
	if err != nil {
		return nil, nil, err
	}
	for i := range facts {
		facts[i].Src = sourceExpand
	}
	for i := range evs {
		evs[i].Src = sourceExpand
	}
	return facts, evs, nil
}

// sentenceStart reports whether byte offset i of text begins a sentence: nothing but
// spaces, quotes or brackets since the text's start or the last . ! ? : or newline.
func sentenceStart(text string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch c := text[j]; c {
		case ' ', '\t', '"', '\'', '(', '[':
			continue
		case '.', '!', '?', ':', '\n':
			return true
		default:
			return false
		}
	}
	return true
}
