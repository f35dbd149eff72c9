package recall

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

type cand struct {
	item    Item
	ranks   map[string]int
	imp     float64
	boosts  []string
	entity  string
	subject string
	// kw is the keyword score (BM25 for evidence, ts_rank for facts); sim the
	// cosine similarity to the question (from the semantic retriever).
	kw, sim       float64
	hasKW, hasSim bool
	// anySim is a turn's similarity to the question whichever retriever found
	// it (hasAnySim: known).
	anySim    float64
	hasAnySim bool
	// exp is the keyword score of the second hop (names the best items mention);
	// ctx the keyword score with the neighbouring turns' words (sourceContext).
	exp, ctx float64
	// stale: a turn that backs only values superseded by as_of.
	stale bool
	// speaker is who said a turn (the name its speaker "USER:Maya" gives),
	// lower-cased.
	speaker string
	// matched: some retriever found it by the question's words, meaning or links.
	matched bool
	// lead is the score without the context (Fusion.Lead).
	lead float64
	// feedbackOnly: only the feedback pass matched it (feedback.go); it never
	// leads.
	feedbackOnly bool
}

// Fusion weighs what each retriever says about an item's relevance to the
// question. The defaults were chosen by measurement on the development suites
// (`engram eval --tune`, see eval/README.md): a grid over these weights, one
// ingestion, the weights with the best mean of evidence recall@1 and @10 on
// open_conversation that keep the seed suites at recall@10 = 1.
type Fusion struct {
	// Keyword multiplies the keyword score normalised by the best in this recall
	// (1 for the best-matching turn).
	Keyword float64 `json:"keyword"`
	// KeywordLengthNorm is the turn keyword score's BM25 length normalisation b
	// (0: none, so a short turn is not lifted over a longer one for the same
	// words; 0.75: Okapi's usual). Part of the statement's text: set when the
	// engine is made.
	KeywordLengthNorm float64 `json:"keyword_length_norm"`
	// Asked is how much a word counts in a turn's keyword score when it stands in
	// one of the turn's questions (turntext.SplitAsked) rather than in what it
	// says: "So how did the 10k go?" asks about the 10k, the reply tells it. Part
	// of the statement's text, as KeywordLengthNorm.
	Asked float64 `json:"asked"`
	// Semantic multiplies the cosine similarity to the question.
	Semantic float64 `json:"semantic"`
	// SemanticAll weighs every turn a retriever found by its similarity to the
	// question, not only those among the semantic retriever's best: a turn
	// found by the question's rare words otherwise counts no meaning at all and
	// falls below chat that is merely like the question.
	SemanticAll bool `json:"semantic_all"`
	// SemanticMatch is the similarity from which an item counts as matching the
	// question by meaning alone.
	SemanticMatch float64 `json:"semantic_match"`
	// FactKeyword scales a fact's own keyword score against the turns' (a fact
	// also takes the keyword score of a turn it stands on).
	FactKeyword float64 `json:"fact_keyword"`
	// Graph, Structured and Recent are added for a graph, structured or recent
	// hit, decreasing with its rank.
	Graph      float64 `json:"graph"`
	Structured float64 `json:"structured"`
	Recent     float64 `json:"recent"`
	// Backing multiplies a turn that a fact in the list already stands on.
	Backing float64 `json:"backing"`
	// Expand multiplies the (normalised) keyword score of the second hop: turns
	// that mention a name the best items mention (0: no second hop).
	Expand float64 `json:"expand"`
	// Superseded multiplies a turn that backs only values superseded by as_of (the
	// old budget's turn below the current budget; still found for "how did it
	// change").
	Superseded float64 `json:"superseded"`
	// Context multiplies the (normalised) keyword score of a turn with the words of
	// the turns around it (the question before it, the reply after it).
	Context float64 `json:"context"`
	// Session multiplies the (normalised) keyword score of the turn's session as a
	// whole.
	Session float64 `json:"session"`
	// Lead is how many items lead the list by their score without Context and
	// Session (the turn's own words, meaning, links); the rest follow by the score
	// with them.
	Lead int `json:"lead"`
	// SpeakerNamed lifts a turn whose speaker the question names by name ("What
	// did Maya say about the move?": Maya's turns) by this share among the leaders
	// (Lead; 0: off).
	SpeakerNamed float64 `json:"speaker_named"`
	// Adjacent lifts the turns next to the best AdjacentFrom turns (AdjacentSpan
	// on each side, same session) to this share of their anchor's score, and this
	// share again per further turn (0: off; see adjacent.go).
	Adjacent     float64 `json:"adjacent"`
	AdjacentFrom int     `json:"adjacent_from"`
	AdjacentSpan int     `json:"adjacent_span"`
	// AdjacentBursts counts the span in bursts (one speaker's messages in a row,
	// less than 30 s apart) rather than messages, and takes of each burst only
	// its message nearest the anchor (inBursts): in chat, the question before the
	// anchor's burst and the start of the reply after it, not the rest of the
	// anchor's own burst.
	AdjacentBursts bool `json:"adjacent_bursts"`
	// Feedback is added, decreasing with its rank, to a turn found by its
	// likeness to the question and the best turns together (pseudo-relevance
	// feedback; see feedback.go), in the score below the leaders only and only
	// for a turn that matches the question on its own (0: off).
	Feedback float64 `json:"feedback"`
	// FeedbackFrom is how many of the best turns the feedback starts from.
	FeedbackFrom int `json:"feedback_from"`
	// TimeAnswer lifts an item that names a time ("yesterday", "two weeks ago",
	// "in 2021"; namesTime) by this share among the leaders (Lead) when the
	// question asks when (ParsedQuery.AsksWhen; 0: off). TimeAnswerAll lifts it
	// in the whole list as well.
	TimeAnswer    float64 `json:"time_answer"`
	TimeAnswerAll bool    `json:"time_answer_all"`
	// TimeAsked lifts an item said in the time the question names ("last
	// week", "in October 2023": ParsedQuery.From, To) by this share (0: off).
	TimeAsked float64 `json:"time_asked"`
	// LeadAsking lowers by this share, among the leaders only, a turn that ends
	// by asking ("… How was yours?"): it asks more than it tells (0: off).
	LeadAsking float64 `json:"lead_asking"`
}

