package recall

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"time"
)

// stmtParams are the parameters of recall's statements. The SQL names each by
// its tag (@tenant); bindNames numbers the names a text uses in the order it
// first uses them ($1, $2, …) and args gives their values in that order.
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
	// Span and Anchors: the turns next to the anchors (adjacentSQL).
	Span    int64  `param:"span"`
	Anchors string `param:"anchors"`
	// Turns: the turns whose similarity to the question is read (similarSQL).
	Turns string `param:"turns"`
	// Leaders and Limit: the best turns the feedback pass starts from and how
	// many turns it returns (feedbackSQL).
	Leaders string `param:"leaders"`
	Limit   int64  `param:"limit"`
}

// stmtParamIndex is the field of stmtParams of each name.
var stmtParamIndex = func() map[string]int {
	t := reflect.TypeFor[stmtParams]()
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("param")] = i
	}
	return m
}()

// paramRe finds @name; "@@" (the text-search match) is no parameter.
var paramRe = regexp.MustCompile(`@@|@([a-z][a-z_]*)`)

// bindNames replaces each @name in sql by $n, n counting the names in the order
// of their first use, and returns the names in that order. A name stmtParams
// has not is a mistake in the statement's text: it panics.
func bindNames(sql string) (string, []string) {
	var names []string
	num := map[string]int{}
	out := paramRe.ReplaceAllStringFunc(sql, func(m string) string {
		if m == "@@" {
			return m
		}
		name := m[1:]
		if _, ok := stmtParamIndex[name]; !ok {
			panic(fmt.Sprintf("recall: the statement names an unknown parameter %s", m))
		}
		n, ok := num[name]
		if !ok {
			names = append(names, name)
			n = len(names)
			num[name] = n
		}
		return "$" + strconv.Itoa(n)
	})
	return out, names
}

// args are the values of the named parameters, in order.
func (sp stmtParams) args(names []string) []any {
	v := reflect.ValueOf(sp)
	out := make([]any, len(names))
	for i, name := range names {
		out[i] = v.Field(stmtParamIndex[name]).Interface()
	}
	return out
}
