package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/uptrace/bun"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

type memoryServer struct{ Deps }

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

func validUUID(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return fieldErr(field, "is empty")
	}
	if _, err := uuid.Parse(v); err != nil {
		return fieldErr(field, fmt.Sprintf("%q is not a UUID", v))
	}
	return nil
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
		res, err := s.ingestOne(ctx, ev, m.Event.OccurredAt == nil, m.Wait, wait)
		if err != nil {
			return nil, toConnect(ctx, err)
		}
		return connect.NewResponse(&engramv1.IngestResponse{Results: []*engramv1.IngestResult{res}}), nil
	}
	if len(m.Events) > write.MaxBatchEvents {
		return nil, fieldErr("events", fmt.Sprintf("%d events, a batch holds at most %d: split it", len(m.Events), write.MaxBatchEvents))
	}
	evs := make([]memory.IngestEvent, len(m.Events))
	seen := map[string]int{}
	for i, e := range m.Events {
		prefix := fmt.Sprintf("events[%d].", i)
		if evs[i], err = s.eventIn(ctx, p, prefix, e, now); err != nil {
			return nil, err
		}
		if j, dup := seen[evs[i].IdempotencyKey]; dup {
			return nil, fieldErr(prefix+"idempotency_key", fmt.Sprintf("repeats events[%d]", j))
		}
		seen[evs[i].IdempotencyKey] = i
	}
	var defaulted []*memory.IngestEvent
	for i, e := range m.Events {
		if e.OccurredAt == nil {
			defaulted = append(defaulted, &evs[i])
		}
	}
	if err := s.sameRetryTime(ctx, p.TenantID, defaulted); err != nil {
		return nil, toConnect(ctx, err)
	}
	out, err := s.ingestBatch(ctx, p, strings.TrimSpace(m.BatchKey), evs, m.Wait, wait)
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	return connect.NewResponse(out), nil
}

// sameRetryTime gives events whose occurred_at defaulted to now the time stored for
// their key, when the key was used before: a retry of an event sent without a time
// is then the same event, not a conflicting one.
func (s *memoryServer) sameRetryTime(ctx context.Context, tenant string, evs []*memory.IngestEvent) error {
	if len(evs) == 0 {
		return nil
	}
	keys := make([]string, len(evs))
	for i, e := range evs {
		keys[i] = e.IdempotencyKey
	}
	rows, err := s.Store.EventsByKey(ctx, tenant, keys)
	if err != nil {
		return fmt.Errorf("look up idempotency keys: %w", err)
	}
	for _, r := range rows {
		if i := slices.Index(keys, r.IdempotencyKey); i >= 0 {
			evs[i].OccurredAt = r.OccurredAt.UTC()
		}
	}
	return nil
}

