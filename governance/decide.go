package governance

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/engramhq/engram/memory"
)

// Action is what the commit step does to memory for an accepted decision.
type Action string

const (
	// ActionCreate writes the first revision of the memory key (or a new ACTIVE
	// revision after earlier ones were closed).
	ActionCreate Action = "CREATE"
	// ActionDuplicate writes no revision: the evidence is linked to Target and its
	// confidence is set to Decision.Confidence.
	ActionDuplicate Action = "DUPLICATE"
	// ActionSupersede writes revision n+1 as the current one and closes Target (the
	// current ACTIVE revision) as SUPERSEDED at the new revision's valid_from.
	ActionSupersede Action = "SUPERSEDE"
	// ActionHistorical writes a revision that is closed already
	// (Decision.ValidFrom..Decision.ValidUntil); Target, the revision it sits before,
	// and the current revision stay as they are.
	ActionHistorical Action = "HISTORICAL"
	// ActionInvalidate marks Target, the current ACTIVE revision, INVALIDATED.
	ActionInvalidate Action = "INVALIDATE"
	// ActionNoop changes nothing (a retraction with nothing to retract, or a rejected
	// candidate).
	ActionNoop Action = "NOOP"
)

// Existing is one stored revision of the proposal's memory key, or an ACTIVE fact with
// the same subject and predicate in another scope (and therefore another key).
type Existing struct {
	FactID     string
	MemoryKey  string
	Scope      memory.ScopeRef
	Subject    string
	Predicate  string
	Object     string
	Status     memory.FactStatus
	Revision   int
	Confidence float64
	ValidFrom  time.Time
	ValidUntil *time.Time
	// ObservedAt is the time of the event behind this revision; it orders revisions
	// in event time, which is how late events are recognised.
	ObservedAt time.Time
	// Similarity is the cosine between the candidate's and this fact's embeddings, 0
	// if unknown.
	Similarity float64
}

// Proposal is one validated candidate with what the schema and policy say about it.
type Proposal struct {
	Candidate memory.Candidate
	// MemoryKey identifies the memory across revisions; it contains the scope, so a
	// TASK-scope budget and a USER-scope budget are different keys.
	MemoryKey string
	Scope     memory.ScopeRef
	// EventTime is when the event behind the candidate happened (not when it arrived).
	EventTime time.Time
	// NeedsConfirmation: the schema marks a change of this predicate as needing human
	// confirmation. It applies only when an existing value would change (SUPERSEDE or
	// INVALIDATE), not to the first value nor to a historical revision.
	NeedsConfirmation bool
	// Sensitive: the schema marks the predicate sensitive; every write needs
	// confirmation (a duplicate, which writes no value, does not).
	Sensitive bool
	// Forbidden: policy forbids storing it; the candidate is REJECTED.
	Forbidden bool
}

// Decision is governance's verdict on one proposal.
type Decision struct {
	// Status is ACCEPTED, REJECTED or NEEDS_CONFIRMATION.
	Status memory.CandidateStatus
	// Action is what commit does when accepted, or after confirmation when
	// NEEDS_CONFIRMATION. It is NOOP for REJECTED.
	Action Action
	// Target is the revision affected: the duplicated, superseded or invalidated one,
	// or the one a historical revision sits before. Nil for CREATE and NOOP. It is a
	// copy, not a pointer into the caller's slice.
	Target *Existing
	// Confidence is the confidence to store: the candidate's, or for DUPLICATE the
	// target's raised by Config.DuplicateBoost (capped at 1).
	Confidence float64
	// Historical: the new revision is closed already (Action HISTORICAL).
	Historical bool
	// ValidFrom is the new revision's valid_from: the candidate's ValidFrom if set,
	// else the event time. Zero when no revision is written.
	ValidFrom time.Time
	// ValidUntil is the new revision's valid_until: the candidate's ValidUntil; for a
	// historical revision the Target's ValidFrom (or the candidate's, if earlier).
	ValidUntil *time.Time
	// Reason says why, in words a reviewer can read; always set.
	Reason string
	// Broader lists ACTIVE facts with the same subject and predicate in broader
	// scopes; they stay ACTIVE, and the reason says so.
	Broader []Existing
}

