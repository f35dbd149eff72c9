package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/engramhq/engram/memory"
)

func mustBuiltin(t *testing.T, name string) *Schema {
	t.Helper()
	s, err := Builtin(name)
	if err != nil {
		t.Fatalf("Builtin(%q): %v", name, err)
	}
	return s
}

func TestBuiltinsLoad(t *testing.T) {
	if got, want := BuiltinNames(), []string{"customer_service", "general", "travel"}; !slices.Equal(got, want) {
		t.Fatalf("BuiltinNames() = %v, want %v", got, want)
	}
	tests := []struct {
		name       string
		predicates []string // must be present, general ones included through extends
		entities   []string
	}{
		{"general", []string{"prefers", "dislikes", "constraint", "uses", "decided", "experience"}, nil},
		{"customer_service", []string{"prefers", "uses", "contact_channel", "order_not_received", "order_inquiry", "refund_requested"}, []string{"User", "Order", "ServiceTicket"}},
		{"travel", []string{"prefers", "budget", "flight_type", "seat", "hotel_preference", "destination", "departure_date"}, []string{"Trip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustBuiltin(t, tt.name)
			if s.Name != tt.name || s.Version < 1 {
				t.Errorf("name/version = %q/%d", s.Name, s.Version)
			}
			for _, p := range tt.predicates {
				if _, ok := s.Predicate(p); !ok {
					t.Errorf("predicate %q missing", p)
				}
			}
			for _, e := range tt.entities {
				if _, ok := s.Entity(e); !ok {
					t.Errorf("entity %q missing", e)
				}
			}
			prompt := s.Prompt()
			for _, p := range tt.predicates {
				if !strings.Contains(prompt, p) {
					t.Errorf("prompt does not mention %q", p)
				}
			}
			checkStrict(t, "$", s.JSONSchema())
			compileJSONSchema(t, s)
		})
	}
}

func TestCustomerServiceSchema(t *testing.T) {
	s := mustBuiltin(t, "customer_service")
	order, _ := s.Entity("Order")
	for _, st := range []string{"CREATED", "PAID", "SHIPPED", "DELIVERED", "NOT_RECEIVED", "REFUNDED"} {
		if !order.HasState(st) {
			t.Errorf("Order lacks state %s", st)
		}
	}
	ticket, _ := s.Entity("ServiceTicket")
	for _, st := range []string{"OPEN", "IN_PROGRESS", "RESOLVED", "CLOSED"} {
		if !ticket.HasState(st) {
			t.Errorf("ServiceTicket lacks state %s", st)
		}
	}
	for _, r := range [][3]string{{"PLACED", "User", "Order"}, {"ABOUT", "ServiceTicket", "Order"}, {"OPENED", "User", "ServiceTicket"}} {
		if _, ok := s.Relationship(r[0], r[1], r[2]); !ok {
			t.Errorf("missing relationship %v", r)
		}
	}
	p, _ := s.Predicate("order_not_received")
	if p.MemoryType != memory.TypeEvent || p.Event == nil || p.Event.State != "NOT_RECEIVED" {
		t.Errorf("order_not_received = %+v", p)
	}
	if sp, ok := s.SpeakerEntity(); !ok || sp.Name != "User" {
		t.Errorf("speaker = %v", sp)
	}
}

// checkStrict walks a JSON Schema and fails on any object that OpenAI's strict mode
// would refuse: additionalProperties not false or a property missing from required.
func checkStrict(t *testing.T, path string, node any) {
	t.Helper()
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if m["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is not false", path)
		}
		req, _ := m["required"].([]any)
		if len(req) != len(props) {
			t.Errorf("%s: %d properties but %d required", path, len(props), len(req))
		}
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				t.Errorf("%s: required %q is not a property", path, r)
			}
		}
		for k, v := range props {
			checkStrict(t, path+"."+k, v)
		}
	} else if m["type"] == "object" || slices.Contains(anyList(m["type"]), any("object")) {
		t.Errorf("%s: object without properties", path)
	}
	if items, ok := m["items"]; ok {
		checkStrict(t, path+"[]", items)
	}
}

func anyList(v any) []any { l, _ := v.([]any); return l }

