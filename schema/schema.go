// Package schema holds Engram's domain schemas: the entities, states, relationships,
// event types and predicates of a domain, loaded from YAML. A schema bounds what an
// extractor may write (it becomes the strict JSON Schema of the LLM's output), validates
// what the extractor wrote, and carries the patterns that drive the offline rule
// extractor. It imports only memory.
//
// The YAML format, in short (see builtin/*.yaml for complete schemas):
//
//	name: travel                # lower_snake_case
//	version: 1                  # facts record the version they were written under
//	extends: general            # optional: merge a built-in schema, own names win
//	memory_types: [FACT, …]     # default: all
//	cues:                       # regexes: negation, retraction, scopes.{TASK,USER,…}
//	entities:                   # name, description, id_pattern, speaker, states,
//	                            # attributes (name, type, enum, entity for references)
//	relationships:              # {type: PLACED, from: User, to: Order}
//	event_types:                # name, entity, state (after the event), relations,
//	                            # scopes, patterns, …: extracted as EVENT candidates
//	predicates:                 # name, description, memory_type, value_type
//	                            # (string|number|money|enum|bool|date|entity_ref),
//	                            # enum, aliases, negate, negated_predicate, currency,
//	                            # scopes, default_scope, cardinality (one|many),
//	                            # key_attribute, needs_confirmation, sensitive,
//	                            # review_default (confirm|reject, default reject),
//	                            # asserted_by (actor types, default [USER]),
//	                            # attributes, examples, patterns, mentions, cues
//
// asserted_by (on a predicate or an event type) lists the actor types whose
// events may assert it: USER, AGENT, SYSTEM, TOOL. By default only the user's own
// words are: an agent repeating what it remembers ("budget = 10000 CNY") is
// evidence of what the agent said, not of what the user wants, and governance
// rejects its candidate with the reason. A key an agent may state about itself or
// the task (its own name, the task's status) lists AGENT.
//
// A pattern is {lang, regex, value, entity, origin, confidence, attributes,
// resolve_state, fallback, ignore_negation}; its named groups (value, entity, unit,
// currency, …) feed the ${group} templates.
package schema

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/engramhq/engram/memory"
)

// ValueType is the type of a predicate's object or an attribute's value.
type ValueType string

const (
	ValueString    ValueType = "string"
	ValueNumber    ValueType = "number"
	ValueMoney     ValueType = "money" // "8000 CNY": an amount and an ISO 4217 code
	ValueEnum      ValueType = "enum"
	ValueBool      ValueType = "bool"
	ValueDate      ValueType = "date" // YYYY-MM-DD or RFC 3339
	ValueEntityRef ValueType = "entity_ref"
)

// ValueTypes lists every value type, in the order error messages show them.
var ValueTypes = []ValueType{ValueString, ValueNumber, ValueMoney, ValueEnum, ValueBool, ValueDate, ValueEntityRef}

// Cardinality says whether a subject holds one value of a predicate or several.
type Cardinality string

const (
	// One: a new value supersedes the old (a budget, a seat preference).
	One Cardinality = "one"
	// Many: values coexist (several liked cuisines); the memory key includes the value.
	Many Cardinality = "many"
)

// ReviewDecision is what happens to a candidate when its human review times out.
type ReviewDecision string

const (
	ReviewConfirm ReviewDecision = "confirm"
	ReviewReject  ReviewDecision = "reject"
)

// Schema is a loaded, validated domain schema. Treat it as read-only: it is shared
// between goroutines and workflow activities.
type Schema struct {
	Name          string              `yaml:"name"`
	Version       int                 `yaml:"version"`
	Description   string              `yaml:"description"`
	Extends       string              `yaml:"extends"`
	MemoryTypes   []memory.MemoryType `yaml:"memory_types"`
	Entities      []*Entity           `yaml:"entities"`
	Relationships []*Relationship     `yaml:"relationships"`
	EventTypes    []*EventType        `yaml:"event_types"`
	Predicates    []*Predicate        `yaml:"predicates"`
	// Cues are the default cue phrases of every predicate and event type; each may add
	// its own.
	Cues Cues `yaml:"cues"`

	entities   map[string]*Entity
	predicates map[string]*Predicate // declared predicates and one per event type
	events     map[string]*EventType
}

// Entity is a kind of thing the domain tracks, with an identity and a state.
type Entity struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// IDPattern, when set, is a regular expression every id of this entity must match.
	IDPattern string `yaml:"id_pattern"`
	// Speaker marks the entity that stands for the person speaking (User): its id is
	// the event's user id, which is how extractors link "my order" to someone.
	Speaker    bool         `yaml:"speaker"`
	Attributes []*Attribute `yaml:"attributes"`
	States     []string     `yaml:"states"`

	idRe *regexp.Regexp
}

// Attribute is a typed attribute of an entity or a predicate. Type entity_ref with
// Entity set is a reference to another entity.
type Attribute struct {
	Name        string    `yaml:"name"`
	Type        ValueType `yaml:"type"`
	Description string    `yaml:"description"`
	Enum        []string  `yaml:"enum"`
	Entity      string    `yaml:"entity"`
}

