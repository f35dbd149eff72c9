package write

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/governance"
)

func rootMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return err.Error()
}

// reviewState holds the candidates awaiting a human and the verdicts received.
type reviewState struct {
	deadline time.Time
	defaults map[string]string
	pending  []PendingCandidate
	verdicts map[string]governance.Verdict
	rejected []string // signals that could not be applied, shown in the details
	// waiting is true while the workflow waits for reviews (what UpdateOutcome
	// answers PendingReview for).
	waiting bool
	// marked are the verdicts recorded in Postgres (MarkDecided), by candidate id.
	marked map[string]bool
	// soFar is the workflow's result so far (a MemoryWriteResult or a
	// MemoryWriteBatchResult), which UpdateOutcome answers with while it waits.
	soFar any
}

// add makes candidates reviewable as soon as governance has decided them, before
// anything is committed, so a review sent at once (e.g. by the API, which reads
// pending candidates from Postgres) is accepted. The deadline starts with the first.
func (r *reviewState) add(ctx workflow.Context, items []pendingItem, timeout time.Duration) {
	if len(items) == 0 {
		return
	}
	if r.deadline.IsZero() {
		r.deadline = workflow.Now(ctx).Add(timeout)
	}
	if r.defaults == nil {
		r.defaults = map[string]string{}
	}
	for _, p := range items {
		it := p.item
		c := it.Candidate
		r.pending = append(r.pending, PendingCandidate{
			CandidateID: it.CandidateID, MemoryKey: it.Proposal.MemoryKey, Content: c.Content, Predicate: c.Predicate,
			Object: c.Object, Scope: string(c.Scope), Origin: string(c.Origin), Confidence: c.Confidence,
			Reason: it.Decision.Reason, OnConfirm: string(it.Decision.Action), Default: it.ReviewDefault,
			Deadline: r.deadline.UTC().Format(time.RFC3339), Evidence: []string{p.evidence},
		})
		r.defaults[it.CandidateID] = it.ReviewDefault
	}
}

func (r *reviewState) pendingList() []PendingCandidate {
	out := []PendingCandidate{}
	for _, p := range r.pending {
		if _, done := r.verdicts[p.CandidateID]; !done {
			out = append(out, p)
		}
	}
	return out
}

func (r *reviewState) validate(req ReviewRequest) error {
	found := false
	for _, p := range r.pending {
		if p.CandidateID == req.CandidateID {
			found = true
		}
	}
	if !found {
		ids := []string{}
		for _, p := range r.pendingList() {
			ids = append(ids, p.CandidateID)
		}
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("candidate_id: %q is not awaiting review here (pending: %s)", req.CandidateID, strings.Join(ids, ", ")), ErrTypeInvalidReview, nil)
	}
	if _, done := r.verdicts[req.CandidateID]; done {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("candidate_id: %q was already reviewed", req.CandidateID), ErrTypeInvalidReview, nil)
	}
	if err := req.Verdict.Validate(); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidReview, err)
	}
	return nil
}

// details is what a reviewer reads in the Web UI's current details. The UI's frame
// for them cuts the end of their text (32 px in UI 2.42) and is about 590 px wide on a
// 1280 px screen, so the payload to send comes first, on lines that fit, and what can be
// spared comes last.
func (r *reviewState) details(deadline time.Time) string {
	var b strings.Builder
	list := r.pendingList()
	fmt.Fprintf(&b, "### %d memory candidate(s) await review\n\n", len(list))
	for _, e := range r.rejected {
		fmt.Fprintf(&b, "> ignored signal: %s\n\n", e)
	}
	fmt.Fprintf(&b, "Send the **review** signal (More Actions → Send a Signal) before %s with:\n\n", deadline.UTC().Format(time.RFC3339))
	for _, p := range list {
		fmt.Fprintf(&b, "```json\n{\"candidate_id\": \"%s\",\n \"decision\": \"confirm\", \"reviewer\": \"your-name\", \"note\": \"\"}\n```\n\n", p.CandidateID)
		fmt.Fprintf(&b, "**%s** · `%s` · %s, %s, confidence %.2f · why review: %s · on confirm: %s · on timeout: %s\n\n", p.Content, p.MemoryKey, p.Scope, p.Origin, p.Confidence, p.Reason, p.OnConfirm, p.Default)
	}
	b.WriteString("`decision` is `confirm`, `reject` or `edit` (with `edited_value`); without one by then, the schema default applies.\n")
	return b.String()
}

