package write

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/turntext"
)

// Error types the write path raises; those retrying cannot fix are non-retryable.
const (
	ErrTypeIdempotencyConflict = "IdempotencyConflict"
	ErrTypeExtractorRejected   = "ExtractorRejected"
)

// NonRetryable lists the error types retry policies must not retry.
var NonRetryable = append([]string{ErrTypeIdempotencyConflict, ErrTypeExtractorRejected}, memory.NonRetryable...)

// MemoryActivities are the write path's steps; the struct holds their dependencies.
type MemoryActivities struct {
	Store     *storage.Store
	Extractor llm.Extractor
	Embedder  embedding.Embedder // nil: no vectors are written
	Schemas   schema.Source
	Gov       governance.Config
	Logger    *slog.Logger
	// Notices, when set, is told each Write's outcome for a caller of this
	// process waiting on the write (see notice.go); nil tells nobody.
	Notices *Notices

	// values is Embedder behind a cache of the short value texts duplicate
	// detection compares: Govern and Commit's re-decision ask for the same ones,
	// and a predicate's values repeat across writes.
	valuesOnce sync.Once
	values     embedding.Embedder
}

const valueCacheSize = 4096

func (a *MemoryActivities) valueEmbedder() embedding.Embedder {
	a.valuesOnce.Do(func() {
		a.values = a.Embedder
		if c, err := embedding.NewCachedEmbedder(a.Embedder, valueCacheSize); err == nil {
			a.values = c
		}
	})
	return a.values
}

func badWriteInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
}

// RecordInput is the Record activity's input.
type RecordInput struct {
	Event      memory.IngestEvent `json:"event"`
	WorkflowID string             `json:"workflow_id"`
	// Embed: embed the turn and store its vector with it (Revision 1 on), rather
	// than leave it to an Index step.
	Embed bool `json:"embed,omitempty"`
}

// Extracted is what extraction made of an event.
type Extracted struct {
	Candidates []memory.Candidate `json:"candidates,omitempty"`
	Attempts   int                `json:"attempts"`
	// Errors are the last attempt's validation errors when no attempt validated.
	Errors []string `json:"errors,omitempty"`
	// Unparsed, when set, is why the extractor gave nothing to validate (it stayed
	// unavailable, or refused): the write keeps the evidence and invents nothing.
	Unparsed string `json:"-"`
}

// RecordResult tells the workflow what was stored and what extractors need around it.
type RecordResult struct {
	EventID    string             `json:"event_id"`
	EvidenceID string             `json:"evidence_id"`
	Created    bool               `json:"created"`
	Recent     []string           `json:"recent,omitempty"`
	Known      []memory.EntityRef `json:"known,omitempty"`
	// Stored is the evidence text as stored and indexed (after redaction), when it
	// differs from the event's content.
	Stored string `json:"stored,omitempty"`
	// Schema is the schema reference the rest of the write uses ("travel@3" for a
	// tenant's stored version, the built-in name otherwise).
	Schema string `json:"schema,omitempty"`
	// LocalExtract: the extractor runs in the worker's process (the rule extractor),
	// so the workflow runs Extract as a local activity.
	LocalExtract bool `json:"local_extract,omitempty"`
	// Indexed: the evidence has its vector (Embed), or there is no embedder; else the
	// workflow indexes it.
	Indexed bool `json:"indexed,omitempty"`
	// Extracted and SessionUpdated are what Record did in revisions 1 and 2: it ran
	// an in-process extractor and updated the session itself. Record no longer does
	// (Write calls those steps); the fields stay for the histories of those
	// revisions, whose replays read them (legacy.go).
	Extracted      *Extracted `json:"extracted,omitempty"`
	SessionUpdated bool       `json:"session_updated,omitempty"`
}

// inProcess is an extractor that needs no network call (llm.RuleExtractor).
type inProcess interface{ InProcess() bool }

// Text is what later steps should read: the stored (redacted) text when there is one.
func (r RecordResult) Text(e memory.IngestEvent) string {
	if r.Stored != "" {
		return r.Stored
	}
	return e.Content
}

var evidenceKind = map[string]string{"MESSAGE": "TURN", "TOOL_RESULT": "TOOL_RESULT", "SYSTEM_EVENT": "SYSTEM", "DOCUMENT": "DOCUMENT"}

// Record stores the event and its evidence (idempotent, the turn's vector with it
// when Embed) and gathers recent turns and known entities for the extractor.
func (a *MemoryActivities) Record(ctx context.Context, in RecordInput) (_ RecordResult, err error) {
	defer func() {
		if err != nil && storage.Permanent(err) {
			err = badWriteInput(err) // e.g. a value Postgres can never store: fail now, with the reason
		}
	}()
	// Record as a step of its own (not inside Write) is a write whose outcome
	// comes later: a caller of this process waiting on it is told to wait for the
	// workflow's (see notice.go).
	defer a.Notices.postNotFinal(ctx, "Record")
	e := in.Event
	pinned, err := a.admit(ctx, &e)
	if err != nil {
		return RecordResult{}, err
	}
	// Redaction and sealing (when configured) happen before anything is stored: the
	// keyword index and the vectors are built from the redacted clear text.
	prot, err := a.Store.ProtectContent(e.Content)
	if err != nil {
		return RecordResult{}, fmt.Errorf("protect content: %w", err)
	}
	ev, created, err := a.storeEvent(ctx, e, in.WorkflowID, prot)
	if err != nil {
		return RecordResult{}, err
	}
	evd, err := a.storeEvidence(ctx, e, ev.ID, prot, in.Embed)
	if err != nil {
		return RecordResult{}, err
	}
	// An earlier attempt's row is returned as stored: it says whether it has a vector.
	res := RecordResult{EventID: ev.ID, EvidenceID: evd.ID, Created: created, Schema: pinned, Indexed: a.Embedder == nil || evd.Embedding != nil}
	if ip, ok := a.Extractor.(inProcess); ok && ip.InProcess() {
		res.LocalExtract = true
	}
	if prot.Redacted != e.Content {
		res.Stored = prot.Redacted
	}
	if err := a.extractorContext(ctx, e, evd.ID, &res); err != nil {
		return res, err
	}
	return res, nil
}

// admit checks an event may be written: valid (Validate fills its defaults in),
// its schema known (the version it is pinned to, returned), its user not being
// erased.
func (a *MemoryActivities) admit(ctx context.Context, e *memory.IngestEvent) (pinned string, err error) {
	if err := e.Validate(); err != nil {
		return "", badWriteInput(err)
	}
	if pinned, err = a.pinSchema(ctx, e.TenantID, e.Schema); err != nil {
		return "", err
	}
	if _, err := a.schemaFor(ctx, e.TenantID, pinned); err != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("schema: %v", err), memory.ErrTypeUnknownSchema, err)
	}
	if m := memoOf(ctx); m == nil || !m.clear[[2]string{e.TenantID, e.UserID}] {
		if err := RefuseDuringErasure(ctx, a.Store, e.TenantID, e.UserID); err != nil {
			return "", err
		}
		if m != nil {
			m.clear[[2]string{e.TenantID, e.UserID}] = true
		}
	}
	return pinned, nil
}