// DefaultFusion are the measured defaults. The adjacent turns (0.8 of the
// anchor's score, from the best 3 turns, 2 on each side) were chosen on public
// LoCoMo by halves (engram eval --locomo FILE --tune --tune-grid around, then
// balance, --folds 2): tuned on conversations 0-4 and on 5-9, every half's best
// had them, and they raised the other half's evidence recall@10 on categories
// 1-4 with @1 unchanged. LoCoMo's best also raised Context to 0.5 and Session to
// 1, but each of those lowered the shipped open_conversation suite (gold, @10
// 0.838 to 0.720 with all three) below its margin over the baseline; adjacency
// alone costs it 0.025 (0.813) and keeps 0.041 of LoCoMo's 0.062, so Context and
// Session stay where open_conversation's folds put them; see eval/README.md.
// Lead was chosen by folds on open_conversation (engram eval --tune --tune-grid
// context), where Context helped no fold beside Session. KeywordLengthNorm 0 was
// chosen the same way (engram eval --tune --tune-grid keyword): every fold's best
// lowered b (0 on conversations b and c, 0.25 on a), and tuned on b it raised the
// other two from 0.469/0.816 to 0.485/0.828 (@1/@10); Asked 0.25 too (0 on b
// and c, 0.25 on a and on the whole suite), every fold gaining on the other two.
// SpeakerNamed 0.2 was chosen on LoCoMo's halves (engram eval --locomo FILE --tune
// --tune-grid speaker --folds 2): both halves' best, it raised the other half's
// evidence recall@1 on categories 1-4 from 0.346 to 0.365 and from 0.379 to 0.407,
// @10 unchanged in every category; lifting the named speaker's turns in the whole
// list instead (not only the leader) lost up to 0.014 at @10 on a half.
// SemanticAll was chosen on LoCoMo's halves (--tune-grid semantic-all, --folds 2): both
// halves' best had it at semantic 3 (keyword 1 tuned on 0-4, 1.5 on 5-9; the
// smaller change is kept), and it raised the other half's evidence recall on
// categories 1-4 from 0.374/0.703 to 0.385/0.743 and from 0.419/0.722 to
// 0.429/0.752 (@1/@10).
// Feedback 0.4 from the best 5 turns was chosen on LoCoMo's halves (--tune-grid
// feedback, --folds 2): both halves' best, it raised the other half's evidence
// recall@10 on categories 1-4 from 0.743 to 0.751 and from 0.755 to 0.761, @1
// unchanged (it never picks the first item).
// TimeAnswer 0.2 in the whole list (TimeAnswerAll) was chosen on LoCoMo's halves
// (--tune-grid when, --folds 2: 0.2-1 among the leaders only or in the whole list):
// tuned on 0-4 the best was 0.2 in the whole list, on 5-9 0.5 in the whole list; the
// smaller is kept. It raised the other half's evidence recall on categories 1-4
// from 0.385/0.751 to 0.394/0.753 and from 0.427/0.761 to 0.437/0.762 (@1/@10).
// TimeAsked 0.25 (the lift of what was said in the time the question names) was
// rechecked there (--tune-grid time-asked, 0.25-2): both halves' best.
// LeadAsking 0.1 was chosen there (--tune-grid lead-asking, 0.1-0.5): both halves'
// best, it raised the other half's evidence recall@1 on categories 1-4 from 0.394
// to 0.399 and from 0.439 to 0.442, @10 unchanged; 0.2 and more lowered it.
// AdjacentBursts was chosen on LoCoMo told as chat (engram eval --locomo FILE
// --bursts --tune --tune-grid adjacent-bursts --folds 2): both halves' best, it
// raised the other half's evidence recall@10 on categories 1-4 from 0.684 to
// 0.715 and from 0.692 to 0.720, @1 unchanged; on LoCoMo itself, whose speakers
// alternate on every turn, it changes nothing.
func DefaultFusion() Fusion {
	return Fusion{Keyword: 1, KeywordLengthNorm: 0, Asked: 0.25, Semantic: 3, SemanticMatch: 0.45, FactKeyword: 0.8, Graph: 0.5, Structured: 0.6, Recent: 0.3, Backing: 0.3, Expand: 0.6, Superseded: 0.3,
		Session: 0.3, Lead: 1, Adjacent: 0.8, AdjacentFrom: 3, AdjacentSpan: 2, AdjacentBursts: true, SpeakerNamed: 0.2, SemanticAll: true, Feedback: 0.4, FeedbackFrom: 5, TimeAnswer: 0.2, TimeAnswerAll: true, TimeAsked: 0.25, LeadAsking: 0.1}
}

