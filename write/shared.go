package write

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
)

// Names of the MemoryWrite workflow's signal, update and query. Reviewers send the
// `review` signal from the Temporal Web UI ("More Actions" → "Send a Signal").
const (
	MemoryWriteWorkflowName = "MemoryWrite"
	MemoryWriteBatchName    = "MemoryWriteBatch"
	SignalReview            = "review"
	UpdateReview            = "review"
	QueryPending            = "pending"
	WriteKind               = "write"
)

// Values of the EngramReview search attribute: reviewers filter on
// `EngramReview = "PENDING"` in the Web UI.
const (
	ReviewNone    = "NONE"
	ReviewPending = "PENDING"
	ReviewDone    = "DONE"
)

// Search attributes of write workflows (Keyword, registered by scripts/stack).
var (
	SearchAttrReview  = temporal.NewSearchAttributeKeyKeyword("EngramReview")
	SearchAttrSubject = temporal.NewSearchAttributeKeyKeyword("EngramSubject")
)

// ErrTypeInvalidReview is the error type of a rejected review update.
const ErrTypeInvalidReview = "InvalidReview"

// MemoryWriteInput starts one MemoryWrite.
type MemoryWriteInput struct {
	Event memory.IngestEvent `json:"event"`
	// ExtractAttempts bounds extraction attempts before the event is UNPARSED (default 3).
	ExtractAttempts int `json:"extract_attempts,omitempty"`
	// ReviewTimeout is how long candidates wait for a human (default 72h).
	ReviewTimeout time.Duration `json:"review_timeout,omitempty"`
	// PauseBeforeCommit is a durable pause between governance and commit. It exists for
	// crash tests (kill the worker while a write is in flight); leave it zero.
	PauseBeforeCommit time.Duration `json:"pause_before_commit,omitempty"`
	// Revision is the shape of the write path the starter chose (Prepare sets
	// WriteRevision). It versions the workflow through its input, which its history
	// keeps, instead of workflow.GetVersion, whose marker also upserts the
	// TemporalChangeVersion search attribute: a visibility write that costs the dev
	// server about 2 ms of CPU per write. 0 is a write started before revisions,
	// versioned by its GetVersion markers.
	Revision int `json:"revision,omitempty"`
}

// WriteRevision is the revision Prepare gives new writes; a worker runs every
// revision up to it, and fails the workflow task of a newer one (so a worker of
// the newer binary picks it up) rather than run it as an older shape.
//
//	1: the fast path (local activities, as fastWriteVersion) with no version
//	   markers and no search attributes unless refused during an erasure or
//	   waiting for review (Prepare); Record embeds the turn and runs an in-process
//	   extractor, Commit embeds the facts.
//	2: with an in-process extractor the whole write is one local activity
//	   (FastWrite: Record, then UNPARSED, nothing to remember, or GovernCommit):
//	   one marker instead of two (bench write at 32 callers: see the README).
//	3: one shape (workflow.go): the Write local activity runs the write's steps
//	   in process (Record, the session, an in-process extractor, then the outcome)
//	   and returns the workflow's own result; what it leaves (an extractor out of
//	   process, review, a failed side step) runs as those same steps. Record does
//	   one thing. A batch carries the revision too (StartBatch): its runs of one
//	   user's events are WriteEvents local activities, each event as Write, and
//	   what a run leaves runs as the single write's steps (writeOne), with no
//	   GetVersion. Revisions 0 to 2, and batches started without a revision,
//	   replay through legacy.go, to be deleted once none can be open (see there).
const WriteRevision = 3

// Write outcomes.
const (
	WriteCommitted = string(memory.EventCommitted)
	WriteUnparsed  = string(memory.EventUnparsed)
	WriteNoMemory  = "NO_MEMORY"
	// WritePendingReview is an event whose candidates wait for a reviewer; only
	// the outcome update's answer while the write waits carries it (see soFar).
	WritePendingReview = string(memory.EventPendingReview)
)

// MemoryWriteResult is what a MemoryWrite returns.
type MemoryWriteResult struct {
	Status     string            `json:"status"`
	EventID    string            `json:"event_id"`
	EvidenceID string            `json:"evidence_id"`
	Attempts   int               `json:"attempts"`
	Reason     string            `json:"reason,omitempty"`
	Results    []CommittedResult `json:"results,omitempty"`
}

// ReviewRequest is the payload of the `review` signal and update:
// {"candidate_id": "…", "decision": "confirm|reject|edit", "edited_value": "…", "reviewer": "alice", "note": "…"}
type ReviewRequest struct {
	CandidateID string `json:"candidate_id"`
	governance.Verdict
}

// PendingCandidate is one candidate awaiting review, as the `pending` query returns it.
type PendingCandidate struct {
	CandidateID string   `json:"candidate_id"`
	MemoryKey   string   `json:"memory_key"`
	Content     string   `json:"content"`
	Predicate   string   `json:"predicate"`
	Object      string   `json:"object"`
	Scope       string   `json:"scope"`
	Origin      string   `json:"origin"`
	Confidence  float64  `json:"confidence"`
	Reason      string   `json:"reason"`
	OnConfirm   string   `json:"on_confirm"`
	Default     string   `json:"default_on_timeout"`
	Deadline    string   `json:"deadline"`
	Evidence    []string `json:"evidence_ids"`
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._:@-]`)

// MemoryWriteWorkflowID derives the workflow id from tenant and idempotency key, so
// a retried Ingest finds the same workflow instead of starting a second one.
func MemoryWriteWorkflowID(tenantID, idempotencyKey string) string {
	k := idempotencyKey
	if len(k) > 80 || unsafeID.MatchString(k) {
		h := sha256.Sum256([]byte(idempotencyKey))
		k = "h-" + hex.EncodeToString(h[:16])
	}
	return "write/" + memory.TemporalIDPart(tenantID) + "/" + k
}