// storeEvent stores the event, or finds it: the API stored it before starting
// this write, so it is looked up first. A key used for another event, or a field
// Postgres refuses, fails the write for good.
func (a *MemoryActivities) storeEvent(ctx context.Context, e memory.IngestEvent, workflowID string, prot storage.ProtectedContent) (*storage.Event, bool, error) {
	ev, created, err := a.Store.EnsureEvent(ctx, e.TenantID, storage.NewEvent(e, workflowID, prot))
	if errors.Is(err, storage.ErrIdempotencyConflict) {
		return nil, false, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeIdempotencyConflict, err)
	}
	var fe memory.FieldError
	if errors.As(err, &fe) {
		return nil, false, badWriteInput(err)
	}
	return ev, created, err
}

// storeEvidence stores the event's turn as evidence (idempotent on the event and
// its locator): what it is found by, its vector and its long sentences' vectors
// when embed (an embedder that fails leaves them to the Index step), and its
// sealed original.
func (a *MemoryActivities) storeEvidence(ctx context.Context, e memory.IngestEvent, eventID string, prot storage.ProtectedContent, embed bool) (*storage.Evidence, error) {
	locator := e.Locator
	if locator == "" {
		locator = "event:" + eventID
	}
	// The turn is found by its own words and its speaker's name (its questions' words
	// at a fraction), and, at a fraction, by the turn before it in the conversation
	// (a reply by the question it answers).
	own, asked := turntext.SplitAsked(prot.Redacted)
	if sp := SpeakerOf(e); llm.SpeakerSubject(sp) != "user" {
		own = sp + ": " + own
	}
	prev, err := a.previousTurn(ctx, e)
	if err != nil {
		return nil, err
	}
	row := &storage.Evidence{
		EventID: eventID, Kind: evidenceKind[e.EventType], Content: prot.Stored, KeyID: prot.KeyID, Locator: locator,
		Speaker: e.ActorType + ":" + firstNonEmpty(e.ActorID, e.UserID), UserID: e.UserID, DepartmentID: e.DepartmentID,
		AgentID: e.AgentID, SessionID: e.SessionID, TaskID: e.TaskID, OccurredAt: e.OccurredAt.UTC(),
	}
	var sentences []*pgvector.Vector
	if embed && a.Embedder != nil {
		// The vector goes in with the row: no Index step to read the text back and
		// update it. An embedder that fails leaves the row without one, for Index.
		// A long turn's sentences are embedded in the same call, each on its own
		// (recall scores a turn by its best sentence).
		texts := []string{embedText(prot.Redacted, row.Speaker, row.UserID)}
		for _, sn := range turntext.Sentences(prot.Redacted) {
			texts = append(texts, embedText(sn, row.Speaker, row.UserID))
		}
		if vs, err := a.embedMany(ctx, texts); err != nil {
			activity.GetLogger(ctx).Warn("embedding the turn failed; the Index step will retry it", "error", err)
		} else {
			row.Embedding, sentences = vs[0], vs[1:]
		}
	}
	evd, err := a.Store.InsertEvidenceSearch(ctx, e.TenantID, row, storage.EvidenceSearch{
		Told: storage.SearchText(own), Asked: storage.SearchText(asked), Context: storage.SearchText(prev)})
	if err != nil {
		return nil, err
	}
	if err := a.Store.InsertEvidenceSentences(ctx, e.TenantID, evd.ID, evd.UserID, sentences); err != nil {
		return nil, err
	}
	if prot.OriginalSealed != "" {
		if err := a.Store.SetEvidenceOriginal(ctx, e.TenantID, evd.ID, prot); err != nil {
			return nil, err
		}
	}
	return evd, nil
}

// extractorContext gathers what the extractor reads beside the turn: the user's
// recent turns (oldest first) and known entities.
func (a *MemoryActivities) extractorContext(ctx context.Context, e memory.IngestEvent, evidenceID string, res *RecordResult) error {
	recent, err := a.Store.RecentTurns(ctx, e.TenantID, storage.TurnQuery{UserID: e.UserID, ExcludeID: evidenceID, Before: e.OccurredAt, Inclusive: true, Limit: 5})
	if err != nil {
		return fmt.Errorf("load recent turns: %w", err)
	}
	for i := len(recent) - 1; i >= 0; i-- { // oldest first
		res.Recent = append(res.Recent, recent[i])
	}
	ents, err := a.Store.EntitiesOfUser(ctx, e.TenantID, e.UserID, 50)
	if err != nil {
		return fmt.Errorf("load known entities: %w", err)
	}
	for _, en := range ents {
		res.Known = append(res.Known, memory.EntityRef{Type: en.Type, ID: en.ID, State: en.State})
	}
	return nil
}

// namedExtractor has every candidate name the extractor that proposed it (an LLM
// is told to leave these fields to us).
func namedExtractor(cands []memory.Candidate, out llm.ExtractOutput) []memory.Candidate {
	for i := range cands {
		if cands[i].Extractor == "" {
			cands[i].Extractor, cands[i].Version = out.Extractor, out.Version
		}
	}
	return cands
}

