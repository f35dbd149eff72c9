package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
)

// candidateFields are the JSON fields of a candidate, in the order JSONSchema lists
// them; any other field is rejected.
var candidateFields = []string{
	"memory_type", "scope", "subject", "predicate", "object", "content",
	"entity_type", "entity_id", "attributes", "confidence", "origin", "retraction",
	"valid_from", "valid_until", "relations", "extractor", "extractor_version",
}

var requiredFields = []string{"memory_type", "scope", "subject", "predicate", "object", "content", "confidence", "origin"}

var relationFields = []string{"type", "from_type", "from_id", "to_type", "to_id"}

// ParseCandidates parses an extractor's raw document {"candidates":[…]} and validates
// every candidate against the schema. It returns the candidates that passed and one
// FieldError per problem, each naming its path (candidates[1].scope) and, for enums,
// the allowed values, so the errors can be given back to an LLM for another attempt.
// Broken JSON gives a single error on field "$". JSON null counts as absent, because
// strict structured output writes optional fields as null.
func (s *Schema) ParseCandidates(raw []byte) ([]memory.Candidate, []memory.FieldError) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, []memory.FieldError{{Field: "$", Problem: "invalid JSON: " + err.Error()}}
	}
	var errs []memory.FieldError
	for k := range doc {
		if k != "candidates" {
			errs = append(errs, memory.FieldError{Field: k, Problem: "unknown field (allowed: candidates)"})
		}
	}
	list, ok := doc["candidates"]
	if !ok || isNull(list) {
		return nil, append(errs, memory.FieldError{Field: "candidates", Problem: "required"})
	}
	var items []json.RawMessage
	if err := json.Unmarshal(list, &items); err != nil {
		return nil, append(errs, memory.FieldError{Field: "candidates", Problem: "must be an array of objects"})
	}
	var out []memory.Candidate
	for i, item := range items {
		v := &validator{s: s, path: fmt.Sprintf("candidates[%d]", i)}
		if c, ok := v.candidate(item); ok {
			out = append(out, c)
		}
		errs = append(errs, v.errs...)
	}
	return out, errs
}

func isNull(r json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(r), []byte("null")) }

type validator struct {
	s    *Schema
	path string
	errs []memory.FieldError
}

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, memory.FieldError{Field: v.path + "." + field, Problem: fmt.Sprintf(format, args...)})
}

// str decodes an optional string field; ok is false when absent, null or not a string.
func (v *validator) str(m map[string]json.RawMessage, field string) (string, bool) {
	r, present := m[field]
	if !present || isNull(r) {
		return "", false
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		v.add(field, "must be a string")
		return "", false
	}
	return s, true
}

func (v *validator) candidate(item json.RawMessage) (memory.Candidate, bool) {
	var c memory.Candidate
	before := len(v.errs)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(item, &m); err != nil || m == nil {
		v.errs = append(v.errs, memory.FieldError{Field: v.path, Problem: "must be an object"})
		return c, false
	}
	unknown := make([]string, 0)
	for k := range m {
		if !slices.Contains(candidateFields, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		v.add(k, "unknown field (allowed: %s)", strings.Join(candidateFields, ", "))
	}
	for _, f := range requiredFields {
		if r, ok := m[f]; !ok || isNull(r) {
			v.add(f, "required")
		}
	}

	mt, _ := v.str(m, "memory_type")
	c.MemoryType = memory.MemoryType(mt)
	sc, _ := v.str(m, "scope")
	c.Scope = memory.Scope(sc)
	c.Subject, _ = v.str(m, "subject")
	c.Predicate, _ = v.str(m, "predicate")
	c.Object, _ = v.str(m, "object")
	c.Content, _ = v.str(m, "content")
	c.EntityType, _ = v.str(m, "entity_type")
	c.EntityID, _ = v.str(m, "entity_id")
	o, _ := v.str(m, "origin")
	c.Origin = memory.Origin(o)
	c.Extractor, _ = v.str(m, "extractor")
	c.Version, _ = v.str(m, "extractor_version")
	if r, ok := m["confidence"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &c.Confidence); err != nil {
			v.add("confidence", "must be a number in [0,1]")
		} else if c.Confidence < 0 || c.Confidence > 1 {
			v.add("confidence", "%v is outside [0,1]", c.Confidence)
		}
	}
	if r, ok := m["retraction"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &c.Retraction); err != nil {
			v.add("retraction", "must be true or false")
		}
	}
	c.ValidFrom = v.time(m, "valid_from")
	c.ValidUntil = v.time(m, "valid_until")
	if c.ValidFrom != nil && c.ValidUntil != nil && !c.ValidUntil.After(*c.ValidFrom) {
		v.add("valid_until", "must be after valid_from")
	}
	if r, ok := m["attributes"]; ok && !isNull(r) {
		var attrs map[string]any
		if err := json.Unmarshal(r, &attrs); err != nil {
			v.add("attributes", "must be an object")
		}
		for k, a := range attrs {
			if a != nil { // strict output writes every known attribute, unused ones null
				if c.Attributes == nil {
					c.Attributes = map[string]any{}
				}
				c.Attributes[k] = a
			}
		}
	}
	if r, ok := m["relations"]; ok && !isNull(r) {
		c.Relations = v.relations(r)
	}

	if c.Subject == "" && m["subject"] != nil && !isNull(m["subject"]) {
		v.add("subject", "must not be empty")
	}
	if c.Content == "" && m["content"] != nil && !isNull(m["content"]) {
		v.add("content", "must not be empty")
	}
	if c.MemoryType != "" && !slices.Contains(v.s.MemoryTypes, c.MemoryType) {
		v.add("memory_type", "unknown %q (allowed: %s)", c.MemoryType, allowed(v.s.MemoryTypes))
	}
	if c.Origin != "" && !c.Origin.Valid() {
		v.add("origin", "unknown %q (allowed: STATED, INFERRED)", c.Origin)
	}
	v.semantics(&c)
	return c, len(v.errs) == before
}

