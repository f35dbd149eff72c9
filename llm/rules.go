package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// RulesVersion is recorded on every candidate the rule extractor proposes; bump it
// when the matching logic changes so facts can be traced to the rules that made them.
const RulesVersion = "rules-1.0.0"

// RuleExtractor is the offline extractor used when no LLM is configured. It knows no
// domain itself: everything comes from the schema's patterns, cues and aliases, so a
// new schema brings its own rules, in any language.
//
// Per sentence it:
//   - matches every pattern of every predicate and event type, keeps the longest match
//     where matches of one predicate overlap, and drops fallback (generic) matches that
//     overlap a specific one;
//   - reads a retraction cue in the same clause as a withdrawal of the matched or merely
//     mentioned predicates ("忘掉我说的预算");
//   - reads a negation cue just before a value as its negation, mapped through the
//     predicate's negate table or negated_predicate, else marked negated;
//   - sets the scope from scope cues ("这次" → TASK, "以后" → USER, "我们团队" →
//     DEPARTMENT), falling back to a scope the event can own: TASK without a task id
//     becomes SESSION, DEPARTMENT without a department id becomes USER (the statement is
//     then kept private to the speaker rather than attached to a guessed team);
//   - resolves an event without an id ("the order that never arrived") from the known
//     entities, then from recent turns, else leaves it unresolved at low confidence;
//   - resolves relative times (昨天, next Friday) against the event time.
type RuleExtractor struct{}

// NewRuleExtractor returns the rule extractor.
func NewRuleExtractor() *RuleExtractor { return &RuleExtractor{} }

// Name implements Extractor.
func (*RuleExtractor) Name() string { return "rules" }

// InProcess says the extractor runs in the caller's process, without a network
// call: the write path runs it as a local activity.
func (*RuleExtractor) InProcess() bool { return true }

// Version is the version of the matching logic.
func (*RuleExtractor) Version() string { return RulesVersion }

var _ Extractor = (*RuleExtractor)(nil)

// Extract implements Extractor. It never fails on text it does not understand: no
// candidates is a valid answer.
func (r *RuleExtractor) Extract(ctx context.Context, s *schema.Schema, in ExtractInput) (ExtractOutput, error) {
	if err := ctx.Err(); err != nil {
		return ExtractOutput{}, err
	}
	if s == nil {
		return ExtractOutput{}, fmt.Errorf("rule extractor: no schema")
	}
	doc := struct {
		Candidates []memory.Candidate `json:"candidates"`
	}{Candidates: r.Candidates(s, in)}
	raw, err := json.Marshal(doc)
	if err != nil {
		return ExtractOutput{}, fmt.Errorf("rule extractor: encode: %w", err)
	}
	return ExtractOutput{Raw: string(raw), Extractor: r.Name(), Version: RulesVersion}, nil
}

// Candidates returns the candidates Extract would encode.
func (r *RuleExtractor) Candidates(s *schema.Schema, in ExtractInput) []memory.Candidate {
	if in.OccurredAt.IsZero() {
		in.OccurredAt = time.Now()
	}
	out := []memory.Candidate{}
	for _, sentence := range splitSentences(in.Text) {
		for _, c := range r.sentence(s, in, sentence) {
			out = mergeCandidate(out, c)
		}
	}
	return out
}

// mergeCandidate adds c unless the same statement is already there, keeping the more
// confident of the two.
func mergeCandidate(list []memory.Candidate, c memory.Candidate) []memory.Candidate {
	for i, x := range list {
		if x.Predicate == c.Predicate && x.Object == c.Object && x.EntityID == c.EntityID && x.Retraction == c.Retraction && x.Scope == c.Scope {
			if c.Confidence > x.Confidence {
				list[i] = c
			}
			return list
		}
	}
	return append(list, c)
}

// match is one pattern hit in a sentence. Offsets are byte offsets into the sentence.
type match struct {
	pred       *schema.Predicate
	pat        *schema.Pattern
	start, end int
	valueStart int // where the value begins, for the negation window
	groups     map[string]string
}