// previousTurn is the clear text of the user's turn just before e (in e's session
// when it has one), or "".
func (a *MemoryActivities) previousTurn(ctx context.Context, e memory.IngestEvent) (string, error) {
	prev, err := a.Store.RecentTurns(ctx, e.TenantID, storage.TurnQuery{UserID: e.UserID, SessionID: e.SessionID, Before: e.OccurredAt, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("load the previous turn: %w", err)
	}
	if len(prev) == 0 {
		return "", nil
	}
	return prev[0], nil
}

// SpeakerOf is who said an event: the person an actor id names when a user's event
// was said by someone other than the user (a conversation between two people kept
// under one user id), else the actor type ("USER", "AGENT", …).
func SpeakerOf(e memory.IngestEvent) string {
	if (e.ActorType == "" || e.ActorType == "USER") && strings.TrimSpace(e.ActorID) != "" && e.ActorID != e.UserID {
		return strings.TrimSpace(e.ActorID)
	}
	return e.ActorType
}

// speakerSubject makes what a named speaker said about "the user" a memory about the
// speaker, whichever extractor proposed it: two people talking never blend into one
// subject. Entity subjects ("Order:1") and collective ones are kept.
func speakerSubject(c memory.Candidate, e memory.IngestEvent) memory.Candidate {
	name := llm.SpeakerSubject(SpeakerOf(e))
	if name == "user" {
		return c
	}
	if sub := strings.ToLower(strings.TrimSpace(c.Subject)); sub == "" || sub == "user" || sub == "speaker" || sub == strings.ToLower(name) {
		c.Subject = name
		if c.Content != "" && strings.HasPrefix(c.Content, "user ") {
			c.Content = name + c.Content[len("user"):]
		}
	}
	return c
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ExtractInput is the Extract activity's input.
type ExtractInput struct {
	Event memory.IngestEvent `json:"event"`
	// Text is what the extractor reads: the redacted text when redaction is on.
	Text     string             `json:"text,omitempty"`
	Recent   []string           `json:"recent,omitempty"`
	Known    []memory.EntityRef `json:"known,omitempty"`
	Feedback []string           `json:"feedback,omitempty"`
}

// Extract asks the configured extractor for candidates. Transient LLM failures are
// retried by the activity's retry policy; a request the endpoint refuses is not.
func (a *MemoryActivities) Extract(ctx context.Context, in ExtractInput) (llm.ExtractOutput, error) {
	s, err := a.schemaFor(ctx, in.Event.TenantID, in.Event.Schema)
	if err != nil {
		return llm.ExtractOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeUnknownSchema, err)
	}
	stop := heartbeatEvery(ctx, 3*time.Second)
	defer stop()
	out, err := a.Extractor.Extract(ctx, s, llm.ExtractInput{
		Text: firstNonEmpty(in.Text, in.Event.Content), OccurredAt: in.Event.OccurredAt, Speaker: SpeakerOf(in.Event),
		UserID: in.Event.UserID, DepartmentID: in.Event.DepartmentID, SessionID: in.Event.SessionID, TaskID: in.Event.TaskID,
		Recent: in.Recent, Known: in.Known, Feedback: in.Feedback,
	})
	if err != nil {
		var ce *llm.CallError
		if errors.As(err, &ce) && !ce.Retryable {
			return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeExtractorRejected, err)
		}
		if ce != nil && ce.RetryAfter > 0 {
			// Honour the endpoint's Retry-After instead of our own backoff.
			return out, temporal.NewApplicationErrorWithOptions(err.Error(), "ExtractorBusy", temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: ce.RetryAfter})
		}
		return out, err
	}
	return out, nil
}

// heartbeatEvery records an activity heartbeat periodically until stop is called.
// Outside an activity (unit tests calling the method directly) it does nothing.
func heartbeatEvery(ctx context.Context, d time.Duration) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// ValidateInput is the Validate activity's input.
type ValidateInput struct {
	TenantID string `json:"tenant_id,omitempty"`
	Schema   string `json:"schema"`
	Raw      string `json:"raw"`
}

// ValidateResult holds the valid candidates or the errors to feed back.
type ValidateResult struct {
	Candidates []memory.Candidate `json:"candidates,omitempty"`
	Errors     []string           `json:"errors,omitempty"`
}

// Validate checks the extractor's raw output against the schema.
func (a *MemoryActivities) Validate(ctx context.Context, in ValidateInput) (ValidateResult, error) {
	s, err := a.schemaFor(ctx, in.TenantID, in.Schema)
	if err != nil {
		return ValidateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeUnknownSchema, err)
	}
	cands, errs := s.ParseCandidates([]byte(in.Raw))
	if len(errs) > 0 {
		out := ValidateResult{}
		for _, e := range errs {
			out.Errors = append(out.Errors, e.Error())
		}
		return out, nil
	}
	return ValidateResult{Candidates: cands}, nil
}

// GovernInput is the Govern activity's input.
type GovernInput struct {
	Event      memory.IngestEvent `json:"event"`
	EventID    string             `json:"event_id"`
	EvidenceID string             `json:"evidence_id"`
	WorkflowID string             `json:"workflow_id"`
	Candidates []memory.Candidate `json:"candidates"`
	// Embed, for GovernCommit: as CommitInput's.
	Embed bool `json:"embed,omitempty"`
}

// GovernCommitResult is what GovernCommit did: the candidates that wait for a
// human, and the commit of the others.
type GovernCommitResult struct {
	Pending   []Governed   `json:"pending,omitempty"`
	Committed CommitResult `json:"committed"`
}

// GovernCommit is Govern, then Commit of every candidate that needs no human, in
// one step (write revision 1): the decisions never travel through the workflow's
// history and back. Both are idempotent, so a retry after a commit whose result
// was lost governs again (the stored decisions stand) and returns what was
// committed.
func (a *MemoryActivities) GovernCommit(ctx context.Context, in GovernInput) (GovernCommitResult, error) {
	var out GovernCommitResult
	gov, err := a.Govern(ctx, in)
	if err != nil {
		return out, err
	}
	var now []Governed
	for _, it := range gov.Items {
		if it.Decision.Status == memory.CandidateNeedsConfirmation {
			out.Pending = append(out.Pending, it)
		} else {
			now = append(now, it)
		}
	}
	if len(now) == 0 {
		return out, nil
	}
	out.Committed, err = a.Commit(ctx, CommitInput{Event: in.Event, EventID: in.EventID, EvidenceID: in.EvidenceID, WorkflowID: in.WorkflowID, Items: now, Embed: in.Embed})
	return out, err
}

// Governed is one candidate with its key, scope and governance decision.
type Governed struct {
	CandidateID   string              `json:"candidate_id"`
	Candidate     memory.Candidate    `json:"candidate"`
	Proposal      governance.Proposal `json:"proposal"`
	Decision      governance.Decision `json:"decision"`
	ReviewDefault string              `json:"review_default"` // confirm or reject when a review times out
}

// GovernResult lists the governed candidates in extraction order.
type GovernResult struct {
	Items []Governed `json:"items"`
}

// candidateNS namespaces deterministic candidate ids.
var candidateNS = uuid.MustParse("6f1c1f0e-8a53-4b8e-9a43-3f0f5e0d2c11")

// CandidateID is deterministic, so a retried Govern or Commit touches the same row.
func CandidateID(eventID string, index int) string {
	return uuid.NewSHA1(candidateNS, []byte(fmt.Sprintf("%s/%d", eventID, index))).String()
}

func scopeRefFor(c memory.Candidate, e memory.IngestEvent) memory.ScopeRef {
	ref := memory.ScopeRef{Scope: c.Scope}
	switch c.Scope {
	case memory.ScopeDepartment:
		ref.DepartmentID = e.DepartmentID
	case memory.ScopeUser:
		ref.UserID = e.UserID
	case memory.ScopeAgent:
		ref.AgentID = e.AgentID
	case memory.ScopeSession:
		ref.SessionID, ref.UserID = e.SessionID, e.UserID
	case memory.ScopeTask:
		ref.TaskID, ref.UserID = e.TaskID, e.UserID
	}
	return ref
}

func toExisting(f storage.Fact) governance.Existing {
	return governance.Existing{
		FactID: f.ID, MemoryKey: f.MemoryKey, Scope: f.ScopeRef(), Subject: f.Subject, Predicate: f.Predicate,
		Object: f.Object, Status: f.Status, Revision: f.Revision, Confidence: f.Confidence,
		ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, ObservedAt: f.ObservedAt, StatedAt: f.StatedAt,
	}
}

