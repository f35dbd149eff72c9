package eval

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
)

// Causes of a miss at @10, in the order a missed evidence turn is put in the first
// that fits (MissCauses). Each technique names the group it is for.
const (
	// CauseNeighbour: the turn shares no content word with the question, but the
	// turn before or after it in its session does ("Where?" answered by "Paris").
	// Shared words are stemmed, without stop words (AnalyzedTokens); the speakers'
	// names do not count.
	CauseNeighbour = "neighbour only"
	// CausePhoto: the text shares no word, the shared photo's caption does.
	CausePhoto = "photo only"
	// CauseSpeaker: the only word shared is the speaker's name (said in every
	// other turn of theirs).
	CauseSpeaker = "speaker only"
	// CauseNoWord: neither the turn (its text, speaker or photo) nor its
	// neighbours share a content word.
	CauseNoWord = "no shared word"
	// CauseTime: the question asks when, or names a time ("last week", "in 2022").
	CauseTime = "time expression"
	// CauseSpread: the answer is spread over several turns, and another of them
	// was found.
	CauseSpread = "spread, partly found"
	// CauseOutranked: the turn shares words with the question but others rank above.
	CauseOutranked = "shares words, outranked"
)

// MissCauseOrder is the order of the causes' columns.
var MissCauseOrder = []string{CauseNeighbour, CausePhoto, CauseSpeaker, CauseNoWord, CauseTime, CauseSpread, CauseOutranked}

var (
	missedTurn = regexp.MustCompile(`^evidence turn (\S+) \(`)
	timeWords  = regexp.MustCompile(`(?i)\b(when|what (year|month|day|date|time)|how long|since|ago|before|after|last (week|month|year|weekend|night)|yesterday|today|tomorrow|recently|(19|20)\d\d|january|february|march|april|may|june|july|august|september|october|november|december)\b`)
)

// MissCauses groups the evidence turns missed at @10 by cause, per category:
// category → cause → count. turns are the suite's scenarios (for the texts).
func MissCauses(s *Suite, probes []ProbeResult) map[string]map[string]int {
	type turnAt struct {
		sc *Scenario
		i  int
	}
	index := map[string]map[string]turnAt{} // scenario label → turn id → turn
	for si := range s.Scenarios {
		sc := &s.Scenarios[si]
		m := map[string]turnAt{}
		for i, t := range sc.Turns {
			m[t.ID] = turnAt{sc, i}
		}
		index[scenarioLabel(*sc)] = m
	}
	words := func(text string) map[string]bool {
		out := map[string]bool{}
		for _, t := range AnalyzedTokens(text) {
			out[t] = true
		}
		return out
	}
	shares := func(q map[string]bool, text string) bool {
		for w := range words(text) {
			if q[w] {
				return true
			}
		}
		return false
	}
	out := map[string]map[string]int{}
	for _, p := range probes {
		if !p.Score.HasEvidence || p.Err != "" {
			continue
		}
		turns := index[p.Scenario]
		q := words(p.Question)
		names := map[string]bool{}
		for _, t := range turns {
			for w := range words(t.sc.Turns[t.i].Person) {
				names[w] = true
			}
		}
		asked := map[string]bool{} // the question's words but the speakers' names
		for w := range q {
			if !names[w] {
				asked[w] = true
			}
		}
		var missed []string
		for _, m := range p.Misses {
			if g := missedTurn.FindStringSubmatch(m); g != nil {
				missed = append(missed, g[1])
			}
		}
		if len(missed) == 0 {
			continue
		}
		partly := p.Score.EvidenceAt[10] > 0
		for _, id := range missed {
			cause := CauseOutranked
			ta, ok := turns[id]
			if !ok {
				continue
			}
			t := ta.sc.Turns[ta.i]
			text, caption := t.Text, ""
			if i := strings.Index(text, " [shares a photo: "); i >= 0 {
				text, caption = text[:i], text[i:]
			}
			neighbour := func() bool {
				for _, j := range []int{ta.i - 1, ta.i + 1} {
					if j >= 0 && j < len(ta.sc.Turns) && ta.sc.Turns[j].Session == t.Session && shares(asked, ta.sc.Turns[j].Text) {
						return true
					}
				}
				return false
			}
			switch {
			case !shares(asked, text) && neighbour():
				cause = CauseNeighbour
			case !shares(asked, text) && shares(asked, caption):
				cause = CausePhoto
			case !shares(asked, text) && shares(q, t.Person+" "+text):
				cause = CauseSpeaker
			case !shares(asked, text):
				cause = CauseNoWord
			case timeWords.MatchString(p.Question):
				cause = CauseTime
			case partly:
				cause = CauseSpread
			}
			if out[p.Category] == nil {
				out[p.Category] = map[string]int{}
			}
			out[p.Category][cause]++
		}
	}
	return out
}

// writeMissCauses prints the missed evidence turns at @10 by category and cause,
// the engine's and the baseline's.
func writeMissCauses(w io.Writer, engine, base map[string]map[string]int) {
	if len(engine) == 0 && len(base) == 0 {
		return
	}
	cats := sortedKeys(engine, base)
	fmt.Fprintln(w, "\nevidence turns missed at @10 by cause (engine / baseline)")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "category\t")
	for _, c := range MissCauseOrder {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw, "all\t")
	for _, cat := range cats {
		fmt.Fprintf(tw, "%s\t", cat)
		te, tb := 0, 0
		for _, c := range MissCauseOrder {
			e, b := engine[cat][c], base[cat][c]
			te, tb = te+e, tb+b
			fmt.Fprintf(tw, "%d / %d\t", e, b)
		}
		fmt.Fprintf(tw, "%d / %d\t\n", te, tb)
	}
	_ = tw.Flush()
}
