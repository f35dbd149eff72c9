package recall

import (
	"database/sql/driver"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/storage"
)

// The kinds of the recall statement's rows.
const (
	rowFact         = "fact"
	rowEvidence     = "evidence"
	rowSessionMatch = "session_match" // a session's keyword score (score), by id
	rowTask         = "task"          // the named task, as TaskState's JSON in content
	rowSession      = "session"       // the named session, as sessionJSON in content
)

// recallRow is one row of the recall statement, read by column name (the
// statement's first arm names them, see rowsSQL): a fact's columns are
// factRow's (its bun tags), a turn's the same with the fact columns empty (its
// valid_from and observed_at are when it was said).
type recallRow struct {
	Kind string `col:"kind"`
	// Hits are the retrievers that found it: "src rank score" each (parseHits).
	Hits  string  `col:"hits"`
	Score float64 `col:"score"`
	factRow
	Speaker string `col:"speaker"`
	// KeyID names the key the content is sealed with ('' = in the clear).
	KeyID string `col:"key_id"`
	// Stale: the turn backs a value superseded by as_of, and none in force then.
	Stale bool `col:"stale"`
}

func (r recallRow) fact(tenant string) factRow {
	f := r.factRow
	f.TenantID = tenant
	return f
}

func (r recallRow) evidence(tenant string) evidenceRow {
	return evidenceRow{
		ID: r.ID, TenantID: tenant, Content: r.Content, Speaker: r.Speaker,
		UserID: r.UserID, DepartmentID: r.DepartmentID, AgentID: r.AgentID, SessionID: r.SessionID, TaskID: r.TaskID,
		OccurredAt: r.ValidFrom, Importance: r.Importance, Stale: r.Stale,
	}
}

// sessionJSON is the named session's row, keyed by the sessions table's column
// names.
type sessionJSON struct {
	ID      string         `json:"id"`
	UserID  string         `json:"user_id"`
	Recent  []storage.Turn `json:"recent"`
	Summary string         `json:"summary"`
}

// rowScanner sets the fields of a T (a struct whose fields are tagged with
// their columns, col:"name", or bun:"name" in an embedded row type) from a
// row's values by column name. Its map of columns to fields is made from the
// first row's columns.
type rowScanner[T any] struct {
	fields [][]int // by column: the field's index path
}

// scan reads vals (named cols) into r. A column T has no field for is an error:
// the statement and the struct have drifted apart.
func (s *rowScanner[T]) scan(cols []string, vals []driver.Value, r *T) error {
	rv := reflect.ValueOf(r).Elem()
	if s.fields == nil {
		byName := map[string][]int{}
		for _, f := range reflect.VisibleFields(rv.Type()) {
			name := f.Tag.Get("col")
			if name == "" {
				name, _, _ = strings.Cut(f.Tag.Get("bun"), ",")
			}
			if name != "" && !f.Anonymous {
				byName[name] = f.Index
			}
		}
		s.fields = make([][]int, len(cols))
		for i, c := range cols {
			f, ok := byName[c]
			if !ok {
				return fmt.Errorf("recall: the statement's column %q is not read", c)
			}
			s.fields[i] = f
		}
	}
	for i, v := range vals {
		f := rv.FieldByIndex(s.fields[i])
		switch f.Kind() {
		case reflect.String:
			f.SetString(asString(v))
		case reflect.Int:
			f.SetInt(int64(asInt(v)))
		case reflect.Float64:
			f.SetFloat(asFloat(v))
		case reflect.Bool:
			f.SetBool(asBool(v))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(asTime(v)))
		case reflect.Pointer: // *time.Time
			f.Set(reflect.ValueOf(asTimePtr(v)))
		case reflect.Slice: // []string
			f.Set(reflect.ValueOf(parseUUIDArray(asString(v))))
		default:
			return fmt.Errorf("recall: cannot read column %q into %s", cols[i], f.Type())
		}
	}
	return nil
}

// parseUUIDArray reads a '{a,b}' literal of values that need no quoting.
func parseUUIDArray(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func asString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func asInt(v driver.Value) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func asFloat(v driver.Value) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case []byte:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	}
	return 0
}

func asTime(v driver.Value) time.Time {
	if t, ok := v.(time.Time); ok {
		return t
	}
	return time.Time{}
}

func asTimePtr(v driver.Value) *time.Time {
	if t, ok := v.(time.Time); ok {
		return &t
	}
	return nil
}

func asBool(v driver.Value) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x == "t" || x == "true"
	case []byte:
		return string(x) == "t" || string(x) == "true"
	}
	return false
}