// loadExisting reads the revisions of the proposal's key and the other ACTIVE
// facts of the same subject and predicate (broader scopes, other values), each
// with its value's similarity to the candidate's.
func (a *MemoryActivities) loadExisting(ctx context.Context, db bun.IDB, tenantID, userID string, p governance.Proposal) ([]governance.Existing, error) {
	revs, err := storage.Revisions(ctx, db, tenantID, p.MemoryKey)
	if err != nil {
		return nil, fmt.Errorf("load revisions: %w", err)
	}
	var out []governance.Existing
	seen := map[string]bool{}
	for _, f := range revs {
		out = append(out, toExisting(f))
		seen[f.ID] = true
	}
	others, err := storage.ActiveBySubjectPredicate(ctx, db, tenantID, userID, p.Candidate.Subject, p.Candidate.Predicate)
	if err != nil {
		return nil, fmt.Errorf("load facts of the same predicate: %w", err)
	}
	for _, f := range others {
		if !seen[f.ID] {
			out = append(out, toExisting(f))
		}
	}
	return out, a.withSimilarity(ctx, p.Candidate, out)
}

// withSimilarity sets the cosine between the candidate's value and each existing
// fact's value (governance.Existing.Similarity), so a value restated in other
// words ("direct flights" / "flying direct") is a duplicate once it reaches
// ENGRAM_DUPLICATE_SIMILARITY. Values are compared, not contents: a content's
// shared wording ("The user prefers …") would make any two values of a
// predicate look alike. Values whose numbers differ ("8000 CNY" / "9000 CNY",
// two dates, two order ids) are never similar, however close their vectors.
// Without an embedder only exact values match.
func (a *MemoryActivities) withSimilarity(ctx context.Context, c memory.Candidate, existing []governance.Existing) error {
	if a.Embedder == nil || strings.TrimSpace(c.Object) == "" {
		return nil
	}
	texts := []string{c.Object}
	var idx []int
	for i, e := range existing {
		if e.Object != "" && schema.NormalizeValue(e.Object) != schema.NormalizeValue(c.Object) && digits(e.Object) == digits(c.Object) {
			texts = append(texts, e.Object)
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	vecs, err := a.valueEmbedder().Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed values for duplicate detection: %w", err)
	}
	for j, i := range idx {
		existing[i].Similarity = embedding.Cosine(vecs[0], vecs[j+1])
	}
	return nil
}

// digits is the string's digits in order: values that differ in them differ.
func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
}

// Govern decides each candidate against stored memory and records the candidates
// (with their evidence links) so pending reviews are visible in Postgres.
func (a *MemoryActivities) Govern(ctx context.Context, in GovernInput) (GovernResult, error) {
	s, err := a.schemaFor(ctx, in.Event.TenantID, in.Event.Schema)
	if err != nil {
		return GovernResult{}, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeUnknownSchema, err)
	}
	var res GovernResult
	err = a.Store.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		final, err := finalCandidates(ctx, tx, in.Event.TenantID, in.EventID)
		if err != nil {
			return err
		}
		for i, c := range in.Candidates {
			c = speakerSubject(c, in.Event)
			g := Governed{CandidateID: CandidateID(in.EventID, i), Candidate: c, ReviewDefault: "reject"}
			ref := scopeRefFor(c, in.Event)
			p := governance.Proposal{Candidate: c, Scope: ref, EventTime: in.Event.OccurredAt.UTC(), Actor: in.Event.ActorType}
			if r, ok := final[g.CandidateID]; ok {
				// Committed by an earlier run of this write (the worker died after the
				// commit, before the workflow recorded it, and the steps run again):
				// the stored decision stands, and Commit returns what it committed.
				p.MemoryKey = r.MemoryKey
				g.Proposal = p
				g.Decision = governance.Decision{Status: r.Status, Action: governance.Action(r.Action), Reason: r.Reason}
				res.Items = append(res.Items, g)
				continue
			}
			if pred, ok := s.Predicate(c.Predicate); ok {
				p.NeedsConfirmation, p.Sensitive, p.AssertedBy = pred.NeedsConfirmation, pred.Sensitive, pred.AssertedBy
				if pred.ReviewDefault != "" {
					g.ReviewDefault = string(pred.ReviewDefault)
				}
			}
			if err := ref.Validate(); err != nil {
				// The scope the extractor chose needs an id this event lacks.
				g.Proposal = p
				g.Decision = governance.Decision{Status: memory.CandidateRejected, Action: governance.ActionNoop,
					Reason: fmt.Sprintf("scope %s cannot be used for this event: %v", c.Scope, err)}
			} else {
				p.MemoryKey = s.MemoryKey(c, ref)
				g.Proposal = p
				existing, err := a.loadExisting(ctx, tx, in.Event.TenantID, in.Event.UserID, p)
				if err != nil {
					return err
				}
				g.Decision = governance.Decide(a.Gov, p, existing)
			}
			if err := storage.UpsertCandidate(ctx, tx, in.Event.TenantID, candidateRow(in, g, s)); err != nil {
				return err
			}
			if err := storage.LinkCandidateEvidence(ctx, tx, in.Event.TenantID, g.CandidateID, in.EvidenceID, memory.RelSupport); err != nil {
				return err
			}
			res.Items = append(res.Items, g)
		}
		status := memory.EventProcessing
		for _, it := range res.Items {
			if it.Decision.Status == memory.CandidateNeedsConfirmation {
				status = memory.EventPendingReview
			}
		}
		return storage.SetGovernedStatus(ctx, tx, in.Event.TenantID, in.EventID, status)
	})
	return res, err
}

// finalCandidates are the event's candidates a commit decided (accepted,
// rejected, superseded), by id.
func finalCandidates(ctx context.Context, tx bun.Tx, tenant, eventID string) (map[string]storage.Candidate, error) {
	stored, err := storage.ListCandidates(ctx, tx, tenant, storage.CandidateFilter{EventID: eventID})
	if err != nil {
		return nil, err
	}
	final := map[string]storage.Candidate{}
	for _, r := range stored {
		if r.Status == memory.CandidateAccepted || r.Status == memory.CandidateRejected || r.Status == memory.CandidateSuperseded {
			final[r.ID] = r
		}
	}
	return final, nil
}

