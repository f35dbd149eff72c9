package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Event is what happened: one message, tool result, system event or document.
// Events are append-only apart from their processing status.
type Event struct {
	bun.BaseModel `bun:"table:events"`

	TenantID       string             `bun:"tenant_id,notnull"`
	ID             string             `bun:"id,pk,type:uuid"`
	IdempotencyKey string             `bun:"idempotency_key,notnull"`
	ContentHash    string             `bun:"content_hash,notnull"`
	ActorType      string             `bun:"actor_type,notnull"`
	ActorID        string             `bun:"actor_id,notnull"`
	UserID         string             `bun:"user_id,notnull"`
	DepartmentID   string             `bun:"department_id,notnull"`
	AgentID        string             `bun:"agent_id,notnull"`
	SessionID      string             `bun:"session_id,notnull"`
	TaskID         string             `bun:"task_id,notnull"`
	EventType      string             `bun:"event_type,notnull"`
	Source         string             `bun:"source,notnull"`
	SchemaName     string             `bun:"schema_name,notnull"`
	Content        string             `bun:"content,notnull"`
	Payload        json.RawMessage    `bun:"payload,type:jsonb,notnull"`
	Locator        string             `bun:"locator,notnull"`
	Status         memory.EventStatus `bun:"status,notnull"`
	StatusReason   string             `bun:"status_reason,notnull"`
	WorkflowID     string             `bun:"workflow_id,notnull"`
	OccurredAt     time.Time          `bun:"occurred_at,notnull"`
	ReceivedAt     time.Time          `bun:"received_at,nullzero,notnull,default:current_timestamp"`
}

// Event types and actor types accepted by the events table (statuses: memory.EventStatuses).
var (
	EventTypes    = []string{"MESSAGE", "TOOL_RESULT", "SYSTEM_EVENT", "DOCUMENT"}
	ActorTypes    = []string{"USER", "AGENT", "SYSTEM", "TOOL"}
	EvidenceKinds = []string{"TURN", "DOCUMENT", "TOOL_RESULT", "API_RESPONSE", "SYSTEM"}
)

func oneOf(field, v string, allowed []string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return memory.FieldError{Field: field, Problem: fmt.Sprintf("unknown value %q (allowed: %s)", v, strings.Join(allowed, ", "))}
}

func validStatus(s memory.EventStatus) error {
	if s.Valid() {
		return nil
	}
	allowed := make([]string, len(memory.EventStatuses))
	for i, v := range memory.EventStatuses {
		allowed[i] = string(v)
	}
	return oneOf("status", string(s), allowed)
}

// HashEventContent is the fingerprint used to tell a retry (same content) from a
// conflicting reuse of an idempotency key.
func HashEventContent(e *Event) string {
	h := sha256.New()
	for _, s := range []string{e.ActorType, e.ActorID, e.UserID, e.DepartmentID, e.AgentID, e.SessionID, e.TaskID, e.EventType, e.Source, e.Content, string(e.Payload), e.OccurredAt.UTC().Format(time.RFC3339Nano)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (e *Event) validate() error {
	if err := checkTenant(e.TenantID); err != nil {
		return err
	}
	if strings.TrimSpace(e.IdempotencyKey) == "" {
		return memory.FieldError{Field: "idempotency_key", Problem: "is empty"}
	}
	if len(e.IdempotencyKey) > 200 {
		return memory.FieldError{Field: "idempotency_key", Problem: "longer than 200 characters"}
	}
	if err := oneOf("actor_type", e.ActorType, ActorTypes); err != nil {
		return err
	}
	if err := oneOf("event_type", e.EventType, EventTypes); err != nil {
		return err
	}
	if e.OccurredAt.IsZero() {
		return memory.FieldError{Field: "occurred_at", Problem: "is missing"}
	}
	if e.Status == "" {
		e.Status = memory.EventReceived
	}
	if err := validStatus(e.Status); err != nil {
		return err
	}
	if len(e.Payload) == 0 {
		e.Payload = json.RawMessage("{}")
	} else if !json.Valid(e.Payload) {
		return memory.FieldError{Field: "payload", Problem: "is not valid JSON"}
	}
	return nil
}

// InsertEvent records an event once per (tenant, idempotency key). A second call
// with the same key and content returns the stored event and created=false; the
// same key with different content returns ErrIdempotencyConflict.
func (s *Store) InsertEvent(ctx context.Context, tenantID string, e *Event) (stored *Event, created bool, err error) {
	e.TenantID = tenantID
	if err := e.validate(); err != nil {
		return nil, false, err
	}
	e.ContentHash = HashEventContent(e)
	q := s.conn(ctx).NewInsert().Model(e).On("CONFLICT (tenant_id, idempotency_key) DO NOTHING").Returning("*")
	if e.ID == "" {
		q = q.ExcludeColumn("id")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("insert event: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return e, true, nil
	}
	existing := new(Event)
	err = s.eventByKey(ctx, tenantID, e.IdempotencyKey, existing)
	if err != nil {
		return nil, false, fmt.Errorf("load event by idempotency key: %w", err)
	}
	return existing, false, sameStored(existing, e)
}

// eventByKey loads the event of an idempotency key into e, or errNoRows.
func (s *Store) eventByKey(ctx context.Context, tenantID, key string, e *Event) error {
	return firstPrepared(ctx, s.conn(ctx), eventByKeySQL, e, tenantID, key)
}

// eventByKeySQL selects the event of an idempotency key ($1 tenant, $2 key).
var eventByKeySQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Event)(nil)).Where("tenant_id = ? AND idempotency_key = ?", p...).String()
})

