// Package llm holds what turns text into candidate memories: the
// OpenAI-compatible client (extractor, embedder, summariser through go-openai),
// the offline rule extractor and its abstention rules, and the extractive
// summariser. It may import memory, schema and embedding.
package llm

import (
	"context"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// ExtractInput is one event to read, with what an extractor needs around it.
type ExtractInput struct {
	Text       string    `json:"text"`
	OccurredAt time.Time `json:"occurred_at"` // relative times resolve against this
	Speaker    string    `json:"speaker,omitempty"`
	UserID     string    `json:"user_id,omitempty"`
	SessionID  string    `json:"session_id,omitempty"`
	TaskID     string    `json:"task_id,omitempty"`
	// DepartmentID, when the speaker's department is known, lets "our team …" become
	// DEPARTMENT-scope memory; without it such statements stay USER scope.
	DepartmentID string             `json:"department_id,omitempty"`
	Recent       []string           `json:"recent,omitempty"`   // a few previous turns, oldest first
	Known        []memory.EntityRef `json:"known,omitempty"`    // entities already known for this user
	Feedback     []string           `json:"feedback,omitempty"` // validation errors of the previous attempt
}

// ExtractOutput is the raw document an extractor produced. It is validated against
// the schema by the caller (schema.ParseCandidates), never trusted as is.
type ExtractOutput struct {
	Raw       string `json:"raw"` // a JSON document {"candidates":[…]} that should match s.JSONSchema()
	Extractor string `json:"extractor"`
	Version   string `json:"version"`
}

// Extractor proposes candidate memories for one event under a domain schema.
type Extractor interface {
	Name() string
	Extract(ctx context.Context, s *schema.Schema, in ExtractInput) (ExtractOutput, error)
}
