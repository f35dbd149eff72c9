package governance

import (
	"fmt"
	"strings"

	"github.com/engramhq/engram/memory"
)

// VerdictKind is a reviewer's answer to a candidate that needs confirmation.
type VerdictKind string

const (
	// VerdictConfirm accepts the candidate as proposed.
	VerdictConfirm VerdictKind = "confirm"
	// VerdictReject rejects the candidate; memory is not changed.
	VerdictReject VerdictKind = "reject"
	// VerdictEdit accepts the candidate with the reviewer's value (Verdict.Object).
	VerdictEdit VerdictKind = "edit"
)

// Valid reports whether k is one of confirm, reject, edit.
func (k VerdictKind) Valid() bool {
	return k == VerdictConfirm || k == VerdictReject || k == VerdictEdit
}

// Verdict is a reviewer's decision on one pending candidate.
type Verdict struct {
	Kind     VerdictKind `json:"decision"`
	Object   string      `json:"edited_value,omitempty"` // the corrected value; required for edit
	Reviewer string      `json:"reviewer"`
	Note     string      `json:"note,omitempty"`
}

// Validate checks the kind, that a reviewer is named and that an edit carries a
// value. The error is a memory.FieldError naming the field.
func (v Verdict) Validate() error {
	switch {
	case !v.Kind.Valid():
		return memory.FieldError{Field: "decision", Problem: fmt.Sprintf("unknown decision %q (allowed: confirm, reject, edit)", v.Kind)}
	case strings.TrimSpace(v.Reviewer) == "":
		return memory.FieldError{Field: "reviewer", Problem: "empty"}
	case v.Kind == VerdictEdit && strings.TrimSpace(v.Object) == "":
		return memory.FieldError{Field: "edited_value", Problem: "required for edit"}
	}
	return nil
}

// Review applies a reviewer's verdict to d, which must be NEEDS_CONFIRMATION; p and
// existing are the proposal and the key's revisions as they are now (they may have
// changed while the candidate waited).
//
//   - confirm: the action is recomputed against existing without the confirmation
//     gates, so it is d's pending Action unless memory changed meanwhile; ACCEPTED.
//   - reject: REJECTED, Action NOOP.
//   - edit: the candidate's object becomes Verdict.Object (a retraction becomes an
//     assertion of that value) and the action is recomputed without the confirmation
//     gates; embedding similarities are ignored, since they were computed for the
//     original value. An edit equal to the current value is a DUPLICATE.
//
// Confidence is the candidate's (a trusted duplicate raises it); the reviewer and note
// are recorded in the reason. Forbidden and invalid proposals stay REJECTED. An
// invalid verdict or a d that is not pending returns an error and no decision.
func Review(cfg Config, p Proposal, existing []Existing, d Decision, v Verdict) (Decision, error) {
	if d.Status != memory.CandidateNeedsConfirmation {
		return Decision{}, memory.FieldError{Field: "status", Problem: fmt.Sprintf("decision is %s, not %s", d.Status, memory.CandidateNeedsConfirmation)}
	}
	if err := v.Validate(); err != nil {
		return Decision{}, err
	}
	by := "reviewer " + strings.TrimSpace(v.Reviewer)
	if n := strings.TrimSpace(v.Note); n != "" {
		by += fmt.Sprintf(" (note: %s)", n)
	}
	switch v.Kind {
	case VerdictReject:
		r := rejected(p, "rejected by "+by)
		return r, nil
	case VerdictEdit:
		p.Candidate.Object = strings.TrimSpace(v.Object)
		p.Candidate.Retraction = false
		stale := make([]Existing, len(existing))
		for i, e := range existing {
			e.Similarity = 0
			stale[i] = e
		}
		return reviewed(decide(cfg, p, stale, true), fmt.Sprintf("edited to %s by %s", p.Candidate.Object, by)), nil
	default:
		return reviewed(decide(cfg, p, existing, true), "confirmed by "+by), nil
	}
}

func reviewed(d Decision, how string) Decision {
	if d.Status == memory.CandidateRejected {
		d.Reason = how + ", but still rejected: " + d.Reason
	} else {
		d.Reason = how + ": " + d.Reason
	}
	return d
}