func candidateRow(in GovernInput, g Governed, sc *schema.Schema) *storage.Candidate {
	c := g.Candidate
	attrs, _ := json.Marshal(c.Attributes)
	rels, _ := json.Marshal(c.Relations)
	if c.Attributes == nil {
		attrs = []byte("{}")
	}
	if c.Relations == nil {
		rels = []byte("[]")
	}
	ref := g.Proposal.Scope
	if ref.Scope == "" {
		ref.Scope = c.Scope
	}
	// The row records the event's ids so a rejected candidate still says whose it was.
	row := &storage.Candidate{
		ID: g.CandidateID, EventID: in.EventID, WorkflowID: in.WorkflowID,
		MemoryType: c.MemoryType, Scope: c.Scope,
		DepartmentID: in.Event.DepartmentID, UserID: in.Event.UserID, AgentID: in.Event.AgentID,
		SessionID: in.Event.SessionID, TaskID: in.Event.TaskID,
		MemoryKey: g.Proposal.MemoryKey, Subject: c.Subject, Predicate: c.Predicate, Object: c.Object, Content: c.Content,
		EntityType: c.EntityType, EntityID: c.EntityID, Attributes: attrs, Relations: rels,
		Confidence: clamp01(c.Confidence), Origin: c.Origin, Retraction: c.Retraction,
		Extractor: c.Extractor, ExtractorVersion: c.Version, SchemaName: sc.Name, SchemaVersion: sc.Version,
		ValidFrom: c.ValidFrom, ValidUntil: c.ValidUntil,
		Status: g.Decision.Status, Action: string(g.Decision.Action), Reason: g.Decision.Reason,
	}
	if row.Status == memory.CandidateAccepted {
		row.Status = memory.CandidatePending // accepted by governance, not yet committed
	}
	if !row.Origin.Valid() {
		row.Origin = memory.OriginStated
	}
	return row
}

func clamp01(f float64) float64 {
	if f < 0 {
		return 0
	}
	if f > 1 {
		return 1
	}
	return f
}

// CommitInput is the Commit activity's input.
type CommitInput struct {
	Event      memory.IngestEvent            `json:"event"`
	EventID    string                        `json:"event_id"`
	EvidenceID string                        `json:"evidence_id"`
	WorkflowID string                        `json:"workflow_id"`
	Items      []Governed                    `json:"items"`
	Verdicts   map[string]governance.Verdict `json:"verdicts,omitempty"` // by candidate id
	// Embed: embed the facts it writes and store their vectors with them (Revision 1
	// on), rather than leave them to an Index step.
	Embed bool `json:"embed,omitempty"`

	// vectors are the embeddings of the contents the accepted items should write,
	// computed before the transaction (no lock is held while embedding); indexed
	// collects the facts written with one.
	vectors map[string]*pgvector.Vector
	indexed map[string]bool
}

// CommittedResult is the final outcome of one candidate.
type CommittedResult struct {
	CandidateID string                 `json:"candidate_id"`
	Status      memory.CandidateStatus `json:"status"`
	Action      string                 `json:"action"`
	FactID      string                 `json:"fact_id,omitempty"`
	MemoryKey   string                 `json:"memory_key,omitempty"`
	Reason      string                 `json:"reason"`
	Reviewer    string                 `json:"reviewer,omitempty"`
}

// CommitResult lists the outcomes and the facts to index.
type CommitResult struct {
	Results []CommittedResult `json:"results"`
	FactIDs []string          `json:"fact_ids,omitempty"`
	// Indexed are the FactIDs written with their vector (Embed): the workflow
	// indexes the rest.
	Indexed []string `json:"indexed,omitempty"`
}

// Commit applies every decision in one transaction: fact revisions, evidence links,
// entities and edges, candidate statuses, outbox rows and the event's status. It
// re-decides under each key's lock, so concurrent writes of one key stay ordered,
// and it is idempotent: once the event is COMMITTED a retry returns the stored outcome.
func (a *MemoryActivities) Commit(ctx context.Context, in CommitInput) (CommitResult, error) {
	tenant := in.Event.TenantID
	var out CommitResult
	s, err := a.schemaFor(ctx, in.Event.TenantID, in.Event.Schema)
	if err != nil {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeUnknownSchema, err)
	}
	if in.Embed && a.Embedder != nil {
		in.vectors, in.indexed = a.embedAccepted(ctx, in), map[string]bool{}
	}
	err = a.Store.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		clear(in.indexed) // a retried transaction starts over
		if _, err := storage.LockEvent(ctx, tx, tenant, in.EventID); err != nil {
			return err
		}
		// A candidate whose row is final was committed by an earlier attempt of this
		// activity (or an earlier run): return what was stored instead of applying twice.
		final, err := finalCandidates(ctx, tx, tenant, in.EventID)
		if err != nil {
			return err
		}
		var todo []Governed
		for _, it := range in.Items {
			if r, ok := final[it.CandidateID]; ok {
				cr := CommittedResult{CandidateID: r.ID, Status: r.Status, Action: r.Action, MemoryKey: r.MemoryKey, Reason: r.Reason, Reviewer: r.Reviewer}
				if r.FactID != nil {
					cr.FactID = *r.FactID
					// The same facts to index as the attempt that committed them: a
					// retried Commit returns what the first returned.
					if r.Status == memory.CandidateAccepted && indexable(governance.Action(r.Action)) {
						out.FactIDs = append(out.FactIDs, cr.FactID)
					}
				}
				out.Results = append(out.Results, cr)
				continue
			}
			todo = append(todo, it)
		}
		in.Items = todo
		// Keys are locked in sorted order so two commits never wait on each other in a cycle.
		keys := []string{}
		for _, it := range in.Items {
			if it.Proposal.MemoryKey != "" {
				keys = append(keys, it.Proposal.MemoryKey)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := storage.LockMemoryKey(ctx, tx, tenant, k); err != nil {
				return err
			}
		}
		var graph []memory.Candidate
		for _, it := range in.Items {
			r, factID, c, err := a.commitOne(ctx, tx, s, in, it)
			if err != nil {
				return fmt.Errorf("commit candidate %s: %w", it.CandidateID, err)
			}
			if factID != "" {
				out.FactIDs = append(out.FactIDs, factID)
			}
			if c != nil {
				graph = append(graph, *c)
			}
			out.Results = append(out.Results, r)
		}
		// The event is COMMITTED once none of its candidates waits for a review.
		if err := storage.SettleEventStatus(ctx, tx, tenant, in.EventID); err != nil {
			return err
		}
		// Entities last, in one order: other writes about the same entity (a city,
		// an order) wait on its row until this transaction ends, so it is locked
		// as late as can be (at 32 callers of bench write such an upsert waited
		// 6 ms on average), and two commits never lock two entities in opposite
		// orders.
		slices.SortStableFunc(graph, func(x, y memory.Candidate) int {
			return cmp.Or(cmp.Compare(x.EntityType, y.EntityType), cmp.Compare(x.EntityID, y.EntityID))
		})
		for _, c := range graph {
			if err := a.writeGraph(ctx, tx, s, in, c); err != nil {
				return err
			}
		}
		return nil
	})
	for _, id := range out.FactIDs {
		if in.indexed[id] {
			out.Indexed = append(out.Indexed, id)
		}
	}
	return out, err
}