func (v *validator) time(m map[string]json.RawMessage, field string) *time.Time {
	s, ok := v.str(m, field)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		v.add(field, "%q is not an RFC 3339 time such as 2024-05-01T00:00:00Z", s)
		return nil
	}
	return &t
}

func (v *validator) relations(r json.RawMessage) []memory.Relation {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(r, &items); err != nil {
		v.add("relations", "must be an array of objects")
		return nil
	}
	var out []memory.Relation
	outer := v.path
	for i, m := range items {
		v.path = fmt.Sprintf("%s.relations[%d]", outer, i)
		for k := range m {
			if !slices.Contains(relationFields, k) {
				v.add(k, "unknown field (allowed: %s)", strings.Join(relationFields, ", "))
			}
		}
		var rel memory.Relation
		vals := map[string]*string{"type": &rel.Type, "from_type": &rel.FromType, "from_id": &rel.FromID, "to_type": &rel.ToType, "to_id": &rel.ToID}
		for _, f := range relationFields {
			val, ok := v.str(m, f)
			if !ok || strings.TrimSpace(val) == "" {
				v.add(f, "required")
			}
			*vals[f] = val
		}
		v.relation(rel)
		out = append(out, rel)
	}
	v.path = outer
	return out
}

func (v *validator) relation(rel memory.Relation) {
	types := v.relTypes()
	if rel.Type == "" {
		return
	}
	if !slices.Contains(types, rel.Type) {
		if len(types) == 0 {
			v.add("type", "schema %s defines no relationships", v.s.Name)
		} else {
			v.add("type", "unknown relationship %q (allowed: %s)", rel.Type, strings.Join(types, ", "))
		}
		return
	}
	if _, ok := v.s.Relationship(rel.Type, rel.FromType, rel.ToType); !ok {
		var ends []string
		for _, r := range v.s.Relationships {
			if r.Type == rel.Type {
				ends = append(ends, r.From+" "+r.Type+" "+r.To)
			}
		}
		v.add("type", "%s does not link %s to %s (allowed: %s)", rel.Type, rel.FromType, rel.ToType, strings.Join(ends, ", "))
		return
	}
	for _, end := range []struct{ field, typ, id string }{{"from_id", rel.FromType, rel.FromID}, {"to_id", rel.ToType, rel.ToID}} {
		if e, ok := v.s.entities[end.typ]; ok && end.id != "" && !e.ValidID(end.id) {
			v.add(end.field, "%q does not match the %s id pattern %s", end.id, end.typ, e.IDPattern)
		}
	}
}

func (v *validator) relTypes() []string {
	var out []string
	for _, r := range v.s.Relationships {
		if !slices.Contains(out, r.Type) {
			out = append(out, r.Type)
		}
	}
	return out
}

// semantics checks what depends on the predicate: its memory type, scopes, object
// value, entity and state.
func (v *validator) semantics(c *memory.Candidate) {
	if c.Predicate == "" {
		return
	}
	p, ok := v.s.predicates[c.Predicate]
	if !ok {
		v.add("predicate", "unknown %q (allowed: %s)", c.Predicate, strings.Join(v.s.predicateNames(), ", "))
		return
	}
	if c.MemoryType != "" && c.MemoryType != p.MemoryType {
		v.add("memory_type", "%q does not fit predicate %s (allowed: %s)", c.MemoryType, p.Name, p.MemoryType)
	}
	if c.Scope != "" && !p.AllowsScope(c.Scope) {
		if !c.Scope.Valid() {
			v.add("scope", "unknown %q (allowed for %s: %s)", c.Scope, p.Name, allowed(p.Scopes))
		} else {
			v.add("scope", "%q is not allowed for %s (allowed: %s)", c.Scope, p.Name, allowed(p.Scopes))
		}
	}
	// A retraction names what it withdraws; its object may be empty ("forget my budget").
	if !(c.Retraction && c.Object == "") && p.Event == nil {
		if problem := v.s.checkObject(p, c.Object); problem != "" {
			v.add("object", "%s", problem)
		}
	}
	v.entity(c, p)
	keys := make([]string, 0, len(c.Attributes))
	for k := range c.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v.attribute(p, c, k, c.Attributes[k])
	}
}