func (r *RuleExtractor) sentence(s *schema.Schema, in ExtractInput, text string) []memory.Candidate {
	var ms []match
	for _, p := range s.AllPredicates() {
		for _, pt := range p.Patterns {
			if pt.Re == nil {
				continue
			}
			for _, idx := range pt.Re.FindAllStringSubmatchIndex(text, -1) {
				ms = append(ms, newMatch(p, pt, text, idx))
			}
		}
	}
	ms = resolveOverlaps(ms)

	var out []memory.Candidate
	retracted := map[string]bool{}
	question := IsQuestion(text)
	for _, m := range ms {
		when := timeFor(m.pred, text, m.start, in.OccurredAt)
		if m.pred.Event == nil && m.pat.Lang == "en" && (question || Hedged(text, m.start, m.end)) {
			continue // asked, hedged or said of the other person: nothing stated
		}
		if m.pred.Event != nil {
			if c, ok := r.event(s, in, text, m, when); ok {
				out = append(out, c)
			}
			continue
		}
		if isRetraction(m.pred, clauseAround(text, m.start)) {
			retracted[m.pred.Name] = true
			if c, ok := r.value(s, in, text, m, when, true); ok {
				out = append(out, c)
			}
			continue
		}
		if c, ok := r.value(s, in, text, m, when, false); ok {
			out = append(out, c)
		}
	}
	// A predicate named without a value in a retracting clause ("forget my budget") is
	// withdrawn as a whole.
	for _, p := range s.Predicates {
		if retracted[p.Name] {
			continue
		}
		for _, re := range p.MentionRes {
			loc := re.FindStringIndex(text)
			if loc == nil || !isRetraction(p, clauseAround(text, loc[0])) {
				continue
			}
			retracted[p.Name] = true
			out = append(out, r.finish(s, in, p, text, memory.Candidate{
				MemoryType: p.MemoryType, Predicate: p.Name, Retraction: true,
				Confidence: 0.8, Origin: memory.OriginStated,
			}, timeFor(p, text, loc[0], in.OccurredAt)))
			break
		}
	}
	return out
}

// timeFor finds the time a match refers to: one in its own clause, else, for what
// happened (events, experiences, facts, decisions), one anywhere in the sentence. A
// "下周五" in "下周五去三亚，预算1万" dates the trip, not the budget.
func timeFor(p *schema.Predicate, text string, pos int, now time.Time) *timeRef {
	if t := findTime(clauseAround(text, pos), now); t != nil {
		return t
	}
	switch p.MemoryType {
	case memory.TypeEvent, memory.TypeExperience, memory.TypeFact, memory.TypeDecision:
		return findTime(text, now)
	}
	return nil
}

func newMatch(p *schema.Predicate, pt *schema.Pattern, text string, idx []int) match {
	m := match{pred: p, pat: pt, start: idx[0], end: idx[1], valueStart: idx[0], groups: map[string]string{}}
	for i, name := range pt.Re.SubexpNames() {
		if name == "" || idx[2*i] < 0 {
			continue
		}
		// Duplicate group names are allowed; the first that took part wins.
		if _, seen := m.groups[name]; !seen && idx[2*i] < idx[2*i+1] {
			m.groups[name] = text[idx[2*i]:idx[2*i+1]]
			if name == "value" {
				m.valueStart = idx[2*i]
			}
		}
	}
	return m
}

// resolveOverlaps keeps, where matches of one predicate overlap, the longest (then the
// most confident); and drops fallback matches overlapping a specific one.
func resolveOverlaps(ms []match) []match {
	overlap := func(a, b match) bool { return a.start < b.end && b.start < a.end }
	better := func(a, b match) bool {
		if la, lb := a.end-a.start, b.end-b.start; la != lb {
			return la > lb
		}
		return a.pat.Confidence > b.pat.Confidence
	}
	var out []match
	for i, m := range ms {
		keep := true
		for j, o := range ms {
			if i == j || !overlap(m, o) {
				continue
			}
			if m.pat.Fallback && !o.pat.Fallback && o.pred != m.pred {
				keep = false
			}
			if o.pred == m.pred && (better(o, m) || (!better(m, o) && j < i)) {
				keep = false
			}
		}
		if keep {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].start < out[b].start })
	return out
}