// EnsureEvent is InsertEvent for a caller whose event is usually stored already
// (the write path runs after the API stored the event): it looks the key up first
// and inserts only when the key is new, one statement instead of two in the usual
// case. Its answers are InsertEvent's.
func (s *Store) EnsureEvent(ctx context.Context, tenantID string, e *Event) (stored *Event, created bool, err error) {
	e.TenantID = tenantID
	if err := e.validate(); err != nil {
		return nil, false, err
	}
	existing := new(Event)
	err = s.eventByKey(ctx, tenantID, e.IdempotencyKey, existing)
	if errors.Is(err, sql.ErrNoRows) {
		return s.InsertEvent(ctx, tenantID, e)
	}
	if err != nil {
		return nil, false, fmt.Errorf("load event by idempotency key: %w", err)
	}
	e.ContentHash = HashEventContent(e)
	return existing, false, sameStored(existing, e)
}

// sameStored is ErrIdempotencyConflict when the stored event of a key is not e.
func sameStored(existing, e *Event) error {
	if existing.ContentHash != e.ContentHash || existing.SchemaName != e.SchemaName {
		return ErrIdempotencyConflict
	}
	return nil
}

// GetEvent loads one event of the tenant.
func (s *Store) GetEvent(ctx context.Context, tenantID, id string) (*Event, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	e := new(Event)
	return e, notFound(firstPrepared(ctx, s.conn(ctx), getEventSQL, e, tenantID, id))
}

// getEventSQL selects an event ($1 tenant, $2 id).
var getEventSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Model((*Event)(nil)).Where("tenant_id = ? AND id = ?", p...).String()
})

