// Package memory holds the vocabulary every part of Engram shares: scopes, memory
// types, statuses, the ingested event (IngestEvent, DefaultSchema) and the candidate
// an extractor proposes, so that schema, governance, storage and the feature
// packages can all speak it. It imports only the standard library and the
// Temporal SDK (search attribute keys).
package memory

import (
	"fmt"
	"strings"
	"time"
)

// Scope says who a memory belongs to and therefore who may see it.
type Scope string

const (
	ScopeTenant     Scope = "TENANT"
	ScopeDepartment Scope = "DEPARTMENT"
	ScopeUser       Scope = "USER"
	ScopeAgent      Scope = "AGENT"
	ScopeSession    Scope = "SESSION"
	ScopeTask       Scope = "TASK"
)

// Scopes lists every scope from broadest to narrowest.
var Scopes = []Scope{ScopeTenant, ScopeDepartment, ScopeUser, ScopeAgent, ScopeSession, ScopeTask}

// Breadth orders scopes: a smaller number is broader. A narrower scope never
// overwrites a broader one.
func (s Scope) Breadth() int {
	for i, v := range Scopes {
		if v == s {
			return i
		}
	}
	return -1
}

func (s Scope) Valid() bool { return s.Breadth() >= 0 }

// MemoryType is the kind of a candidate or fact.
type MemoryType string

const (
	TypeFact       MemoryType = "FACT"
	TypePreference MemoryType = "PREFERENCE"
	TypeConstraint MemoryType = "CONSTRAINT"
	TypeDecision   MemoryType = "DECISION"
	TypeExperience MemoryType = "EXPERIENCE"
	TypeEvent      MemoryType = "EVENT" // a schema event record (order not received, ticket opened, …)
)

var MemoryTypes = []MemoryType{TypeFact, TypePreference, TypeConstraint, TypeDecision, TypeExperience, TypeEvent}

func (t MemoryType) Valid() bool { return contains(MemoryTypes, t) }

// FactStatus is the life-cycle state of one fact revision.
type FactStatus string

const (
	FactActive      FactStatus = "ACTIVE"
	FactSuperseded  FactStatus = "SUPERSEDED"
	FactExpired     FactStatus = "EXPIRED"
	FactInvalidated FactStatus = "INVALIDATED"
)

var FactStatuses = []FactStatus{FactActive, FactSuperseded, FactExpired, FactInvalidated}

func (s FactStatus) Valid() bool { return contains(FactStatuses, s) }

// CandidateStatus is the governance outcome for a proposed memory.
type CandidateStatus string

const (
	CandidatePending           CandidateStatus = "PENDING"
	CandidateAccepted          CandidateStatus = "ACCEPTED"
	CandidateRejected          CandidateStatus = "REJECTED"
	CandidateNeedsConfirmation CandidateStatus = "NEEDS_CONFIRMATION"
	CandidateSuperseded        CandidateStatus = "SUPERSEDED"
)

var CandidateStatuses = []CandidateStatus{CandidatePending, CandidateAccepted, CandidateRejected, CandidateNeedsConfirmation, CandidateSuperseded}

func (s CandidateStatus) Valid() bool { return contains(CandidateStatuses, s) }

// Origin says whether the speaker said it or the extractor inferred it.
type Origin string

const (
	OriginStated   Origin = "STATED"
	OriginInferred Origin = "INFERRED"
)

func (o Origin) Valid() bool { return o == OriginStated || o == OriginInferred }

// EvidenceRelation links a candidate to evidence.
type EvidenceRelation string

const (
	RelSupport   EvidenceRelation = "SUPPORT"
	RelConflict  EvidenceRelation = "CONFLICT"
	RelReference EvidenceRelation = "REFERENCE"
)

// TaskState is the state of a task workflow; it is kept apart from memory.
type TaskState string

const (
	TaskCreated             TaskState = "CREATED"
	TaskPlanning            TaskState = "PLANNING"
	TaskWaitingConfirmation TaskState = "WAITING_CONFIRMATION"
	TaskExecuting           TaskState = "EXECUTING"
	TaskCompleted           TaskState = "COMPLETED"
	TaskFailed              TaskState = "FAILED"
	TaskCancelled           TaskState = "CANCELLED"
	TaskOutcomeUnknown      TaskState = "OUTCOME_UNKNOWN"
)

