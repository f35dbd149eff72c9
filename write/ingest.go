package write

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/internal/outage"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Ingestor takes writes in: it protects each event's content as Record does,
// records the event (or joins the one stored under its key), then starts its
// write, hands the start to its Starter, or waits for the outcome. The API, the
// MCP server (through the API's handlers) and the benchmarks ingest through the
// one app.Build makes, whose Notices its worker and Temporal connection share.
type Ingestor struct {
	store    *storage.Store
	temporal client.Client
	o        IngestorOptions
}

// IngestorOptions configure an Ingestor; zero values take the write path's
// defaults.
type IngestorOptions struct {
	TaskQueue       string
	ExtractAttempts int           // MemoryWriteInput.ExtractAttempts
	ReviewTimeout   time.Duration // MemoryWriteInput.ReviewTimeout
	// Starter starts the writes of Ingest without wait in the background; nil
	// starts them in the call.
	Starter *Starter
	// Notices answer a caller waiting on a write this process's worker runs (see
	// notice.go); nil waits for the workflow's result.
	Notices *Notices
}

// NewIngestor returns an Ingestor of writes into st, started on c.
func NewIngestor(st *storage.Store, c client.Client, o IngestorOptions) *Ingestor {
	return &Ingestor{store: st, temporal: c, o: o}
}

// Statuses of an Ingested beside the write outcomes (WriteCommitted…).
const (
	// WriteRunning: the write is durable (its event is stored) and runs on.
	WriteRunning = "RUNNING"
	// WriteFailed: the write's workflow failed; Reason says why.
	WriteFailed = string(memory.EventFailed)
)

// Ingested is what Ingest answers for one event.
type Ingested struct {
	IdempotencyKey string
	WorkflowID     string
	RunID          string // empty when the start was handed to the Starter
	EventID        string
	EvidenceID     string
	Status         string // WriteRunning, WriteCommitted, WriteUnparsed, WriteNoMemory, WritePendingReview or WriteFailed
	Reason         string
	Outcomes       []CommittedResult // each candidate's, once known
	Pending        []PendingReview   // the candidates awaiting a reviewer
}

// PendingReview is a candidate of an ingested event that awaits a reviewer, with
// its evidence.
type PendingReview struct {
	Candidate   storage.Candidate
	EvidenceIDs []string
}

// IngestedBatch is what IngestBatch answers: the batch's workflow and each
// event's result, in the order of the batch.
type IngestedBatch struct {
	WorkflowID string
	Results    []*Ingested
}

// KeyConflictError refuses an event whose idempotency key was already used for a
// different one. Index is its place in a batch (-1: a single event).
type KeyConflictError struct {
	Index      int
	Key        string
	Why        string    // what differs (single events)
	ReceivedAt time.Time // when the stored event was received (single events)
}

func (e *KeyConflictError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("%q was already used for a different event", e.Key)
	}
	return fmt.Sprintf("%q was already used for a different event (%s; received %s)", e.Key, e.Why, e.ReceivedAt.UTC().Format(time.RFC3339))
}

// Is makes a KeyConflictError a storage.ErrIdempotencyConflict.
func (e *KeyConflictError) Is(target error) bool { return target == storage.ErrIdempotencyConflict }