// SetEventStatus records the processing outcome of an event.
func (s *Store) SetEventStatus(ctx context.Context, tenantID, id string, status memory.EventStatus, reason string) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if err := validStatus(status); err != nil {
		return err
	}
	res, err := execPrepared(ctx, s.conn(ctx), setEventStatusSQL, status, reason, tenantID, id)
	if err != nil {
		return fmt.Errorf("set event status: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// setEventStatusSQL sets an event's status ($1) and reason ($2) ($3 tenant, $4 id).
var setEventStatusSQL = statementText(4, func(db bun.IDB, p []any) string {
	return db.NewUpdate().Table("events").Set("status = ?, status_reason = ?", p[:2]...).
		Where("tenant_id = ? AND id = ?", p[2:]...).String()
})

func notFound(err error) error {
	if err != nil && errors.Is(err, errNoRows) {
		return ErrNotFound
	}
	return err
}

// NewEvent is the events row of an ingested event, as the API and the write path's
// Record both store it: content is prot.EventContent (redacted, and sealed when
// sealing is on), status PROCESSING. Building the row in one place keeps the two
// content hashes equal, so a retry is recognised as the same event.
func NewEvent(e memory.IngestEvent, workflowID string, prot ProtectedContent) *Event {
	return &Event{
		IdempotencyKey: e.IdempotencyKey, ActorType: e.ActorType, ActorID: e.ActorID, UserID: e.UserID,
		DepartmentID: e.DepartmentID, AgentID: e.AgentID, SessionID: e.SessionID, TaskID: e.TaskID,
		EventType: e.EventType, Source: e.Source, SchemaName: e.Schema, Content: prot.EventContent,
		Payload: e.Payload, Locator: e.Locator, Status: memory.EventProcessing, WorkflowID: workflowID, OccurredAt: e.OccurredAt.UTC(),
	}
}

// SameEvent says whether in, stored by the write path, is the stored event: the
// same fingerprint (content protected as the write path protects it) and schema.
func (s *Store) SameEvent(stored *Event, in memory.IngestEvent) (bool, error) {
	prot, err := s.ProtectContent(in.Content)
	if err != nil {
		return false, err
	}
	e := NewEvent(in, stored.WorkflowID, prot)
	if len(e.Payload) == 0 {
		e.Payload = json.RawMessage("{}") // as InsertEvent stores it
	}
	return HashEventContent(e) == stored.ContentHash && e.SchemaName == stored.SchemaName, nil
}

// Ingest is the event as it was ingested, NewEvent's inverse, for starting its
// write again: the content is the stored one (redacted when redaction is on;
// decrypt a sealed row with DecryptEvent first), so the write path computes the
// same fingerprint. An unredacted original kept beside the evidence is not
// recovered: a write started from the row sees the redacted text only.
func (e *Event) Ingest() memory.IngestEvent {
	return memory.IngestEvent{
		TenantID: e.TenantID, IdempotencyKey: e.IdempotencyKey, ActorType: e.ActorType, ActorID: e.ActorID, UserID: e.UserID,
		DepartmentID: e.DepartmentID, AgentID: e.AgentID, SessionID: e.SessionID, TaskID: e.TaskID, EventType: e.EventType,
		Source: e.Source, Schema: e.SchemaName, Content: e.Content, Payload: e.Payload, Locator: e.Locator, OccurredAt: e.OccurredAt.UTC(),
	}
}

// EventsByKey loads the stored events of the given idempotency keys (id, key,
// content hash, schema, status and occurred_at; not the content). Keys never used are absent.
func (s *Store) EventsByKey(ctx context.Context, tenantID string, keys []string) ([]Event, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var out []Event
	var err error
	if len(keys) == 1 {
		// One key (an Ingest of one event) is compared as one value: the generic plan
		// of "= ANY($2)" costs the array as ten keys, ten descents of the unique index,
		// and on a small table (a new database, before autovacuum has analyzed it
		// often) prefers a sequential scan, which it keeps as the table grows.
		err = selectPrepared(ctx, s.conn(ctx), eventByKeyColumnsSQL, &out, tenantID, keys[0])
	} else {
		err = selectPrepared(ctx, s.conn(ctx), eventsByKeySQL, &out, tenantID, TextArray(keys))
	}
	if err != nil {
		return nil, fmt.Errorf("load events by idempotency key: %w", err)
	}
	return out, nil
}

// eventKeyColumns are the columns EventsByKey reads.
var eventKeyColumns = []string{"id", "idempotency_key", "content_hash", "schema_name", "status", "occurred_at"}

// eventByKeyColumnsSQL selects eventKeyColumns of the event of one idempotency
// key ($1 tenant, $2 key); eventsByKeySQL of several ($2 a text[]).
var (
	eventByKeyColumnsSQL = statementText(2, func(db bun.IDB, p []any) string {
		return db.NewSelect().Model((*Event)(nil)).Column(eventKeyColumns...).Where("tenant_id = ? AND idempotency_key = ?", p...).String()
	})
	eventsByKeySQL = statementText(2, func(db bun.IDB, p []any) string {
		return db.NewSelect().Model((*Event)(nil)).Column(eventKeyColumns...).Where("tenant_id = ? AND idempotency_key = ANY(?::text[])", p...).String()
	})
)

// EventKeyConflict is the ErrIdempotencyConflict of MatchEvents: rows[Index] reuses
// a stored key with different content.
type EventKeyConflict struct {
	Index int
	Key   string
}

func (e *EventKeyConflict) Error() string {
	return fmt.Sprintf("event %d: idempotency key %q: %v", e.Index, e.Key, ErrIdempotencyConflict)
}

func (e *EventKeyConflict) Unwrap() error { return ErrIdempotencyConflict }

// MatchEvents checks rows (built with NewEvent) against the events already stored
// under their keys without writing anything. It returns the stored id by key for
// the rows seen before, or an *EventKeyConflict when a key holds other content.
func (s *Store) MatchEvents(ctx context.Context, tenantID string, rows []*Event) (map[string]string, error) {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.IdempotencyKey
	}
	stored, err := s.EventsByKey(ctx, tenantID, keys)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]Event, len(stored))
	for _, x := range stored {
		byKey[x.IdempotencyKey] = x
	}
	ids := map[string]string{}
	for i, r := range rows {
		x, ok := byKey[r.IdempotencyKey]
		if !ok {
			continue
		}
		e := *r
		if len(e.Payload) == 0 {
			e.Payload = json.RawMessage("{}") // as InsertEvent stores it
		}
		if HashEventContent(&e) != x.ContentHash || x.SchemaName != r.SchemaName {
			return nil, &EventKeyConflict{Index: i, Key: r.IdempotencyKey}
		}
		ids[r.IdempotencyKey] = x.ID
	}
	return ids, nil
}