// embedAccepted embeds, in one call, the content each item would write as a fact
// revision if accepted (an item rejected for good, by governance or its reviewer,
// or accepted as one that writes no revision, is left out), keyed by that
// content. A content the transaction ends up writing differently is simply not
// found and left to Index; an embedder that fails leaves them all to Index.
func (a *MemoryActivities) embedAccepted(ctx context.Context, in CommitInput) map[string]*pgvector.Vector {
	var texts []string
	for _, it := range in.Items {
		v, reviewed := in.Verdicts[it.CandidateID]
		if it.Decision.Status == memory.CandidateRejected || (reviewed && v.Kind == governance.VerdictReject) || it.Proposal.MemoryKey == "" {
			continue
		}
		// A duplicate, an invalidation or a no-op writes no revision: its content
		// is not embedded (a forward pass of the model for nothing: at 32 callers
		// of bench write two candidates in five were duplicates). Should memory
		// have changed since Govern so that the transaction writes a revision
		// after all, its vector is not found and Index embeds it.
		if it.Decision.Status == memory.CandidateAccepted && !indexable(it.Decision.Action) {
			continue
		}
		c := it.Candidate
		if reviewed && v.Kind == governance.VerdictEdit && v.Object != c.Object {
			c.Content = strings.Replace(c.Content, c.Object, v.Object, 1)
			c.Object = v.Object
		}
		texts = append(texts, factContent(c))
	}
	if len(texts) == 0 {
		return nil
	}
	vecs, err := a.Embedder.Embed(ctx, texts)
	if err != nil || len(vecs) != len(texts) {
		activity.GetLogger(ctx).Warn("embedding the facts failed; the Index step will retry them", "error", err)
		return nil
	}
	out := make(map[string]*pgvector.Vector, len(texts))
	for i, t := range texts {
		v := pgvector.NewVector(vecs[i])
		out[t] = &v
	}
	return out
}

// factContent is the text a fact revision of c stores (and is embedded from).
func factContent(c memory.Candidate) string {
	if c.Content != "" {
		return c.Content
	}
	return strings.TrimSpace(c.Subject + " " + c.Predicate + " " + c.Object)
}

// commitOne commits one governed candidate: its decision (decided again on what is
// stored now), the fact revision it writes and its candidate row. It returns the
// result, the fact revision to index, and the accepted candidate whose entity and
// relations the caller writes (writeGraph) before the transaction ends.
func (a *MemoryActivities) commitOne(ctx context.Context, tx bun.Tx, s *schema.Schema, in CommitInput, it Governed) (CommittedResult, string, *memory.Candidate, error) {
	tenant := in.Event.TenantID
	d := it.Decision
	res := CommittedResult{CandidateID: it.CandidateID, MemoryKey: it.Proposal.MemoryKey}
	row := candidateRow(GovernInput{Event: in.Event, EventID: in.EventID, WorkflowID: in.WorkflowID}, it, s)
	if it.Proposal.MemoryKey != "" && d.Status != memory.CandidateRejected {
		existing, err := a.loadExisting(ctx, tx, tenant, in.Event.UserID, it.Proposal)
		if err != nil {
			return res, "", nil, err
		}
		switch d.Status {
		case memory.CandidateNeedsConfirmation:
			v, ok := in.Verdicts[it.CandidateID]
			if !ok {
				return res, "", nil, fmt.Errorf("no review verdict for a candidate that needs confirmation")
			}
			d, err = governance.Review(a.Gov, it.Proposal, existing, d, v)
			if err != nil {
				return res, "", nil, temporal.NewNonRetryableApplicationError(err.Error(), memory.ErrTypeBadInput, err)
			}
			now := time.Now().UTC()
			row.Reviewer, row.ReviewNote, row.ReviewedAt = v.Reviewer, v.Note, &now
			if v.Kind == governance.VerdictEdit {
				row.Object = v.Object
			}
		default:
			// Memory may have changed since Govern (another write, a long review):
			// decide again on what is stored now, keeping a trusted decision trusted.
			nd := governance.Decide(a.Gov, it.Proposal, existing)
			if nd.Status == memory.CandidateNeedsConfirmation {
				nd, err = governance.Review(a.Gov, it.Proposal, existing, nd, governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "engram:governance"})
				if err != nil {
					return res, "", nil, err
				}
			}
			d = nd
		}
	}
	res.Status, res.Action, res.Reason, res.Reviewer = d.Status, string(d.Action), d.Reason, row.Reviewer
	row.Status, row.Action, row.Reason = d.Status, string(d.Action), d.Reason
	var factID string
	var graph *memory.Candidate
	if d.Status == memory.CandidateAccepted {
		c := it.Candidate
		if row.Object != c.Object {
			c.Object = row.Object
			c.Content = strings.Replace(c.Content, it.Candidate.Object, row.Object, 1)
		}
		var err error
		factID, err = a.applyAction(ctx, tx, s, in, it, c, d)
		if err != nil {
			return res, "", nil, err
		}
		if factID != "" {
			row.FactID = &factID
			res.FactID = factID
		}
		graph = &c
	}
	if err := storage.UpsertCandidate(ctx, tx, tenant, row); err != nil {
		return res, "", nil, err
	}
	if !indexable(d.Action) {
		return res, "", graph, nil // no new revision to index
	}
	return res, factID, graph, nil
}

// indexable is whether an accepted candidate's action wrote a fact revision to
// embed (a duplicate, an invalidation or a no-op did not).
func indexable(a governance.Action) bool {
	return a != governance.ActionDuplicate && a != governance.ActionInvalidate && a != governance.ActionNoop
}

// applyAction writes what the decision says and returns the fact id it touched.
func (a *MemoryActivities) applyAction(ctx context.Context, tx bun.Tx, s *schema.Schema, in CommitInput, it Governed, c memory.Candidate, d governance.Decision) (string, error) {
	switch d.Action {
	case governance.ActionCreate, governance.ActionSupersede, governance.ActionHistorical:
		return a.writeRevision(ctx, tx, s, in, it, c, d)
	case governance.ActionDuplicate:
		return a.restate(ctx, tx, in, d)
	case governance.ActionInvalidate:
		return invalidate(ctx, tx, in, d)
	}
	return "", nil
}

// newFact is the fact revision a created, superseding or historical candidate
// writes (its content not yet sealed).
func newFact(s *schema.Schema, in CommitInput, it Governed, c memory.Candidate, d governance.Decision) *storage.Fact {
	ref := it.Proposal.Scope
	attrs, _ := json.Marshal(c.Attributes)
	if c.Attributes == nil {
		attrs = []byte("{}")
	}
	cid := it.CandidateID
	validFrom := d.ValidFrom
	if validFrom.IsZero() {
		validFrom = in.Event.OccurredAt.UTC()
	}
	f := &storage.Fact{
		MemoryKey: it.Proposal.MemoryKey, OwnerType: "USER", OwnerID: in.Event.UserID,
		Scope: ref.Scope, DepartmentID: ref.DepartmentID, UserID: firstNonEmpty(ref.UserID, in.Event.UserID),
		AgentID: ref.AgentID, SessionID: ref.SessionID, TaskID: ref.TaskID,
		MemoryType: c.MemoryType, Subject: c.Subject, Predicate: c.Predicate, Object: c.Object,
		Content: c.Content, Attributes: attrs, EntityType: c.EntityType, EntityID: c.EntityID,
		Origin: c.Origin, Confidence: clamp01(d.Confidence), ValidFrom: validFrom, ValidUntil: d.ValidUntil,
		ObservedAt: in.Event.OccurredAt.UTC(), SourceCandidateID: &cid,
		SchemaName: s.Name, SchemaVersion: s.Version, Reason: d.Reason,
	}
	if ref.Scope == memory.ScopeDepartment || ref.Scope == memory.ScopeTenant {
		f.UserID = "" // a shared fact is not owned by the user who said it
		f.OwnerType, f.OwnerID = string(ref.Scope), ref.DepartmentID
	}
	f.Content = factContent(c)
	f.Embedding = in.vectors[f.Content]
	if f.Confidence == 0 {
		f.Confidence = clamp01(c.Confidence)
	}
	if !d.StatedAt.IsZero() {
		f.StatedAt = []time.Time{d.StatedAt}
	}
	return f
}