// ingestOne records the event (so a reused key with other content is refused
// atomically, before any workflow runs) and starts or joins its MemoryWrite.
//
// defaultTime says the event's time defaulted to now: a retry then takes the time
// stored for its key, so it is the same event. The insert is tried first (a new
// key, the usual case, costs one statement); when it finds the key stored with
// another time, the stored time is read and the insert tried once more, so a retry,
// or the loser of two identical requests at once, joins the write instead of being
// refused.
func (s *memoryServer) ingestOne(ctx context.Context, ev memory.IngestEvent, defaultTime, wait bool, timeout time.Duration) (*engramv1.IngestResult, error) {
	wfID := write.MemoryWriteWorkflowID(ev.TenantID, ev.IdempotencyKey)
	// The same protection as the write path's Record, so both compute the same
	// fingerprint and a retry is recognised.
	prot, err := s.Store.ProtectContent(ev.Content)
	if err != nil {
		return nil, fmt.Errorf("protect content: %w", err)
	}
	var stored *storage.Event
	var created bool
	for attempt := 0; ; attempt++ {
		if defaultTime && attempt > 0 {
			if err := s.sameRetryTime(ctx, ev.TenantID, []*memory.IngestEvent{&ev}); err != nil {
				return nil, err
			}
		}
		stored, created, err = s.Store.InsertEvent(ctx, ev.TenantID, storage.NewEvent(ev, wfID, prot))
		if !errors.Is(err, storage.ErrIdempotencyConflict) || !defaultTime || attempt > 0 {
			break
		}
	}
	if errors.Is(err, storage.ErrIdempotencyConflict) {
		why := "different content, actor, scope ids or time"
		if stored.SchemaName != ev.Schema {
			why = fmt.Sprintf("schema %q, not %q", stored.SchemaName, ev.Schema)
		}
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("event.idempotency_key: %q was already used for a different event (%s; received %s)", ev.IdempotencyKey, why, stored.ReceivedAt.UTC().Format(time.RFC3339)))
	}
	if err != nil {
		return nil, prefixField("event.", err)
	}
	in := write.MemoryWriteInput{Event: ev, ExtractAttempts: s.Config.ExtractAttempts, ReviewTimeout: s.Config.ReviewTimeout}
	res := &engramv1.IngestResult{IdempotencyKey: ev.IdempotencyKey, WorkflowId: wfID, EventId: stored.ID, Status: engramv1.WriteStatus_WRITE_STATUS_RUNNING}
	if !wait {
		// The event is stored: the write is durable. A new write's workflow is
		// started in the background when a Starter is configured (run_id stays
		// empty; the workflow id names the write); a retry's is joined here, so it
		// learns the run.
		if s.Starter != nil && created {
			if err := s.Starter.Enqueue(ctx, in); err != nil {
				return nil, fmt.Errorf("start memory write: %w", err)
			}
			return res, nil
		}
		run, err := write.Start(ctx, s.Temporal, s.Config.TaskQueue, in)
		if err != nil {
			return nil, fmt.Errorf("start memory write: %w", err)
		}
		res.RunId = run.GetRunID()
		return res, nil
	}
	w, err := write.StartAndWait(ctx, s.Temporal, s.Config.TaskQueue, in, timeout)
	res.RunId = w.RunID
	st, reason, err := waitedStatus(ctx, w.Running, w.PendingReview, err)
	if err != nil {
		return nil, err
	}
	res.Status, res.Reason = st, reason
	if st == engramv1.WriteStatus_WRITE_STATUS_COMMITTED {
		fillResult(res, w.Result)
	}
	if st == engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW {
		fillResult(res, w.Result) // what was committed without a reviewer
		if err := s.fillPending(ctx, ev.TenantID, wfID, []*engramv1.IngestResult{res}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func fillResult(res *engramv1.IngestResult, out write.MemoryWriteResult) {
	if out.EventID != "" {
		res.EventId = out.EventID
	}
	res.EvidenceId = out.EvidenceID
	if out.Reason != "" {
		res.Reason = out.Reason
	}
	switch out.Status {
	case write.WriteCommitted:
		res.Status = engramv1.WriteStatus_WRITE_STATUS_COMMITTED
	case write.WriteUnparsed:
		res.Status = engramv1.WriteStatus_WRITE_STATUS_UNPARSED
	case write.WriteNoMemory:
		res.Status = engramv1.WriteStatus_WRITE_STATUS_NO_MEMORY
	case write.WritePendingReview:
		res.Status = engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW
	}
	for _, r := range out.Results {
		res.Outcomes = append(res.Outcomes, &engramv1.CandidateOutcome{
			CandidateId: r.CandidateID, Status: candidateStatusOut(r.Status), Action: r.Action, FactId: r.FactID,
			MemoryKey: r.MemoryKey, Reason: r.Reason, Reviewer: r.Reviewer,
		})
	}
}

// waitedStatus is the status of a write that StartAndWait returned: COMMITTED
// (fillResult refines it), PENDING_REVIEW, RUNNING when the wait ended first, or
// FAILED with the workflow's reason. A reused key with other content is
// ALREADY_EXISTS; the caller's end and an unreachable Temporal are errors.
func waitedStatus(ctx context.Context, running, pendingReview bool, err error) (engramv1.WriteStatus, string, error) {
	switch {
	case err == nil && running:
		return engramv1.WriteStatus_WRITE_STATUS_RUNNING, "", nil
	case err == nil && pendingReview:
		return engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, "", nil
	case err == nil:
		return engramv1.WriteStatus_WRITE_STATUS_COMMITTED, "", nil
	case ctx.Err() != nil:
		return 0, "", ctx.Err()
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		if ae.Type() == write.ErrTypeIdempotencyConflict {
			return 0, "", connect.NewError(connect.CodeAlreadyExists, errors.New(ae.Message()))
		}
		return engramv1.WriteStatus_WRITE_STATUS_FAILED, ae.Message(), nil
	}
	var se serviceerror.ServiceError
	if unavailable(err) || errors.As(err, &se) {
		return 0, "", fmt.Errorf("start memory write: %w", err)
	}
	return engramv1.WriteStatus_WRITE_STATUS_FAILED, "the write workflow failed: " + rootCause(err), nil
}

func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// fillPending attaches the candidates of workflow wfID awaiting review to the
// results of their events.
func (s *memoryServer) fillPending(ctx context.Context, tenant, wfID string, results []*engramv1.IngestResult) error {
	cands, err := s.Store.ListCandidates(ctx, tenant, storage.CandidateFilter{Status: memory.CandidateNeedsConfirmation, Undecided: true, WorkflowID: wfID})
	if err != nil {
		return fmt.Errorf("load pending candidates: %w", err)
	}
	ev, err := s.Store.CandidateEvidenceIDs(ctx, tenant, cands)
	if err != nil {
		return err
	}
	for i := range cands {
		c := &cands[i]
		for _, r := range results {
			if r.EventId == c.EventID || len(results) == 1 {
				r.Pending = append(r.Pending, pendingOut(c, ev[c.ID]))
				if r.Status != engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW {
					r.Status = engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW
				}
				break
			}
		}
	}
	return nil
}

// ingestBatch refuses keys already used for other content, then starts or joins one
// MemoryWriteBatch whose id derives from the batch key (or the events' keys).
func (s *memoryServer) ingestBatch(ctx context.Context, p *Principal, batchKey string, evs []memory.IngestEvent, wait bool, timeout time.Duration) (*engramv1.IngestResponse, error) {
	keys := make([]string, len(evs))
	for i, e := range evs {
		keys[i] = e.IdempotencyKey
	}
	rows := make([]*storage.Event, len(evs))
	for i, e := range evs {
		prot, err := s.Store.ProtectContent(e.Content)
		if err != nil {
			return nil, fmt.Errorf("protect content: %w", err)
		}
		rows[i] = storage.NewEvent(e, "", prot)
	}
	ids, err := s.Store.MatchEvents(ctx, p.TenantID, rows)
	var conflict *storage.EventKeyConflict
	if errors.As(err, &conflict) {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("events[%d].idempotency_key: %q was already used for a different event", conflict.Index, conflict.Key))
	}
	if err != nil {
		return nil, fmt.Errorf("check idempotency keys: %w", err)
	}
	if batchKey == "" {
		h := sha256.Sum256([]byte(strings.Join(keys, "\x1f")))
		batchKey = "h-" + hex.EncodeToString(h[:16])
	}
	wfID := write.MemoryWriteBatchWorkflowID(p.TenantID, batchKey)
	in := write.MemoryWriteBatchInput{Events: evs, ExtractAttempts: s.Config.ExtractAttempts, ReviewTimeout: int64(s.Config.ReviewTimeout / time.Second)}
	out := &engramv1.IngestResponse{BatchWorkflowId: wfID}
	for _, e := range evs {
		out.Results = append(out.Results, &engramv1.IngestResult{
			IdempotencyKey: e.IdempotencyKey, WorkflowId: wfID, EventId: ids[e.IdempotencyKey],
			Status: engramv1.WriteStatus_WRITE_STATUS_RUNNING,
		})
	}
	setRun := func(runID string) {
		for _, r := range out.Results {
			r.RunId = runID
		}
	}
	if !wait {
		run, err := write.StartBatch(ctx, s.Temporal, s.Config.TaskQueue, p.TenantID, batchKey, in)
		if err != nil {
			return nil, fmt.Errorf("start batch write: %w", err)
		}
		setRun(run.GetRunID())
		return out, nil
	}
	w, err := write.StartBatchAndWait(ctx, s.Temporal, s.Config.TaskQueue, p.TenantID, batchKey, in, timeout)
	setRun(w.RunID)
	st, reason, err := waitedStatus(ctx, w.Running, w.PendingReview, err)
	if err != nil {
		return nil, err
	}
	switch st {
	case engramv1.WriteStatus_WRITE_STATUS_COMMITTED:
		for i, r := range w.Result.Results {
			if i < len(out.Results) {
				fillResult(out.Results[i], r)
			}
		}
	case engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, engramv1.WriteStatus_WRITE_STATUS_RUNNING:
		// Each event answers its own status: the batch's result so far while it
		// waits for review, else (a batch that began waiting before it kept one, or
		// a wait that ended first) what Postgres holds of each event.
		if len(w.Result.Results) == len(out.Results) {
			for i, r := range w.Result.Results {
				fillResult(out.Results[i], r)
			}
		} else if err := s.storedStatuses(ctx, p.TenantID, keys, out.Results); err != nil {
			return nil, err
		}
		if st == engramv1.WriteStatus_WRITE_STATUS_RUNNING {
			break
		}
		if err := s.fillPending(ctx, p.TenantID, wfID, out.Results); err != nil {
			return nil, err
		}
	default:
		for _, r := range out.Results {
			r.Status, r.Reason = st, reason
		}
	}
	return out, nil
}

// storedStatuses sets the status of each event of a batch (results, in the order of
// keys) that Postgres says is settled: COMMITTED, PENDING_REVIEW, UNPARSED or FAILED.
// The others stay RUNNING.
func (s *memoryServer) storedStatuses(ctx context.Context, tenant string, keys []string, results []*engramv1.IngestResult) error {
	stored, err := s.Store.EventsByKey(ctx, tenant, keys)
	if err != nil {
		return fmt.Errorf("load batch events: %w", err)
	}
	for _, x := range stored {
		i := slices.Index(keys, x.IdempotencyKey)
		if i < 0 {
			continue
		}
		r := results[i]
		r.EventId = x.ID
		switch x.Status {
		case memory.EventCommitted:
			r.Status = engramv1.WriteStatus_WRITE_STATUS_COMMITTED
		case memory.EventPendingReview:
			r.Status = engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW
		case memory.EventUnparsed:
			r.Status = engramv1.WriteStatus_WRITE_STATUS_UNPARSED
		case memory.EventFailed:
			r.Status = engramv1.WriteStatus_WRITE_STATUS_FAILED
		}
		if x.StatusReason != "" && r.Reason == "" {
			r.Reason = x.StatusReason
		}
	}
	return nil
}

// ---- reads ----

// restrictTo narrows fact queries (already filtered by tenant in storage) to what a
// restricted key may read: its users' facts and the shared facts of its tenant,
// department or agent. nil when the key may read the whole tenant.
func restrictTo(p *Principal) func(*bun.SelectQuery) *bun.SelectQuery {
	if !p.Restricted() {
		return nil
	}
	return storage.VisibleTo(p.Users(), p.DepartmentID, p.AgentID)
}

func (s *memoryServer) logAccess(ctx context.Context, p *Principal, purpose, user, query string, facts []storage.Fact) {
	if len(facts) == 0 {
		return
	}
	ids := make([]string, 0, len(facts))
	for _, f := range facts {
		ids = append(ids, f.ID)
	}
	if err := s.Store.LogAccess(ctx, p.TenantID, p.Name, purpose, user, query, ids, nil); err != nil {
		s.Logger.WarnContext(ctx, "access log write failed", "tenant", p.TenantID, "error", err)
	}
}

func (s *memoryServer) GetFact(ctx context.Context, req *connect.Request[engramv1.GetFactRequest]) (*connect.Response[engramv1.GetFactResponse], error) {
	p, err := require(ctx, "GetFact", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	if err := validUUID("fact_id", req.Msg.FactId); err != nil {
		return nil, err
	}
	var found []storage.Fact
	var ev []string
	err = s.read(ctx, "get fact", func(ctx context.Context, st *storage.Store) error {
		var err error
		if found, err = st.ListFacts(ctx, p.TenantID, storage.FactFilter{ID: req.Msg.FactId, Restrict: restrictTo(p), Limit: 1}); err != nil {
			return fmt.Errorf("load fact: %w", err)
		}
		if len(found) == 0 {
			return nil
		}
		if ev, err = st.FactEvidenceIDs(ctx, p.TenantID, found[0].ID); err != nil {
			return fmt.Errorf("load fact evidence: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	if len(found) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("fact_id: no fact %s", req.Msg.FactId))
	}
	f := found[0]
	s.logAccess(ctx, p, "api:GetFact", f.UserID, "", []storage.Fact{f})
	out := factOut(&f)
	out.EvidenceIds = ev
	return connect.NewResponse(&engramv1.GetFactResponse{Fact: out}), nil
}

func (s *memoryServer) ListFacts(ctx context.Context, req *connect.Request[engramv1.ListFactsRequest]) (*connect.Response[engramv1.ListFactsResponse], error) {
	p, err := require(ctx, "ListFacts", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	limit := int(m.Limit)
	switch {
	case limit < 0:
		return nil, fieldErr("limit", "is negative")
	case limit == 0:
		limit = 100
	case limit > 1000:
		return nil, fieldErr("limit", fmt.Sprintf("%d exceeds the limit of 1000", limit))
	}
	if m.UserId != "" && !p.MayActFor(m.UserId) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("user_id: the key of %q may not read user %q", p.Name, m.UserId))
	}
	ff := storage.FactFilter{UserID: m.UserId, TaskID: m.TaskId, MemoryKey: m.MemoryKey, Predicate: m.Predicate, Limit: limit, Restrict: restrictTo(p)}
	if m.Scope != 0 {
		ff.Scope = scopeIn(m.Scope)
		if !ff.Scope.Valid() {
			return nil, fieldErr("scope", fmt.Sprintf("unknown value %d", m.Scope))
		}
	}
	for i, st := range m.Statuses {
		fs := factStatusIn(st)
		if !fs.Valid() {
			return nil, fieldErr(fmt.Sprintf("statuses[%d]", i), fmt.Sprintf("unknown value %d", st))
		}
		ff.Statuses = append(ff.Statuses, fs)
	}
	if ff.KnownAt, err = timeIn("known_at", m.KnownAt); err != nil {
		return nil, err
	}
	asOf, err := timeIn("as_of", m.AsOf)
	if err != nil {
		return nil, err
	}
	var facts []storage.Fact
	err = s.read(ctx, "list facts", func(ctx context.Context, st *storage.Store) (err error) {
		if asOf.IsZero() {
			facts, err = st.ListFacts(ctx, p.TenantID, ff)
		} else {
			facts, err = st.FactsAsOf(ctx, p.TenantID, asOf, ff)
		}
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("list facts: %w", err))
	}
	s.logAccess(ctx, p, "api:ListFacts", m.UserId, "", facts)
	out := &engramv1.ListFactsResponse{Facts: make([]*engramv1.Fact, len(facts))}
	for i := range facts {
		out.Facts[i] = factOut(&facts[i])
	}
	return connect.NewResponse(out), nil
}

func (s *memoryServer) FactHistory(ctx context.Context, req *connect.Request[engramv1.FactHistoryRequest]) (*connect.Response[engramv1.FactHistoryResponse], error) {
	p, err := require(ctx, "FactHistory", "agent", "reviewer")
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(req.Msg.MemoryKey)
	if key == "" {
		return nil, fieldErr("memory_key", "is empty")
	}
	knownAt, err := timeIn("known_at", req.Msg.KnownAt)
	if err != nil {
		return nil, err
	}
	var facts []storage.Fact
	err = s.read(ctx, "fact history", func(ctx context.Context, st *storage.Store) (err error) {
		facts, err = st.FactHistoryKnownAt(ctx, p.TenantID, key, knownAt, restrictTo(p))
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("fact history: %w", err))
	}
	if len(facts) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("memory_key: no facts with key %q", key))
	}
	s.logAccess(ctx, p, "api:FactHistory", facts[0].UserID, "", facts)
	out := &engramv1.FactHistoryResponse{}
	for i := range facts {
		out.Revisions = append(out.Revisions, factOut(&facts[i]))
	}
	return connect.NewResponse(out), nil
}

func (s *memoryServer) InvalidateFact(ctx context.Context, req *connect.Request[engramv1.InvalidateFactRequest]) (*connect.Response[engramv1.InvalidateFactResponse], error) {
	p, err := require(ctx, "InvalidateFact", "reviewer")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := validUUID("fact_id", m.FactId); err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(m.Reason)
	if reason == "" {
		return nil, fieldErr("reason", "is empty: say why the fact is invalid")
	}
	f, err := s.Store.InvalidateFact(ctx, p.TenantID, m.FactId, fmt.Sprintf("invalidated by %s: %s", p.Name, reason))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("fact_id: no fact %s", m.FactId))
	case errors.Is(err, storage.ErrFactNotActive):
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("fact_id: revision %d of %q is %s; only the ACTIVE revision can be invalidated", f.Revision, f.MemoryKey, f.Status))
	case err != nil:
		return nil, toConnect(ctx, err)
	}
	s.Logger.InfoContext(ctx, "fact invalidated", "tenant", p.TenantID, "fact_id", f.ID, "principal", p.Name)
	return connect.NewResponse(&engramv1.InvalidateFactResponse{Fact: factOut(f)}), nil
}

