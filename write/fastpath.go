package write

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
)

// The in-process part of a write (revision 3). Each step of the write path is one
// function, the body of the activity of its name: Record stores the event and its
// evidence, UpdateSession adds the turn to its session, Extract and Validate
// propose and check the candidates, GovernCommit decides them and commits what
// needs no reviewer, MarkEvent settles an event that commits nothing, Index embeds.
// The Write local activity calls them in that order, in the worker's process, and
// returns the workflow's own result (WriteStep.Result): a write with an in-process
// extractor and no reviewer is one marker in its history. What it cannot finish
// (an extractor out of process, a candidate for a reviewer, a session or a vector
// that failed) it leaves to the workflow, which runs the same activities as steps
// of their own.

// parts are the steps a write is made of, each the body of the activity of its
// name. MemoryActivities.parts gives the real ones; the workflow tests give theirs.
type parts struct {
	record       func(context.Context, RecordInput) (RecordResult, error)
	session      func(context.Context, UpdateSessionInput) (UpdateSessionResult, error)
	extract      func(context.Context, ExtractInput) (llm.ExtractOutput, error)
	validate     func(context.Context, ValidateInput) (ValidateResult, error)
	governCommit func(context.Context, GovernInput) (GovernCommitResult, error)
	mark         func(context.Context, MarkEventInput) error
}

func (a *MemoryActivities) parts() parts {
	return parts{record: a.Record, session: a.UpdateSession, extract: a.Extract, validate: a.Validate,
		governCommit: a.GovernCommit, mark: a.MarkEvent}
}

// WriteInput is the Write activity's input: one event of a write.
type WriteInput struct {
	Event           memory.IngestEvent `json:"event"`
	WorkflowID      string             `json:"workflow_id"`
	ExtractAttempts int                `json:"extract_attempts"`
	// Embed stores the turn's and the facts' vectors with them; without it they are
	// left in Unindexed, for Index steps (a batch embeds them in chunks).
	Embed bool `json:"embed,omitempty"`
	// Hold stops after extraction, so the workflow governs and commits in steps of
	// its own (PauseBeforeCommit, for crash tests).
	Hold bool `json:"hold,omitempty"`
}

// WriteStep is what the in-process part of a write did, and what it left to the
// workflow.
type WriteStep struct {
	// Result is the write's result so far: the workflow returns it as it is once
	// Status is set and nothing is Pending (Final).
	Result MemoryWriteResult `json:"result"`
	// Schema is the schema reference Record pinned ("travel@3"): the write's later
	// steps use it, so a PutSchema meanwhile does not change its rules.
	Schema string `json:"schema,omitempty"`
	// Pending are the candidates that wait for a reviewer.
	Pending []Governed `json:"pending,omitempty"`
	// Extract, when set, is extraction left to the workflow: an extractor out of
	// process (LocalExtract false), or an in-process one that failed and is retried
	// as a step of its own.
	Extract      *ExtractInput `json:"extract,omitempty"`
	LocalExtract bool          `json:"local_extract,omitempty"`
	// Extracted are a held write's validated candidates (Hold).
	Extracted []memory.Candidate `json:"extracted,omitempty"`
	// Session, when set, is the session's update left to its step (it failed in a
	// way a retry may fix).
	Session *UpdateSessionInput `json:"session,omitempty"`
	// Unindexed is what was stored without its vector, for an Index step.
	Unindexed IndexInput `json:"unindexed"`
}

// Final is whether Result is the workflow's result.
func (s WriteStep) Final() bool { return s.Result.Status != "" && len(s.Pending) == 0 }

// Write is the in-process part of one event's write (revision 3): Record, the
// session, an in-process extractor with validation, then the outcome (settle).
// Every part is idempotent, so a run again after a lost result (a killed worker)
// returns what the first committed.
func (a *MemoryActivities) Write(ctx context.Context, in WriteInput) (WriteStep, error) {
	step, err := writeInProcess(ctx, in, a.parts())
	// A caller of this process waiting on the write is told its outcome now, or
	// that it must wait for the workflow's (see notice.go).
	if activity.IsActivity(ctx) {
		if info := activity.GetInfo(ctx); info.WorkflowExecution.ID != "" {
			n := notice{runID: info.WorkflowExecution.RunID}
			if err == nil && step.Final() {
				n.res, n.final = step.Result, true
			}
			a.Notices.post(info.WorkflowExecution.ID, n)
		}
	}
	return step, err
}