// LockEvent locks an event's row for the rest of the transaction and returns its
// status.
func LockEvent(ctx context.Context, tx bun.IDB, tenantID, id string) (memory.EventStatus, error) {
	var statuses []memory.EventStatus
	err := selectPrepared(ctx, tx, lockEventSQL, &statuses, tenantID, id)
	if err == nil && len(statuses) == 0 {
		err = errNoRows
	}
	if err != nil {
		return "", fmt.Errorf("lock event: %w", err)
	}
	return statuses[0], nil
}

// lockEventSQL locks an event's row and reads its status ($1 tenant, $2 id).
var lockEventSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewSelect().Table("events").Column("status").Where("tenant_id = ? AND id = ?", p...).For("UPDATE").String()
})

// SetGovernedStatus records the status governance leaves an event in (PROCESSING,
// or PENDING_REVIEW when a candidate needs a reviewer), unless it is already COMMITTED.
func SetGovernedStatus(ctx context.Context, db bun.IDB, tenantID, id string, status memory.EventStatus) error {
	_, err := execPrepared(ctx, db, setGovernedStatusSQL, status, tenantID, id)
	return err
}

// setGovernedStatusSQL sets an event's status ($1) unless it is COMMITTED ($2
// tenant, $3 id).
var setGovernedStatusSQL = statementText(3, func(db bun.IDB, p []any) string {
	return db.NewUpdate().Table("events").Set("status = ?", p[0]).
		Where("tenant_id = ? AND id = ? AND status <> ?", p[1], p[2], memory.EventCommitted).String()
})

// SettleEventStatus sets an event COMMITTED once none of its candidates waits for a
// review (PENDING or NEEDS_CONFIRMATION), else PENDING_REVIEW, and clears its reason.
func SettleEventStatus(ctx context.Context, db bun.IDB, tenantID, id string) error {
	_, err := execPrepared(ctx, db, settleEventStatusSQL, tenantID, id)
	return err
}

// settleEventStatusSQL settles an event's status by its candidates ($1 tenant, $2 id).
var settleEventStatusSQL = statementText(2, func(db bun.IDB, p []any) string {
	return db.NewUpdate().Table("events").
		Set("status = CASE WHEN EXISTS (SELECT 1 FROM candidates c WHERE c.tenant_id = ? AND c.event_id = ? AND c.status IN (?, ?)) THEN ? ELSE ? END",
			p[0], p[1], memory.CandidatePending, memory.CandidateNeedsConfirmation, memory.EventPendingReview, memory.EventCommitted).
		Set("status_reason = ''").
		Where("tenant_id = ? AND id = ?", p[0], p[1]).String()
})