// fuse merges what the retrievers found into one list ordered by relevance to the
// question: keyword score (normalised) + weighted cosine similarity + graph,
// structured and recent hits (fw), then small boosts for recency, importance
// and confidence and larger ones for the task and session at hand and what the
// parser recognised. An item that matches the question by no word, no meaning
// above Fusion.SemanticMatch and no graph or structured hit is never ranked above
// one that does. One revision per memory key; a task-scope fact leads the facts of
// the same predicate it narrows. It reads nothing but its arguments.
func fuse(fw Fusion, p plan, facts []factRow, evs []evidenceRow, recent []storage.Turn) []Item {
	cs := collect(p, facts, evs, recent)
	sc := scalesOf(cs, p.sessions)
	backing := backedTurns(cs)
	for _, c := range cs {
		score(fw, p, sc, backing, c)
	}
	out := oneRevisionPerKey(cs)
	if p.vis.TaskID != "" {
		taskScopeLeads(out, p.vis.TaskID)
	}
	rank(out)
	leadFirst(out, fw.Lead)
	items := make([]Item, len(out))
	for i, c := range out {
		items[i] = c.item
	}
	return items
}

// candidates gathers the retrievers' rows by item, in the order first found.
type candidates struct {
	byID  map[string]*cand
	order []*cand
}

