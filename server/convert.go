package server

import (
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Enum values on the wire are the engine's names with a type prefix
// (SCOPE_USER ↔ USER); these helpers convert by name so the two never drift.

func enumName[E ~int32](v E, names map[int32]string, prefix string) string {
	if v == 0 {
		return ""
	}
	return strings.TrimPrefix(names[int32(v)], prefix)
}

func enumValue[E ~int32](name string, values map[string]int32, prefix string) E {
	if name == "" {
		return 0
	}
	return E(values[prefix+name])
}

func scopeOut(s memory.Scope) engramv1.Scope {
	return enumValue[engramv1.Scope](string(s), engramv1.Scope_value, "SCOPE_")
}

func scopeIn(s engramv1.Scope) memory.Scope {
	return memory.Scope(enumName(s, engramv1.Scope_name, "SCOPE_"))
}

func memoryTypeOut(t memory.MemoryType) engramv1.MemoryType {
	return enumValue[engramv1.MemoryType](string(t), engramv1.MemoryType_value, "MEMORY_TYPE_")
}

func factStatusOut(s memory.FactStatus) engramv1.FactStatus {
	return enumValue[engramv1.FactStatus](string(s), engramv1.FactStatus_value, "FACT_STATUS_")
}

func factStatusIn(s engramv1.FactStatus) memory.FactStatus {
	return memory.FactStatus(enumName(s, engramv1.FactStatus_name, "FACT_STATUS_"))
}

func candidateStatusOut(s memory.CandidateStatus) engramv1.CandidateStatus {
	return enumValue[engramv1.CandidateStatus](string(s), engramv1.CandidateStatus_value, "CANDIDATE_STATUS_")
}

func originOut(o memory.Origin) engramv1.Origin {
	return enumValue[engramv1.Origin](string(o), engramv1.Origin_value, "ORIGIN_")
}

func taskStateOut(s memory.TaskState) engramv1.TaskState {
	return enumValue[engramv1.TaskState](string(s), engramv1.TaskState_value, "TASK_STATE_")
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// structOf decodes a JSON object; anything else (or invalid JSON) gives nil.
func structOf(raw json.RawMessage) *structpb.Struct {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

func valueOf(raw json.RawMessage) *structpb.Value {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	out, err := structpb.NewValue(v)
	if err != nil {
		return nil
	}
	return out
}

func scopeRefOut(r memory.ScopeRef) *engramv1.ScopeRef {
	return &engramv1.ScopeRef{Scope: scopeOut(r.Scope), DepartmentId: r.DepartmentID, UserId: r.UserID, AgentId: r.AgentID, SessionId: r.SessionID, TaskId: r.TaskID}
}

func factOut(f *storage.Fact) *engramv1.Fact {
	return &engramv1.Fact{
		Id: f.ID, MemoryKey: f.MemoryKey, Revision: int32(f.Revision), Scope: scopeRefOut(f.ScopeRef()),
		MemoryType: memoryTypeOut(f.MemoryType), Subject: f.Subject, Predicate: f.Predicate, Object: f.Object,
		Content: f.Content, Attributes: structOf(f.Attributes), EntityType: f.EntityType, EntityId: f.EntityID,
		Status: factStatusOut(f.Status), Origin: originOut(f.Origin), Confidence: f.Confidence, Importance: f.Importance,
		ValidFrom: ts(f.ValidFrom), ValidUntil: tsp(f.ValidUntil), SupersedesId: str(f.SupersedesID),
		SourceCandidateId: str(f.SourceCandidateID), Reason: f.Reason, SchemaName: f.SchemaName,
		SchemaVersion: int32(f.SchemaVersion), RecordedAt: ts(f.RecordedAt), RetiredAt: tsp(f.ClosedAt),
		StatedAt: tsList(f.Stated()),
	}
}

func tsList(ts []time.Time) []*timestamppb.Timestamp {
	out := make([]*timestamppb.Timestamp, len(ts))
	for i, t := range ts {
		out[i] = timestamppb.New(t)
	}
	return out
}

// timeIn is an optional timestamp field of a request: zero when unset, an
// InvalidArgument naming field when malformed.
func timeIn(field string, t *timestamppb.Timestamp) (time.Time, error) {
	if t == nil {
		return time.Time{}, nil
	}
	if err := t.CheckValid(); err != nil {
		return time.Time{}, fieldErr(field, err.Error())
	}
	return t.AsTime(), nil
}

func pendingOut(c *storage.Candidate, evidence []string) *engramv1.PendingReview {
	return &engramv1.PendingReview{
		CandidateId: c.ID, WorkflowId: c.WorkflowID, UserId: c.UserID, MemoryKey: c.MemoryKey, Content: c.Content,
		Predicate: c.Predicate, Object: c.Object,
		Scope:      scopeRefOut(memory.ScopeRef{Scope: c.Scope, DepartmentID: c.DepartmentID, UserID: c.UserID, AgentID: c.AgentID, SessionID: c.SessionID, TaskID: c.TaskID}),
		MemoryType: memoryTypeOut(c.MemoryType), Origin: originOut(c.Origin), Confidence: c.Confidence, Reason: c.Reason,
		CreatedAt: ts(c.CreatedAt), EvidenceIds: evidence,
	}
}
