package typesense

import (
	"fmt"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// Field names of the collection.
const (
	FieldTenant     = "tenant_id"
	FieldKind       = "kind" // fact | evidence (recall.Kind)
	FieldRefID      = "ref_id"
	FieldContent    = "content"    // locale zh
	FieldContentEn  = "content_en" // default locale
	FieldMemoryType = "memory_type"
	FieldMemoryKey  = "memory_key"
	FieldScope      = "scope"
	FieldUser       = "user_id"
	FieldDepartment = "department_id"
	FieldAgent      = "agent_id"
	FieldSession    = "session_id"
	FieldTask       = "task_id"
	FieldStatus     = "status"
	FieldValidFrom  = "valid_from"  // unix seconds
	FieldValidUntil = "valid_until" // unix seconds; OpenUntil when the window is open
	FieldOccurredAt = "occurred_at" // unix seconds, the recency tie-break
	FieldClosedAt   = "closed_at"   // unix seconds; OpenUntil while the revision is open
	FieldIndexedAt  = "indexed_at"  // unix seconds of the last upsert
	FieldImportance = "importance"
)

// OpenUntil stands for "no valid_until" (9999-12-31T23:59:59Z): Typesense cannot
// filter on a missing field, so an open window gets the far end of time.
const OpenUntil int64 = 253402300799

// Document is one row of the index: a fact revision or an evidence row.
// Evidence has no scope or status; its window opens when it occurred.
type Document struct {
	ID           string  `json:"id"`
	TenantID     string  `json:"tenant_id"`
	Kind         string  `json:"kind"`
	RefID        string  `json:"ref_id"`
	Content      string  `json:"content"`
	ContentEn    string  `json:"content_en"`
	MemoryType   string  `json:"memory_type"`
	MemoryKey    string  `json:"memory_key"`
	Scope        string  `json:"scope"`
	UserID       string  `json:"user_id"`
	DepartmentID string  `json:"department_id"`
	AgentID      string  `json:"agent_id"`
	SessionID    string  `json:"session_id"`
	TaskID       string  `json:"task_id"`
	Status       string  `json:"status"`
	ValidFrom    int64   `json:"valid_from"`
	ValidUntil   int64   `json:"valid_until"`
	OccurredAt   int64   `json:"occurred_at"`
	ClosedAt     int64   `json:"closed_at"`
	IndexedAt    int64   `json:"indexed_at"`
	Importance   float64 `json:"importance"`
}

func (d Document) check() error {
	if strings.TrimSpace(d.TenantID) == "" {
		return memory.FieldError{Field: "tenant_id", Problem: "is empty"}
	}
	if d.Kind != string(recall.KindFact) && d.Kind != string(recall.KindEvidence) {
		return memory.FieldError{Field: "kind", Problem: fmt.Sprintf("unknown value %q", d.Kind)}
	}
	if d.RefID == "" || d.ID != DocID(d.TenantID, recall.Kind(d.Kind), d.RefID) {
		return memory.FieldError{Field: "id", Problem: "does not match tenant, kind and ref_id"}
	}
	return nil
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// FactDocument builds the document of one fact revision (any status: closed
// revisions answer as_of questions about the past).
func FactDocument(f *storage.Fact) Document {
	content := f.Content
	if f.Object != "" && !strings.Contains(content, f.Object) {
		content += " " + f.Object
	}
	until, closed := OpenUntil, OpenUntil
	if f.ValidUntil != nil {
		until = f.ValidUntil.Unix()
	}
	if f.ClosedAt != nil {
		closed = f.ClosedAt.Unix()
	}
	return Document{
		ID: DocID(f.TenantID, recall.KindFact, f.ID), TenantID: f.TenantID, Kind: string(recall.KindFact), RefID: f.ID,
		Content: content, ContentEn: content, MemoryType: string(f.MemoryType), MemoryKey: f.MemoryKey,
		Scope: string(f.Scope), UserID: f.UserID, DepartmentID: f.DepartmentID, AgentID: f.AgentID,
		SessionID: f.SessionID, TaskID: f.TaskID, Status: string(f.Status),
		ValidFrom: unix(f.ValidFrom), ValidUntil: until, ClosedAt: closed, OccurredAt: unix(f.ObservedAt), Importance: float64(f.Importance),
	}
}

// EvidenceDocument builds the document of one evidence row.
func EvidenceDocument(e *storage.Evidence) Document {
	return Document{
		ID: DocID(e.TenantID, recall.KindEvidence, e.ID), TenantID: e.TenantID, Kind: string(recall.KindEvidence), RefID: e.ID,
		Content: e.Content, ContentEn: e.Content,
		UserID: e.UserID, DepartmentID: e.DepartmentID, AgentID: e.AgentID, SessionID: e.SessionID, TaskID: e.TaskID,
		ValidFrom: unix(e.OccurredAt), ValidUntil: OpenUntil, ClosedAt: OpenUntil,
		OccurredAt: unix(e.OccurredAt), Importance: float64(e.Importance),
	}
}