// get returns the candidate of kind and id, made on first sight (seen false).
func (cs *candidates) get(kind Kind, id string) (c *cand, seen bool) {
	key := string(kind) + ":" + id
	if c, ok := cs.byID[key]; ok {
		return c, true
	}
	c = &cand{ranks: map[string]int{}}
	cs.byID[key] = c
	cs.order = append(cs.order, c)
	return c, false
}

// collect makes one candidate per fact and turn the retrievers found, with each
// retriever's best rank and score; the session's recent turns (newest first)
// are the recent retriever's hits.
func collect(p plan, facts []factRow, evs []evidenceRow, recent []storage.Turn) []*cand {
	cs := &candidates{byID: map[string]*cand{}}
	for _, f := range facts {
		c, seen := cs.get(KindFact, f.ID)
		if !seen {
			c.item = factItem(f)
			c.imp, c.entity, c.subject = f.Importance, f.EntityID, f.Subject
		}
		c.addHit(f.Src, f.Rk, f.D)
	}
	for _, ev := range evs {
		c, seen := cs.get(KindEvidence, ev.ID)
		if !seen {
			ref := memory.ScopeRef{Scope: memory.ScopeUser, UserID: ev.UserID, SessionID: ev.SessionID, TaskID: ev.TaskID}
			c.item = Item{Kind: KindEvidence, ID: ev.ID, Content: ev.Content, Scope: ref, ValidFrom: ev.OccurredAt, OccurredAt: ev.OccurredAt, Confidence: 1,
				Speaker: speakerName(ev.Speaker, ev.UserID)}
			c.imp = ev.Importance
			if _, name, ok := strings.Cut(ev.Speaker, ":"); ok {
				c.speaker = strings.ToLower(name)
			}
		}
		c.stale = c.stale || ev.Stale
		if ev.Sim >= -1 && (!c.hasAnySim || ev.Sim > c.anySim) {
			c.anySim, c.hasAnySim = ev.Sim, true
		}
		c.addHit(ev.Src, ev.Rk, ev.D)
	}
	for i := len(recent) - 1; i >= 0; i-- {
		tr := recent[i]
		c, seen := cs.get(KindEvidence, tr.EvidenceID)
		if !seen {
			ref := memory.ScopeRef{Scope: memory.ScopeSession, UserID: p.vis.UserID, SessionID: p.vis.SessionID}
			c.item = Item{Kind: KindEvidence, ID: tr.EvidenceID, Content: tr.Text, Scope: ref, ValidFrom: tr.At, OccurredAt: tr.At, Confidence: 1}
			c.imp = 0.3
		}
		c.addHit(RetrieverRecent, len(recent)-i, nil)
	}
	return cs.order
}

// factItem is a fact row as an item of the answer.
func factItem(f factRow) Item {
	ref := memory.ScopeRef{Scope: f.Scope, DepartmentID: f.DepartmentID, UserID: f.UserID, AgentID: f.AgentID, SessionID: f.SessionID, TaskID: f.TaskID}
	return Item{
		Kind: KindFact, ID: f.ID, Content: f.Content, MemoryType: f.MemoryType, Scope: ref, Status: f.Status,
		MemoryKey: f.MemoryKey, Predicate: f.Predicate, Object: f.Object, EntityType: f.EntityType, EntityID: f.EntityID, Revision: f.Revision,
		ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, Confidence: f.Confidence, EvidenceIDs: f.Evidence, OccurredAt: f.ObservedAt,
	}
}

// addHit keeps a retriever's best rank of c and the best score of each kind: the
// semantic similarity, the keyword score, the second hop's and the context's.
func (c *cand) addHit(src string, rk int, d *float64) {
	if rk <= 0 {
		rk = 1
	}
	if old, ok := c.ranks[src]; !ok || rk < old {
		c.ranks[src] = rk
	}
	if d == nil {
		return
	}
	switch src {
	case RetrieverSemantic:
		if sim := 1 - *d; !c.hasSim || sim > c.sim {
			c.sim, c.hasSim = sim, true
		}
	case RetrieverKeyword:
		if !c.hasKW || *d > c.kw {
			c.kw, c.hasKW = *d, true
		}
	case sourceExpand:
		c.exp = math.Max(c.exp, *d)
	case sourceContext:
		c.ctx = math.Max(c.ctx, *d)
	}
}

