// Package recall answers "what should I remember right now?": hybrid retrieval over
// governed facts and raw evidence, filtered by tenant, scope and time, fused and
// packed into a compact context for an agent. It reads Postgres only, through
// its one prepared statement and storage. It may import memory, schema, storage and
// embedding.
package recall

import (
	"context"
	"time"

	"github.com/engramhq/engram/memory"
)

// Principal is who asks, resolved from the caller's credentials (never from the
// request body). Tenant is always the key's tenant.
type Principal struct {
	TenantID     string `json:"tenant_id"`
	ID           string `json:"id"` // the principal (API key owner) for the access log
	UserID       string `json:"user_id"`
	DepartmentID string `json:"department_id,omitempty"`
	AgentID      string `json:"agent_id,omitempty"`
}

// Request is one recall.
type Request struct {
	Principal Principal `json:"principal"`
	Query     string    `json:"query"`
	SessionID string    `json:"session_id,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	AsOf      time.Time `json:"as_of,omitempty"` // zero: now
	// KnownAt, when set, answers as the memory held its revisions then
	// (transaction time): those recorded by then, with the status and validity
	// they had. AsOf defaults to it.
	KnownAt time.Time `json:"known_at,omitempty"`
	K       int       `json:"k,omitempty"` // ranked items to return (default 10, max 100)
	// TokenBudget bounds the context text (default 1000 tokens, max 8000).
	TokenBudget int    `json:"token_budget,omitempty"`
	Schema      string `json:"schema,omitempty"` // schema used to parse the query (default general)
	Purpose     string `json:"purpose,omitempty"`
	// Scopes, when set, restricts the visible scopes further (never widens them).
	Scopes []memory.Scope `json:"scopes,omitempty"`
	// Explain asks for every fused candidate (Response.Candidates), not only the
	// top K: what each retriever found, for debugging and isolation tests.
	Explain bool `json:"explain,omitempty"`
	// Retrievers, when set, runs only these retrievers (semantic, keyword, graph,
	// structured, recent); empty runs them all. An unknown name is a FieldError.
	Retrievers []string `json:"retrievers,omitempty"`
}

// Kind of a ranked item.
type Kind string

const (
	KindFact     Kind = "fact"
	KindEvidence Kind = "evidence"
)

// Item is one ranked memory with why it was chosen.
type Item struct {
	Kind        Kind              `json:"kind"`
	ID          string            `json:"id"`
	Content     string            `json:"content"`
	MemoryType  memory.MemoryType `json:"memory_type,omitempty"`
	Scope       memory.ScopeRef   `json:"scope"`
	Status      memory.FactStatus `json:"status,omitempty"`
	MemoryKey   string            `json:"memory_key,omitempty"`
	Predicate   string            `json:"predicate,omitempty"`
	Object      string            `json:"object,omitempty"`
	EntityType  string            `json:"entity_type,omitempty"`
	EntityID    string            `json:"entity_id,omitempty"`
	Revision    int               `json:"revision,omitempty"`
	ValidFrom   time.Time         `json:"valid_from"`
	ValidUntil  *time.Time        `json:"valid_until,omitempty"`
	Confidence  float64           `json:"confidence,omitempty"`
	Score       float64           `json:"score"`
	Retrievers  []string          `json:"retrievers"`    // semantic, keyword, graph, structured, recent; adjacent: next to a turn ranked above it; feedback: like the best turns and the question together
	Why         string            `json:"why,omitempty"` // why it was chosen, e.g. "keyword #1, semantic #3; task scope leads"
	EvidenceIDs []string          `json:"evidence_ids,omitempty"`
	OccurredAt  time.Time         `json:"occurred_at"`
	// Speaker is who said an evidence turn, when a named person other than the user
	// did (a conversation between two people kept under one user).
	Speaker string `json:"speaker,omitempty"`
}

// TaskState is the task part of the context, read from the tasks table.
type TaskState struct {
	TaskID    string           `json:"task_id"`
	Goal      string           `json:"goal"`
	State     memory.TaskState `json:"state"`
	Done      []string         `json:"done"`
	Todo      []string         `json:"todo"`
	NextStep  string           `json:"next_step"`
	LastError string           `json:"last_error,omitempty"`
}

// Section is one titled part of the context; each line names its fact or evidence.
type Section struct {
	Title string   `json:"title"` // task, task state, constraints, preferences, facts, recent turns, summary, evidence
	Lines []string `json:"lines"`
}

// Response is what an agent gets back.
type Response struct {
	Context  string                   `json:"context"` // the sections rendered as text within the budget
	Sections []Section                `json:"sections"`
	Items    []Item                   `json:"items"`
	Task     *TaskState               `json:"task,omitempty"`
	Tokens   int                      `json:"tokens"`
	AsOf     time.Time                `json:"as_of"`
	Timings  map[string]time.Duration `json:"timings,omitempty"`
	// Candidates are all fused candidates, ranked, when the request asked to Explain.
	Candidates []Item `json:"candidates,omitempty"`
	// Parsed is what the query parser understood (entities, predicates, types, time).
	Parsed *ParsedQuery `json:"parsed,omitempty"`
}

// Visibility is what a principal may see: its tenant plus the scopes below. Every
// retriever (semantic, keyword, graph) applies it in its query, not after.
type Visibility struct {
	TenantID     string
	UserID       string
	DepartmentID string
	AgentID      string
	SessionID    string
	TaskID       string
	AsOf         time.Time
	// Scopes, when not empty, is the subset of scopes the caller asked for.
	Scopes []memory.Scope
}

// KeywordHit is one keyword match.
type KeywordHit struct {
	Kind  Kind
	ID    string
	Score float64
}

// KeywordIndex is the keyword retriever: Postgres full-text by default, Typesense
// when configured. Implementations must filter by Visibility themselves.
type KeywordIndex interface {
	Name() string
	Search(ctx context.Context, v Visibility, query string, kinds []Kind, limit int) ([]KeywordHit, error)
}
