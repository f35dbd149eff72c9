package schema

import (
	"fmt"
	"strings"
)

// Prompt describes the schema for an LLM: memory types, entities and their states,
// relationships, event types and predicates with their value types, allowed scopes
// and examples. It says what may be written; the JSON Schema says how.
func (s *Schema) Prompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Domain schema %q version %d.", s.Name, s.Version)
	if s.Description != "" {
		b.WriteString(" " + strings.TrimSpace(s.Description))
	}
	b.WriteString("\n\nExtract only memories this schema allows. Memory types: ")
	b.WriteString(allowed(s.MemoryTypes))
	b.WriteString(".\nScopes: TENANT (whole organisation), DEPARTMENT (a team), USER (the person, for all tasks), " +
		"AGENT, SESSION (this conversation), TASK (this task only, e.g. \"this trip\"). " +
		"Use the narrowest scope the speaker means; \"from now on\"/\"以后\" means USER, \"this time\"/\"这次\" means TASK.\n" +
		"origin is STATED when the speaker said it, INFERRED when you concluded it; inferred memories get lower confidence.\n" +
		"Set retraction true when the speaker withdraws something (\"forget that\", \"不再\").\n" +
		"Resolve relative times (yesterday, 昨天, next Friday) against the event time.\n")

	if len(s.Entities) > 0 {
		b.WriteString("\nEntities:\n")
		for _, e := range s.Entities {
			fmt.Fprintf(&b, "- %s: %s", e.Name, oneLine(e.Description))
			if len(e.States) > 0 {
				fmt.Fprintf(&b, " States: %s.", strings.Join(e.States, ", "))
			}
			if len(e.Attributes) > 0 {
				var as []string
				for _, a := range e.Attributes {
					as = append(as, a.Name+" ("+string(a.Type)+")")
				}
				fmt.Fprintf(&b, " Attributes: %s.", strings.Join(as, ", "))
			}
			b.WriteString("\n")
		}
	}
	if len(s.Relationships) > 0 {
		b.WriteString("\nRelationships:\n")
		for _, r := range s.Relationships {
			fmt.Fprintf(&b, "- %s %s %s", r.From, r.Type, r.To)
			if r.Description != "" {
				b.WriteString(": " + oneLine(r.Description))
			}
			b.WriteString("\n")
		}
	}
	if len(s.EventTypes) > 0 {
		b.WriteString("\nEvent types (memory_type EVENT, predicate = event type, subject \"Type:id\", object = resulting state):\n")
		for _, e := range s.EventTypes {
			fmt.Fprintf(&b, "- %s about %s", e.Name, e.Entity)
			if e.State != "" {
				fmt.Fprintf(&b, " → state %s", e.State)
			}
			fmt.Fprintf(&b, ": %s Scopes: %s.%s\n", oneLine(e.Description), allowed(e.Scopes), assertedBy(e.AssertedBy))
			writeExamples(&b, e.Examples)
		}
	}
	b.WriteString("\nPredicates:\n")
	for _, p := range s.Predicates {
		fmt.Fprintf(&b, "- %s (%s, %s", p.Name, p.MemoryType, p.ValueType)
		if len(p.Enum) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(p.Enum, "|"))
		}
		if p.ValueType == ValueMoney {
			fmt.Fprintf(&b, ", e.g. \"8000 %s\"", p.Currency)
		}
		if p.Cardinality == Many {
			b.WriteString(", several values allowed")
		}
		fmt.Fprintf(&b, "): %s Scopes: %s, default %s.", oneLine(p.Description), allowed(p.Scopes), p.DefaultScope)
		if len(p.Attributes) > 0 {
			var as []string
			for _, a := range p.Attributes {
				as = append(as, a.Name)
			}
			fmt.Fprintf(&b, " Attributes: %s.", strings.Join(as, ", "))
		}
		b.WriteString(assertedBy(p.AssertedBy))
		b.WriteString("\n")
		writeExamples(&b, p.Examples)
	}
	return b.String()
}

// assertedBy names who may assert a key when it is not the user alone (the
// default, left unsaid so the prompts of user-only schemas do not change).
func assertedBy(actors []string) string {
	if len(actors) == 0 || (len(actors) == 1 && actors[0] == "USER") {
		return ""
	}
	return " Asserted by: " + strings.Join(actors, ", ") + "."
}

func writeExamples(b *strings.Builder, xs []Example) {
	for _, x := range xs {
		fmt.Fprintf(b, "    e.g. %q", x.Text)
		var parts []string
		if x.Object != "" {
			parts = append(parts, "object "+x.Object)
		}
		if x.Scope != "" {
			parts = append(parts, "scope "+string(x.Scope))
		}
		if x.Origin != "" {
			parts = append(parts, string(x.Origin))
		}
		if x.Note != "" {
			parts = append(parts, x.Note)
		}
		if len(parts) > 0 {
			b.WriteString(" → " + strings.Join(parts, ", "))
		}
		b.WriteString("\n")
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
