package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"

	"connectrpc.com/connect"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
	"github.com/google/uuid"
)

const (
	defaultWait = 30 * time.Second
	maxWait     = 5 * time.Minute
	// minWait is the shortest wait: a shorter wait_timeout is raised to it. No
	// write finishes sooner, and the start of a write is bounded apart from the
	// wait (write.StartAndWait), so a short wait answers RUNNING with the write's
	// ids, never an error.
	minWait = 10 * time.Millisecond
	// maxFuture is how far ahead of the server's clock occurred_at may be.
	maxFuture = 24 * time.Hour
)

// Ingest checks the request's events and hands them to the Ingestor (Deps.Ingestor),
// which records them and starts, enqueues or waits for their writes.
func (s *memoryServer) Ingest(ctx context.Context, req *connect.Request[engramv1.IngestRequest]) (*connect.Response[engramv1.IngestResponse], error) {
	p, err := require(ctx, "Ingest", "agent")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	wait, err := waitTimeout("wait_timeout", m.WaitTimeout, m.WaitTimeout == nil)
	if err != nil {
		return nil, err
	}
	if !m.Wait {
		wait = 0
	}
	// Postgres keeps microseconds: a default time must survive the round trip so a
	// retry that reuses the stored time hashes the same.
	now := time.Now().UTC().Truncate(time.Microsecond)
	switch {
	case m.Event != nil && len(m.Events) > 0:
		return nil, fieldErr("events", "set either event or events, not both")
	case m.Event == nil && len(m.Events) == 0:
		return nil, fieldErr("event", "is missing (or send a batch in events)")
	case m.Event != nil:
		ev, err := s.eventIn(ctx, p, "event.", m.Event, now)
		if err != nil {
			return nil, err
		}
		res, err := s.Ingestor.Ingest(ctx, ev, m.Event.OccurredAt == nil, wait)
		if err != nil {
			return nil, ingestErr(ctx, "event.", err)
		}
		return connect.NewResponse(&engramv1.IngestResponse{Results: []*engramv1.IngestResult{ingestedOut(res)}}), nil
	}
	b, err := s.batchIn(ctx, p, m, now)
	if err != nil {
		return nil, err
	}
	out, err := s.Ingestor.IngestBatch(ctx, b, wait)
	if err != nil {
		return nil, ingestErr(ctx, "", err)
	}
	resp := &engramv1.IngestResponse{BatchWorkflowId: out.WorkflowID}
	for _, r := range out.Results {
		resp.Results = append(resp.Results, ingestedOut(r))
	}
	return connect.NewResponse(resp), nil
}

// batchIn checks the events of a batch request: at most write.MaxBatchEvents,
// each valid, no idempotency key twice.
func (s *memoryServer) batchIn(ctx context.Context, p *Principal, m *engramv1.IngestRequest, now time.Time) (write.Batch, error) {
	b := write.Batch{TenantID: p.TenantID, Key: strings.TrimSpace(m.BatchKey)}
	if len(m.Events) > write.MaxBatchEvents {
		return b, fieldErr("events", fmt.Sprintf("%d events, a batch holds at most %d: split it", len(m.Events), write.MaxBatchEvents))
	}
	b.Events = make([]memory.IngestEvent, len(m.Events))
	b.DefaultTime = make([]bool, len(m.Events))
	seen := map[string]int{}
	for i, e := range m.Events {
		prefix := fmt.Sprintf("events[%d].", i)
		var err error
		if b.Events[i], err = s.eventIn(ctx, p, prefix, e, now); err != nil {
			return b, err
		}
		key := b.Events[i].IdempotencyKey
		if j, dup := seen[key]; dup {
			return b, fieldErr(prefix+"idempotency_key", fmt.Sprintf("repeats events[%d]", j))
		}
		seen[key] = i
		b.DefaultTime[i] = e.OccurredAt == nil
	}
	return b, nil
}

// ingestedOut is one event's IngestResult.
func ingestedOut(r *write.Ingested) *engramv1.IngestResult {
	out := &engramv1.IngestResult{
		IdempotencyKey: r.IdempotencyKey, WorkflowId: r.WorkflowID, RunId: r.RunID, EventId: r.EventID, EvidenceId: r.EvidenceID,
		Status: enumValue[engramv1.WriteStatus](r.Status, engramv1.WriteStatus_value, "WRITE_STATUS_"), Reason: r.Reason,
	}
	for _, c := range r.Outcomes {
		out.Outcomes = append(out.Outcomes, &engramv1.CandidateOutcome{
			CandidateId: c.CandidateID, Status: candidateStatusOut(c.Status), Action: c.Action, FactId: c.FactID,
			MemoryKey: c.MemoryKey, Reason: c.Reason, Reviewer: c.Reviewer,
		})
	}
	for i := range r.Pending {
		out.Pending = append(out.Pending, pendingOut(&r.Pending[i].Candidate, r.Pending[i].EvidenceIDs))
	}
	return out
}