// scales are the best scores of this recall that each kind is normalised by,
// and each turn's normalised keyword score (evKW, by id).
type scales struct {
	maxEv, maxFact, maxExp, maxCtx, maxSess float64
	evKW                                    map[string]float64
	sessions                                map[string]float64
	// feedback is each turn's rank in the feedback pass (feedback.go), by id.
	feedback map[string]int
}

func scalesOf(cs []*cand, sessions map[string]float64) scales {
	sc := scales{evKW: map[string]float64{}, sessions: sessions, feedback: map[string]int{}}
	for _, r := range sessions {
		sc.maxSess = math.Max(sc.maxSess, r)
	}
	for _, c := range cs {
		sc.maxExp = math.Max(sc.maxExp, c.exp)
		sc.maxCtx = math.Max(sc.maxCtx, c.ctx)
		if !c.hasKW {
			continue
		}
		if c.item.Kind == KindFact {
			sc.maxFact = math.Max(sc.maxFact, c.kw)
		} else {
			sc.maxEv = math.Max(sc.maxEv, c.kw)
		}
	}
	for _, c := range cs {
		if c.item.Kind == KindEvidence && c.hasKW && sc.maxEv > 0 {
			sc.evKW[c.item.ID] = c.kw / sc.maxEv
		}
		if rk, ok := c.ranks[sourceFeedback]; ok && c.item.Kind == KindEvidence {
			sc.feedback[c.item.ID] = rk
		}
	}
	return sc
}

// backedTurns are the turns a candidate fact stands on: on their own they add
// little (Fusion.Backing).
func backedTurns(cs []*cand) map[string]bool {
	backing := map[string]bool{}
	for _, c := range cs {
		if c.item.Kind == KindFact {
			for _, id := range c.item.EvidenceIDs {
				backing[id] = true
			}
		}
	}
	return backing
}

// score sets c's score, lead score, whether it matched and why: its relevance
// to the question times its boosts.
func score(fw Fusion, p plan, sc scales, backing map[string]bool, c *cand) {
	it := &c.item
	why, shown := sourcesOf(c)
	it.Retrievers = shown
	rel, ctxRel, hit := relevance(fw, sc, c)
	if r, ok := sc.sessions[it.Scope.SessionID]; ok && it.Kind == KindEvidence && it.Scope.SessionID != "" && sc.maxSess > 0 {
		why = append(why, fmt.Sprintf("session matches %.2f", r/sc.maxSess))
	}
	mult := boosts(fw, p, backing, c)
	c.lead = rel * mult
	if fw.SpeakerNamed > 0 && c.speaker != "" && containsWord(p.parsed.lower, c.speaker) {
		// It decides the leaders only (Fusion.Lead): among the rest it would push
		// a named speaker's small talk over what answers.
		c.lead *= 1 + fw.SpeakerNamed
		c.boosts = append(c.boosts, "said by "+c.speaker+", whom the question names")
	}
	if fw.LeadAsking > 0 && it.Kind == KindEvidence && endsAsking(it.Content) {
		c.lead *= 1 - fw.LeadAsking
	}
	if fw.TimeAnswer > 0 && p.parsed.AsksWhen && hit && namesTime(it.Content) {
		c.lead *= 1 + fw.TimeAnswer
		if fw.TimeAnswerAll {
			mult *= 1 + fw.TimeAnswer
		}
		c.boosts = append(c.boosts, "names a time, as the question asks when")
	}
	if !hit {
		c.boosts = append(c.boosts, "matches the question by no word, meaning or link")
	}
	c.matched = hit
	it.Score = (rel + ctxRel) * mult
	it.Why = strings.Join(append(why, c.boosts...), "; ")
}