// writeInProcess is Write over its parts.
func writeInProcess(ctx context.Context, in WriteInput, p parts) (WriteStep, error) {
	rec, err := p.record(ctx, RecordInput{Event: in.Event, WorkflowID: in.WorkflowID, Embed: in.Embed})
	if err != nil {
		return WriteStep{}, err
	}
	ev := in.Event
	if rec.Schema != "" {
		ev.Schema = rec.Schema
	}
	step := WriteStep{Result: MemoryWriteResult{EventID: rec.EventID, EvidenceID: rec.EvidenceID}, Schema: rec.Schema,
		Unindexed: IndexInput{TenantID: ev.TenantID}}
	if !rec.Indexed {
		step.Unindexed.EvidenceIDs = []string{rec.EvidenceID}
	}
	if ev.SessionID != "" {
		turn := SessionTurn(ev, rec.EvidenceID, rec.Text(ev))
		if !sessionSettled(ctx, p.session, turn) {
			step.Session = &turn
		}
	}
	xin := ExtractInput{Event: ev, Text: rec.Stored, Recent: rec.Recent, Known: rec.Known}
	if !rec.LocalExtract {
		step.Extract = &xin
		return step, nil
	}
	x, err := extractValidated(ctx, p, xin, in.ExtractAttempts)
	if err != nil {
		// Left to the Extract step, with its retry policy.
		logWarn(ctx, "in-process extraction failed; the Extract step will retry it", err)
		step.Extract, step.LocalExtract = &xin, true
		return step, nil
	}
	if in.Hold && step.hold(*x) {
		return step, nil
	}
	err = settle(&step, ev, in.WorkflowID, in.Embed, in.ExtractAttempts, *x,
		func(m MarkEventInput) error { return p.mark(ctx, m) },
		func(g GovernInput) (GovernCommitResult, error) { return p.governCommit(ctx, g) })
	return step, err
}

// hold keeps x's candidates for the workflow to govern (a held write), unless
// there are none to govern; it says whether it kept them.
func (s *WriteStep) hold(x Extracted) bool {
	if x.Unparsed != "" || len(x.Errors) > 0 || len(x.Candidates) == 0 {
		return false
	}
	s.Result.Attempts, s.Extracted = x.Attempts, x.Candidates
	return true
}

// settle ends a write whose extraction is done, through mark and governCommit
// (the parts in process, the activities in the workflow): UNPARSED when no attempt
// validated, COMMITTED with nothing to remember, or its candidates governed, those
// that need no reviewer committed and the others Pending.
func settle(step *WriteStep, ev memory.IngestEvent, workflowID string, embed bool, attempts int, x Extracted,
	mark func(MarkEventInput) error, governCommit func(GovernInput) (GovernCommitResult, error)) error {
	res := &step.Result
	res.Attempts = x.Attempts
	switch {
	case x.Unparsed != "" || len(x.Errors) > 0:
		res.Status, res.Reason = WriteUnparsed, x.Unparsed
		if res.Reason == "" {
			res.Reason = fmt.Sprintf("extraction did not validate after %d attempts: %s", attempts, strings.Join(x.Errors, "; "))
		}
		return mark(MarkEventInput{TenantID: ev.TenantID, EventID: res.EventID, Status: memory.EventUnparsed, Reason: res.Reason})
	case len(x.Candidates) == 0:
		res.Status = WriteNoMemory
		return mark(MarkEventInput{TenantID: ev.TenantID, EventID: res.EventID, Status: memory.EventCommitted, Reason: "nothing to remember"})
	}
	gc, err := governCommit(GovernInput{Event: ev, EventID: res.EventID, EvidenceID: res.EvidenceID,
		WorkflowID: workflowID, Candidates: x.Candidates, Embed: embed})
	if err != nil {
		return err
	}
	res.Status = WriteCommitted
	step.Pending = append(step.Pending, gc.Pending...)
	step.committed(gc.Committed)
	return nil
}