// Relationship is a typed edge allowed between two entity types.
type Relationship struct {
	Type        string `yaml:"type"`
	From        string `yaml:"from"`
	To          string `yaml:"to"`
	Description string `yaml:"description"`
}

// EventType is something that happens to an entity (an order not received). Extracted
// events are candidates of memory type EVENT whose predicate is the event type's name.
type EventType struct {
	Name        string `yaml:"name"`
	Entity      string `yaml:"entity"`
	State       string `yaml:"state"` // the entity's state after the event, if it changes
	Description string `yaml:"description"`
	// Relations are relationship types that link the speaker to the entity when the
	// event is extracted (User PLACED Order).
	Relations         []string       `yaml:"relations"`
	Scopes            []memory.Scope `yaml:"scopes"`
	DefaultScope      memory.Scope   `yaml:"default_scope"`
	NeedsConfirmation bool           `yaml:"needs_confirmation"`
	Sensitive         bool           `yaml:"sensitive"`
	ReviewDefault     ReviewDecision `yaml:"review_default"`
	// AssertedBy: as the predicate's.
	AssertedBy []string   `yaml:"asserted_by"`
	Examples   []Example  `yaml:"examples"`
	Patterns   []*Pattern `yaml:"patterns"`
	Mentions   []string   `yaml:"mentions"`
	Cues       Cues       `yaml:"cues"`
}

// Predicate is something that can be remembered about a subject: a budget, a flight
// preference, a tool a team uses.
type Predicate struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	MemoryType  memory.MemoryType `yaml:"memory_type"`
	ValueType   ValueType         `yaml:"value_type"`
	Enum        []string          `yaml:"enum"`
	// Aliases maps an enum value to the words that mean it ("window": 靠窗, window).
	Aliases map[string][]string `yaml:"aliases"`
	// Negate maps an enum value to the value meant when it is negated ("no layovers"
	// is connecting negated, i.e. direct).
	Negate map[string]string `yaml:"negate"`
	// NegatedPredicate receives negated statements that Negate cannot map
	// ("I don't like X" → dislikes X).
	NegatedPredicate string         `yaml:"negated_predicate"`
	Entity           string         `yaml:"entity"`   // the entity type of an entity_ref value
	Currency         string         `yaml:"currency"` // default currency of a money value
	Scopes           []memory.Scope `yaml:"scopes"`
	DefaultScope     memory.Scope   `yaml:"default_scope"`
	Cardinality      Cardinality    `yaml:"cardinality"`
	// KeyAttribute, for cardinality many, names the attribute that identifies a value
	// in the memory key instead of the whole object ("Flink" rather than "Flink 1.17",
	// so an upgrade supersedes instead of adding).
	KeyAttribute      string         `yaml:"key_attribute"`
	NeedsConfirmation bool           `yaml:"needs_confirmation"`
	Sensitive         bool           `yaml:"sensitive"`
	ReviewDefault     ReviewDecision `yaml:"review_default"`
	// AssertedBy lists the actor types (memory.ActorTypes) whose events may assert
	// the predicate; the loader fills [USER] when it says nothing.
	AssertedBy []string     `yaml:"asserted_by"`
	Attributes []*Attribute `yaml:"attributes"`
	Examples   []Example    `yaml:"examples"`
	Patterns   []*Pattern   `yaml:"patterns"`
	// Mentions are regexes that name the predicate without a value ("预算", "budget"),
	// used to recognise retractions such as "forget my budget".
	Mentions []string `yaml:"mentions"`
	Cues     Cues     `yaml:"cues"`

	// Event is set on the predicate synthesised for an event type.
	Event *EventType `yaml:"-"`

	// MentionRes are the compiled Mentions.
	MentionRes []*regexp.Regexp `yaml:"-"`
}

// Example is an input and what should be extracted from it; examples go into the
// LLM prompt and are checked against the predicate at load.
type Example struct {
	Text   string        `yaml:"text"`
	Object string        `yaml:"object"`
	Scope  memory.Scope  `yaml:"scope"`
	Origin memory.Origin `yaml:"origin"`
	Note   string        `yaml:"note"`
}

