package schema

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/engramhq/engram/memory"
)

// Problem is one thing wrong with a schema document: where and what.
type Problem struct {
	Line    int    // 1-based line in the document; 0 when unknown
	Field   string // path such as predicates[3].value_type; empty for syntax errors
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// LoadError lists every problem found in a schema document, so an author fixes them
// in one pass rather than one per load.
type LoadError struct {
	Problems []Problem
}

func (e *LoadError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return strings.Join(s, "\n")
}

// Load parses and validates a YAML schema document. A schema that extends a built-in
// schema ("extends: general") gets the parent's entities, relationships, event types,
// predicates, memory types and cues, its own definitions winning on a name clash.
// Every regular expression is compiled here, so an extractor never meets a bad one.
func Load(data []byte) (*Schema, error) {
	return load(data, nil)
}

var (
	nameRe      = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	entityRe    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	relTypeRe   = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	stateRe     = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	currencyRe  = regexp.MustCompile(`^[A-Z]{3}$`)
	templateVar = regexp.MustCompile(`\$\{(\w+)\}`)
)

func load(data []byte, seen []string) (*Schema, error) {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(err)
	}
	s := &Schema{}
	if err := yaml.UnmarshalWithOptions(data, s, yaml.DisallowUnknownField()); err != nil {
		return nil, yamlError(err)
	}
	c := &checker{file: file}
	if s.Extends != "" {
		if slices.Contains(seen, s.Extends) || s.Extends == s.Name {
			c.add("extends", "cycle through %q", s.Extends)
			return nil, c.err()
		}
		src, ok := builtinSource(s.Extends)
		if !ok {
			c.add("extends", "unknown built-in schema %q (allowed: %s)", s.Extends, strings.Join(BuiltinNames(), ", "))
			return nil, c.err()
		}
		parent, err := load(src, append(seen, s.Name))
		if err != nil {
			return nil, fmt.Errorf("extends %s: %w", s.Extends, err)
		}
		merge(s, parent)
	}
	c.validate(s)
	if len(c.problems) > 0 {
		return nil, c.err()
	}
	return s, nil
}

// yamlError turns a go-yaml error into a LoadError carrying its line.
func yamlError(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := Problem{Message: ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			p.Line = tk.Position.Line
		}
		return &LoadError{Problems: []Problem{p}}
	}
	return &LoadError{Problems: []Problem{{Message: err.Error()}}}
}

// merge adds the parent's definitions the child does not redefine. The parent is
// freshly loaded, so its pointers are the child's own and may be compiled again.
func merge(s, parent *Schema) {
	for _, t := range parent.MemoryTypes {
		if len(s.MemoryTypes) > 0 && !slices.Contains(s.MemoryTypes, t) {
			s.MemoryTypes = append(s.MemoryTypes, t)
		}
	}
	for _, e := range parent.Entities {
		if !slices.ContainsFunc(s.Entities, func(x *Entity) bool { return x.Name == e.Name }) {
			s.Entities = append(s.Entities, e)
		}
	}
	for _, r := range parent.Relationships {
		if _, ok := s.findRel(r.Type, r.From, r.To); !ok {
			s.Relationships = append(s.Relationships, r)
		}
	}
	for _, e := range parent.EventTypes {
		if !slices.ContainsFunc(s.EventTypes, func(x *EventType) bool { return x.Name == e.Name }) {
			s.EventTypes = append(s.EventTypes, e)
		}
	}
	for _, p := range parent.Predicates {
		if !slices.ContainsFunc(s.Predicates, func(x *Predicate) bool { return x.Name == p.Name }) {
			s.Predicates = append(s.Predicates, p)
		}
	}
	s.Cues.Negation = append(s.Cues.Negation, parent.Cues.Negation...)
	s.Cues.Retraction = append(s.Cues.Retraction, parent.Cues.Retraction...)
	for sc, l := range parent.Cues.Scopes {
		if s.Cues.Scopes == nil {
			s.Cues.Scopes = map[memory.Scope][]string{}
		}
		s.Cues.Scopes[sc] = append(s.Cues.Scopes[sc], l...)
	}
}