func isRetraction(p *schema.Predicate, clause string) bool {
	return p.Cues.RetractionRe != nil && p.Cues.RetractionRe.MatchString(clause)
}

// negationWindow is how far before a value a negation cue may stand, in runes.
const negationWindow = 12

// negated reports whether a negation cue stands shortly before the value, within the
// same comma-separated clause, so "不喜欢转机，以后尽量直飞" negates only 转机.
func negated(p *schema.Predicate, text string, m match) bool {
	if m.pat.IgnoreNegation || p.Cues.NegationRe == nil {
		return false
	}
	end := m.valueStart
	if _, hasValue := m.groups["value"]; !hasValue {
		end = m.start
	}
	begin := clauseStart(text, end)
	for utf8.RuneCountInString(text[begin:end]) > negationWindow {
		_, size := utf8.DecodeRuneInString(text[begin:])
		begin += size
	}
	return p.Cues.NegationRe.MatchString(text[begin:end])
}

func (r *RuleExtractor) value(s *schema.Schema, in ExtractInput, text string, m match, when *timeRef, retraction bool) (memory.Candidate, bool) {
	p := m.pred
	obj, attrs, ok := objectOf(p, m, in.OccurredAt)
	if !ok {
		return memory.Candidate{}, false
	}
	conf := m.pat.Confidence
	if p.ValueType == schema.ValueString && !retraction {
		// A pronoun, a fragment or a whole clause names no thing: abstain, or, for a
		// long object, let a reviewer decide.
		clean, named, weak := CheckObject(obj)
		if !named {
			return memory.Candidate{}, false
		}
		obj = clean
		if weak && conf >= WeakConfidence {
			conf = WeakConfidence
		}
	}
	c := memory.Candidate{
		MemoryType: p.MemoryType, Predicate: p.Name, Object: obj, Attributes: attrs,
		Confidence: conf, Origin: m.pat.Origin, Retraction: retraction,
	}
	if retraction {
		c.Origin = memory.OriginStated // withdrawing is always said outright
	} else if negated(p, text, m) {
		switch {
		case p.Negate[obj] != "":
			c.Object = p.Negate[obj]
		case p.NegatedPredicate != "":
			q, _ := s.Predicate(p.NegatedPredicate)
			p = q
			c.Predicate, c.MemoryType = q.Name, q.MemoryType
		default:
			c.Attributes = setAttr(c.Attributes, "negated", true)
		}
	}
	return r.finish(s, in, p, text, c, when), true
}

// finish sets what every non-event candidate needs: scope, subject, time, content and
// the extractor's name.
func (r *RuleExtractor) finish(s *schema.Schema, in ExtractInput, p *schema.Predicate, text string, c memory.Candidate, when *timeRef) memory.Candidate {
	c.Scope = chooseScope(p, text, in)
	c.Subject = SpeakerSubject(in.Speaker)
	switch c.Scope {
	case memory.ScopeDepartment:
		c.Subject = "department"
	case memory.ScopeTenant:
		c.Subject = "organization"
	}
	if when != nil && p.ValueType != schema.ValueDate {
		applyTime(&c, when, in.OccurredAt)
	}
	c.Content = content(c, text)
	c.Extractor, c.Version = r.Name(), RulesVersion
	return c
}