// sourcesOf lists c's retrievers with their ranks ("keyword #2", for Why) and
// the retrievers shown to the caller (the second hop is the graph's, the
// context the keyword's).
func sourcesOf(c *cand) (why, shown []string) {
	srcs := make([]string, 0, len(c.ranks))
	for src := range c.ranks {
		srcs = append(srcs, src)
	}
	sort.Strings(srcs)
	for _, src := range srcs {
		why = append(why, src+" #"+strconv.Itoa(c.ranks[src]))
		switch src {
		case sourceExpand:
			src = RetrieverGraph // the second hop walks the graph of names
		case sourceContext:
			src = RetrieverKeyword // the words of the turns around it
		}
		if !slices.Contains(shown, src) {
			shown = append(shown, src)
		}
	}
	sort.Strings(shown)
	return why, shown
}

// rankWeight is a hit's weight w at rank rk: w at the first, less further down.
func rankWeight(w float64, rk int) float64 { return w / (1 + 0.1*float64(rk-1)) }

// relevance is how well c answers the question: rel from its own words, meaning
// and links, ctxRel from the words around it and its session's (which find what
// its own words miss, @5-@10, but would push a neighbour over the answer, so they
// do not decide the leaders: Fusion.Lead); hit whether anything matched it.
func relevance(fw Fusion, sc scales, c *cand) (rel, ctxRel float64, hit bool) {
	it := &c.item
	lex := 0.0
	if it.Kind == KindEvidence {
		lex = sc.evKW[it.ID]
	} else {
		if c.hasKW && sc.maxFact > 0 {
			lex = fw.FactKeyword * c.kw / sc.maxFact
		}
		for _, id := range it.EvidenceIDs {
			lex = math.Max(lex, sc.evKW[id])
		}
	}
	rel = fw.Keyword * lex
	if c.hasSim {
		rel += fw.Semantic * math.Max(c.sim, 0)
	} else if fw.SemanticAll && c.hasAnySim {
		rel += fw.Semantic * math.Max(c.anySim, 0)
	}
	hit = lex > 0 || (c.hasSim && c.sim >= fw.SemanticMatch)
	if rk, ok := c.ranks[RetrieverGraph]; ok {
		rel += rankWeight(fw.Graph, rk)
		hit = true
	}
	if c.exp > 0 && sc.maxExp > 0 && lex == 0 {
		// Only what the question's own words did not reach: the second hop adds
		// turns, it does not reorder those that answer the words asked.
		rel += fw.Expand * c.exp / sc.maxExp
		hit = true
	}
	if c.ctx > 0 && sc.maxCtx > 0 {
		ctxRel += fw.Context * c.ctx / sc.maxCtx
		hit = true
	}
	if r, ok := sc.sessions[it.Scope.SessionID]; ok && it.Kind == KindEvidence && it.Scope.SessionID != "" && sc.maxSess > 0 {
		ctxRel += fw.Session * r / sc.maxSess
	}
	if rk, ok := c.ranks[RetrieverStructured]; ok {
		rel += rankWeight(fw.Structured, rk)
		hit = true
	}
	if rk, ok := c.ranks[RetrieverRecent]; ok {
		rel += rankWeight(fw.Recent, rk)
		hit = true
	}
	if rk, ok := feedbackRank(sc, c); ok && fw.Feedback > 0 {
		// Like the leaders as well as the question: it fills the list, it never
		// leads it, and it matches only by the question's own meaning (a turn
		// merely like the leaders is not made relevant by them).
		if !hit && c.hasAnySim && c.anySim >= fw.SemanticMatch {
			hit, c.feedbackOnly = true, true
		}
		if hit {
			ctxRel += rankWeight(fw.Feedback, rk)
		}
	}
	return rel, ctxRel, hit
}

// feedbackRank is c's best rank in the feedback pass: a turn's own, a fact's
// that of the best turn it stands on (as it takes their keyword score), so a
// fact is not pushed below the turns it came from.
func feedbackRank(sc scales, c *cand) (int, bool) {
	if c.item.Kind == KindEvidence {
		rk, ok := sc.feedback[c.item.ID]
		return rk, ok
	}
	best, ok := 0, false
	for _, id := range c.item.EvidenceIDs {
		if rk, found := sc.feedback[id]; found && (!ok || rk < best) {
			best, ok = rk, true
		}
	}
	return best, ok
}