func waitTimeout(field string, d interface{ AsDuration() time.Duration }, isNil bool) (time.Duration, error) {
	if isNil {
		return defaultWait, nil
	}
	v := d.AsDuration()
	switch {
	case v < 0:
		return 0, fieldErr(field, "is negative")
	case v == 0:
		return defaultWait, nil
	case v > maxWait:
		return 0, fieldErr(field, fmt.Sprintf("%s exceeds the limit of %s", v, maxWait))
	}
	return max(v, minWait), nil
}

// eventIn checks one event of a request and returns it as the write path's input.
// An event without occurred_at gets now; sameRetryTime later replaces that by the
// stored time when the key was seen before, so a retry hashes the same.
func (s *memoryServer) eventIn(ctx context.Context, p *Principal, prefix string, e *engramv1.Event, now time.Time) (memory.IngestEvent, error) {
	var out memory.IngestEvent
	if e == nil {
		return out, fieldErr(strings.TrimSuffix(prefix, "."), "is missing")
	}
	user, err := userFor(p, prefix+"user_id", e.UserId)
	if err != nil {
		return out, err
	}
	agent, err := bound(p, prefix+"agent_id", p.AgentID, e.AgentId)
	if err != nil {
		return out, err
	}
	dept, err := bound(p, prefix+"department_id", p.DepartmentID, e.DepartmentId)
	if err != nil {
		return out, err
	}
	actor, ok := engramv1.ActorType_name[int32(e.ActorType)]
	if !ok {
		return out, fieldErr(prefix+"actor_type", fmt.Sprintf("unknown value %d", e.ActorType))
	}
	evType, ok := engramv1.EventType_name[int32(e.EventType)]
	if !ok {
		return out, fieldErr(prefix+"event_type", fmt.Sprintf("unknown value %d", e.EventType))
	}
	key := strings.TrimSpace(e.IdempotencyKey)
	if key == "" {
		key = "srv-" + uuid.NewString()
	}
	if len(key) > 200 {
		return out, fieldErr(prefix+"idempotency_key", fmt.Sprintf("is %d characters, the limit is 200", len(key)))
	}
	occurred := now
	if e.OccurredAt != nil {
		if err := e.OccurredAt.CheckValid(); err != nil {
			return out, fieldErr(prefix+"occurred_at", err.Error())
		}
		occurred = e.OccurredAt.AsTime()
		if occurred.After(now.Add(maxFuture)) {
			return out, fieldErr(prefix+"occurred_at", fmt.Sprintf("%s is more than %s in the future", occurred.Format(time.RFC3339), maxFuture))
		}
		if occurred.Year() < 1970 {
			return out, fieldErr(prefix+"occurred_at", "is before 1970")
		}
	}
	// The event's schema, else the deployment's (ENGRAM_SCHEMA), else the built-in default.
	sc := cmp.Or(strings.TrimSpace(e.Schema), s.Config.DefaultSchema, memory.DefaultSchema)
	if _, ok := schema.BuiltinSource(sc); !ok {
		// Not a built-in: the tenant may have stored it with PutSchema.
		if _, serr := s.Store.GetSchema(ctx, p.TenantID, sc, 0); serr != nil {
			if !errors.Is(serr, storage.ErrNotFound) {
				return out, fmt.Errorf("look up schema: %w", serr)
			}
			return out, fieldErr(prefix+"schema", fmt.Sprintf("unknown schema %q (built-in: %s; or one stored with PutSchema)", sc, strings.Join(schema.BuiltinNames(), ", ")))
		}
	}
	var payload json.RawMessage
	if e.Payload != nil && len(e.Payload.Fields) > 0 {
		if payload, err = json.Marshal(e.Payload.AsMap()); err != nil {
			return out, fieldErr(prefix+"payload", "cannot be encoded as JSON")
		}
	}
	out = memory.IngestEvent{
		TenantID: p.TenantID, IdempotencyKey: key, ActorType: strings.TrimPrefix(actor, "ACTOR_TYPE_"), ActorID: strings.TrimSpace(e.ActorId),
		UserID: user, DepartmentID: dept, AgentID: agent, SessionID: strings.TrimSpace(e.SessionId), TaskID: strings.TrimSpace(e.TaskId),
		EventType: strings.TrimPrefix(evType, "EVENT_TYPE_"), Source: e.Source, Schema: sc, Content: e.Content,
		Payload: payload, Locator: e.Locator, OccurredAt: occurred.UTC(),
	}
	if out.ActorType == "UNSPECIFIED" {
		out.ActorType = "" // Validate fills the default
	}
	if out.EventType == "UNSPECIFIED" {
		out.EventType = ""
	}
	if err := out.Validate(); err != nil {
		return out, toConnect(context.Background(), prefixField(prefix, err))
	}
	return out, nil
}
