package llm

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/engramhq/engram/schema"
)

// Abstention: the rule extractor proposes a memory only from a first-person
// statement with an explicit cue and a complete object. What open conversation is
// mostly made of — questions, empathy ("must have been tough"), hedges ("I bet",
// "sounds like"), wishes and hypotheticals ("I'd love to", "if I"), statements about
// the other person ("you always liked …") and objects that are pronouns or
// fragments ("I love it", "I like that idea") — yields nothing. Precision comes
// before recall: a fact the engine invents is worse than one it misses.

// SpeakerSubject is the subject of what a speaker said: the speaker's name when a
// turn names a person (a conversation between two people kept under one user id),
// else "user". Actor kinds ("USER", "AGENT", …) are not names.
func SpeakerSubject(speaker string) string {
	s := strings.TrimSpace(speaker)
	switch strings.ToUpper(s) {
	case "", "USER", "AGENT", "SYSTEM", "TOOL":
		return "user"
	}
	return s
}

// NonUserActor is the actor type a speaker names when it is not the user
// (AGENT, SYSTEM, TOOL), and whether it is one.
func NonUserActor(speaker string) (string, bool) {
	switch a := strings.ToUpper(strings.TrimSpace(speaker)); a {
	case "AGENT", "SYSTEM", "TOOL":
		return a, true
	}
	return "", false
}

// assertsAny is whether the schema lets the actor assert any key.
func assertsAny(s *schema.Schema, actor string) bool {
	for _, p := range s.AllPredicates() {
		if p.AssertableBy(actor) {
			return true
		}
	}
	return false
}

// englishQuestion: a sentence that asks rather than states.
var englishQuestion = regexp.MustCompile(`(?i)^\s*(?:(?:so|and|but|oh|hey|well|ok|okay|wow|haha|lol)[,!]?\s+)*(?:do|does|did|are|is|was|were|have|has|had|can|could|would|will|should|shall|may|might|what|when|where|who|whom|whose|why|how|which|isn't|aren't|don't|didn't|doesn't|won't|wouldn't)\b`)

// IsQuestion reports whether a sentence is a question (it ends with a question mark,
// or, in English, opens like one).
func IsQuestion(sentence string) bool {
	s := strings.TrimSpace(sentence)
	if strings.HasSuffix(s, "?") || strings.HasSuffix(s, "？") {
		return true
	}
	return englishQuestion.MatchString(s)
}

// hedgeCue marks a clause as empathy, a guess, a wish, a hypothetical or a remark
// about the other person: nothing in it is a first-person fact.
var hedgeCue = regexp.MustCompile(`(?i)(?:\bmust(?:'ve| have)? be(?:en)?\b|\bsounds?\b|\bi bet\b|\bi guess\b|\bi suppose\b|\bi imagine\b|\bimagine\b|\bmaybe\b|\bperhaps\b|\bprobably\b|\bi wish\b|\bif\b|\bwould\b|\bcould\b|\bi'd\b|\bi hope\b|\bhopefully\b|\bseems?\b|\blooks like\b|\bpretend\b|\bjoking\b|\bkidding\b|\bunless\b|\bwhether\b|\byou\b|\byour\b|\byou're\b|\byou've\b|\byou'd\b|\blet's\b|\bwe should\b|\bshould\b)`)

// Hedged reports whether the clause of text up to the end of the match (byte
// offsets) carries a hedge cue, so the match is no statement of fact. Only English
// cues are read; other languages rely on their patterns.
func Hedged(text string, start, end int) bool {
	b := clauseStart(text, start)
	if end > len(text) {
		end = len(text)
	}
	return hedgeCue.MatchString(text[b:end])
}

// Words an object may not start with: pronouns, determiners of something unnamed,
// question words and degree words, which leave the object unnamed ("it", "that
// idea", "how you did it", "so much").
var badObjectStart = map[string]bool{
	"it": true, "its": true, "it's": true, "that": true, "that's": true, "this": true, "these": true, "those": true,
	"them": true, "they": true, "their": true, "him": true, "her": true, "he": true, "she": true, "his": true,
	"you": true, "your": true, "yours": true, "we": true, "us": true, "me": true, "myself": true,
	"everything": true, "something": true, "anything": true, "nothing": true, "everyone": true, "everybody": true,
	"someone": true, "somebody": true, "anyone": true, "one": true, "ones": true, "all": true, "both": true, "either": true,
	"how": true, "what": true, "when": true, "where": true, "why": true, "who": true, "which": true, "whatever": true,
	"so": true, "too": true, "very": true, "much": true, "more": true, "less": true, "most": true, "such": true,
	"the": false, "a": false, "an": false, "there": true, "here": true, "being": true, "seeing": true, "hearing": true,
	"talking": true, "chatting": true, "catching": true, "having": true, "getting": true, "not": true, "to": false,
}

// Words a complete object does not end on: it was cut mid-phrase.
var danglingEnd = map[string]bool{
	"and": true, "or": true, "but": true, "to": true, "the": true, "a": true, "an": true, "of": true, "with": true,
	"for": true, "that": true, "which": true, "because": true, "so": true, "when": true, "if": true, "my": true,
	"our": true, "at": true, "in": true, "on": true, "from": true, "than": true, "as": true, "about": true, "by": true,
	"is": true, "are": true, "was": true, "be": true, "i": true, "it": true, "them": true, "this": true, "like": true,
}

// Words anywhere in an object that make it about the other person or no object at
// all.
var badObjectWord = map[string]bool{
	"you": true, "your": true, "yours": true, "you're": true, "it": true, "it's": true, "that'll": true, "them": true,
	"i": true, "i'm": true, "i'll": true, "i've": true, "we're": true,
}

// Trailing qualifiers a loose capture picks up ("hiking so much" → "hiking").
var trailingQualifier = regexp.MustCompile(`(?i)(?:\s+(?:so much|a lot|lots|too|as well|though|lately|now|these days|right now|anyway|honestly|really|again|already|haha|lol|for sure|very much|so|even more|more than anything|the most|best|there|here|out there|over there))+$`)

// CheckObject cleans an English object and says whether it names something
// (ok), and whether it is long enough to be a clause rather than a thing (weak: the
// candidate then waits for review). Objects with no Latin letters are left to the
// patterns of their language.
func CheckObject(obj string) (clean string, ok, weak bool) {
	clean = strings.TrimSpace(trailingQualifier.ReplaceAllString(strings.TrimSpace(obj), ""))
	if !hasLatin(clean) {
		return clean, clean != "", false
	}
	words := strings.Fields(strings.ToLower(clean))
	for len(words) > 0 && (words[0] == "to" || words[0] == "the" || words[0] == "a" || words[0] == "an") && len(words) > 1 {
		// "to cook", "the beach": look at the word that names the thing.
		if badObjectStart[words[1]] {
			return clean, false, false
		}
		break
	}
	if len(words) == 0 || badObjectStart[words[0]] {
		return clean, false, false
	}
	if danglingEnd[words[len(words)-1]] {
		return clean, false, false
	}
	for _, w := range words {
		if badObjectWord[strings.Trim(w, ",.;:!?\"'")] {
			return clean, false, false
		}
	}
	letters := 0
	for _, r := range clean {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	if letters < 3 {
		return clean, false, false
	}
	return clean, true, len(words) > 5
}

func hasLatin(s string) bool {
	for _, r := range s {
		if r < 0x80 && unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// WeakConfidence is what a weak match (a long, clause-like object) is given: below
// governance's default confirmation threshold (0.6), so it waits for review instead
// of becoming a fact.
const WeakConfidence = 0.55