// Ingest records ev (so a reused key with other content is refused atomically,
// before any workflow runs) and starts or joins its MemoryWrite: with wait > 0 it
// waits up to wait for the outcome, else it returns once the event is stored.
//
// defaultTime says ev's time defaulted to now: a retry then takes the time stored
// for its key, so it is the same event. The insert is tried first (a new key, the
// usual case, costs one statement); when it finds the key stored with another
// time, the stored time is read and the insert tried once more, so a retry, or
// the loser of two identical requests at once, joins the write instead of being
// refused.
func (g *Ingestor) Ingest(ctx context.Context, ev memory.IngestEvent, defaultTime bool, wait time.Duration) (*Ingested, error) {
	wfID := MemoryWriteWorkflowID(ev.TenantID, ev.IdempotencyKey)
	stored, created, err := g.record(ctx, &ev, wfID, defaultTime)
	if err != nil {
		return nil, err
	}
	in := MemoryWriteInput{Event: ev, ExtractAttempts: g.o.ExtractAttempts, ReviewTimeout: g.o.ReviewTimeout}
	res := &Ingested{IdempotencyKey: ev.IdempotencyKey, WorkflowID: wfID, EventID: stored.ID, Status: WriteRunning}
	if wait <= 0 {
		// The event is stored: the write is durable. A new write's workflow is
		// started in the background when a Starter is configured (RunID stays
		// empty; the workflow id names the write); a retry's is joined here, so it
		// learns the run.
		if g.o.Starter != nil && created {
			if err := g.o.Starter.Enqueue(ctx, in); err != nil {
				return nil, fmt.Errorf("start memory write: %w", err)
			}
			return res, nil
		}
		run, err := Start(ctx, g.temporal, g.o.TaskQueue, in)
		if err != nil {
			return nil, fmt.Errorf("start memory write: %w", err)
		}
		res.RunID = run.GetRunID()
		return res, nil
	}
	w, err := StartAndWait(ctx, g.temporal, g.o.Notices, g.o.TaskQueue, in, wait)
	res.RunID = w.RunID
	st, reason, err := waitedStatus(ctx, w.Running, w.PendingReview, err)
	if err != nil {
		return nil, err
	}
	res.Status, res.Reason = st, reason
	if st == WriteCommitted || st == WritePendingReview {
		res.fill(w.Result) // for a write awaiting review: what was committed without a reviewer
	}
	if st == WritePendingReview {
		if err := g.fillPending(ctx, ev.TenantID, wfID, []*Ingested{res}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// record protects ev's content and inserts its event, or finds it stored under
// its key (see Ingest).
func (g *Ingestor) record(ctx context.Context, ev *memory.IngestEvent, wfID string, defaultTime bool) (*storage.Event, bool, error) {
	// The same protection as the write path's Record, so both compute the same
	// fingerprint and a retry is recognised.
	prot, err := g.store.ProtectContent(ev.Content)
	if err != nil {
		return nil, false, fmt.Errorf("protect content: %w", err)
	}
	var stored *storage.Event
	var created bool
	for attempt := 0; ; attempt++ {
		if defaultTime && attempt > 0 {
			if err := g.sameRetryTime(ctx, ev.TenantID, []*memory.IngestEvent{ev}); err != nil {
				return nil, false, err
			}
		}
		stored, created, err = g.store.InsertEvent(ctx, ev.TenantID, storage.NewEvent(*ev, wfID, prot))
		if !errors.Is(err, storage.ErrIdempotencyConflict) || !defaultTime || attempt > 0 {
			break
		}
	}
	if errors.Is(err, storage.ErrIdempotencyConflict) {
		why := "different content, actor, scope ids or time"
		if stored.SchemaName != ev.Schema {
			why = fmt.Sprintf("schema %q, not %q", stored.SchemaName, ev.Schema)
		}
		return nil, false, &KeyConflictError{Index: -1, Key: ev.IdempotencyKey, Why: why, ReceivedAt: stored.ReceivedAt}
	}
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// sameRetryTime gives events whose occurred_at defaulted to now the time stored for
// their key, when the key was used before: a retry of an event sent without a time
// is then the same event, not a conflicting one.
func (g *Ingestor) sameRetryTime(ctx context.Context, tenant string, evs []*memory.IngestEvent) error {
	if len(evs) == 0 {
		return nil
	}
	keys := make([]string, len(evs))
	for i, e := range evs {
		keys[i] = e.IdempotencyKey
	}
	rows, err := g.store.EventsByKey(ctx, tenant, keys)
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

// fill takes what the write returned: its ids, reason, outcome and each
// candidate's result. A status other than an outcome leaves res's.
func (res *Ingested) fill(out MemoryWriteResult) {
	if out.EventID != "" {
		res.EventID = out.EventID
	}
	res.EvidenceID = out.EvidenceID
	if out.Reason != "" {
		res.Reason = out.Reason
	}
	switch out.Status {
	case WriteCommitted, WriteUnparsed, WriteNoMemory, WritePendingReview:
		res.Status = out.Status
	}
	res.Outcomes = append(res.Outcomes, out.Results...)
}

// waitedStatus is the status of a write that StartAndWait returned: WriteCommitted
// (fill refines it), WritePendingReview, WriteRunning when the wait ended first,
// or WriteFailed with the workflow's reason. A reused key with other content
// (the workflow's ErrTypeIdempotencyConflict), the caller's end and an
// unreachable Temporal are errors.
func waitedStatus(ctx context.Context, running, pendingReview bool, err error) (string, string, error) {
	switch {
	case err == nil && running:
		return WriteRunning, "", nil
	case err == nil && pendingReview:
		return WritePendingReview, "", nil
	case err == nil:
		return WriteCommitted, "", nil
	case ctx.Err() != nil:
		return "", "", ctx.Err()
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		if ae.Type() == ErrTypeIdempotencyConflict {
			return "", "", ae
		}
		return WriteFailed, ae.Message(), nil
	}
	var se serviceerror.ServiceError
	if outage.Is(err) || errors.As(err, &se) {
		return "", "", fmt.Errorf("start memory write: %w", err)
	}
	return WriteFailed, "the write workflow failed: " + rootCause(err), nil
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
func (g *Ingestor) fillPending(ctx context.Context, tenant, wfID string, results []*Ingested) error {
	cands, err := g.store.ListCandidates(ctx, tenant, storage.CandidateFilter{Status: memory.CandidateNeedsConfirmation, Undecided: true, WorkflowID: wfID})
	if err != nil {
		return fmt.Errorf("load pending candidates: %w", err)
	}
	ev, err := g.store.CandidateEvidenceIDs(ctx, tenant, cands)
	if err != nil {
		return err
	}
	for i := range cands {
		c := &cands[i]
		for _, r := range results {
			if r.EventID == c.EventID || len(results) == 1 {
				r.Pending = append(r.Pending, PendingReview{Candidate: *c, EvidenceIDs: ev[c.ID]})
				r.Status = WritePendingReview
				break
			}
		}
	}
	return nil
}

// Batch is a batch of events for IngestBatch, all of one tenant.
type Batch struct {
	TenantID string
	// Key names the batch's workflow; empty derives it from the events' keys.
	Key    string
	Events []memory.IngestEvent
	// DefaultTime[i] says event i's time defaulted to now (see Ingest).
	DefaultTime []bool
}

// IngestBatch refuses keys already used for other events, then starts or joins one
// MemoryWriteBatch whose id derives from the batch key (or the events' keys),
// waiting up to wait for its outcome when wait > 0.
func (g *Ingestor) IngestBatch(ctx context.Context, b Batch, wait time.Duration) (*IngestedBatch, error) {
	evs := b.Events
	var defaulted []*memory.IngestEvent
	for i := range evs {
		if i < len(b.DefaultTime) && b.DefaultTime[i] {
			defaulted = append(defaulted, &evs[i])
		}
	}
	if err := g.sameRetryTime(ctx, b.TenantID, defaulted); err != nil {
		return nil, err
	}
	keys := make([]string, len(evs))
	for i, e := range evs {
		keys[i] = e.IdempotencyKey
	}
	ids, err := g.matchEvents(ctx, b.TenantID, evs)
	if err != nil {
		return nil, err
	}
	batchKey := b.Key
	if batchKey == "" {
		h := sha256.Sum256([]byte(strings.Join(keys, "\x1f")))
		batchKey = "h-" + hex.EncodeToString(h[:16])
	}
	wfID := MemoryWriteBatchWorkflowID(b.TenantID, batchKey)
	in := MemoryWriteBatchInput{Events: evs, ExtractAttempts: g.o.ExtractAttempts, ReviewTimeout: int64(g.o.ReviewTimeout / time.Second)}
	out := &IngestedBatch{WorkflowID: wfID}
	for _, e := range evs {
		out.Results = append(out.Results, &Ingested{IdempotencyKey: e.IdempotencyKey, WorkflowID: wfID, EventID: ids[e.IdempotencyKey], Status: WriteRunning})
	}
	setRun := func(runID string) {
		for _, r := range out.Results {
			r.RunID = runID
		}
	}
	if wait <= 0 {
		run, err := StartBatch(ctx, g.temporal, g.o.TaskQueue, b.TenantID, batchKey, in)
		if err != nil {
			return nil, fmt.Errorf("start batch write: %w", err)
		}
		setRun(run.GetRunID())
		return out, nil
	}
	w, err := StartBatchAndWait(ctx, g.temporal, g.o.TaskQueue, b.TenantID, batchKey, in, wait)
	setRun(w.RunID)
	st, reason, err := waitedStatus(ctx, w.Running, w.PendingReview, err)
	if err != nil {
		return nil, err
	}
	return out, g.settleBatch(ctx, b.TenantID, keys, out, st, reason, w.Result)
}

// matchEvents protects each event's content and checks the events against those
// stored under their keys: the ids of the stored ones, or a KeyConflictError.
func (g *Ingestor) matchEvents(ctx context.Context, tenant string, evs []memory.IngestEvent) (map[string]string, error) {
	rows := make([]*storage.Event, len(evs))
	for i, e := range evs {
		prot, err := g.store.ProtectContent(e.Content)
		if err != nil {
			return nil, fmt.Errorf("protect content: %w", err)
		}
		rows[i] = storage.NewEvent(e, "", prot)
	}
	ids, err := g.store.MatchEvents(ctx, tenant, rows)
	var conflict *storage.EventKeyConflict
	if errors.As(err, &conflict) {
		return nil, &KeyConflictError{Index: conflict.Index, Key: conflict.Key}
	}
	if err != nil {
		return nil, fmt.Errorf("check idempotency keys: %w", err)
	}
	return ids, nil
}

// settleBatch sets each event's result from the batch's waited status st and
// result so far.
func (g *Ingestor) settleBatch(ctx context.Context, tenant string, keys []string, out *IngestedBatch, st, reason string, res MemoryWriteBatchResult) error {
	switch st {
	case WriteCommitted:
		for i, r := range res.Results {
			if i < len(out.Results) {
				out.Results[i].fill(r)
			}
		}
	case WritePendingReview, WriteRunning:
		// Each event answers its own status: the batch's result so far while it
		// waits for review, else (a batch that began waiting before it kept one, or
		// a wait that ended first) what Postgres holds of each event.
		if len(res.Results) == len(out.Results) {
			for i, r := range res.Results {
				out.Results[i].fill(r)
			}
		} else if err := g.storedStatuses(ctx, tenant, keys, out.Results); err != nil {
			return err
		}
		if st == WriteRunning {
			return nil
		}
		return g.fillPending(ctx, tenant, out.WorkflowID, out.Results)
	default:
		for _, r := range out.Results {
			r.Status, r.Reason = st, reason
		}
	}
	return nil
}

// storedStatuses sets the status of each event of a batch (results, in the order of
// keys) that Postgres says is settled: COMMITTED, PENDING_REVIEW, UNPARSED or FAILED.
// The others stay RUNNING.
func (g *Ingestor) storedStatuses(ctx context.Context, tenant string, keys []string, results []*Ingested) error {
	stored, err := g.store.EventsByKey(ctx, tenant, keys)
	if err != nil {
		return fmt.Errorf("load batch events: %w", err)
	}
	for _, x := range stored {
		i := slices.Index(keys, x.IdempotencyKey)
		if i < 0 {
			continue
		}
		r := results[i]
		r.EventID = x.ID
		switch x.Status {
		case memory.EventCommitted, memory.EventPendingReview, memory.EventUnparsed, memory.EventFailed:
			r.Status = string(x.Status)
		}
		if x.StatusReason != "" && r.Reason == "" {
			r.Reason = x.StatusReason
		}
	}
	return nil
}