func (v *validator) entity(c *memory.Candidate, p *Predicate) {
	if p.Event != nil && c.EntityType == "" {
		v.add("entity_type", "required for event %s (allowed: %s)", p.Name, p.Event.Entity)
		return
	}
	if c.EntityType == "" {
		if c.EntityID != "" {
			v.add("entity_type", "required when entity_id is set (allowed: %s)", allowed(entityList(v.s)))
		}
		return
	}
	e, ok := v.s.entities[c.EntityType]
	if !ok {
		v.add("entity_type", "unknown %q (allowed: %s)", c.EntityType, allowed(entityList(v.s)))
		return
	}
	if p.Event != nil && c.EntityType != p.Event.Entity {
		v.add("entity_type", "%q does not fit event %s (allowed: %s)", c.EntityType, p.Name, p.Event.Entity)
	}
	if c.EntityID != "" && !e.ValidID(c.EntityID) {
		v.add("entity_id", "%q does not match the %s id pattern %s", c.EntityID, e.Name, e.IDPattern)
	}
}

func (v *validator) attribute(p *Predicate, c *memory.Candidate, name string, val any) {
	field := "attributes." + name
	if name == "state" {
		e, ok := v.s.entities[c.EntityType]
		st, isStr := val.(string)
		switch {
		case !ok && (p.Event != nil || c.EntityType != ""):
			// the entity type itself is wrong or missing, and already reported
		case !ok || len(e.States) == 0:
			v.add(field, "a state needs an entity_type with states")
		case !isStr || !e.HasState(st):
			v.add(field, "unknown state %v of %s (allowed: %s)", val, e.Name, allowed(e.States))
		}
		return
	}
	a, ok := p.Attribute(name)
	if !ok {
		if e, ok2 := v.s.entities[c.EntityType]; ok2 {
			a, ok = findAttr(e.Attributes, name)
		}
	}
	if !ok {
		// Unknown attributes are kept: the schema report suggests schema changes from them.
		return
	}
	switch a.Type {
	case ValueNumber:
		if _, isNum := val.(float64); !isNum {
			v.add(field, "must be a number")
		}
	case ValueBool:
		if _, isBool := val.(bool); !isBool {
			v.add(field, "must be true or false")
		}
	case ValueEnum:
		if s, _ := val.(string); !slices.Contains(a.Enum, s) {
			v.add(field, "unknown %v (allowed: %s)", val, allowed(a.Enum))
		}
	default:
		s, isStr := val.(string)
		if !isStr {
			v.add(field, "must be a string")
		} else if a.Type == ValueDate && !validDate(s) {
			v.add(field, "%q is not a date such as 2024-05-01", s)
		}
	}
}

func findAttr(list []*Attribute, name string) (*Attribute, bool) {
	for _, a := range list {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

func validDate(s string) bool {
	if _, err := time.Parse(time.DateOnly, s); err == nil {
		return true
	}
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

// checkObject returns what is wrong with obj as a value of p, or "".
func (s *Schema) checkObject(p *Predicate, obj string) string {
	if strings.TrimSpace(obj) == "" {
		return "must not be empty"
	}
	switch p.ValueType {
	case ValueEnum:
		if !slices.Contains(p.Enum, obj) {
			return fmt.Sprintf("unknown %q for %s (allowed: %s)", obj, p.Name, allowed(p.Enum))
		}
	case ValueNumber:
		if _, err := strconv.ParseFloat(obj, 64); err != nil {
			return fmt.Sprintf("%q is not a number", obj)
		}
	case ValueMoney:
		if _, _, ok := ParseMoney(obj); !ok {
			return fmt.Sprintf("%q is not money such as \"8000 %s\"", obj, p.Currency)
		}
	case ValueBool:
		if obj != "true" && obj != "false" {
			return fmt.Sprintf("%q is not a bool (allowed: true, false)", obj)
		}
	case ValueDate:
		if !validDate(obj) {
			return fmt.Sprintf("%q is not a date such as 2024-05-01", obj)
		}
	case ValueEntityRef:
		typ, id, ok := strings.Cut(obj, ":")
		e, known := s.entities[typ]
		if !ok || typ != p.Entity || !known || !e.ValidID(id) {
			return fmt.Sprintf("%q is not a reference such as \"%s:<id>\"", obj, p.Entity)
		}
	}
	return ""
}

// predicateNames lists predicates then event types, as JSONSchema enumerates them.
func (s *Schema) predicateNames() []string {
	var out []string
	for _, p := range s.AllPredicates() {
		out = append(out, p.Name)
	}
	return out
}