// ValidateProposal checks what Decide needs: a memory key, a valid scope ref matching
// the candidate's scope, subject, predicate, an object unless retracting, a valid
// memory type and origin, a confidence within [0, 1] and an event time. The error is a
// memory.FieldError naming the field.
func ValidateProposal(p Proposal) error {
	c := p.Candidate
	if strings.TrimSpace(p.MemoryKey) == "" {
		return memory.FieldError{Field: "memory_key", Problem: "empty"}
	}
	if err := p.Scope.Validate(); err != nil {
		return err
	}
	if c.Scope != "" && c.Scope != p.Scope.Scope {
		return memory.FieldError{Field: "scope", Problem: fmt.Sprintf("candidate scope %s differs from proposal scope %s", c.Scope, p.Scope.Scope)}
	}
	switch {
	case strings.TrimSpace(c.Subject) == "":
		return memory.FieldError{Field: "subject", Problem: "empty"}
	case strings.TrimSpace(c.Predicate) == "":
		return memory.FieldError{Field: "predicate", Problem: "empty"}
	case !c.Retraction && strings.TrimSpace(c.Object) == "":
		return memory.FieldError{Field: "object", Problem: "empty (only a retraction may omit it)"}
	case !c.MemoryType.Valid():
		return memory.FieldError{Field: "memory_type", Problem: fmt.Sprintf("unknown memory type %q", c.MemoryType)}
	case !c.Origin.Valid():
		return memory.FieldError{Field: "origin", Problem: fmt.Sprintf("unknown origin %q (allowed: STATED, INFERRED)", c.Origin)}
	case math.IsNaN(c.Confidence) || c.Confidence < 0 || c.Confidence > 1:
		return memory.FieldError{Field: "confidence", Problem: fmt.Sprintf("must be within [0, 1], got %v", c.Confidence)}
	case p.EventTime.IsZero():
		return memory.FieldError{Field: "event_time", Problem: "missing"}
	}
	return nil
}

// Decide applies the rules, in this order:
//
//  1. Invalid cfg or malformed proposal (ValidateProposal) → REJECTED, the reason
//     naming the field. Decide does not return errors: callers should validate
//     first, and anything that slips through is refused, never stored.
//  2. Forbidden → REJECTED; confidence < RejectBelow → REJECTED (this beats INFERRED).
//  3. The action, against the revisions of p.MemoryKey:
//     - retraction: INVALIDATE the current ACTIVE revision; NOOP when there is none or
//     when the candidate names an object that is not the current value;
//     - same normalised object as the current ACTIVE revision, or Similarity ≥
//     DuplicateSimilarity → DUPLICATE; with no ACTIVE revision, an ACTIVE fact of
//     another key (a many-valued predicate's other value) in the same scope, of
//     the same subject and predicate, with Similarity ≥ DuplicateSimilarity →
//     DUPLICATE of it (restated);
//     - event older than a stored revision (EventTime before its ObservedAt) →
//     HISTORICAL before the earliest such revision, or DUPLICATE of the revision
//     in force at EventTime when that one has the same value;
//     - a current ACTIVE revision → SUPERSEDE (an event at the same time supersedes);
//     - otherwise CREATE.
//  4. Confirmation, for actions that write a value (CREATE, SUPERSEDE, HISTORICAL,
//     INVALIDATE): INFERRED (when ConfirmInferred), confidence < ConfirmBelow,
//     Sensitive, or NeedsConfirmation on SUPERSEDE/INVALIDATE → NEEDS_CONFIRMATION
//     with the action to apply on confirm. DUPLICATE and NOOP write no value and are
//     ACCEPTED; an inferred or low-confidence duplicate links evidence but does not
//     raise confidence.
//
// Facts of broader scopes with the same subject and predicate are never touched
// (they have other keys); they are listed in Decision.Broader and named in the reason.
func Decide(cfg Config, p Proposal, existing []Existing) Decision {
	return decide(cfg, p, existing, false)
}

// decide is Decide; reviewed means a human confirmed or edited the proposal, so no
// confirmation gate applies and a duplicate is trusted.
func decide(cfg Config, p Proposal, existing []Existing, reviewed bool) Decision {
	if err := cfg.Validate(); err != nil {
		return rejected(p, "invalid governance config: "+err.Error())
	}
	if err := ValidateProposal(p); err != nil {
		return rejected(p, "malformed proposal: "+err.Error())
	}
	c := p.Candidate
	if p.Forbidden {
		return rejected(p, fmt.Sprintf("policy forbids storing %s", c.Predicate))
	}
	if c.Confidence < cfg.RejectBelow {
		return rejected(p, fmt.Sprintf("confidence %.2f is below the reject threshold %.2f", c.Confidence, cfg.RejectBelow))
	}

	var gates []string // why a human must confirm, candidate quality first
	if cfg.ConfirmInferred && c.Origin == memory.OriginInferred {
		gates = append(gates, "inferred, not stated")
	}
	if c.Confidence < cfg.ConfirmBelow {
		gates = append(gates, fmt.Sprintf("confidence %.2f is below %.2f", c.Confidence, cfg.ConfirmBelow))
	}
	trusted := reviewed || len(gates) == 0

	d := plan(cfg, p, existing, trusted)
	if d.Action == ActionDuplicate || d.Action == ActionNoop || reviewed {
		d.Status = memory.CandidateAccepted
		return d
	}
	if p.Sensitive {
		gates = append(gates, fmt.Sprintf("%s is sensitive", c.Predicate))
	}
	if p.NeedsConfirmation && (d.Action == ActionSupersede || d.Action == ActionInvalidate) {
		gates = append(gates, fmt.Sprintf("the schema requires confirmation to change %s", c.Predicate))
	}
	if len(gates) > 0 {
		d.Status = memory.CandidateNeedsConfirmation
		d.Reason = "needs confirmation (" + strings.Join(gates, "; ") + "); on confirm: " + d.Reason
		return d
	}
	d.Status = memory.CandidateAccepted
	return d
}