func (s *memoryServer) Forget(ctx context.Context, req *connect.Request[engramv1.ForgetRequest]) (*connect.Response[engramv1.ForgetResponse], error) {
	p, err := require(ctx, "Forget", "admin")
	if err != nil {
		return nil, err
	}
	user := strings.TrimSpace(req.Msg.UserId)
	if user == "" {
		return nil, fieldErr("user_id", "is empty: name the user to erase")
	}
	in := lifecycle.EraseSubjectInput{TenantID: p.TenantID, UserID: user, RequestedBy: p.Name, Reason: req.Msg.Reason}
	opts := lifecycle.EraseSubjectStartOptions(s.Config.TaskQueue, in)
	// Asking twice while an erasure runs joins it.
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	run, err := s.Temporal.ExecuteWorkflow(ctx, opts, lifecycle.EraseSubjectWorkflowName, in)
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("start erasure: %w", err))
	}
	s.Logger.InfoContext(ctx, "erasure started", "tenant", p.TenantID, "workflow_id", run.GetID(), "principal", p.Name)
	return connect.NewResponse(&engramv1.ForgetResponse{WorkflowId: run.GetID()}), nil
}

func (s *memoryServer) Recall(ctx context.Context, req *connect.Request[engramv1.RecallRequest]) (*connect.Response[engramv1.RecallResponse], error) {
	p, err := require(ctx, "Recall", "agent")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	user, err := userFor(p, "user_id", m.UserId)
	if err != nil {
		return nil, err
	}
	switch {
	case m.K < 0 || m.K > 100:
		return nil, fieldErr("k", fmt.Sprintf("%d is outside [0, 100]", m.K))
	case m.TokenBudget < 0 || m.TokenBudget > 8000:
		return nil, fieldErr("token_budget", fmt.Sprintf("%d is outside [0, 8000]", m.TokenBudget))
	case len(m.Query) > 8<<10:
		return nil, fieldErr("query", "longer than 8 KiB")
	}
	rq := recall.Request{
		Principal: recall.Principal{TenantID: p.TenantID, ID: p.Name, UserID: user, DepartmentID: p.DepartmentID, AgentID: p.AgentID},
		Query:     m.Query, SessionID: m.SessionId, TaskID: m.TaskId, K: int(m.K), TokenBudget: int(m.TokenBudget),
		Schema: m.Schema, Purpose: m.Purpose,
	}
	if m.AsOf != nil {
		if err := m.AsOf.CheckValid(); err != nil {
			return nil, fieldErr("as_of", err.Error())
		}
		rq.AsOf = m.AsOf.AsTime()
	}
	if rq.KnownAt, err = timeIn("known_at", m.KnownAt); err != nil {
		return nil, err
	}
	// rq.Schema may name a tenant's stored schema: the engine resolves it for the
	// caller's tenant and answers an unknown name as a schema field error.
	for i, sc := range m.Scopes {
		v := scopeIn(sc)
		if !v.Valid() {
			return nil, fieldErr(fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("unknown value %d", sc))
		}
		rq.Scopes = append(rq.Scopes, v)
	}
	if s.Recaller == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("recall is not configured on this server"))
	}
	resp, err := s.Recaller.Recall(ctx, rq)
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	return connect.NewResponse(recallOut(resp)), nil
}

