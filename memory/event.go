package memory

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// DefaultSchema is the schema an event is read with when neither the event nor the
// deployment (ENGRAM_SCHEMA) names one.
const DefaultSchema = "general"

// MaxContentBytes bounds one event's text.
const MaxContentBytes = 64 << 10

// Default actor and event types of an event that names none.
const (
	DefaultActorType = "USER"
	DefaultEventType = "MESSAGE"
)

// ActorTypes lists who may produce an event. What the user says is a source of
// the user's memory; what the agent, the system or a tool says is kept as
// evidence, and becomes memory only for the keys a schema lets it assert
// (schema predicates' asserted_by).
var ActorTypes = []string{"USER", "AGENT", "SYSTEM", "TOOL"}

// EventStatus is where an event is in the write path.
type EventStatus string

const (
	EventReceived      EventStatus = "RECEIVED"       // stored, no write has started
	EventProcessing    EventStatus = "PROCESSING"     // its MemoryWrite runs
	EventCommitted     EventStatus = "COMMITTED"      // every candidate is decided and applied
	EventPendingReview EventStatus = "PENDING_REVIEW" // a candidate waits for a reviewer
	EventUnparsed      EventStatus = "UNPARSED"       // extraction never produced valid candidates
	EventFailed        EventStatus = "FAILED"
)

// EventStatuses lists every status the events table accepts.
var EventStatuses = []EventStatus{EventReceived, EventProcessing, EventCommitted, EventPendingReview, EventUnparsed, EventFailed}

func (s EventStatus) Valid() bool { return contains(EventStatuses, s) }

// IngestEvent is one event an agent sends: what the API accepts and the write path
// records.
type IngestEvent struct {
	TenantID       string          `json:"tenant_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	ActorType      string          `json:"actor_type"` // USER, AGENT, SYSTEM, TOOL
	ActorID        string          `json:"actor_id,omitempty"`
	UserID         string          `json:"user_id"`
	DepartmentID   string          `json:"department_id,omitempty"`
	AgentID        string          `json:"agent_id,omitempty"`
	SessionID      string          `json:"session_id,omitempty"`
	TaskID         string          `json:"task_id,omitempty"`
	EventType      string          `json:"event_type"` // MESSAGE, TOOL_RESULT, SYSTEM_EVENT, DOCUMENT
	Source         string          `json:"source,omitempty"`
	Schema         string          `json:"schema"`
	Content        string          `json:"content"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Locator        string          `json:"locator,omitempty"` // message or turn id
	OccurredAt     time.Time       `json:"occurred_at"`
}

// Validate checks an event before anything is written and fills the defaults of
// what it leaves empty: actor type USER, event type MESSAGE, schema DefaultSchema.
// It is the one place those defaults are applied.
func (e *IngestEvent) Validate() error {
	if strings.TrimSpace(e.TenantID) == "" {
		return FieldError{Field: "tenant_id", Problem: "is empty"}
	}
	if strings.TrimSpace(e.IdempotencyKey) == "" {
		return FieldError{Field: "idempotency_key", Problem: "is empty"}
	}
	if strings.TrimSpace(e.UserID) == "" {
		return FieldError{Field: "user_id", Problem: "is empty: every event belongs to a user"}
	}
	if strings.TrimSpace(e.Content) == "" {
		return FieldError{Field: "content", Problem: "is empty"}
	}
	if len(e.Content) > MaxContentBytes {
		return FieldError{Field: "content", Problem: fmt.Sprintf("is %d bytes, the limit is %d", len(e.Content), MaxContentBytes)}
	}
	if e.OccurredAt.IsZero() {
		return FieldError{Field: "occurred_at", Problem: "is missing"}
	}
	if e.ActorType == "" {
		e.ActorType = DefaultActorType
	}
	if e.EventType == "" {
		e.EventType = DefaultEventType
	}
	if e.Schema == "" {
		e.Schema = DefaultSchema
	}
	return nil
}