// objectOf renders the matched value as the predicate's normalised object, with the
// pattern's attributes.
func objectOf(p *schema.Predicate, m match, now time.Time) (string, map[string]any, bool) {
	vars := copyVars(m.groups)
	if p.ValueType == schema.ValueMoney {
		amount, ok := parseAmount(vars["value"], vars["unit"])
		if !ok {
			return "", nil, false
		}
		vars["amount"] = strconv.FormatFloat(amount, 'f', -1, 64)
		vars["currency"] = currencyCode(vars, p.Currency)
	}
	tmpl := m.pat.Value
	if tmpl == "" {
		tmpl = "${value}"
	}
	raw := cleanValue(expand(tmpl, vars))
	attrs := patternAttributes(p, m.pat, vars)
	var obj string
	switch p.ValueType {
	case schema.ValueEnum:
		v, ok := p.EnumValue(raw)
		if !ok {
			return "", nil, false
		}
		obj = v
	case schema.ValueMoney:
		a, _ := strconv.ParseFloat(vars["amount"], 64)
		obj = schema.FormatMoney(a, vars["currency"])
	case schema.ValueNumber:
		a, ok := parseAmount(raw, "")
		if !ok {
			return "", nil, false
		}
		obj = strconv.FormatFloat(a, 'f', -1, 64)
	case schema.ValueDate:
		t := findTime(raw, now)
		if t == nil {
			return "", nil, false
		}
		obj = t.date.Format(time.DateOnly)
		attrs = setAttr(attrs, "time_text", t.text)
	case schema.ValueBool:
		switch strings.ToLower(raw) {
		case "true", "yes", "是", "对":
			obj = "true"
		case "false", "no", "否", "不":
			obj = "false"
		default:
			return "", nil, false
		}
	case schema.ValueEntityRef:
		obj = raw
		if !strings.Contains(raw, ":") {
			obj = p.Entity + ":" + raw
		}
	default:
		obj = raw
	}
	return obj, attrs, obj != ""
}

func copyVars(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

var templateVar = regexp.MustCompile(`\$\{(\w+)\}`)

func expand(tmpl string, vars map[string]string) string {
	return strings.Join(strings.Fields(templateVar.ReplaceAllStringFunc(tmpl, func(v string) string {
		return vars[v[2:len(v)-1]]
	})), " ")
}

// patternAttributes expands the pattern's attribute templates; empty ones are dropped
// and those the predicate declares as numbers become numbers.
func patternAttributes(p *schema.Predicate, pt *schema.Pattern, vars map[string]string) map[string]any {
	var attrs map[string]any
	for k, v := range pt.Attributes {
		t, isStr := v.(string)
		if !isStr {
			attrs = setAttr(attrs, k, v)
			continue
		}
		x := cleanValue(expand(t, vars))
		if x == "" {
			continue
		}
		if a, ok := p.Attribute(k); ok && a.Type == schema.ValueNumber {
			f, err := strconv.ParseFloat(strings.ReplaceAll(x, ",", ""), 64)
			if err != nil {
				continue // a capture that is not a number is not worth a failed validation
			}
			attrs = setAttr(attrs, k, f)
			continue
		}
		attrs = setAttr(attrs, k, x)
	}
	return attrs
}

func setAttr(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

// cleanValue trims spaces, punctuation and trailing particles a loose capture picks up.
func cleanValue(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, " ,.;:!?，。；：！？、\"'“”‘’")
	for _, suffix := range []string{"了", "吧", "啊", "呢", "哦", "的"} {
		s = strings.TrimSuffix(s, suffix)
	}
	return strings.TrimSpace(s)
}

func parseAmount(value, unit string) (float64, bool) {
	a, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(value), ",", ""), 64)
	if err != nil {
		return 0, false
	}
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "万":
		a *= 10000
	case "千", "k", "thousand":
		a *= 1000
	}
	return a, true
}