func rejected(p Proposal, reason string) Decision {
	return Decision{
		Status:     memory.CandidateRejected,
		Action:     ActionNoop,
		Confidence: p.Candidate.Confidence,
		Reason:     reason,
	}
}

// plan chooses the action and fills everything but Status. trusted says whether a
// duplicate raises confidence.
func plan(cfg Config, p Proposal, existing []Existing, trusted bool) Decision {
	c := p.Candidate
	d := Decision{Confidence: c.Confidence, Broader: broader(p, existing)}

	var revs []Existing // this key's revisions, oldest event first
	for _, e := range existing {
		if e.MemoryKey == p.MemoryKey {
			revs = append(revs, e)
		}
	}
	sort.SliceStable(revs, func(i, j int) bool {
		if !revs[i].ObservedAt.Equal(revs[j].ObservedAt) {
			return revs[i].ObservedAt.Before(revs[j].ObservedAt)
		}
		return revs[i].Revision < revs[j].Revision
	})
	var current *Existing
	for i := range revs {
		if revs[i].Status == memory.FactActive && (current == nil || revs[i].Revision > current.Revision) {
			current = &revs[i]
		}
	}
	what := fmt.Sprintf("%s %s", scopeLabel(p.Scope.Scope), c.Predicate)

	if c.Retraction {
		switch {
		case current == nil:
			d.Action = ActionNoop
			d.Reason = fmt.Sprintf("retraction of %s: no ACTIVE revision to invalidate", what)
		case strings.TrimSpace(c.Object) != "" && !sameValue(cfg, c.Object, *current):
			d.Action = ActionNoop
			d.Reason = fmt.Sprintf("retraction of %s %s does not match the current value %s (rev %d); nothing invalidated", what, c.Object, current.Object, current.Revision)
		default:
			d.Action = ActionInvalidate
			d.Target = ptr(*current)
			d.Reason = fmt.Sprintf("retraction invalidates %s %s (rev %d)", what, current.Object, current.Revision)
		}
		return d
	}

	if current != nil && sameValue(cfg, c.Object, *current) {
		return duplicate(cfg, d, *current, c, what, trusted)
	}
	if current == nil {
		if near := restated(cfg, p, existing); near != nil {
			return duplicate(cfg, d, *near, c, what, trusted)
		}
	}

	// A late event: some stored revision comes from a newer event.
	var next, prev *Existing
	for i := range revs {
		if revs[i].Status == memory.FactInvalidated {
			continue // withdrawn; it neither bounds nor explains a late event
		}
		if revs[i].ObservedAt.After(p.EventTime) {
			if next == nil {
				next = &revs[i]
			}
		} else {
			prev = &revs[i]
		}
	}
	d.ValidFrom = p.EventTime
	if c.ValidFrom != nil && !c.ValidFrom.IsZero() {
		d.ValidFrom = *c.ValidFrom
	}
	d.ValidUntil = c.ValidUntil
	if next != nil {
		if prev != nil && sameValue(cfg, c.Object, *prev) {
			return duplicate(cfg, d, *prev, c, what, trusted)
		}
		d.Action = ActionHistorical
		d.Historical = true
		d.Target = ptr(*next)
		until := next.ValidFrom
		if d.ValidUntil == nil || until.Before(*d.ValidUntil) {
			d.ValidUntil = &until
		}
		d.Reason = fmt.Sprintf("event at %s predates rev %d (observed %s): %s %s kept as a historical revision until %s",
			stamp(p.EventTime), next.Revision, stamp(next.ObservedAt), what, c.Object, stamp(until))
		if current != nil {
			d.Reason += fmt.Sprintf("; %s (rev %d) stays current", current.Object, current.Revision)
		}
		return withBroader(d)
	}

	if current != nil && cfg.NeverSupersede { // test-only fault, see Config.NeverSupersede
		return duplicate(cfg, d, *current, c, what, trusted)
	}
	if current != nil {
		d.Action = ActionSupersede
		d.Target = ptr(*current)
		d.Reason = fmt.Sprintf("new value %s supersedes %s (rev %d)", c.Object, current.Object, current.Revision)
		return withBroader(d)
	}

	d.Action = ActionCreate
	d.Reason = fmt.Sprintf("%s %s added", what, c.Object)
	if n := len(revs); n > 0 {
		last := revs[0]
		for _, r := range revs {
			if r.Revision > last.Revision {
				last = r
			}
		}
		d.Reason += fmt.Sprintf(" (no ACTIVE revision; latest rev %d is %s)", last.Revision, last.Status)
	}
	return withBroader(d)
}