// boosts is what c's relevance is multiplied by: a little for recency,
// importance and confidence, more for the task and session at hand and what the
// parser recognised, less for a turn a shown fact stands on, one of a superseded
// value or one said in another task. Each reason is added to c.boosts.
func boosts(fw Fusion, p plan, backing map[string]bool, c *cand) float64 {
	it := &c.item
	q := p.parsed
	age := p.vis.AsOf.Sub(it.OccurredAt)
	if it.Kind == KindFact && it.ValidFrom.After(it.OccurredAt) {
		age = p.vis.AsOf.Sub(it.ValidFrom)
	}
	recency := math.Exp(-math.Max(age.Hours(), 0) / (24 * 30))
	mult := 1 + 0.05*recency + 0.05*c.imp + 0.05*it.Confidence
	boost := func(f float64, reason string) {
		mult *= f
		c.boosts = append(c.boosts, reason)
	}
	if it.Kind == KindFact {
		for _, b := range factBoosts(p, c) {
			boost(b.f, b.reason)
		}
	} else if backing[it.ID] {
		boost(fw.Backing, "backs a fact already shown")
	} else if c.stale {
		boost(fw.Superseded, "said of a value since superseded")
	}
	if it.Kind == KindEvidence && p.vis.TaskID != "" && it.Scope.TaskID != "" && it.Scope.TaskID != p.vis.TaskID {
		// A turn said in another of the user's tasks is a lookalike of the task
		// at hand ("this trip's budget" of another trip): the narrower scope
		// wins, as it does among facts.
		boost(otherTask, "said in another task")
	}
	if q.From != nil && q.To != nil && !it.OccurredAt.Before(*q.From) && !it.OccurredAt.After(*q.To) && fw.TimeAsked > 0 {
		boost(1+fw.TimeAsked, "in the time asked about")
	}
	if q.Latest {
		mult *= 1 + 0.2*recency
	}
	return mult
}

type factBoost struct {
	f      float64
	reason string
}

// factBoosts are a fact's boosts, in order: the task and session at hand, the
// predicate, entity, memory type and scope the question names.
func factBoosts(p plan, c *cand) []factBoost {
	it, q := &c.item, p.parsed
	var out []factBoost
	if it.Scope.Scope == memory.ScopeTask && it.Scope.TaskID == p.vis.TaskID && p.vis.TaskID != "" {
		out = append(out, factBoost{1.3, "the task at hand"})
	}
	if it.Scope.Scope == memory.ScopeSession && it.Scope.SessionID == p.vis.SessionID && p.vis.SessionID != "" {
		out = append(out, factBoost{1.1, "this session"})
	}
	if slices.Contains(q.Predicates, it.Predicate) {
		out = append(out, factBoost{1.3, "predicate " + it.Predicate + " asked for"})
	}
	if c.entity != "" && slices.Contains(q.EntityIDs, c.entity) {
		out = append(out, factBoost{1.3, "entity " + c.entity + " named"})
	}
	if slices.Contains(q.MemoryTypes, it.MemoryType) {
		out = append(out, factBoost{1.15, strings.ToLower(string(it.MemoryType)) + " asked for"})
	}
	if slices.Contains(q.Scopes, it.Scope.Scope) {
		out = append(out, factBoost{1.1, "scope cue"})
	}
	return out
}

// oneRevisionPerKey keeps one revision per memory key: the current one (or, as
// of a past time, the one valid then; the latest by validity if several are),
// with the best score and lead of its key's revisions.
func oneRevisionPerKey(cs []*cand) []*cand {
	best := map[string]*cand{}
	for _, c := range cs {
		if c.item.Kind != KindFact {
			continue
		}
		b, ok := best[c.item.MemoryKey]
		if !ok || better(c, b) {
			best[c.item.MemoryKey] = c
		}
	}
	kept := cs[:0]
	for _, c := range cs {
		if c.item.Kind == KindFact {
			b := best[c.item.MemoryKey]
			if b != c {
				if c.item.Score > b.item.Score {
					b.item.Score = c.item.Score
				}
				b.lead = math.Max(b.lead, c.lead)
				continue
			}
		}
		kept = append(kept, c)
	}
	return kept
}

