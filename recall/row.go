package recall

import (
	"database/sql/driver"
	"fmt"
	"reflect"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// The kinds of the recall statement's rows.
const (
	rowFact         = "fact"
	rowEvidence     = "evidence"
	rowSessionMatch = "session_match" // a session's keyword score (score), by id
	rowTask         = "task"          // the named task, as taskJSON in content
	rowSession      = "session"       // the named session, as sessionJSON in content
)

// recallRow is one row of the recall statement, read by column name (the
// statement's first arm names them, see buildSQL). A turn's row leaves the fact
// columns empty; its valid_from and observed_at are when it was said.
type recallRow struct {
	Kind string `col:"kind"`
	// Hits are the retrievers that found it: "src rank score" each (parseHits).
	Hits  string  `col:"hits"`
	Score float64 `col:"score"`
	ID    string  `col:"id"`

	MemoryKey    string     `col:"memory_key"`
	Revision     int        `col:"revision"`
	Scope        string     `col:"scope"`
	DepartmentID string     `col:"department_id"`
	UserID       string     `col:"user_id"`
	AgentID      string     `col:"agent_id"`
	SessionID    string     `col:"session_id"`
	TaskID       string     `col:"task_id"`
	MemoryType   string     `col:"memory_type"`
	Subject      string     `col:"subject"`
	Predicate    string     `col:"predicate"`
	Object       string     `col:"object"`
	Content      string     `col:"content"`
	EntityType   string     `col:"entity_type"`
	EntityID     string     `col:"entity_id"`
	Status       string     `col:"status"`
	Confidence   float64    `col:"confidence"`
	Importance   float64    `col:"importance"`
	ValidFrom    time.Time  `col:"valid_from"`
	ValidUntil   *time.Time `col:"valid_until"`
	ObservedAt   time.Time  `col:"observed_at"`
	ClosedAt     *time.Time `col:"closed_at"`
	// EvidenceIDs: a fact's latest three turns.
	EvidenceIDs []string `col:"evidence_ids"`
	Speaker     string   `col:"speaker"`
	// KeyID names the key the content is sealed with ('' = in the clear).
	KeyID string `col:"key_id"`
	// Stale: the turn backs a value superseded by as_of, and none in force then.
	Stale bool `col:"stale"`
}

func (r recallRow) fact(tenant string) factRow {
	return factRow{
		ID: r.ID, TenantID: tenant, MemoryKey: r.MemoryKey, Revision: r.Revision, Scope: memory.Scope(r.Scope),
		DepartmentID: r.DepartmentID, UserID: r.UserID, AgentID: r.AgentID, SessionID: r.SessionID, TaskID: r.TaskID,
		MemoryType: memory.MemoryType(r.MemoryType), Subject: r.Subject, Predicate: r.Predicate, Object: r.Object,
		Content: r.Content, EntityType: r.EntityType, EntityID: r.EntityID, Status: memory.FactStatus(r.Status),
		Confidence: r.Confidence, Importance: r.Importance, ValidFrom: r.ValidFrom, ValidUntil: r.ValidUntil,
		ObservedAt: r.ObservedAt, ClosedAt: r.ClosedAt, Evidence: r.EvidenceIDs,
	}
}

func (r recallRow) evidence(tenant string) evidenceRow {
	return evidenceRow{
		ID: r.ID, TenantID: tenant, Content: r.Content, Speaker: r.Speaker,
		UserID: r.UserID, DepartmentID: r.DepartmentID, AgentID: r.AgentID, SessionID: r.SessionID, TaskID: r.TaskID,
		OccurredAt: r.ValidFrom, Importance: r.Importance, Stale: r.Stale,
	}
}

// taskJSON is the named task's row: json_build_object keyed by the tasks
// table's column names.
type taskJSON struct {
	ID        string           `json:"id"`
	UserID    string           `json:"user_id"`
	Goal      string           `json:"goal"`
	State     memory.TaskState `json:"state"`
	Done      []string         `json:"done"`
	Todo      []string         `json:"todo"`
	NextStep  string           `json:"next_step"`
	LastError string           `json:"last_error"`
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
// their columns, col:"name") from a row's values by column name. Its map of
// columns to fields is made from the first row's columns.
type rowScanner[T any] struct {
	fields []int // by column: the field's index
}

// scan reads vals (named cols) into r. A column T has no field for is an error:
// the statement and the struct have drifted apart.
func (s *rowScanner[T]) scan(cols []string, vals []driver.Value, r *T) error {
	rv := reflect.ValueOf(r).Elem()
	if s.fields == nil {
		byName := map[string]int{}
		for i := range rv.NumField() {
			byName[rv.Type().Field(i).Tag.Get("col")] = i
		}
		s.fields = make([]int, len(cols))
		for i, c := range cols {
			f, ok := byName[c]
			if !ok {
				return fmt.Errorf("recall: the statement's column %q is not read", c)
			}
			s.fields[i] = f
		}
	}
	for i, v := range vals {
		f := rv.Field(s.fields[i])
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