// writeRevision writes a new revision of the candidate's fact (current, or
// historical beside the current), supported by the turn; a revision the
// statement split holds again after it (Decision.Reopen).
func (a *MemoryActivities) writeRevision(ctx context.Context, tx bun.Tx, s *schema.Schema, in CommitInput, it Governed, c memory.Candidate, d governance.Decision) (string, error) {
	tenant := in.Event.TenantID
	f := newFact(s, in, it, c, d)
	mode := storage.WriteCurrent
	if d.Action == governance.ActionHistorical {
		mode = storage.WriteHistorical
	}
	if err := a.trim(ctx, tx, tenant, d); err != nil {
		return "", err
	}
	search := storage.SearchText(f.Content + " " + f.Object)
	var err error
	if f.KeyID, f.Content, err = a.Store.SealContent(f.Content); err != nil {
		return "", fmt.Errorf("seal fact content: %w", err)
	}
	var wf *storage.Fact
	if f.MemoryKey != "" {
		wf, err = storage.WriteFactRevisionLocked(ctx, tx, tenant, f, mode, search) // Commit locked every key of its items
	} else {
		wf, err = storage.WriteFactRevision(ctx, tx, tenant, f, mode, search)
	}
	if err != nil {
		return "", err
	}
	if f.Embedding != nil {
		in.indexed[wf.ID] = true
	}
	if err := storage.LinkFactEvidence(ctx, tx, tenant, wf.ID, in.EvidenceID, memory.RelSupport); err != nil {
		return "", err
	}
	if r := d.Reopen; r != nil && d.Target != nil {
		// The statement split the Target: its value holds again after it.
		ro, err := storage.ReopenRevision(ctx, tx, tenant, d.Target.FactID, r.From, r.Until, r.Status, r.StatedAt, wf.ID,
			fmt.Sprintf("%s stated again at %s, after %s", d.Target.Object, r.From.UTC().Format(time.RFC3339), c.Object))
		if err != nil {
			return "", err
		}
		if err := storage.EnqueueFact(ctx, tx, tenant, ro.ID); err != nil {
			return "", err
		}
	}
	return wf.ID, storage.EnqueueFact(ctx, tx, tenant, wf.ID)
}

// restate records a duplicate: the target fact stated again (its confidence, when
// it was stated, an earlier start), supported by the turn.
func (a *MemoryActivities) restate(ctx context.Context, tx bun.Tx, in CommitInput, d governance.Decision) (string, error) {
	tenant := in.Event.TenantID
	if d.Target == nil {
		return "", fmt.Errorf("duplicate without a target fact")
	}
	if err := a.trim(ctx, tx, tenant, d); err != nil {
		return "", err
	}
	if err := storage.RestateFact(ctx, tx, tenant, d.Target.FactID, clamp01(d.Confidence), d.StatedAt, d.ExtendFrom); err != nil {
		return "", err
	}
	if d.ExtendFrom != nil {
		if err := storage.EnqueueFact(ctx, tx, tenant, d.Target.FactID); err != nil {
			return "", err
		}
	}
	if err := storage.LinkFactEvidence(ctx, tx, tenant, d.Target.FactID, in.EvidenceID, memory.RelSupport); err != nil {
		return "", err
	}
	return d.Target.FactID, nil
}

// invalidate closes the target fact as invalidated at the turn's time, the turn
// linked to it as the conflict; a fact a concurrent write closed is left.
func invalidate(ctx context.Context, tx bun.Tx, in CommitInput, d governance.Decision) (string, error) {
	tenant := in.Event.TenantID
	if d.Target == nil {
		return "", fmt.Errorf("invalidation without a target fact")
	}
	closed, err := storage.CloseFact(ctx, tx, tenant, d.Target.MemoryKey, memory.FactInvalidated, in.Event.OccurredAt.UTC(), d.Reason)
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil // already closed by a concurrent write
	}
	if err != nil {
		return "", err
	}
	if err := storage.LinkFactEvidence(ctx, tx, tenant, closed.ID, in.EvidenceID, memory.RelConflict); err != nil {
		return "", err
	}
	return closed.ID, storage.EnqueueFact(ctx, tx, tenant, closed.ID)
}

// trim ends the revision a statement fell inside of (Decision.Trim) at the
// statement's time, and queues it for the search index.
func (a *MemoryActivities) trim(ctx context.Context, tx bun.Tx, tenant string, d governance.Decision) error {
	if d.Trim == nil {
		return nil
	}
	if err := storage.TrimRevision(ctx, tx, tenant, d.Trim.FactID, d.StatedAt); err != nil {
		return err
	}
	return storage.EnqueueFact(ctx, tx, tenant, d.Trim.FactID)
}

// writeGraph records the entity a candidate is about (with the state its event
// type leads to) and its relations.
func (a *MemoryActivities) writeGraph(ctx context.Context, tx bun.Tx, s *schema.Schema, in CommitInput, c memory.Candidate) error {
	tenant := in.Event.TenantID
	if c.EntityType != "" && c.EntityID != "" {
		state := ""
		if st, ok := c.Attributes["state"].(string); ok {
			state = st
		}
		if p, ok := s.Predicate(c.Predicate); ok && p.Event != nil && p.Event.State != "" && state == "" {
			state = p.Event.State
		}
		if err := storage.UpsertEntity(ctx, tx, tenant, &storage.Entity{Type: c.EntityType, ID: c.EntityID, UserID: in.Event.UserID, State: state}); err != nil {
			return err
		}
	}
	evID := in.EvidenceID
	for _, r := range c.Relations {
		if r.FromID == "" || r.ToID == "" {
			continue
		}
		if err := storage.UpsertEdge(ctx, tx, tenant, &storage.Edge{
			Type: r.Type, FromType: r.FromType, FromID: r.FromID, ToType: r.ToType, ToID: r.ToID,
			UserID: in.Event.UserID, ValidFrom: in.Event.OccurredAt.UTC(), EvidenceID: &evID,
		}); err != nil {
			return err
		}
	}
	return nil
}