// Pattern is a regular expression for the offline rule extractor. Named groups feed
// the templates: "value" is the object, "entity" the entity id; for money values the
// groups "value", "unit" (万, k) and "currency" give the derived ${amount} and
// ${currency}. Regexes are matched case-insensitively.
type Pattern struct {
	Lang  string `yaml:"lang"` // informational: zh, en, …
	Regex string `yaml:"regex"`
	// Value is the object template, default "${value}"; a constant ("direct") when the
	// regex recognises a fixed value.
	Value string `yaml:"value"`
	// Entity is the entity id template for event types, default "${entity}".
	Entity     string        `yaml:"entity"`
	Origin     memory.Origin `yaml:"origin"`     // default STATED
	Confidence float64       `yaml:"confidence"` // default 0.85 stated, 0.6 inferred
	// Attributes are added to the candidate; string values are templates, empty
	// expansions are dropped, and attributes the predicate declares as numbers become
	// numbers.
	Attributes map[string]any `yaml:"attributes"`
	// ResolveState, for event types, narrows how a match without an entity id ("the
	// order that never arrived") is resolved: to a known entity in that state. Without
	// it the latest known entity of the type is taken.
	ResolveState string `yaml:"resolve_state"`
	// Fallback patterns are generic; their match is dropped when a specific pattern
	// matched an overlapping span.
	Fallback bool `yaml:"fallback"`
	// IgnoreNegation is for patterns whose wording already carries the polarity
	// ("不超过8000", "I don't like X" under dislikes), so a cue inside is no negation.
	IgnoreNegation bool `yaml:"ignore_negation"`

	// Re is the compiled Regex.
	Re *regexp.Regexp `yaml:"-"`
}

// Cues are regexes that change how a match is read: a negation before it, a
// retraction in its sentence, or words that set its scope ("这次" → TASK).
type Cues struct {
	Negation   []string                  `yaml:"negation"`
	Retraction []string                  `yaml:"retraction"`
	Scopes     map[memory.Scope][]string `yaml:"scopes"`

	// Compiled alternations of the lists above, the schema's defaults included.
	NegationRe   *regexp.Regexp                  `yaml:"-"`
	RetractionRe *regexp.Regexp                  `yaml:"-"`
	ScopeRes     map[memory.Scope]*regexp.Regexp `yaml:"-"`
}

// Predicate returns the predicate or event type named name. Event types are returned
// as predicates of memory type EVENT with Event set.
func (s *Schema) Predicate(name string) (*Predicate, bool) {
	p, ok := s.predicates[name]
	return p, ok
}

// Entity returns the entity type named name.
func (s *Schema) Entity(name string) (*Entity, bool) {
	e, ok := s.entities[name]
	return e, ok
}

// EventType returns the event type named name.
func (s *Schema) EventType(name string) (*EventType, bool) {
	e, ok := s.events[name]
	return e, ok
}

// AllPredicates returns the declared predicates followed by the event-type
// predicates, in schema order.
func (s *Schema) AllPredicates() []*Predicate {
	out := slices.Clone(s.Predicates)
	for _, e := range s.EventTypes {
		out = append(out, s.predicates[e.Name])
	}
	return out
}

// SpeakerEntity returns the entity that stands for the speaker, if the schema has one.
func (s *Schema) SpeakerEntity() (*Entity, bool) {
	for _, e := range s.Entities {
		if e.Speaker {
			return e, true
		}
	}
	return nil, false
}

// Relationship returns the relationship of that type between from and to.
func (s *Schema) Relationship(typ, from, to string) (*Relationship, bool) {
	for _, r := range s.Relationships {
		if r.Type == typ && r.From == from && r.To == to {
			return r, true
		}
	}
	return nil, false
}

// ValidID reports whether id is acceptable for the entity.
func (e *Entity) ValidID(id string) bool {
	return strings.TrimSpace(id) != "" && (e.idRe == nil || e.idRe.MatchString(id))
}

// HasState reports whether state is one of the entity's states.
func (e *Entity) HasState(state string) bool { return slices.Contains(e.States, state) }

// Attribute returns the predicate's attribute named name.
func (p *Predicate) Attribute(name string) (*Attribute, bool) {
	for _, a := range p.Attributes {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

// AssertableBy reports whether an event of the actor type (USER when empty) may
// assert the predicate.
func (p *Predicate) AssertableBy(actor string) bool {
	if actor == "" {
		actor = memory.DefaultActorType
	}
	return slices.Contains(p.AssertedBy, actor)
}

// AllowsScope reports whether a candidate of this predicate may have scope sc.
func (p *Predicate) AllowsScope(sc memory.Scope) bool { return slices.Contains(p.Scopes, sc) }

// EnumValue maps text to an enum value: the value itself (case-insensitive) or one of
// its aliases.
func (p *Predicate) EnumValue(text string) (string, bool) {
	t := strings.ToLower(strings.TrimSpace(text))
	for _, v := range p.Enum {
		if strings.ToLower(v) == t {
			return v, true
		}
	}
	for _, v := range p.Enum {
		for _, a := range p.Aliases[v] {
			if strings.ToLower(a) == t {
				return v, true
			}
		}
	}
	return "", false
}

// FormatMoney renders an amount and currency the way money objects are stored.
func FormatMoney(amount float64, currency string) string {
	return strconv.FormatFloat(amount, 'f', -1, 64) + " " + currency
}

// ParseMoney parses a money object such as "8000 CNY" or "12.5 usd".
func ParseMoney(s string) (amount float64, currency string, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, "", false
	}
	a, err := strconv.ParseFloat(f[0], 64)
	if err != nil || a < 0 || len(f[1]) != 3 {
		return 0, "", false
	}
	for _, r := range f[1] {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
			return 0, "", false
		}
	}
	return a, strings.ToUpper(f[1]), true
}