var TaskStates = []TaskState{TaskCreated, TaskPlanning, TaskWaitingConfirmation, TaskExecuting, TaskCompleted, TaskFailed, TaskCancelled, TaskOutcomeUnknown}

func (s TaskState) Valid() bool { return contains(TaskStates, s) }

// Terminal reports whether no transition leaves the state.
func (s TaskState) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// ScopeRef is a scope with the ids it needs. Only the ids the scope requires are
// meaningful; Validate rejects a ref that lacks them.
type ScopeRef struct {
	Scope        Scope  `json:"scope"`
	DepartmentID string `json:"department_id,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	AgentID      string `json:"agent_id,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	TaskID       string `json:"task_id,omitempty"`
}

// Validate checks the scope name and that the id it needs is present.
func (r ScopeRef) Validate() error {
	if !r.Scope.Valid() {
		return FieldError{Field: "scope", Problem: fmt.Sprintf("unknown scope %q (allowed: %s)", r.Scope, joinScopes())}
	}
	need := map[Scope]struct{ field, val string }{
		ScopeDepartment: {"department_id", r.DepartmentID},
		ScopeUser:       {"user_id", r.UserID},
		ScopeAgent:      {"agent_id", r.AgentID},
		ScopeSession:    {"session_id", r.SessionID},
		ScopeTask:       {"task_id", r.TaskID},
	}
	if n, ok := need[r.Scope]; ok && strings.TrimSpace(n.val) == "" {
		return FieldError{Field: n.field, Problem: fmt.Sprintf("required for scope %s", r.Scope)}
	}
	return nil
}

// Key renders the scope and the id that identifies it, e.g. "TASK:trip-1".
func (r ScopeRef) Key() string {
	switch r.Scope {
	case ScopeDepartment:
		return "DEPARTMENT:" + r.DepartmentID
	case ScopeUser:
		return "USER:" + r.UserID
	case ScopeAgent:
		return "AGENT:" + r.AgentID
	case ScopeSession:
		return "SESSION:" + r.SessionID
	case ScopeTask:
		return "TASK:" + r.TaskID
	}
	return string(r.Scope)
}

// Candidate is what an extractor proposes from one event. It is not memory until
// governance accepts it.
type Candidate struct {
	MemoryType MemoryType     `json:"memory_type"`
	Scope      Scope          `json:"scope"`
	Subject    string         `json:"subject"`   // who or what it is about, e.g. "user" or "Order:12345"
	Predicate  string         `json:"predicate"` // a schema predicate, e.g. "budget"
	Object     string         `json:"object"`    // the value, normalised, e.g. "8000 CNY"
	Content    string         `json:"content"`   // one readable sentence
	EntityType string         `json:"entity_type,omitempty"`
	EntityID   string         `json:"entity_id,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	Confidence float64        `json:"confidence"`
	Origin     Origin         `json:"origin"`
	Retraction bool           `json:"retraction,omitempty"` // the speaker withdrew an earlier statement
	ValidFrom  *time.Time     `json:"valid_from,omitempty"`
	ValidUntil *time.Time     `json:"valid_until,omitempty"`
	Relations  []Relation     `json:"relations,omitempty"`
	Extractor  string         `json:"extractor"`
	Version    string         `json:"extractor_version"`
}

// Relation is a typed edge between two schema entities, e.g. User u1 PLACED Order 12345.
type Relation struct {
	Type     string `json:"type"`
	FromType string `json:"from_type"`
	FromID   string `json:"from_id"`
	ToType   string `json:"to_type"`
	ToID     string `json:"to_id"`
}

// EntityRef names an entity already known for the subject, given to extractors so a
// message like "the order that never arrived" can be resolved.
type EntityRef struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	State string `json:"state,omitempty"`
}

// FieldError names the field that is wrong and why. Every bad-input error in Engram
// is, or wraps, one of these.
type FieldError struct {
	Field   string
	Problem string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Problem }

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func joinScopes() string {
	s := make([]string, len(Scopes))
	for i, v := range Scopes {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