// IndexInput names what to embed after a commit.
type IndexInput struct {
	TenantID    string   `json:"tenant_id"`
	FactIDs     []string `json:"fact_ids,omitempty"`
	EvidenceIDs []string `json:"evidence_ids,omitempty"`
}

// Index writes embeddings for new facts and evidence. It is idempotent.
func (a *MemoryActivities) Index(ctx context.Context, in IndexInput) error {
	if a.Embedder == nil || (len(in.FactIDs) == 0 && len(in.EvidenceIDs) == 0) {
		return nil
	}
	for _, t := range []struct {
		table string
		ids   []string
		load  func(context.Context, string, []string) ([]storage.TextToEmbed, error)
	}{
		{"facts", in.FactIDs, a.Store.FactsToEmbed},
		{"evidence", in.EvidenceIDs, a.Store.EvidenceToEmbed},
	} {
		rows, err := t.load(ctx, in.TenantID, t.ids)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		// A turn's sentences are embedded with it, as Record does (recall scores a
		// turn by its best sentence): texts[first[i]:first[i+1]] are row i's.
		var texts []string
		first := make([]int, len(rows)+1)
		for i, r := range rows {
			// Vectors are built from the clear (redacted) text, never the sealed column.
			texts = append(texts, embedText(r.Content, r.Speaker, r.UserID))
			if t.table == "evidence" {
				for _, sn := range turntext.Sentences(r.Content) {
					texts = append(texts, embedText(sn, r.Speaker, r.UserID))
				}
			}
			first[i+1] = len(texts)
		}
		vecs, err := a.embedMany(ctx, texts)
		if err != nil {
			return fmt.Errorf("embed %s: %w", t.table, err)
		}
		// One commit for the chunk's rows, not one each.
		err = a.Store.InTx(ctx, func(tctx context.Context, _ bun.Tx) error {
			if t.table == "evidence" {
				ids, vs := make([]string, len(rows)), make([]pgvector.Vector, len(rows))
				for i, r := range rows {
					ids[i], vs[i] = r.ID, *vecs[first[i]]
				}
				if err := a.Store.SetEvidenceEmbeddings(tctx, in.TenantID, ids, vs); err != nil {
					return fmt.Errorf("store evidence embeddings: %w", err)
				}
			}
			for i, r := range rows {
				if t.table == "facts" {
					if err := a.Store.SetFactEmbedding(tctx, in.TenantID, r.ID, *vecs[first[i]]); err != nil {
						return fmt.Errorf("store facts embedding: %w", err)
					}
				}
				if t.table == "evidence" && first[i+1] > first[i]+1 {
					if err := a.Store.InsertEvidenceSentences(tctx, in.TenantID, r.ID, r.UserID, vecs[first[i]+1:first[i+1]]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// embedText is what a row's vector is built from: its clear text, and for a turn
// said by a named person "Name: text", so "what did Maya …" finds what Maya said.
// speaker is the evidence's ("USER:maya"); a fact has none.
func embedText(content, speaker, userID string) string {
	if _, name, ok := strings.Cut(speaker, ":"); ok && name != "" && name != userID && llm.SpeakerSubject(name) != "user" {
		return name + ": " + content
	}
	return content
}

// embedMany embeds texts in one call, one vector each, in order.
func (a *MemoryActivities) embedMany(ctx context.Context, texts []string) ([]*pgvector.Vector, error) {
	vecs, err := a.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("the embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	out := make([]*pgvector.Vector, len(vecs))
	for i := range vecs {
		v := pgvector.NewVector(vecs[i])
		out[i] = &v
	}
	return out, nil
}

// FastWrite is the one step of a revision-2 write (legacy.go): Write, answered in
// the shape that revision reads (asFastWrite).
func (a *MemoryActivities) FastWrite(ctx context.Context, in FastWriteInput) (FastWriteResult, error) {
	step, err := a.Write(ctx, in.writeInput(true))
	return asFastWrite(step), err
}

// FastWriteInput is FastWrite's input: Record's, and the attempts the write allows
// (for the reason of an UNPARSED write).
type FastWriteInput struct {
	Record          RecordInput `json:"record"`
	ExtractAttempts int         `json:"extract_attempts"`
}

// FastWriteResult is what FastWrite did. Done: the write's outcome is Status
// (Reason, Attempts), and Governed holds what a committed write governed and
// committed; else Record is all that ran.
type FastWriteResult struct {
	Record   RecordResult        `json:"record"`
	Done     bool                `json:"done,omitempty"`
	Status   string              `json:"status,omitempty"`
	Reason   string              `json:"reason,omitempty"`
	Attempts int                 `json:"attempts,omitempty"`
	Governed *GovernCommitResult `json:"governed,omitempty"`
}

// MarkEventInput records a final event status that is not a commit.
type MarkEventInput struct {
	TenantID string             `json:"tenant_id"`
	EventID  string             `json:"event_id"`
	Status   memory.EventStatus `json:"status"`
	Reason   string             `json:"reason"`
}

// MarkFailedInput names the events of a write that can never finish: by id when
// Record stored them, else by idempotency key.
type MarkFailedInput struct {
	TenantID string   `json:"tenant_id"`
	EventIDs []string `json:"event_ids,omitempty"`
	Keys     []string `json:"idempotency_keys,omitempty"`
	Reason   string   `json:"reason"`
}

// MarkFailed sets the events FAILED with the reason, unless they reached a final
// status (storage.Store.FailEvents). It is idempotent.
func (a *MemoryActivities) MarkFailed(ctx context.Context, in MarkFailedInput) (int, error) {
	return a.Store.FailEvents(ctx, in.TenantID, in.EventIDs, in.Keys, truncateReason(in.Reason))
}

func truncateReason(reason string) string {
	if len(reason) > 4000 {
		reason = strings.ToValidUTF8(reason[:4000], "")
	}
	return reason
}

// MarkDecidedInput names the candidates of a write that reviewers decided while it
// waits for the verdicts of its others.
type MarkDecidedInput struct {
	TenantID string          `json:"tenant_id"`
	Decided  []ReviewRequest `json:"decided"`
}

// MarkDecided records each verdict on its candidate (storage.MarkDecided), so a
// decided candidate leaves the pending list before its write commits. Idempotent.
func (a *MemoryActivities) MarkDecided(ctx context.Context, in MarkDecidedInput) error {
	return a.Store.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, d := range in.Decided {
			if err := storage.MarkDecided(ctx, tx, in.TenantID, d.CandidateID, d.Reviewer, d.Note); err != nil {
				return err
			}
		}
		return nil
	})
}

// MarkEvent sets an event's status (UNPARSED when extraction never validated).
func (a *MemoryActivities) MarkEvent(ctx context.Context, in MarkEventInput) error {
	return a.Store.SetEventStatus(ctx, in.TenantID, in.EventID, in.Status, truncateReason(in.Reason))
}