func (s *Schema) findRel(typ, from, to string) (int, bool) {
	for i, r := range s.Relationships {
		if r.Type == typ && r.From == from && r.To == to {
			return i, true
		}
	}
	return -1, false
}

// checker collects problems with the line each field sits on.
type checker struct {
	file     *ast.File
	problems []Problem
}

func (c *checker) add(field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Line: c.line(field), Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error { return &LoadError{Problems: c.problems} }

// line finds the line of field in the document, or of its nearest ancestor that is
// there (a missing field is reported where its parent starts).
func (c *checker) line(field string) int {
	for f := field; f != ""; f = parentField(f) {
		p, err := yaml.PathString("$." + f)
		if err != nil {
			continue
		}
		n, err := p.FilterFile(c.file)
		if err != nil || n == nil {
			continue
		}
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			return tk.Position.Line
		}
	}
	return 0
}

func parentField(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i <= 0 {
		return ""
	}
	return f[:i]
}

func allowed[T ~string](list []T) string {
	s := make([]string, len(list))
	for i, v := range list {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

func (c *checker) validate(s *Schema) {
	if !nameRe.MatchString(s.Name) {
		c.add("name", "%q must be lower_snake_case and not empty", s.Name)
	}
	if s.Version < 1 {
		c.add("version", "must be an integer ≥ 1, got %d", s.Version)
	}
	if len(s.MemoryTypes) == 0 {
		s.MemoryTypes = slices.Clone(memory.MemoryTypes)
	}
	for i, t := range s.MemoryTypes {
		if !t.Valid() {
			c.add(fmt.Sprintf("memory_types[%d]", i), "unknown %q (allowed: %s)", t, allowed(memory.MemoryTypes))
		}
	}
	base := c.compileCues("cues", &s.Cues, nil)

	s.entities = map[string]*Entity{}
	speakers := 0
	for i, e := range s.Entities {
		f := fmt.Sprintf("entities[%d]", i)
		checkName(c, f, e.Name, entityRe, "UpperCamelCase", s.entities, "duplicate entity %q")
		s.entities[e.Name] = e
		if e.Speaker {
			speakers++
			if speakers > 1 {
				c.add(f+".speaker", "only one entity may stand for the speaker")
			}
		}
		if e.IDPattern != "" {
			re, err := regexp.Compile(e.IDPattern)
			if err != nil {
				c.add(f+".id_pattern", "invalid regex: %v", err)
			}
			e.idRe = re
		}
		for j, st := range e.States {
			if !stateRe.MatchString(st) {
				c.add(fmt.Sprintf("%s.states[%d]", f, j), "%q must be UPPER_SNAKE_CASE", st)
			} else if slices.Index(e.States, st) != j {
				c.add(fmt.Sprintf("%s.states[%d]", f, j), "duplicate state %q", st)
			}
		}
	}
	for i, e := range s.Entities {
		c.checkAttributes(s, fmt.Sprintf("entities[%d].attributes", i), e.Attributes)
	}
	entityNames := func() string { return allowed(entityList(s)) }
	for i, r := range s.Relationships {
		f := fmt.Sprintf("relationships[%d]", i)
		if !relTypeRe.MatchString(r.Type) {
			c.add(f+".type", "%q must be UPPER_SNAKE_CASE and not empty", r.Type)
		}
		if _, ok := s.entities[r.From]; !ok {
			c.add(f+".from", "unknown entity %q (allowed: %s)", r.From, entityNames())
		}
		if _, ok := s.entities[r.To]; !ok {
			c.add(f+".to", "unknown entity %q (allowed: %s)", r.To, entityNames())
		}
		if j, _ := s.findRel(r.Type, r.From, r.To); j != i {
			c.add(f, "duplicate relationship %s %s %s", r.From, r.Type, r.To)
		}
	}

	s.predicates = map[string]*Predicate{}
	for i, p := range s.Predicates {
		checkName(c, fmt.Sprintf("predicates[%d]", i), p.Name, nameRe, "lower_snake_case", s.predicates, "duplicate predicate %q")
		s.predicates[p.Name] = p
	}
	s.events = map[string]*EventType{}
	for i, e := range s.EventTypes {
		f := fmt.Sprintf("event_types[%d]", i)
		checkName(c, f, e.Name, nameRe, "lower_snake_case", s.predicates, "%q is already a predicate or event type")
		s.events[e.Name] = e
		p := eventPredicate(s, e)
		s.predicates[e.Name] = p
		c.checkEvent(s, f, e, p, base)
	}
	if len(s.EventTypes) > 0 && !slices.Contains(s.MemoryTypes, memory.TypeEvent) {
		c.add("memory_types", "event types are declared but EVENT is not allowed")
	}
	for i, p := range s.Predicates {
		c.checkPredicate(s, fmt.Sprintf("predicates[%d]", i), p, base)
	}
}

func entityList(s *Schema) []string {
	out := make([]string, 0, len(s.Entities))
	for _, e := range s.Entities {
		out = append(out, e.Name)
	}
	return out
}

// eventPredicate is the predicate an event type is extracted under: memory type EVENT,
// the object the resulting state (or the entity reference), one value per subject.
func eventPredicate(s *Schema, e *EventType) *Predicate {
	p := &Predicate{
		Name: e.Name, Description: e.Description, MemoryType: memory.TypeEvent,
		ValueType: ValueString, Entity: e.Entity, Scopes: e.Scopes, DefaultScope: e.DefaultScope,
		Cardinality: One, NeedsConfirmation: e.NeedsConfirmation, Sensitive: e.Sensitive,
		ReviewDefault: e.ReviewDefault, AssertedBy: e.AssertedBy, Examples: e.Examples, Patterns: e.Patterns,
		Mentions: e.Mentions, Cues: e.Cues, Event: e,
	}
	if ent, ok := s.entities[e.Entity]; ok && len(ent.States) > 0 {
		p.Attributes = []*Attribute{{Name: "state", Type: ValueEnum, Enum: ent.States, Description: "the " + e.Entity + "'s state after the event"}}
	}
	return p
}

// checkName checks the name of the element at f: it must match re (rule says
// how it is written), and one already in names is refused with taken's message.
func checkName[V any](c *checker, f, name string, re *regexp.Regexp, rule string, names map[string]V, taken string) {
	if _, dup := names[name]; !re.MatchString(name) {
		c.add(f+".name", "%q must be %s and not empty", name, rule)
	} else if dup {
		c.add(f+".name", taken, name)
	}
}

func (c *checker) checkAttributes(s *Schema, f string, attrs []*Attribute) {
	seen := map[string]bool{}
	for j, a := range attrs {
		af := fmt.Sprintf("%s[%d]", f, j)
		checkName(c, af, a.Name, nameRe, "lower_snake_case", seen, "duplicate attribute %q")
		seen[a.Name] = true
		c.checkValueType(af+".type", &a.Type)
		if a.Type == ValueEnum && len(a.Enum) == 0 {
			c.add(af+".enum", "an enum attribute needs its values")
		}
		if a.Type == ValueEntityRef {
			if _, ok := s.entities[a.Entity]; !ok {
				c.add(af+".entity", "unknown entity %q (allowed: %s)", a.Entity, allowed(entityList(s)))
			}
		}
	}
}

// checkValueType fills the default value type (string) and refuses an unknown one.
func (c *checker) checkValueType(f string, t *ValueType) {
	if *t == "" {
		*t = ValueString
	}
	if !slices.Contains(ValueTypes, *t) {
		c.add(f, "unknown %q (allowed: %s)", *t, allowed(ValueTypes))
	}
}

// scopes fills the scope defaults and checks them: USER when nothing is said, and the
// default is USER when allowed, else the first allowed scope.
func (c *checker) scopes(f string, list *[]memory.Scope, def *memory.Scope) {
	if len(*list) == 0 {
		*list = []memory.Scope{memory.ScopeUser}
	}
	for i, sc := range *list {
		if !sc.Valid() {
			c.add(fmt.Sprintf("%s.scopes[%d]", f, i), "unknown %q (allowed: %s)", sc, allowed(memory.Scopes))
		}
	}
	if *def == "" {
		*def = (*list)[0]
		if slices.Contains(*list, memory.ScopeUser) {
			*def = memory.ScopeUser
		}
	}
	if !slices.Contains(*list, *def) {
		c.add(f+".default_scope", "%q is not among the allowed scopes (allowed: %s)", *def, allowed(*list))
	}
}

func (c *checker) review(f string, r *ReviewDecision) {
	if *r == "" {
		*r = ReviewReject
	}
	if *r != ReviewConfirm && *r != ReviewReject {
		c.add(f+".review_default", "unknown %q (allowed: confirm, reject)", *r)
	}
}

// assertedBy fills the default (the user alone) and checks every actor type,
// written in any case, against memory.ActorTypes.
func (c *checker) assertedBy(f string, list *[]string) {
	if len(*list) == 0 {
		*list = []string{memory.DefaultActorType}
	}
	for i, a := range *list {
		(*list)[i] = strings.ToUpper(strings.TrimSpace(a))
		if !slices.Contains(memory.ActorTypes, (*list)[i]) {
			c.add(fmt.Sprintf("%s.asserted_by[%d]", f, i), "unknown actor type %q (allowed: %s)", a, strings.Join(memory.ActorTypes, ", "))
		}
	}
}

func (c *checker) checkEvent(s *Schema, f string, e *EventType, p *Predicate, base *Cues) {
	ent, ok := s.entities[e.Entity]
	if !ok {
		c.add(f+".entity", "unknown entity %q (allowed: %s)", e.Entity, allowed(entityList(s)))
	}
	if e.State != "" && ok && !ent.HasState(e.State) {
		c.add(f+".state", "unknown state %q of %s (allowed: %s)", e.State, e.Entity, allowed(ent.States))
	}
	speaker, hasSpeaker := s.SpeakerEntity()
	for i, r := range e.Relations {
		rf := fmt.Sprintf("%s.relations[%d]", f, i)
		if !hasSpeaker {
			c.add(rf, "relations need an entity marked speaker")
			continue
		}
		_, fwd := s.findRel(r, speaker.Name, e.Entity)
		_, back := s.findRel(r, e.Entity, speaker.Name)
		if !fwd && !back {
			c.add(rf, "no relationship %s between %s and %s", r, speaker.Name, e.Entity)
		}
	}
	c.scopes(f, &e.Scopes, &e.DefaultScope)
	p.Scopes, p.DefaultScope = e.Scopes, e.DefaultScope
	c.review(f, &e.ReviewDefault)
	p.ReviewDefault = e.ReviewDefault
	c.assertedBy(f, &e.AssertedBy)
	p.AssertedBy = e.AssertedBy
	for i, x := range e.Examples {
		if x.Scope != "" && !slices.Contains(e.Scopes, x.Scope) {
			c.add(fmt.Sprintf("%s.examples[%d].scope", f, i), "%q is not allowed (allowed: %s)", x.Scope, allowed(e.Scopes))
		}
	}
	c.checkPatterns(s, f, p, base)
	e.Cues = p.Cues
}

func (c *checker) checkPredicate(s *Schema, f string, p *Predicate, base *Cues) {
	switch {
	case p.MemoryType == "":
		c.add(f+".memory_type", "required (allowed: %s)", allowed(s.MemoryTypes))
	case !p.MemoryType.Valid():
		c.add(f+".memory_type", "unknown %q (allowed: %s)", p.MemoryType, allowed(memory.MemoryTypes))
	case p.MemoryType == memory.TypeEvent:
		c.add(f+".memory_type", "EVENT records are declared under event_types")
	case !slices.Contains(s.MemoryTypes, p.MemoryType):
		c.add(f+".memory_type", "%q is not among the schema's memory_types (allowed: %s)", p.MemoryType, allowed(s.MemoryTypes))
	}
	c.checkValueType(f+".value_type", &p.ValueType)
	if p.ValueType == ValueEnum && len(p.Enum) == 0 {
		c.add(f+".enum", "value_type enum needs enum values")
	}
	if p.ValueType != ValueEnum && len(p.Enum) > 0 {
		c.add(f+".enum", "enum values need value_type enum, not %q", p.ValueType)
	}
	for v := range p.Aliases {
		if !slices.Contains(p.Enum, v) {
			c.add(f+".aliases."+v, "%q is not an enum value (allowed: %s)", v, allowed(p.Enum))
		}
	}
	for k, v := range p.Negate {
		if !slices.Contains(p.Enum, k) {
			c.add(f+".negate."+k, "%q is not an enum value (allowed: %s)", k, allowed(p.Enum))
		}
		if !slices.Contains(p.Enum, v) {
			c.add(f+".negate."+k, "%q is not an enum value (allowed: %s)", v, allowed(p.Enum))
		}
	}
	if p.NegatedPredicate != "" {
		if q, ok := s.predicates[p.NegatedPredicate]; !ok || q.Event != nil {
			c.add(f+".negated_predicate", "unknown predicate %q", p.NegatedPredicate)
		}
	}
	if p.ValueType == ValueEntityRef {
		if _, ok := s.entities[p.Entity]; !ok {
			c.add(f+".entity", "value_type entity_ref needs a known entity, got %q (allowed: %s)", p.Entity, allowed(entityList(s)))
		}
	}
	if p.ValueType == ValueMoney {
		if p.Currency == "" {
			p.Currency = "CNY"
		}
		if !currencyRe.MatchString(p.Currency) {
			c.add(f+".currency", "%q is not an ISO 4217 code such as CNY", p.Currency)
		}
	}
	c.scopes(f, &p.Scopes, &p.DefaultScope)
	switch p.Cardinality {
	case "":
		p.Cardinality = One
	case One, Many:
	default:
		c.add(f+".cardinality", "unknown %q (allowed: one, many)", p.Cardinality)
	}
	c.review(f, &p.ReviewDefault)
	c.assertedBy(f, &p.AssertedBy)
	c.checkAttributes(s, f+".attributes", p.Attributes)
	if p.KeyAttribute != "" {
		if _, ok := p.Attribute(p.KeyAttribute); !ok {
			c.add(f+".key_attribute", "%q is not one of the predicate's attributes", p.KeyAttribute)
		}
	}
	for i, x := range p.Examples {
		xf := fmt.Sprintf("%s.examples[%d]", f, i)
		if x.Scope != "" && !p.AllowsScope(x.Scope) {
			c.add(xf+".scope", "%q is not allowed (allowed: %s)", x.Scope, allowed(p.Scopes))
		}
		if x.Origin != "" && !x.Origin.Valid() {
			c.add(xf+".origin", "unknown %q (allowed: STATED, INFERRED)", x.Origin)
		}
		if err := s.checkObject(p, x.Object); x.Object != "" && err != "" {
			c.add(xf+".object", "%s", err)
		}
	}
	c.checkPatterns(s, f, p, base)
}

// checkPatterns compiles a predicate's patterns, mentions and cues, and checks that
// every template names a group its regex has.
func (c *checker) checkPatterns(s *Schema, f string, p *Predicate, base *Cues) {
	c.compileCues(f+".cues", &p.Cues, base)
	p.MentionRes = nil
	for i, m := range p.Mentions {
		re, err := regexp.Compile("(?i)" + m)
		if err != nil {
			c.add(fmt.Sprintf("%s.mentions[%d]", f, i), "invalid regex: %v", err)
			continue
		}
		p.MentionRes = append(p.MentionRes, re)
	}
	for i, pt := range p.Patterns {
		pf := fmt.Sprintf("%s.patterns[%d]", f, i)
		re, err := regexp.Compile("(?i)" + pt.Regex)
		if pt.Regex == "" {
			c.add(pf+".regex", "required")
			continue
		}
		if err != nil {
			c.add(pf+".regex", "invalid regex: %v", err)
			continue
		}
		pt.Re = re
		groups := map[string]bool{}
		for _, g := range re.SubexpNames() {
			if g != "" {
				groups[g] = true
			}
		}
		if p.ValueType == ValueMoney && groups["value"] {
			groups["amount"], groups["currency"] = true, true
		}
		check := func(field, tmpl string) {
			for _, m := range templateVar.FindAllStringSubmatch(tmpl, -1) {
				if !groups[m[1]] {
					c.add(pf+"."+field, "template uses ${%s} but the regex has no group %q", m[1], m[1])
				}
			}
		}
		if p.Event != nil {
			// Without an entity group the id is resolved from what is known.
			if pt.Entity != "" {
				check("entity", pt.Entity)
			}
			if pt.ResolveState != "" {
				if ent, ok := s.entities[p.Event.Entity]; ok && !ent.HasState(pt.ResolveState) {
					c.add(pf+".resolve_state", "unknown state %q of %s (allowed: %s)", pt.ResolveState, ent.Name, allowed(ent.States))
				}
			}
		} else {
			if pt.Value == "" {
				if !groups["value"] {
					c.add(pf+".regex", "needs a group (?P<value>…) or a value")
				}
			} else {
				check("value", pt.Value)
				if p.ValueType == ValueEnum && !strings.Contains(pt.Value, "${") && !slices.Contains(p.Enum, pt.Value) {
					c.add(pf+".value", "%q is not an enum value (allowed: %s)", pt.Value, allowed(p.Enum))
				}
			}
		}
		for k, v := range pt.Attributes {
			if t, ok := v.(string); ok {
				check("attributes."+k, t)
			}
		}
		switch pt.Origin {
		case "":
			pt.Origin = memory.OriginStated
		case memory.OriginStated, memory.OriginInferred:
		default:
			c.add(pf+".origin", "unknown %q (allowed: STATED, INFERRED)", pt.Origin)
		}
		if pt.Confidence == 0 {
			pt.Confidence = 0.85
			if pt.Origin == memory.OriginInferred {
				pt.Confidence = 0.6
			}
		}
		if pt.Confidence < 0 || pt.Confidence > 1 {
			c.add(pf+".confidence", "%v is outside [0,1]", pt.Confidence)
		}
	}
}

// compileCues compiles each cue list into one alternation, after the base (schema
// level) cues, and reports a bad regex at its own index.
func (c *checker) compileCues(f string, cu *Cues, base *Cues) *Cues {
	one := func(field string, own []string, inherited []string) *regexp.Regexp {
		var parts []string
		for i, r := range own {
			if _, err := regexp.Compile(r); err != nil {
				c.add(fmt.Sprintf("%s.%s[%d]", f, field, i), "invalid regex: %v", err)
				continue
			}
			parts = append(parts, "(?:"+r+")")
		}
		for _, r := range inherited {
			if _, err := regexp.Compile(r); err == nil { // a bad one is reported where declared
				parts = append(parts, "(?:"+r+")")
			}
		}
		if len(parts) == 0 {
			return nil
		}
		return regexp.MustCompile("(?i)" + strings.Join(parts, "|"))
	}
	var inh Cues
	if base != nil {
		inh = *base
	}
	cu.NegationRe = one("negation", cu.Negation, inh.Negation)
	cu.RetractionRe = one("retraction", cu.Retraction, inh.Retraction)
	cu.ScopeRes = map[memory.Scope]*regexp.Regexp{}
	for _, sc := range memory.Scopes {
		if re := one("scopes."+string(sc), cu.Scopes[sc], inh.Scopes[sc]); re != nil {
			cu.ScopeRes[sc] = re
		}
	}
	for sc := range cu.Scopes {
		if !sc.Valid() {
			c.add(f+".scopes."+string(sc), "unknown scope %q (allowed: %s)", sc, allowed(memory.Scopes))
		}
	}
	return cu
}