// compileJSONSchema checks the derived schema is valid JSON Schema and that a
// well-formed strict document (every optional field null) conforms to it.
func compileJSONSchema(t *testing.T, s *Schema) *jsonschema.Schema {
	t.Helper()
	sch := compile(t, s)
	p, _ := s.Predicate("prefers")
	obj := "tea"

	doc := map[string]any{"candidates": []any{map[string]any{
		"memory_type": string(p.MemoryType), "scope": string(p.DefaultScope), "subject": "user",
		"predicate": p.Name, "object": obj, "content": "c", "entity_type": nil, "entity_id": nil,
		"attributes": nil, "confidence": 0.9, "origin": "STATED", "retraction": false,
		"valid_from": nil, "valid_until": nil, "relations": []any{}, "extractor": nil, "extractor_version": nil,
	}}}
	if err := sch.Validate(roundTrip(t, doc)); err != nil {
		t.Errorf("strict document rejected by JSONSchema(): %v", err)
	}
	raw, _ := json.Marshal(doc)
	if _, errs := s.ParseCandidates(raw); len(errs) > 0 {
		t.Errorf("strict document rejected by ParseCandidates: %v", errs)
	}
	return sch
}

func compile(t *testing.T, s *Schema) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("engram.json", roundTrip(t, s.JSONSchema())); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("engram.json")
	if err != nil {
		t.Fatalf("JSONSchema() does not compile: %v", err)
	}
	return sch
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadRejectsInvalidSchemas(t *testing.T) {
	const head = "name: shop\nversion: 1\n"
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, line and field included
	}{
		{"unknown value type", head + `predicates:
  - name: price
    memory_type: FACT
    value_type: moneyy
`, []string{`line 6: predicates[0].value_type: unknown "moneyy" (allowed: string, number, money, enum, bool, date, entity_ref)`}},
		{"fourth predicate", head + `predicates:
  - {name: a, memory_type: FACT}
  - {name: b, memory_type: FACT}
  - {name: c, memory_type: FACT}
  - name: d
    memory_type: FACT
    value_type: moneyy
`, []string{`line 9: predicates[3].value_type: unknown "moneyy"`}},
		{"missing name", "version: 1\n", []string{`name: "" must be lower_snake_case`}},
		{"bad version", "name: x\nversion: 0\n", []string{"line 2: version: must be an integer ≥ 1"}},
		{"version not int", "name: x\nversion: one\n", []string{"line 2:"}},
		{"unknown field", head + "predicatez: []\n", []string{"line 3:", "predicatez"}},
		{"syntax error", "name: [x\nversion: 1\n", []string{"line "}},
		{"bad regex", head + `predicates:
  - name: p
    memory_type: FACT
    patterns:
      - regex: '(?P<value>abc'
`, []string{"line 7: predicates[0].patterns[0].regex: invalid regex"}},
		{"template without group", head + `predicates:
  - name: p
    memory_type: FACT
    patterns:
      - regex: 'x(?P<v>\d+)'
`, []string{"predicates[0].patterns[0].regex: needs a group (?P<value>…) or a value"}},
		{"bad memory type", head + `predicates:
  - name: p
    memory_type: FEELING
`, []string{`line 5: predicates[0].memory_type: unknown "FEELING" (allowed: FACT, PREFERENCE`}},
		{"bad scope", head + `predicates:
  - name: p
    memory_type: FACT
    scopes: [USER, GALAXY]
`, []string{`line 6: predicates[0].scopes[1]: unknown "GALAXY"`}},
		{"default scope not allowed", head + `predicates:
  - name: p
    memory_type: FACT
    scopes: [USER]
    default_scope: TASK
`, []string{`line 7: predicates[0].default_scope: "TASK" is not among the allowed scopes (allowed: USER)`}},
		{"enum without values", head + `predicates:
  - name: p
    memory_type: PREFERENCE
    value_type: enum
`, []string{"predicates[0].enum: value_type enum needs enum values"}},
		{"bad cardinality and review", head + `predicates:
  - name: p
    memory_type: FACT
    cardinality: few
    review_default: maybe
`, []string{`line 6: predicates[0].cardinality: unknown "few" (allowed: one, many)`, `line 7: predicates[0].review_default: unknown "maybe" (allowed: confirm, reject)`}},
		{"unknown actor type", head + `predicates:
  - name: p
    memory_type: FACT
    asserted_by: [USER, ROBOT]
`, []string{`line 6: predicates[0].asserted_by[1]: unknown actor type "ROBOT" (allowed: USER, AGENT, SYSTEM, TOOL)`}},
		{"relationship to unknown entity", head + `entities:
  - name: User
relationships:
  - {type: PLACED, from: User, to: Ordr}
`, []string{`line 6: relationships[0].to: unknown entity "Ordr" (allowed: User)`}},
		{"event with unknown state", head + `entities:
  - name: Order
    states: [PAID]
event_types:
  - name: order_lost
    entity: Order
    state: LOST
`, []string{`line 9: event_types[0].state: unknown state "LOST" of Order (allowed: PAID)`}},
		{"duplicate predicate", head + `predicates:
  - {name: p, memory_type: FACT}
  - {name: p, memory_type: FACT}
`, []string{`line 5: predicates[1].name: duplicate predicate "p"`}},
		{"example violates enum", head + `predicates:
  - name: seat
    memory_type: PREFERENCE
    value_type: enum
    enum: [window, aisle]
    examples:
      - {text: "x", object: wing}
`, []string{`predicates[0].examples[0].object: unknown "wing" for seat (allowed: window, aisle)`}},
		{"bad cue regex", head + "cues:\n  negation: ['(']\n", []string{"line 4: cues.negation[0]: invalid regex"}},
		{"unknown extends", head + "extends: nothing\n", []string{`line 3: extends: unknown built-in schema "nothing" (allowed: customer_service, general, travel)`}},
		{"bad entity id pattern", head + "entities:\n  - name: Order\n    id_pattern: '['\n", []string{"line 5: entities[0].id_pattern: invalid regex"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Load([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Load accepted an invalid schema: %+v", s)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// Who may assert a key: the user alone unless the schema says otherwise (for a
// predicate or an event type), actor types read in any case; the prompt names
// the others, and a built-in key is the user's alone.
func TestAssertedBy(t *testing.T) {
	s, err := Load([]byte(`name: ops
version: 1
extends: travel
entities:
  - name: Ticket
event_types:
  - name: ticket_closed
    entity: Ticket
    asserted_by: [tool]
predicates:
  - name: agent_name
    memory_type: FACT
    scopes: [AGENT]
    asserted_by: [agent, " SYSTEM"]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pred  string
		want  []string
		yes   []string
		never []string
	}{
		{"agent_name", []string{"AGENT", "SYSTEM"}, []string{"AGENT", "SYSTEM"}, []string{"USER", "", "TOOL"}},
		{"ticket_closed", []string{"TOOL"}, []string{"TOOL"}, []string{"USER", "AGENT"}},
		{"budget", []string{"USER"}, []string{"USER", ""}, []string{"AGENT", "SYSTEM", "TOOL"}},
		{"prefers", []string{"USER"}, []string{"USER"}, []string{"AGENT"}},
	} {
		p, ok := s.Predicate(tc.pred)
		if !ok {
			t.Fatalf("predicate %q missing", tc.pred)
		}
		if !slices.Equal(p.AssertedBy, tc.want) {
			t.Errorf("%s asserted_by = %v, want %v", tc.pred, p.AssertedBy, tc.want)
		}
		for _, a := range tc.yes {
			if !p.AssertableBy(a) {
				t.Errorf("%s: %q may assert it", tc.pred, a)
			}
		}
		for _, a := range tc.never {
			if p.AssertableBy(a) {
				t.Errorf("%s: %q may not assert it", tc.pred, a)
			}
		}
	}
	prompt := s.Prompt()
	for _, w := range []string{"Asserted by: AGENT, SYSTEM.", "Asserted by: TOOL."} {
		if !strings.Contains(prompt, w) {
			t.Errorf("prompt does not say %q", w)
		}
	}
	if strings.Count(prompt, "Asserted by") != 2 {
		t.Errorf("a user-only key is not annotated:\n%s", prompt)
	}
}

func TestLoadExtendsAndOverrides(t *testing.T) {
	s, err := Load([]byte(`name: team
version: 3
extends: general
predicates:
  - name: prefers
    description: overridden
    memory_type: PREFERENCE
    scopes: [DEPARTMENT]
  - name: oncall
    memory_type: FACT
    value_type: bool
`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Predicate("prefers")
	if p.Description != "overridden" || p.DefaultScope != memory.ScopeDepartment {
		t.Errorf("child did not override prefers: %+v", p)
	}
	if _, ok := s.Predicate("allergy"); !ok {
		t.Error("parent predicate allergy not merged")
	}
	if p.Cues.RetractionRe == nil || !p.Cues.RetractionRe.MatchString("forget it") {
		t.Error("parent cues not inherited")
	}
	if s.Version != 3 {
		t.Errorf("version = %d", s.Version)
	}
}

// doc builds an extractor document from candidate objects given as JSON fragments.
func doc(cands ...string) []byte {
	return []byte(`{"candidates":[` + strings.Join(cands, ",") + `]}`)
}

const (
	goodBudget = `{"memory_type":"CONSTRAINT","scope":"TASK","subject":"user","predicate":"budget","object":"10000 CNY","content":"budget 10000","attributes":{"max":10000,"currency":"CNY","min":null},"confidence":0.9,"origin":"STATED"}`
	goodEvent  = `{"memory_type":"EVENT","scope":"USER","subject":"Order:12345","predicate":"order_not_received","object":"NOT_RECEIVED","content":"order 12345 not received","entity_type":"Order","entity_id":"12345","attributes":{"state":"NOT_RECEIVED"},"confidence":0.9,"origin":"STATED","relations":[{"type":"PLACED","from_type":"User","from_id":"u1","to_type":"Order","to_id":"12345"}],"valid_from":"2024-05-01T00:00:00Z","valid_until":null,"retraction":false,"extractor":null,"extractor_version":null}`
)

func withField(c, field, value string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(c), &m); err != nil {
		panic(err)
	}
	if value == "-" {
		delete(m, field)
	} else {
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			panic(fmt.Sprintf("%s: %v", value, err))
		}
		m[field] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestParseCandidates(t *testing.T) {
	travel := mustBuiltin(t, "travel")
	cs := mustBuiltin(t, "customer_service")
	retract := `{"memory_type":"CONSTRAINT","scope":"USER","subject":"user","predicate":"budget","object":"","content":"forget budget","confidence":0.8,"origin":"STATED","retraction":true}`
	tests := []struct {
		name   string
		s      *Schema
		raw    []byte
		n      int      // candidates accepted
		fields []string // error fields, in order
		want   []string // substrings of the problems
	}{
		{"good budget", travel, doc(goodBudget), 1, nil, nil},
		{"good event with relation", cs, doc(goodEvent), 1, nil, nil},
		{"empty", travel, doc(), 0, nil, nil},
		{"retraction may omit object", travel, doc(retract), 1, nil, nil},
		{"broken JSON", travel, []byte(`{"candidates":[{"memory_type":`), 0, []string{"$"}, []string{"invalid JSON"}},
		{"not an object", travel, []byte(`[1,2]`), 0, []string{"$"}, nil},
		{"candidates missing", travel, []byte(`{}`), 0, []string{"candidates"}, []string{"required"}},
		{"bad scope enum", travel, doc(goodBudget, withField(goodBudget, "scope", `"PLANET"`)), 1,
			[]string{"candidates[1].scope"}, []string{`unknown "PLANET" (allowed for budget: USER, TASK, SESSION)`}},
		{"scope not allowed for predicate", travel, doc(withField(goodBudget, "scope", `"DEPARTMENT"`)), 0,
			[]string{"candidates[0].scope"}, []string{`"DEPARTMENT" is not allowed for budget (allowed: USER, TASK, SESSION)`}},
		{"bad memory type", travel, doc(withField(goodBudget, "memory_type", `"WISH"`)), 0,
			[]string{"candidates[0].memory_type", "candidates[0].memory_type"}, []string{`unknown "WISH" (allowed: FACT, PREFERENCE, CONSTRAINT, DECISION, EXPERIENCE, EVENT)`}},
		{"memory type does not fit predicate", travel, doc(withField(goodBudget, "memory_type", `"FACT"`)), 0,
			[]string{"candidates[0].memory_type"}, []string{`"FACT" does not fit predicate budget (allowed: CONSTRAINT)`}},
		{"confidence above 1", travel, doc(withField(goodBudget, "confidence", `1.5`)), 0,
			[]string{"candidates[0].confidence"}, []string{"1.5 is outside [0,1]"}},
		{"confidence negative", travel, doc(withField(goodBudget, "confidence", `-0.1`)), 0,
			[]string{"candidates[0].confidence"}, nil},
		{"confidence not a number", travel, doc(withField(goodBudget, "confidence", `"high"`)), 0,
			[]string{"candidates[0].confidence"}, nil},
		{"unknown predicate", travel, doc(withField(goodBudget, "predicate", `"budgett"`)), 0,
			[]string{"candidates[0].predicate"}, []string{`unknown "budgett" (allowed: budget, flight_type`}},
		{"bad enum object", travel, doc(`{"memory_type":"PREFERENCE","scope":"USER","subject":"user","predicate":"flight_type","object":"teleport","content":"x","confidence":0.9,"origin":"STATED"}`), 0,
			[]string{"candidates[0].object"}, []string{`unknown "teleport" for flight_type (allowed: direct, connecting, any)`}},
		{"bad money object", travel, doc(withField(goodBudget, "object", `"lots"`)), 0,
			[]string{"candidates[0].object"}, []string{`"lots" is not money such as "8000 CNY"`}},
		{"missing required", travel, doc(withField(withField(goodBudget, "origin", "-"), "content", "null")), 0,
			[]string{"candidates[0].content", "candidates[0].origin"}, []string{"required"}},
		{"bad origin", travel, doc(withField(goodBudget, "origin", `"GUESSED"`)), 0,
			[]string{"candidates[0].origin"}, []string{`unknown "GUESSED" (allowed: STATED, INFERRED)`}},
		{"unknown field", travel, doc(withField(goodBudget, "mood", `"happy"`)), 0,
			[]string{"candidates[0].mood"}, []string{"unknown field"}},
		{"bad state", cs, doc(withField(goodEvent, "attributes", `{"state":"VANISHED"}`)), 0,
			[]string{"candidates[0].attributes.state"}, []string{"unknown state VANISHED of Order (allowed: CREATED, PAID"}},
		{"bad entity type", cs, doc(withField(goodEvent, "entity_type", `"Parcel"`)), 0,
			[]string{"candidates[0].entity_type"}, []string{`unknown "Parcel" (allowed: User, Order, ServiceTicket)`}},
		{"event needs entity type", cs, doc(withField(goodEvent, "entity_type", `null`)), 0,
			[]string{"candidates[0].entity_type"}, nil},
		{"bad entity id", cs, doc(withField(goodEvent, "entity_id", `"1 2"`)), 0,
			[]string{"candidates[0].entity_id"}, []string{"does not match the Order id pattern"}},
		{"unknown relation type", cs, doc(withField(goodEvent, "relations", `[{"type":"OWNS","from_type":"User","from_id":"u1","to_type":"Order","to_id":"12345"}]`)), 0,
			[]string{"candidates[0].relations[0].type"}, []string{`unknown relationship "OWNS" (allowed: PLACED, OPENED, ABOUT, ASKED_ABOUT)`}},
		{"relation wrong direction", cs, doc(withField(goodEvent, "relations", `[{"type":"PLACED","from_type":"Order","from_id":"12345","to_type":"User","to_id":"u1"}]`)), 0,
			[]string{"candidates[0].relations[0].type"}, []string{"PLACED does not link Order to User (allowed: User PLACED Order)"}},
		{"relation missing id", cs, doc(withField(goodEvent, "relations", `[{"type":"PLACED","from_type":"User","from_id":"","to_type":"Order","to_id":"12345"}]`)), 0,
			[]string{"candidates[0].relations[0].from_id"}, nil},
		{"relations in a schema without relationships", mustBuiltin(t, "general"), doc(`{"memory_type":"PREFERENCE","scope":"USER","subject":"user","predicate":"prefers","object":"tea","content":"x","confidence":0.9,"origin":"STATED","relations":[{"type":"PLACED","from_type":"User","from_id":"u1","to_type":"Order","to_id":"1"}]}`), 0,
			[]string{"candidates[0].relations[0].type"}, []string{"defines no relationships"}},
		{"bad valid_from", cs, doc(withField(goodEvent, "valid_from", `"yesterday"`)), 0,
			[]string{"candidates[0].valid_from"}, []string{"RFC 3339"}},
		{"attribute type", travel, doc(withField(goodBudget, "attributes", `{"max":"ten"}`)), 0,
			[]string{"candidates[0].attributes.max"}, []string{"must be a number"}},
		{"second of two bad", travel, doc(goodBudget, withField(goodBudget, "confidence", "2")), 1,
			[]string{"candidates[1].confidence"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := tt.s.ParseCandidates(tt.raw)
			if len(got) != tt.n {
				t.Errorf("accepted %d candidates, want %d (errors %v)", len(got), tt.n, errs)
			}
			var fields, problems []string
			for _, e := range errs {
				fields = append(fields, e.Field)
				problems = append(problems, e.Problem)
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("error fields = %q, want %q (%v)", fields, tt.fields, errs)
			}
			all := strings.Join(problems, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q\ndo not contain %q", all, w)
				}
			}
		})
	}
}

func TestParseCandidatesValues(t *testing.T) {
	s := mustBuiltin(t, "customer_service")
	got, errs := s.ParseCandidates(doc(goodEvent))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	c := got[0]
	if c.EntityID != "12345" || c.Attributes["state"] != "NOT_RECEIVED" || len(c.Relations) != 1 || c.ValidFrom == nil || c.ValidUntil != nil {
		t.Errorf("parsed %+v", c)
	}
	// Nulls written by strict output are dropped, not kept as attributes.
	got, _ = mustBuiltin(t, "travel").ParseCandidates(doc(goodBudget))
	if _, ok := got[0].Attributes["min"]; ok || got[0].Attributes["max"] != 10000.0 {
		t.Errorf("attributes = %v", got[0].Attributes)
	}
}

func TestMemoryKey(t *testing.T) {
	s := mustBuiltin(t, "travel")
	user := memory.ScopeRef{Scope: memory.ScopeUser, UserID: "u1"}
	task := memory.ScopeRef{Scope: memory.ScopeTask, TaskID: "trip-1"}
	b8 := memory.Candidate{Scope: memory.ScopeUser, Subject: "user", Predicate: "budget", Object: "8000 CNY"}
	b10 := b8
	b10.Object = "10000 CNY"
	h1 := memory.Candidate{Scope: memory.ScopeUser, Subject: "User", Predicate: "hotel_preference", Object: "Pool"}
	h2 := h1
	h2.Object = "breakfast"
	h3 := h1
	h3.Object = " pool "
	uses1 := memory.Candidate{Scope: memory.ScopeDepartment, Subject: "department", Predicate: "uses", Object: "Flink 1.17", Attributes: map[string]any{"tool": "Flink"}}
	uses2 := uses1
	uses2.Object, uses2.Attributes = "Flink 1.18", map[string]any{"tool": "flink"}
	dept := memory.ScopeRef{Scope: memory.ScopeDepartment, DepartmentID: "d1"}

	if got := s.MemoryKey(b8, user); got != "USER:u1|user|budget" {
		t.Errorf("key = %q", got)
	}
	if s.MemoryKey(b8, user) != s.MemoryKey(b10, user) {
		t.Error("cardinality one: a new value must keep the key (and supersede)")
	}
	if s.MemoryKey(b10, task) == s.MemoryKey(b10, user) {
		t.Error("a task budget must not share the user's key")
	}
	if s.MemoryKey(h1, user) == s.MemoryKey(h2, user) {
		t.Error("cardinality many: different values need different keys")
	}
	if s.MemoryKey(h1, user) != s.MemoryKey(h3, user) {
		t.Error("values differing in case and space must share a key")
	}
	if s.MemoryKey(uses1, dept) != s.MemoryKey(uses2, dept) {
		t.Error("key_attribute: a new version of the same tool must keep the key")
	}
	if got := s.MemoryKey(b8, memory.ScopeRef{UserID: "u1"}); got != "USER:u1|user|budget" {
		t.Errorf("scope from candidate: %q", got)
	}
}

func TestMoney(t *testing.T) {
	for in, ok := range map[string]bool{"8000 CNY": true, "12.5 usd": true, "8000": false, "x CNY": false, "8000 YUAN": false, "-1 CNY": false} {
		if _, _, got := ParseMoney(in); got != ok {
			t.Errorf("ParseMoney(%q) ok = %v", in, got)
		}
	}
	if got := FormatMoney(8000, "CNY"); got != "8000 CNY" {
		t.Errorf("FormatMoney = %q", got)
	}
}

func TestEnumValue(t *testing.T) {
	s := mustBuiltin(t, "travel")
	p, _ := s.Predicate("flight_type")
	for in, want := range map[string]string{"直飞": "direct", "Direct Flights": "direct", "layovers": "connecting", "any": "any"} {
		if got, ok := p.EnumValue(in); !ok || got != want {
			t.Errorf("EnumValue(%q) = %q, %v", in, got, ok)
		}
	}
	if _, ok := p.EnumValue("teleport"); ok {
		t.Error("unknown alias accepted")
	}
}