func recallOut(r recall.Response) *engramv1.RecallResponse {
	out := &engramv1.RecallResponse{Context: r.Context, Tokens: int32(r.Tokens), AsOf: ts(r.AsOf)}
	for _, sec := range r.Sections {
		out.Sections = append(out.Sections, &engramv1.ContextSection{Title: sec.Title, Lines: sec.Lines})
	}
	for _, it := range r.Items {
		out.Items = append(out.Items, &engramv1.RecallItem{
			Kind: string(it.Kind), Id: it.ID, Content: it.Content, MemoryType: memoryTypeOut(it.MemoryType),
			Scope: scopeRefOut(it.Scope), Status: factStatusOut(it.Status), MemoryKey: it.MemoryKey, Predicate: it.Predicate,
			Object: it.Object, Revision: int32(it.Revision), ValidFrom: ts(it.ValidFrom), ValidUntil: tsp(it.ValidUntil),
			Confidence: it.Confidence, Score: it.Score, Retrievers: it.Retrievers, EvidenceIds: it.EvidenceIDs,
			OccurredAt: ts(it.OccurredAt), Why: it.Why,
		})
	}
	if t := r.Task; t != nil {
		out.Task = &engramv1.RecallTask{TaskId: t.TaskID, Goal: t.Goal, State: taskStateOut(t.State), Done: t.Done, Todo: t.Todo, NextStep: t.NextStep, LastError: t.LastError}
	}
	return out
}