// committed adds a commit's results, and its facts stored without a vector.
func (s *WriteStep) committed(com CommitResult) {
	s.Result.Results = append(s.Result.Results, com.Results...)
	for _, id := range com.FactIDs {
		if !slices.Contains(com.Indexed, id) {
			s.Unindexed.FactIDs = append(s.Unindexed.FactIDs, id)
		}
	}
}

// sessionSettled adds the turn to its session's working memory and says whether
// that is settled: a session that cannot take the turn (another user's) never
// fails the write (settled, logged); any other failure is left to the
// UpdateSession step.
func sessionSettled(ctx context.Context, update func(context.Context, UpdateSessionInput) (UpdateSessionResult, error), turn UpdateSessionInput) bool {
	_, err := update(ctx, turn)
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ae) && ae.Type() == memory.ErrTypeBadInput:
		logWarn(ctx, "session not updated", err)
		return true
	default:
		logWarn(ctx, "updating the session failed; the UpdateSession step will retry it", err)
		return false
	}
}

// extractValidated runs the extractor and validates its output, feeding the errors
// back, for up to attempts attempts, as the workflow's Extract and Validate steps do.
func extractValidated(ctx context.Context, p parts, in ExtractInput, attempts int) (*Extracted, error) {
	x := &Extracted{}
	for attempt := 1; attempt <= attempts; attempt++ {
		x.Attempts = attempt
		out, err := p.extract(ctx, in)
		if err != nil {
			return nil, err
		}
		v, err := p.validate(ctx, ValidateInput{TenantID: in.Event.TenantID, Schema: in.Event.Schema, Raw: out.Raw})
		if err != nil {
			return nil, err
		}
		if len(v.Errors) == 0 {
			x.Candidates, x.Errors = namedExtractor(v.Candidates, out), nil
			return x, nil
		}
		x.Errors, in.Feedback = v.Errors, v.Errors
	}
	return x, nil
}

// logWarn logs through the activity's logger, or not at all outside an activity
// (the workflow tests call the parts directly).
func logWarn(ctx context.Context, msg string, err error) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn(msg, "error", err)
	}
}

// writeInput is the Write input of a revision-2 step's.
func (in FastWriteInput) writeInput(embed bool) WriteInput {
	return WriteInput{Event: in.Record.Event, WorkflowID: in.Record.WorkflowID, ExtractAttempts: in.ExtractAttempts, Embed: embed}
}

// asFastWrite is step in the shape a revision-2 write and a batch's WriteRun read
// (FastWriteResult): Done with the outcome once settled, else the Record that
// extraction goes on from.
func asFastWrite(step WriteStep) FastWriteResult {
	rec := RecordResult{EventID: step.Result.EventID, EvidenceID: step.Result.EvidenceID, Schema: step.Schema,
		Indexed: len(step.Unindexed.EvidenceIDs) == 0, SessionUpdated: step.Session == nil, LocalExtract: step.LocalExtract}
	if x := step.Extract; x != nil {
		rec.Stored, rec.Recent, rec.Known = x.Text, x.Recent, x.Known
	}
	out := FastWriteResult{Record: rec}
	if step.Result.Status == "" {
		return out
	}
	out.Done, out.Status, out.Reason, out.Attempts = true, step.Result.Status, step.Result.Reason, step.Result.Attempts
	if step.Result.Status == WriteCommitted {
		com := CommitResult{Results: step.Result.Results}
		for _, r := range step.Result.Results {
			if r.FactID != "" {
				com.FactIDs = append(com.FactIDs, r.FactID)
				if !slices.Contains(step.Unindexed.FactIDs, r.FactID) {
					com.Indexed = append(com.Indexed, r.FactID)
				}
			}
		}
		out.Governed = &GovernCommitResult{Pending: step.Pending, Committed: com}
	}
	return out
}
