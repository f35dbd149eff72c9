package recall

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"time"
)

// stmtParams are the recall statement's parameters. The SQL names each by its
// tag (@tenant); bindNames numbers them in this order ($1 is @tenant), and args
// gives their values in the same order. A part that does not read a value still
// names it, so every statement of an engine binds the same list (known_at only
// the known-at statements, which is why it is last).
type stmtParams struct {
	Tenant string `param:"tenant"`
	User   string `param:"user"`
	// UserVisible: the USER scope is visible (the user's own facts and turns).
	UserVisible bool `param:"user_visible"`
	// Session and Task are the named session and task when their scopes are
	// visible ('' = none).
	Session string `param:"session"`
	Task    string `param:"task"`
	// TenantVisible: the TENANT scope is visible.
	TenantVisible bool `param:"tenant_visible"`
	// Department and Agent are the principal's when their scopes are visible
	// ('' = none).
	Department string    `param:"department"`
	Agent      string    `param:"agent"`
	AsOf       time.Time `param:"as_of"`
	// QueryVector is the question's embedding as text (nil = none).
	QueryVector any `param:"query_vector"`
	// TSQuery is the question's words as a to_tsquery text (OR).
	TSQuery string `param:"tsquery"`
	// Predicates … EntityStates are what the parser recognised, as text[]
	// literals (storage.TextArray).
	Predicates   string `param:"predicates"`
	EntityIDs    string `param:"entity_ids"`
	MemoryTypes  string `param:"memory_types"`
	EntityTypes  string `param:"entity_types"`
	EntityStates string `param:"entity_states"`
	// GraphHops bounds the graph walk; SpeakerType is the entity it never walks
	// through.
	GraphHops   int64  `param:"graph_hops"`
	SpeakerType string `param:"speaker_type"`
	// StructuredTask is the task named by the request, whatever the scopes
	// ('' = none): the structured retriever prefers its facts.
	StructuredTask string `param:"structured_task"`
	// Run* switch a retriever on.
	RunStructured bool `param:"run_structured"`
	RunGraph      bool `param:"run_graph"`
	RunSemantic   bool `param:"run_semantic"`
	RunKeyword    bool `param:"run_keyword"`
	// KnownAt is the transaction time of a known-at recall.
	KnownAt time.Time `param:"known_at"`
}

// stmtParamIndex numbers stmtParams' names from 1 ($n).
var stmtParamIndex = func() map[string]int {
	t := reflect.TypeFor[stmtParams]()
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("param")] = i + 1
	}
	return m
}()

// paramRe finds @name; "@@" (the text-search match) is no parameter.
var paramRe = regexp.MustCompile(`@@|@([a-z][a-z_]*)`)

// bindNames replaces each @name in sql by its $n and returns how many
// parameters the text binds (the highest n). A name stmtParams has not is a
// mistake in the statement's text: it panics.
func bindNames(sql string) (string, int) {
	n := 0
	out := paramRe.ReplaceAllStringFunc(sql, func(m string) string {
		if m == "@@" {
			return m
		}
		i, ok := stmtParamIndex[m[1:]]
		if !ok {
			panic(fmt.Sprintf("recall: the statement names an unknown parameter %s", m))
		}
		n = max(n, i)
		return "$" + strconv.Itoa(i)
	})
	return out, n
}

// args are the values of the first n parameters, in order.
func (sp stmtParams) args(n int) []any {
	v := reflect.ValueOf(sp)
	out := make([]any, n)
	for i := range n {
		out[i] = v.Field(i).Interface()
	}
	return out
}
