package governance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
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
	// StatedAt are the times (in valid time) its value was stated: the statement
	// that wrote it and every duplicate since. Empty means ValidFrom alone.
	StatedAt []time.Time
	// Similarity is the cosine between the candidate's and this fact's embeddings, 0
	// if unknown.
	Similarity float64
}

// live is whether the revision takes part in the key's history of values: ACTIVE
// or SUPERSEDED (an INVALIDATED or EXPIRED one is withdrawn from it).
func (e Existing) live() bool {
	return e.Status == memory.FactActive || e.Status == memory.FactSuperseded
}

// stated is StatedAt, or ValidFrom when none is recorded.
func (e Existing) stated() []time.Time {
	if len(e.StatedAt) == 0 {
		return []time.Time{e.ValidFrom}
	}
	return e.StatedAt
}

// Reopen is the revision a HISTORICAL statement splits off its Target: the
// Target's value again from From (its first statement after the new one) to
// Until, with the Target's status (ACTIVE when the Target was current).
type Reopen struct {
	From     time.Time         `json:"from"`
	Until    *time.Time        `json:"until,omitempty"`
	Status   memory.FactStatus `json:"status"`
	StatedAt []time.Time       `json:"stated_at,omitempty"`
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
	// Actor is the actor type of the event the candidate was read from (USER,
	// AGENT, SYSTEM, TOOL; empty means USER).
	Actor string `json:",omitempty"`
	// AssertedBy lists the actor types the schema lets assert the predicate; empty
	// means USER alone. A candidate of another actor is REJECTED: an agent's own
	// words are evidence of what it said, not a source of the user's facts.
	AssertedBy []string `json:",omitempty"`
}

// asserters is AssertedBy with its default.
func (p Proposal) asserters() []string {
	if len(p.AssertedBy) == 0 {
		return []string{memory.DefaultActorType}
	}
	return p.AssertedBy
}

