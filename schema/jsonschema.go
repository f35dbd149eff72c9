package schema

import (
	"slices"
	"sort"

	"github.com/engramhq/engram/memory"
)

// commonAttributes are attributes any candidate may carry, whatever its predicate:
// the entity state of an event, a resolved date and the phrase it came from, and the
// mark of a negated statement no predicate mapping could express.
var commonAttributes = []*Attribute{
	{Name: "state", Type: ValueString, Description: "the entity's state, one of its entity type's states"},
	{Name: "date", Type: ValueDate, Description: "a date the statement refers to, resolved against the event time, YYYY-MM-DD"},
	{Name: "time_text", Type: ValueString, Description: "the time phrase as said, e.g. 昨天 or next Friday"},
	{Name: "negated", Type: ValueBool, Description: "true when the speaker negated the statement"},
}

// JSONSchema returns the JSON Schema of an extractor's output document
// {"candidates":[…]} under this schema. It is compatible with OpenAI's strict
// json_schema mode: every object closes with additionalProperties false and lists all
// its properties as required, optional ones being nullable. Attributes therefore form
// a closed object of every attribute the schema knows, unused ones null.
func (s *Schema) JSONSchema() map[string]any {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	nullable := func(t, desc string) map[string]any {
		return map[string]any{"type": []any{t, "null"}, "description": desc}
	}
	enum := func(desc string, vals []string) map[string]any {
		return map[string]any{"type": "string", "enum": toAny(vals), "description": desc}
	}

	var scopes []string
	for _, sc := range memory.Scopes {
		for _, p := range s.AllPredicates() {
			if p.AllowsScope(sc) {
				scopes = append(scopes, string(sc))
				break
			}
		}
	}
	entityType := map[string]any{"type": "null", "description": "this schema has no entity types"}
	if names := entityList(s); len(names) > 0 {
		entityType = map[string]any{
			"type": []any{"string", "null"}, "enum": append(toAny(names), nil),
			"description": "the schema entity the candidate is about, or null",
		}
	}
	relType := str("a relationship type of the schema")
	if types := (&validator{s: s}).relTypes(); len(types) > 0 {
		relType = enum("a relationship type of the schema", types)
	}
	endType := str("an entity type of the schema")
	if names := entityList(s); len(names) > 0 {
		endType = enum("an entity type of the schema", names)
	}
	relation := object(map[string]any{
		"type":      relType,
		"from_type": endType,
		"from_id":   str("id of the entity the edge starts at"),
		"to_type":   endType,
		"to_id":     str("id of the entity the edge points to"),
	}, relationFields)

	candidate := object(map[string]any{
		"memory_type":       enum("kind of memory; EVENT for a schema event type", toStrings(s.MemoryTypes)),
		"scope":             enum("who the memory belongs to; must be allowed for the predicate", scopes),
		"subject":           str(`who or what it is about: "user" (or, when the prompt names the speaker of a conversation between several people, that speaker's name), or "Type:id" for an entity, e.g. "Order:12345"`),
		"predicate":         enum("a predicate or event type name of the schema", s.predicateNames()),
		"object":            str(`the value, normalised: an enum value, "8000 CNY" for money, YYYY-MM-DD for a date; for an event its resulting state`),
		"content":           str("one readable sentence stating the memory"),
		"entity_type":       entityType,
		"entity_id":         nullable("string", "id of the entity, or null when unknown"),
		"attributes":        s.attributesSchema(),
		"confidence":        map[string]any{"type": "number", "minimum": 0, "maximum": 1, "description": "0 to 1; lower when guessed"},
		"origin":            enum("STATED when the speaker said it, INFERRED when concluded from what they said", []string{string(memory.OriginStated), string(memory.OriginInferred)}),
		"retraction":        map[string]any{"type": "boolean", "description": "true when the speaker withdraws an earlier statement"},
		"valid_from":        nullable("string", "RFC 3339 time from which it holds, or null"),
		"valid_until":       nullable("string", "RFC 3339 time until which it holds, or null"),
		"relations":         map[string]any{"type": "array", "items": relation, "description": "typed edges between entities"},
		"extractor":         nullable("string", "leave null; Engram records the extractor"),
		"extractor_version": nullable("string", "leave null; Engram records the extractor version"),
	}, candidateFields)

	doc := object(map[string]any{
		"candidates": map[string]any{"type": "array", "items": candidate},
	}, []string{"candidates"})
	doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	doc["title"] = s.Name
	return doc
}

func (s *Schema) attributesSchema() map[string]any {
	types := map[string]map[string]bool{}
	descs := map[string]string{}
	addAll := func(list []*Attribute) {
		for _, a := range list {
			if types[a.Name] == nil {
				types[a.Name] = map[string]bool{}
				descs[a.Name] = a.Description
			}
			types[a.Name][jsonType(a.Type)] = true
		}
	}
	addAll(commonAttributes)
	for _, p := range s.AllPredicates() {
		addAll(p.Attributes)
	}
	for _, e := range s.Entities {
		addAll(e.Attributes)
	}
	names := make([]string, 0, len(types))
	props := map[string]any{}
	for n, ts := range types {
		names = append(names, n)
		var t []any
		for _, k := range []string{"string", "number", "boolean"} {
			if ts[k] {
				t = append(t, k)
			}
		}
		props[n] = map[string]any{"type": append(t, "null"), "description": descs[n]}
	}
	sort.Strings(names)
	o := object(props, names)
	o["type"] = []any{"object", "null"}
	o["description"] = "attributes of the memory; null for those that do not apply"
	return o
}

func jsonType(t ValueType) string {
	switch t {
	case ValueNumber:
		return "number"
	case ValueBool:
		return "boolean"
	}
	return "string"
}

// object is a closed JSON Schema object whose properties are all required, in order.
func object(props map[string]any, order []string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             toAny(slices.Clone(order)),
		"additionalProperties": false,
	}
}

func toAny[T any](l []T) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

func toStrings[T ~string](l []T) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = string(v)
	}
	return out
}