// currencyWords maps how people write a currency to its ISO 4217 code.
var currencyWords = map[string]string{
	"元": "CNY", "块": "CNY", "人民币": "CNY", "rmb": "CNY", "cny": "CNY", "yuan": "CNY", "¥": "CNY", "￥": "CNY",
	"美元": "USD", "美金": "USD", "刀": "USD", "$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
	"欧元": "EUR", "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
	"日元": "JPY", "jpy": "JPY", "yen": "JPY",
	"英镑": "GBP", "£": "GBP", "gbp": "GBP", "pound": "GBP", "pounds": "GBP",
}

// currencyCode reads the currency from any group named currency…, else the default.
func currencyCode(groups map[string]string, def string) string {
	names := make([]string, 0)
	for k := range groups {
		if strings.HasPrefix(k, "currency") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if code, ok := currencyWords[strings.ToLower(strings.TrimSpace(groups[k]))]; ok {
			return code
		}
	}
	return def
}

func (r *RuleExtractor) event(s *schema.Schema, in ExtractInput, text string, m match, when *timeRef) (memory.Candidate, bool) {
	p, ev := m.pred, m.pred.Event
	ent, ok := s.Entity(ev.Entity)
	if !ok {
		return memory.Candidate{}, false
	}
	tmpl := m.pat.Entity
	if tmpl == "" {
		tmpl = "${entity}"
	}
	id := cleanValue(expand(tmpl, m.groups))
	conf := m.pat.Confidence
	if id != "" && !ent.ValidID(id) {
		return memory.Candidate{}, false
	}
	if id == "" {
		var how string
		id, how = resolveEntity(s, in, ev.Entity, m.pat.ResolveState)
		switch how {
		case "recent":
			conf = max(0, conf-0.1)
		case "":
			conf = min(conf, 0.5) // an inquiry about we-don't-know-which order
		}
	}
	c := memory.Candidate{
		MemoryType: memory.TypeEvent, Predicate: p.Name, EntityType: ev.Entity, EntityID: id,
		Confidence: conf, Origin: m.pat.Origin, Subject: "user",
	}
	switch {
	case ev.State != "":
		c.Object = ev.State
		c.Attributes = setAttr(c.Attributes, "state", ev.State)
	case id != "":
		c.Object = ev.Entity + ":" + id
	default:
		c.Object = ev.Entity
	}
	if id != "" {
		c.Subject = ev.Entity + ":" + id
		c.Relations = eventRelations(s, in, ev, id)
	}
	c.Scope = chooseScope(p, text, in)
	if when != nil {
		applyTime(&c, when, in.OccurredAt)
	}
	c.Content = content(c, text)
	c.Extractor, c.Version = r.Name(), RulesVersion
	return c, true
}

// resolveEntity finds the entity a reference without an id means: the latest known
// entity of that type (in that state, when given), else the latest id an event
// pattern finds in the recent turns. how is "known", "recent" or "".
func resolveEntity(s *schema.Schema, in ExtractInput, typ, state string) (id, how string) {
	for i := len(in.Known) - 1; i >= 0; i-- {
		k := in.Known[i]
		if k.Type == typ && k.ID != "" && (state == "" || k.State == state) {
			return k.ID, "known"
		}
	}
	for i := len(in.Recent) - 1; i >= 0; i-- {
		for _, sentence := range splitSentences(in.Recent[i]) {
			for _, ev := range s.EventTypes {
				if ev.Entity != typ || (state != "" && ev.State != state) {
					continue
				}
				p, _ := s.Predicate(ev.Name)
				for _, pt := range p.Patterns {
					idx := pt.Re.FindStringSubmatchIndex(sentence)
					if idx == nil {
						continue
					}
					m := newMatch(p, pt, sentence, idx)
					if got := cleanValue(m.groups["entity"]); got != "" {
						if e, ok := s.Entity(typ); ok && e.ValidID(got) {
							return got, "recent"
						}
					}
				}
			}
		}
	}
	return "", ""
}