func duplicate(cfg Config, d Decision, target Existing, c memory.Candidate, what string, trusted bool) Decision {
	d.Action = ActionDuplicate
	d.Target = ptr(target)
	d.ValidFrom, d.ValidUntil = time.Time{}, nil
	how := "same value"
	if normalize(c.Object) != normalize(target.Object) {
		how = fmt.Sprintf("similar value (cosine %.2f ≥ %.2f)", target.Similarity, cfg.DuplicateSimilarity)
	}
	d.Reason = fmt.Sprintf("%s %s as %s %s (rev %d): no new revision, evidence linked", how, c.Object, what, target.Object, target.Revision)
	if trusted {
		d.Confidence = math.Min(1, math.Max(target.Confidence, c.Confidence)+cfg.DuplicateBoost)
		d.Reason += fmt.Sprintf(", confidence %.2f → %.2f", target.Confidence, d.Confidence)
	} else {
		d.Confidence = target.Confidence
		d.Reason += fmt.Sprintf(", confidence stays %.2f (candidate needs confirmation on its own)", target.Confidence)
	}
	return d
}

// withBroader appends to the reason which broader-scope facts stay ACTIVE.
func withBroader(d Decision) Decision {
	if len(d.Broader) == 0 {
		return d
	}
	parts := make([]string, len(d.Broader))
	for i, b := range d.Broader {
		parts[i] = fmt.Sprintf("%s %s stays ACTIVE", scopeLabel(b.Scope.Scope), b.Object)
	}
	d.Reason += "; " + strings.Join(parts, "; ")
	return d
}

// broader lists the ACTIVE facts in scopes broader than p's with the same subject
// and predicate, broadest first.
func broader(p Proposal, existing []Existing) []Existing {
	var out []Existing
	breadth := p.Scope.Scope.Breadth()
	for _, e := range existing {
		if e.MemoryKey == p.MemoryKey || e.Status != memory.FactActive {
			continue
		}
		b := e.Scope.Scope.Breadth()
		if b < 0 || b >= breadth {
			continue
		}
		if normalize(e.Subject) != normalize(p.Candidate.Subject) || normalize(e.Predicate) != normalize(p.Candidate.Predicate) {
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Scope.Scope.Breadth() < out[j].Scope.Scope.Breadth() })
	return out
}

// restated finds the ACTIVE fact a candidate restates in other words. A value of
// a many-valued predicate is its own memory key, so "direct flights" and "flying
// direct" have different keys: a fact of another key with the same scope, subject
// and predicate whose embedding is at least DuplicateSimilarity close to the
// candidate's is that value, not a new one (the closest wins).
func restated(cfg Config, p Proposal, existing []Existing) *Existing {
	var best *Existing
	for i, e := range existing {
		if e.MemoryKey == p.MemoryKey || e.Status != memory.FactActive || e.Scope.Key() != p.Scope.Key() ||
			e.Similarity <= 0 || e.Similarity < cfg.DuplicateSimilarity ||
			normalize(e.Subject) != normalize(p.Candidate.Subject) || normalize(e.Predicate) != normalize(p.Candidate.Predicate) {
			continue
		}
		if best == nil || e.Similarity > best.Similarity {
			best = &existing[i]
		}
	}
	return best
}

func sameValue(cfg Config, object string, e Existing) bool {
	return normalize(object) == normalize(e.Object) || (e.Similarity > 0 && e.Similarity >= cfg.DuplicateSimilarity)
}

// normalize folds what does not change a value: full-width forms, case, runs of white
// space, surrounding space and thousands separators between digits ("８,０００ cny" and
// "8000 CNY" are equal).
func normalize(s string) string {
	rs := []rune(strings.TrimSpace(s))
	for i, r := range rs {
		switch {
		case r == '\u3000':
			rs[i] = ' '
		case r >= '\uFF01' && r <= '\uFF5E':
			rs[i] = r - 0xFEE0
		}
	}
	var b strings.Builder
	space := false
	for i, r := range rs {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if r == ',' && i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]) {
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func scopeLabel(s memory.Scope) string { return strings.ToLower(string(s)) + "-scope" }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func ptr(e Existing) *Existing { return &e }