// assertable is whether the proposal's actor may assert its predicate.
func (p Proposal) assertable() bool {
	return slices.Contains(p.asserters(), cmp.Or(p.Actor, memory.DefaultActorType))
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
	// StatedAt is the statement's time in valid time (the candidate's valid_from,
	// else the event time): a new revision's first statement, or for DUPLICATE the
	// time added to Target's statements. Zero for a retraction or rejection.
	StatedAt time.Time
	// ExtendFrom, for a DUPLICATE stated before its Target's window, is the
	// Target's new valid_from.
	ExtendFrom *time.Time
	// Trim is a revision whose window reaches past StatedAt and so now ends there
	// (SUPERSEDED if it was ACTIVE); nil when none. For SUPERSEDE the Target is
	// closed anyway and is not repeated here.
	Trim *Existing
	// Reopen, for a HISTORICAL inside one revision's window (Target, then also
	// Trim), is the revision that carries Target's value on after it.
	Reopen *Reopen
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
//  2. An actor the schema does not let assert the predicate (Proposal.AssertedBy;
//     by default only the user's own words) → REJECTED: the event stays evidence,
//     and no fact, duplicate or review comes of it. Forbidden → REJECTED;
//     confidence < RejectBelow → REJECTED (this beats INFERRED).
//  3. The action, against the revisions of p.MemoryKey:
//     - retraction: INVALIDATE the current ACTIVE revision; NOOP when there is none or
//     when the candidate names an object that is not the current value;
//     - with no ACTIVE revision, an ACTIVE fact of another key (a many-valued
//     predicate's other value) in the same scope, of the same subject and
//     predicate, with Similarity ≥ DuplicateSimilarity → DUPLICATE of it (restated);
//     - valid time decides, not the order writes arrive in. The statement's time t
//     (the candidate's valid_from, else the event time) is placed among the times
//     the key's live revisions were stated (Existing.StatedAt): prev is the latest
//     at or before t (a tie comes before the new statement), next the first after;
//     - prev's value (same normalised object, or Similarity ≥ DuplicateSimilarity)
//     → DUPLICATE of prev's revision, t added to its statements;
//     - next's value, next opening its revision → DUPLICATE of next's revision,
//     which now starts at t (ExtendFrom), prev's revision ending there (Trim);
//     - a next of another value → HISTORICAL from t until next's revision begins;
//     prev's revision ends at t (Trim); when prev and next are one revision the
//     statement splits it, and its value opens again at next (Reopen, ACTIVE when
//     the split revision was);
//     - nothing after t and a current ACTIVE revision → SUPERSEDE (prev's revision
//     trimmed if it is another one);
//     - otherwise CREATE (prev's revision trimmed).
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
	if !p.assertable() {
		return rejected(p, fmt.Sprintf("said by %s, which the schema does not let assert %s (asserted_by: %s): kept as evidence, not as memory",
			cmp.Or(p.Actor, memory.DefaultActorType), c.Predicate, strings.Join(p.asserters(), ", ")))
	}
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

	if current == nil {
		if near := restated(cfg, p, existing); near != nil {
			return duplicate(cfg, d, *near, c, what, trusted)
		}
	}

	// Valid time decides, not commit order: the statement is placed among the
	// key's statements (every time a live revision was stated) by its time.
	t := p.EventTime
	if c.ValidFrom != nil && !c.ValidFrom.IsZero() {
		t = *c.ValidFrom
	}
	d.StatedAt = t
	prev, next := placeStatement(revs, t)
	if prev != nil && sameValue(cfg, c.Object, *prev.rev) {
		// The value in force then, stated again: a duplicate, and one more time it was stated.
		return duplicate(cfg, d, *prev.rev, c, what, trusted)
	}
	if next != nil && sameValue(cfg, c.Object, *next.rev) && (prev == nil || prev.rev.FactID != next.rev.FactID) {
		// The value that follows, stated earlier than it was known: its revision now
		// starts at this statement, and the one before ends there.
		d = duplicate(cfg, d, *next.rev, c, what, trusted)
		if t.Before(next.rev.ValidFrom) {
			d.ExtendFrom = ptrTime(t)
			d.Reason += fmt.Sprintf("; rev %d now valid from %s", next.rev.Revision, stamp(t))
		}
		d.Trim = trimmed(prev, t)
		return withTrim(d)
	}
	d.ValidFrom = t
	d.ValidUntil = c.ValidUntil
	if next != nil {
		d.Action = ActionHistorical
		d.Historical = true
		until := next.rev.ValidFrom
		if prev != nil && prev.rev.FactID == next.rev.FactID {
			// Inside one revision's window: it ends here, and its value opens again at
			// the first statement after this one (a split).
			until = next.at
			src := *prev.rev
			d.Target = ptr(src)
			d.Reopen = &Reopen{From: next.at, Until: src.ValidUntil, Status: src.Status}
			for _, s := range src.stated() {
				if !s.Before(next.at) {
					d.Reopen.StatedAt = append(d.Reopen.StatedAt, s)
				}
			}
		} else {
			d.Target = ptr(*next.rev)
		}
		if until.Before(t) {
			until = t
		}
		if d.ValidUntil == nil || until.Before(*d.ValidUntil) {
			d.ValidUntil = &until
		}
		d.Trim = trimmed(prev, t)
		d.Reason = fmt.Sprintf("statement at %s predates rev %d (%s, stated %s): %s %s kept as a historical revision until %s",
			stamp(t), next.rev.Revision, next.rev.Object, stamp(next.at), what, c.Object, stamp(until))
		if d.Reopen != nil {
			d.Reason += fmt.Sprintf("; it splits rev %d, whose value %s is stated again from %s", d.Target.Revision, d.Target.Object, stamp(next.at))
		} else if current != nil {
			d.Reason += fmt.Sprintf("; %s (rev %d) stays current", current.Object, current.Revision)
		}
		return withBroader(withTrim(d))
	}

	if current != nil && cfg.NeverSupersede { // test-only fault, see Config.NeverSupersede
		return duplicate(cfg, d, *current, c, what, trusted)
	}
	if current != nil {
		d.Action = ActionSupersede
		d.Target = ptr(*current)
		if prev != nil && prev.rev.FactID != current.FactID {
			d.Trim = trimmed(prev, t)
		}
		d.Reason = fmt.Sprintf("new value %s supersedes %s (rev %d)", c.Object, current.Object, current.Revision)
		return withBroader(withTrim(d))
	}

	d.Action = ActionCreate
	d.Trim = trimmed(prev, t)
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
	return withBroader(withTrim(d))
}

// statement is one time a live revision's value was stated.
type statement struct {
	at  time.Time
	rev *Existing
}

// placeStatement finds, among the statements of the key's live revisions (ACTIVE
// and SUPERSEDED; a withdrawn or expired revision neither bounds nor explains
// another), the latest at or before t (prev; a statement at the same time comes
// before the new one) and the first after t (next).
func placeStatement(revs []Existing, t time.Time) (prev, next *statement) {
	var all []statement
	for i := range revs {
		if !revs[i].live() {
			continue
		}
		for _, s := range revs[i].stated() {
			all = append(all, statement{at: s, rev: &revs[i]})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].at.Equal(all[j].at) {
			return all[i].at.Before(all[j].at)
		}
		return all[i].rev.Revision < all[j].rev.Revision
	})
	for i := range all {
		if all[i].at.After(t) {
			return prev, &all[i]
		}
		prev = &all[i]
	}
	return prev, nil
}

// trimmed is the revision of prev when its window reaches past t (so it must end
// there), else nil.
func trimmed(prev *statement, t time.Time) *Existing {
	if prev == nil || (prev.rev.ValidUntil != nil && !prev.rev.ValidUntil.After(t)) {
		return nil
	}
	return ptr(*prev.rev)
}

func withTrim(d Decision) Decision {
	if d.Trim != nil {
		d.Reason += fmt.Sprintf("; rev %d (%s) now ends at %s", d.Trim.Revision, d.Trim.Object, stamp(d.StatedAt))
	}
	return d
}

func ptrTime(t time.Time) *time.Time { return &t }

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