// taskScopeLeads: the narrower scope wins for the task at hand. A TASK fact of
// task leads every other fact of the same subject and predicate; both are kept,
// with their scopes shown.
func taskScopeLeads(cs []*cand, task string) {
	group := map[string][]*cand{}
	for _, c := range cs {
		if c.item.Kind == KindFact && c.item.Predicate != "" {
			g := strings.ToLower(c.subject) + "|" + c.item.Predicate
			group[g] = append(group[g], c)
		}
	}
	for _, g := range group {
		var lead *cand
		top, topLead := 0.0, 0.0
		for _, c := range g {
			if c.item.Scope.Scope == memory.ScopeTask && c.item.Scope.TaskID == task {
				lead = c
			}
			top = math.Max(top, c.item.Score)
			topLead = math.Max(topLead, c.lead)
		}
		if lead == nil || len(g) < 2 {
			continue
		}
		lead.item.Score = math.Max(lead.item.Score, top*1.01)
		lead.lead = math.Max(lead.lead, topLead*1.01)
		lead.item.Why += "; task scope leads"
		for _, c := range g {
			if c != lead {
				c.item.Why += fmt.Sprintf("; overridden for task %s by %s", task, short(lead.item.ID))
			}
		}
	}
}

// rank orders the candidates: what matched the question first, then by score,
// facts before turns, then as tied (tiedBefore).
func rank(cs []*cand) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].matched != cs[j].matched {
			return cs[i].matched
		}
		a, b := &cs[i].item, &cs[j].item
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.Kind != b.Kind {
			return a.Kind == KindFact
		}
		return tiedBefore(a, b)
	})
}

// tiedBefore orders two items of equal score: the more recent first, then by
// content, then by id. Not by id first: ids are random, so two ingestions of the
// same conversation ranked its ties differently (an eval moved by ±0.005 from
// run to run), and a user is better served by the newer of two equal answers.
func tiedBefore(a, b *Item) bool {
	if !a.OccurredAt.Equal(b.OccurredAt) {
		return a.OccurredAt.After(b.OccurredAt)
	}
	if a.Content != b.Content {
		return a.Content < b.Content
	}
	return a.ID < b.ID
}

// otherTask multiplies a turn said in another task than the one at hand.
const otherTask = 0.5

// leadFirst moves the best n candidates by their score without the context
// (cand.lead) to the front, in that order, ahead of the rest as ranked; a
// candidate that matched nothing, or only the leaders' likeness (feedback), never
// leads.
func leadFirst(out []*cand, n int) {
	for i := 0; i < n && i < len(out); i++ {
		best := -1
		for j := i; j < len(out); j++ {
			if !out[j].matched || out[j].feedbackOnly {
				continue
			}
			if best < 0 || out[j].lead > out[best].lead {
				best = j
			}
		}
		if best < 0 {
			return
		}
		c := out[best]
		copy(out[i+1:best+1], out[i:best])
		out[i] = c
	}
}

// better prefers an ACTIVE revision, then the later validity, then the higher
// revision.
func better(a, b *cand) bool {
	ai, bi := a.item, b.item
	if (ai.Status == memory.FactActive) != (bi.Status == memory.FactActive) {
		return ai.Status == memory.FactActive
	}
	if !ai.ValidFrom.Equal(bi.ValidFrom) {
		return ai.ValidFrom.After(bi.ValidFrom)
	}
	return ai.Revision > bi.Revision
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// speakerName is the person an evidence row's speaker ("USER:Maya") names, when it
// is not the user the memory belongs to.
func speakerName(speaker, user string) string {
	_, name, ok := strings.Cut(speaker, ":")
	if !ok || name == "" || name == user {
		return ""
	}
	return name
}

// endsAsking reports whether s ends with a question, after any attachment in
// brackets ("[shares a photo: …]"), emoji and closing quotes.
func endsAsking(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "]") {
		if i := strings.LastIndex(s, "["); i > 0 {
			s = s[:i]
		}
	}
	s = strings.TrimRightFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.So, r) || unicode.Is(unicode.Sk, r) || strings.ContainsRune("\"')”’!.。！\u200d\ufe0f", r)
	})
	return strings.HasSuffix(s, "?") || strings.HasSuffix(s, "？")
}