// eventRelations links the speaker to the entity through the event's relationship
// types, in the direction the schema declares.
func eventRelations(s *schema.Schema, in ExtractInput, ev *schema.EventType, id string) []memory.Relation {
	speaker, ok := s.SpeakerEntity()
	if !ok || in.UserID == "" || !speaker.ValidID(in.UserID) {
		return nil
	}
	var out []memory.Relation
	for _, typ := range ev.Relations {
		if _, ok := s.Relationship(typ, speaker.Name, ev.Entity); ok {
			out = append(out, memory.Relation{Type: typ, FromType: speaker.Name, FromID: in.UserID, ToType: ev.Entity, ToID: id})
		} else if _, ok := s.Relationship(typ, ev.Entity, speaker.Name); ok {
			out = append(out, memory.Relation{Type: typ, FromType: ev.Entity, FromID: id, ToType: speaker.Name, ToID: in.UserID})
		}
	}
	return out
}

// scopeOrder is the order scope cues are tried in: an explicit narrow scope wins
// ("我们团队这次用…" is about this task), then the collective ones, then USER.
var scopeOrder = []memory.Scope{memory.ScopeTask, memory.ScopeSession, memory.ScopeDepartment, memory.ScopeTenant, memory.ScopeAgent, memory.ScopeUser}

// chooseScope picks the scope a cue in the sentence asks for, else the predicate's
// default, then moves to a scope the event can actually own.
func chooseScope(p *schema.Predicate, text string, in ExtractInput) memory.Scope {
	sc := p.DefaultScope
	for _, cue := range scopeOrder {
		if re := p.Cues.ScopeRes[cue]; re != nil && p.AllowsScope(cue) && re.MatchString(text) {
			sc = cue
			break
		}
	}
	for range memory.Scopes { // each step moves broader, so this ends
		next, ok := fallbackScope(sc, in)
		if ok {
			break
		}
		if !p.AllowsScope(next) {
			// Nothing the predicate allows is ownable; keep the scope and let
			// validation of the scope ref report the missing id.
			if p.AllowsScope(memory.ScopeUser) {
				return memory.ScopeUser
			}
			return sc
		}
		sc = next
	}
	return sc
}

// fallbackScope reports whether sc can be owned by this event, and if not the scope
// to try next: TASK without a task id → SESSION; SESSION without a session id, AGENT,
// DEPARTMENT without a department id → USER.
func fallbackScope(sc memory.Scope, in ExtractInput) (memory.Scope, bool) {
	switch sc {
	case memory.ScopeTask:
		return memory.ScopeSession, in.TaskID != ""
	case memory.ScopeSession:
		return memory.ScopeUser, in.SessionID != ""
	case memory.ScopeDepartment:
		return memory.ScopeUser, in.DepartmentID != ""
	case memory.ScopeAgent:
		return memory.ScopeUser, false // the extractor input names no agent
	}
	return sc, true
}

func applyTime(c *memory.Candidate, t *timeRef, now time.Time) {
	c.Attributes = setAttr(c.Attributes, "date", t.date.Format(time.DateOnly))
	c.Attributes = setAttr(c.Attributes, "time_text", t.text)
	// A past date says when a fact or event began; a future one on a preference is
	// about the plan (the trip), not about when the preference starts.
	past := !t.date.After(now)
	switch c.MemoryType {
	case memory.TypeEvent, memory.TypeExperience, memory.TypeFact:
		if past {
			from := t.date
			c.ValidFrom = &from
		}
	}
}

func content(c memory.Candidate, text string) string {
	quote := strings.TrimSpace(text)
	if utf8.RuneCountInString(quote) > 80 {
		quote = string([]rune(quote)[:80]) + "…"
	}
	if c.Retraction {
		what := c.Predicate
		if c.Object != "" {
			what += " " + c.Object
		}
		return fmt.Sprintf("%s withdrew %s (%s scope): %q", c.Subject, what, c.Scope, quote)
	}
	neg := ""
	if c.Attributes["negated"] == true {
		neg = "not "
	}
	return fmt.Sprintf("%s %s: %s%s (%s scope): %q", c.Subject, c.Predicate, neg, c.Object, c.Scope, quote)
}