// TurnQuery selects a user's evidence before a moment, newest first.
type TurnQuery struct {
	UserID    string
	SessionID string    // only this session's turns, when set
	Before    time.Time // occurred_at < Before (<= when Inclusive)
	Inclusive bool
	ExcludeID string // leave out this evidence row
	Limit     int
}

// RecentTurns returns the clear text of a user's evidence matching q, newest first.
func (s *Store) RecentTurns(ctx context.Context, tenantID string, q TurnQuery) ([]string, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var rows []Evidence
	op := "<"
	if q.Inclusive {
		op = "<="
	}
	// One prepared statement per shape of the query (which filters it has): its
	// text, written here each call (microseconds), is what the connection knows
	// it by.
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	args := []any{tenantID, q.UserID, q.Before.UTC(), limit}
	if q.ExcludeID != "" {
		args = append(args, q.ExcludeID)
	}
	if q.SessionID != "" {
		args = append(args, q.SessionID)
	}
	text := statementText(len(args), func(db bun.IDB, p []any) string {
		sel := db.NewSelect().Model((*Evidence)(nil)).Column("content", "key_id").
			Where("tenant_id = ? AND user_id = ?", p[0], p[1]).
			Where("occurred_at "+op+" ?", p[2])
		next := 4
		if q.ExcludeID != "" {
			sel = sel.Where("id <> ?", p[next])
			next++
		}
		if q.SessionID != "" {
			sel = sel.Where("session_id = ?", p[next])
		}
		return sel.Order("occurred_at DESC").String() + " LIMIT $4"
	})
	if err := selectPrepared(ctx, s.conn(ctx), text, &rows, args...); err != nil {
		return nil, err
	}
	if err := s.DecryptEvidence(rows); err != nil {
		return nil, err
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Content
	}
	return out, nil
}

// FailEvents marks events FAILED with the reason, by id or by idempotency key,
// unless they already reached a final status (COMMITTED, UNPARSED, FAILED): a write
// that can never finish says so instead of staying PROCESSING. It returns how many
// events it marked.
func (s *Store) FailEvents(ctx context.Context, tenantID string, ids, keys []string, reason string) (int, error) {
	if err := checkTenant(tenantID); err != nil {
		return 0, err
	}
	if len(ids) == 0 && len(keys) == 0 {
		return 0, nil
	}
	if ids == nil {
		ids = []string{}
	}
	if keys == nil {
		keys = []string{}
	}
	res, err := s.conn(ctx).NewUpdate().Table("events").Set("status = ?, status_reason = ?", memory.EventFailed, reason).
		Where("tenant_id = ?", tenantID).
		Where("status IN (?)", bun.In([]memory.EventStatus{memory.EventReceived, memory.EventProcessing, memory.EventPendingReview})).
		Where("(id::text IN (?) OR idempotency_key IN (?))", bun.In(append(ids, "")), bun.In(append(keys, ""))).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("mark events failed: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// OrphanCandidates lists events of every tenant still RECEIVED or PROCESSING
// that were received before `before` and name their workflow, oldest first: what a
// sweeper checks for writes whose workflow never started.
func (s *Store) OrphanCandidates(ctx context.Context, before time.Time, limit int) ([]Event, error) {
	var out []Event
	err := s.conn(ctx).NewSelect().Model(&out).Column("tenant_id", "id", "idempotency_key", "workflow_id", "status", "received_at").
		Where("status IN (?)", bun.In([]memory.EventStatus{memory.EventReceived, memory.EventProcessing})).
		Where("workflow_id <> ''").Where("received_at < ?", before).
		Order("received_at").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list unfinished events: %w", err)
	}
	return out, nil
}

// EventStatusCounts counts the tenant's events by status.
func (s *Store) EventStatusCounts(ctx context.Context, tenantID string) (map[memory.EventStatus]int, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	var rows []struct {
		Status memory.EventStatus `bun:"status"`
		N      int                `bun:"n"`
	}
	if err := s.conn(ctx).NewSelect().Table("events").Column("status").ColumnExpr("count(*) AS n").
		Where("tenant_id = ?", tenantID).Group("status").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count events by status: %w", err)
	}
	out := map[memory.EventStatus]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