// registerReview installs the review update handler and the signal reader at
// workflow start, so a review sent early is validated against what is pending (and
// refused with a clear message) rather than rejected as an unknown update.
func registerReview(ctx workflow.Context, ch workflow.ReceiveChannel, rv *reviewState) error {
	apply := func(req ReviewRequest) {
		rv.verdicts[req.CandidateID] = req.Verdict
		workflow.GetLogger(ctx).Info("review received", "candidate_id", req.CandidateID, "decision", req.Kind, "reviewer", req.Reviewer)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateReview,
		func(ctx workflow.Context, req ReviewRequest) (string, error) {
			apply(req)
			return "recorded", nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ReviewRequest) error { return rv.validate(req) }},
	); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req ReviewRequest
			ch.Receive(ctx, &req)
			if err := rv.validate(req); err != nil {
				rv.rejected = append(rv.rejected, err.Error())
				continue
			}
			apply(req)
		}
	})
	return workflow.SetQueryHandler(ctx, QueryPending, func() ([]PendingCandidate, error) { return rv.pendingList(), nil })
}

// reviewMarksChange (workflow.GetVersion): a write waiting for reviews records each
// verdict in Postgres as it arrives (MarkDecided), where a candidate decided from the
// Web UI stayed on the pending list until the write's last candidate was decided.
const (
	reviewMarksChange  = "review-marks"
	reviewMarksVersion = 1
)

// markDecided records the verdicts received and not yet recorded. A failure is
// logged: the commit records every verdict anyway.
func (r *reviewState) markDecided(ctx workflow.Context, tenant string) {
	in := MarkDecidedInput{TenantID: tenant}
	for _, p := range r.pending {
		if v, ok := r.verdicts[p.CandidateID]; ok && !r.marked[p.CandidateID] {
			in.Decided = append(in.Decided, ReviewRequest{CandidateID: p.CandidateID, Verdict: v})
		}
	}
	if len(in.Decided) == 0 {
		return
	}
	var a *MemoryActivities
	if err := workflow.ExecuteLocalActivity(localActivity(ctx), a.MarkDecided, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("verdicts not recorded before the commit", "error", err)
		return
	}
	if r.marked == nil {
		r.marked = map[string]bool{}
	}
	for _, d := range in.Decided {
		r.marked[d.CandidateID] = true
	}
}

// awaitReview waits, when any candidate needs confirmation, for a verdict per
// candidate through the review signal or update, until the timeout; then the
// schema's default applies to what is left.
// A write of revision 3 on always records the verdicts (byRevision); the others ask
// their history (reviewMarksChange).
func awaitReview(ctx workflow.Context, tenant string, rv *reviewState, timeout time.Duration, byRevision bool) error {
	deadline := rv.deadline
	if len(rv.pending) == 0 {
		return nil
	}
	marks := byRevision || workflow.GetVersion(ctx, reviewMarksChange, workflow.DefaultVersion, reviewMarksVersion) >= reviewMarksVersion
	rv.waiting = true
	defer func() { rv.waiting = false }()
	_ = workflow.UpsertTypedSearchAttributes(ctx, SearchAttrReview.ValueSet(ReviewPending))
	workflow.SetCurrentDetails(ctx, rv.details(deadline))
	for {
		if marks {
			rv.markDecided(ctx, tenant)
		}
		n := len(rv.pendingList())
		nRejected := len(rv.rejected)
		ok, err := workflow.AwaitWithTimeout(ctx, deadline.Sub(workflow.Now(ctx)), func() bool {
			return len(rv.pendingList()) != n || len(rv.rejected) != nRejected
		})
		if err != nil {
			return err
		}
		workflow.SetCurrentDetails(ctx, rv.details(deadline))
		if len(rv.pendingList()) == 0 {
			break
		}
		if !ok { // timed out: the schema's default decides what nobody reviewed
			ids := []string{}
			for _, p := range rv.pendingList() {
				ids = append(ids, p.CandidateID)
			}
			sort.Strings(ids)
			for _, id := range ids {
				kind := governance.VerdictReject
				if rv.defaults[id] == "confirm" {
					kind = governance.VerdictConfirm
				}
				rv.verdicts[id] = governance.Verdict{Kind: kind, Reviewer: "engram:review-timeout", Note: fmt.Sprintf("no review within %s; schema default %s", timeout, kind)}
			}
			break
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SearchAttrReview.ValueSet(ReviewDone))
	workflow.SetCurrentDetails(ctx, "review finished")
	return nil
}