// splitSentences cuts text at sentence ends: CJK and ASCII terminators (a period only
// before space or the end, so 1.17 and 8000.5 stay whole) and new lines.
func splitSentences(text string) []string {
	var out []string
	start := 0
	rs := []rune(text)
	flush := func(end int) {
		if s := strings.TrimSpace(string(rs[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range rs {
		switch r {
		case '。', '！', '？', '!', '?', '\n', '；', ';':
			flush(i + 1)
		case '.':
			if i+1 == len(rs) || rs[i+1] == ' ' || rs[i+1] == '\n' {
				flush(i + 1)
			}
		}
	}
	flush(len(rs))
	return out
}

// clauseDelims separate the clauses of a sentence; cues act within a clause.
const clauseDelims = "，,、：:"

func clauseStart(text string, pos int) int {
	if i := strings.LastIndexAny(text[:pos], clauseDelims); i >= 0 {
		_, size := utf8.DecodeRuneInString(text[i:])
		return i + size
	}
	return 0
}

func clauseAround(text string, pos int) string {
	b := clauseStart(text, pos)
	e := len(text)
	if i := strings.IndexAny(text[pos:], clauseDelims); i >= 0 {
		e = pos + i
	}
	return text[b:e]
}

// ---- relative times ----

// timeRef is a date found in text and the words it came from.
type timeRef struct {
	date time.Time // midnight, in the event time's location
	text string
}

var (
	weekdaysZH = map[string]time.Weekday{"一": time.Monday, "二": time.Tuesday, "三": time.Wednesday, "四": time.Thursday, "五": time.Friday, "六": time.Saturday, "日": time.Sunday, "天": time.Sunday}
	weekdaysEN = map[string]time.Weekday{"monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday, "sunday": time.Sunday}
	dayWordsZH = map[string]int{"大前天": -3, "前天": -2, "昨天": -1, "今天": 0, "明天": 1, "后天": 2, "大后天": 3}
	dayWordsEN = map[string]int{"the day before yesterday": -2, "yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1, "the day after tomorrow": 2}

	isoDateRe  = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	zhFullRe   = regexp.MustCompile(`(\d{4})年(\d{1,2})月(\d{1,2})[日号]`)
	zhMDRe     = regexp.MustCompile(`(\d{1,2})月(\d{1,2})[日号]`)
	zhWeekRe   = regexp.MustCompile(`(上|下|这|本)?(?:个)?(?:周|星期|礼拜)([一二三四五六日天])`)
	zhDayRe    = regexp.MustCompile(`大前天|前天|昨天|今天|明天|大后天|后天`)
	zhOffRe    = regexp.MustCompile(`(\d+)\s*天(前|后|以后|之后|以前|之前)`)
	enWeekRe   = regexp.MustCompile(`(?i)\b(?:(next|this|last|on)\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	enDayRe    = regexp.MustCompile(`(?i)\b(?:the day before yesterday|the day after tomorrow|yesterday|today|tonight|tomorrow)\b`)
	enAgoRe    = regexp.MustCompile(`(?i)\b(\d+)\s+days?\s+ago\b`)
	enInDaysRe = regexp.MustCompile(`(?i)\bin\s+(\d+)\s+days?\b`)
)

// findTime finds the first date expression in text and resolves it against now:
// absolute dates, 昨天/yesterday-style words, N days ago / N天后, and weekdays, where
// 下周五 and "next Friday" mean Friday of next week (weeks start on Monday), 这周五 and
// "this Friday" Friday of this week, and a bare weekday its next occurrence.
func findTime(text string, now time.Time) *timeRef {
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	type hit struct {
		pos int
		ref timeRef
	}
	var hits []hit
	add := func(loc []int, d time.Time) {
		hits = append(hits, hit{loc[0], timeRef{date: d, text: text[loc[0]:loc[1]]}})
	}
	if m := isoDateRe.FindStringSubmatchIndex(text); m != nil {
		if d, err := time.ParseInLocation(time.DateOnly, text[m[0]:m[1]], now.Location()); err == nil {
			add(m, d)
		}
	}
	if m := zhFullRe.FindStringSubmatchIndex(text); m != nil {
		y, mo, d := atoi(text[m[2]:m[3]]), atoi(text[m[4]:m[5]]), atoi(text[m[6]:m[7]])
		add(m, time.Date(y, time.Month(mo), d, 0, 0, 0, 0, now.Location()))
	} else if m := zhMDRe.FindStringSubmatchIndex(text); m != nil {
		mo, d := atoi(text[m[2]:m[3]]), atoi(text[m[4]:m[5]])
		add(m, time.Date(day.Year(), time.Month(mo), d, 0, 0, 0, 0, now.Location()))
	}
	if m := zhWeekRe.FindStringSubmatchIndex(text); m != nil {
		rel := ""
		if m[2] >= 0 {
			rel = text[m[2]:m[3]]
		}
		wd := weekdaysZH[text[m[4]:m[5]]]
		switch rel {
		case "上":
			add(m, weekday(day, wd, -1))
		case "下":
			add(m, weekday(day, wd, 1))
		case "这", "本":
			add(m, weekday(day, wd, 0))
		default:
			add(m, nextWeekday(day, wd))
		}
	}
	if m := zhDayRe.FindStringIndex(text); m != nil {
		add(m, day.AddDate(0, 0, dayWordsZH[text[m[0]:m[1]]]))
	}
	if m := zhOffRe.FindStringSubmatchIndex(text); m != nil {
		n := atoi(text[m[2]:m[3]])
		if strings.HasSuffix(text[m[4]:m[5]], "前") {
			n = -n
		}
		add(m, day.AddDate(0, 0, n))
	}
	if m := enWeekRe.FindStringSubmatchIndex(text); m != nil {
		rel := ""
		if m[2] >= 0 {
			rel = strings.ToLower(text[m[2]:m[3]])
		}
		wd := weekdaysEN[strings.ToLower(text[m[4]:m[5]])]
		switch rel {
		case "last":
			add(m, weekday(day, wd, -1))
		case "next":
			add(m, weekday(day, wd, 1))
		case "this":
			add(m, weekday(day, wd, 0))
		default:
			add(m, nextWeekday(day, wd))
		}
	}
	if m := enDayRe.FindStringIndex(text); m != nil {
		add(m, day.AddDate(0, 0, dayWordsEN[strings.ToLower(text[m[0]:m[1]])]))
	}
	if m := enAgoRe.FindStringSubmatchIndex(text); m != nil {
		add(m, day.AddDate(0, 0, -atoi(text[m[2]:m[3]])))
	}
	if m := enInDaysRe.FindStringSubmatchIndex(text); m != nil {
		add(m, day.AddDate(0, 0, atoi(text[m[2]:m[3]])))
	}
	if len(hits) == 0 {
		return nil
	}
	// The earliest, then the longest expression: "the day after tomorrow" over "tomorrow".
	best := slices.MinFunc(hits, func(a, b hit) int {
		if a.pos != b.pos {
			return a.pos - b.pos
		}
		return len(b.ref.text) - len(a.ref.text)
	})
	return &best.ref
}

// weekday returns weekday wd of the week weeks away from day's week (Monday first).
func weekday(day time.Time, wd time.Weekday, weeks int) time.Time {
	offset := (int(day.Weekday()) + 6) % 7 // days since Monday
	monday := day.AddDate(0, 0, -offset+7*weeks)
	return monday.AddDate(0, 0, (int(wd)+6)%7)
}

// nextWeekday returns the next wd strictly after day.
func nextWeekday(day time.Time, wd time.Weekday) time.Time {
	n := (int(wd) - int(day.Weekday()) + 7) % 7
	if n == 0 {
		n = 7
	}
	return day.AddDate(0, 0, n)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
