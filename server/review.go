package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/sdk/client"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

type reviewServer struct{ Deps }

func (s *reviewServer) ListPending(ctx context.Context, req *connect.Request[engramv1.ListPendingRequest]) (*connect.Response[engramv1.ListPendingResponse], error) {
	p, err := require(ctx, "ListPending", "reviewer")
	if err != nil {
		return nil, err
	}
	limit := int(req.Msg.Limit)
	switch {
	case limit < 0:
		return nil, fieldErr("limit", "is negative")
	case limit == 0:
		limit = 100
	case limit > 1000:
		return nil, fieldErr("limit", fmt.Sprintf("%d exceeds the limit of 1000", limit))
	}
	var cands []storage.Candidate
	var ev map[string][]string
	err = s.read(ctx, "list pending", func(ctx context.Context, st *storage.Store) error {
		var err error
		if cands, err = st.ListCandidates(ctx, p.TenantID, storage.CandidateFilter{
			Status: memory.CandidateNeedsConfirmation, Undecided: true, UserID: strings.TrimSpace(req.Msg.UserId), Limit: limit}); err != nil {
			return fmt.Errorf("list pending: %w", err)
		}
		ev, err = st.CandidateEvidenceIDs(ctx, p.TenantID, cands)
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	out := &engramv1.ListPendingResponse{}
	items := map[string]*engramv1.PendingReview{}
	for i := range cands {
		c := &cands[i]
		if it, ok := items[identicalKey(c)]; ok && c.MemoryKey != "" {
			// The same thing said again: one review item, its evidence with it.
			it.IdenticalCandidateIds = append(it.IdenticalCandidateIds, c.ID)
			for _, e := range ev[c.ID] {
				if !slices.Contains(it.EvidenceIds, e) {
					it.EvidenceIds = append(it.EvidenceIds, e)
				}
			}
			continue
		}
		it := pendingOut(c, ev[c.ID])
		items[identicalKey(c)] = it
		out.Pending = append(out.Pending, it)
	}
	return connect.NewResponse(out), nil
}

// identicalKey is what makes two pending candidates one review item: the same
// user, memory key, value and retraction. Each stays a candidate of its own
// write, committed at its own statement's time, so a value stated again after
// another keeps its place in the key's valid time.
func identicalKey(c *storage.Candidate) string {
	return fmt.Sprintf("%s\x1f%s\x1f%s\x1f%v", c.UserID, c.MemoryKey, c.Object, c.Retraction)
}

// decideIdentical sends the verdict given for c to every other undecided
// candidate of the same review item (identicalKey), each in its own write, and
// returns their ids. A candidate another reviewer decided meanwhile is left.
func (s *reviewServer) decideIdentical(ctx context.Context, tenant string, c *storage.Candidate, v governance.Verdict) ([]string, error) {
	if c.MemoryKey == "" {
		return nil, nil
	}
	cands, err := s.Store.ListCandidates(ctx, tenant, storage.CandidateFilter{Status: memory.CandidateNeedsConfirmation, Undecided: true, UserID: c.UserID, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("list identical candidates: %w", err)
	}
	var done []string
	for i := range cands {
		o := &cands[i]
		if o.ID == c.ID || o.WorkflowID == "" || identicalKey(o) != identicalKey(c) {
			continue
		}
		if err := s.sendReview(ctx, o, v); err != nil {
			return done, fmt.Errorf("identical candidate %s: %w", o.ID, err)
		}
		if err := s.Store.MarkDecided(ctx, tenant, o.ID, v.Reviewer, v.Note); err != nil {
			return done, err
		}
		done = append(done, o.ID)
	}
	return done, nil
}

// sendReview sends a verdict to the write c waits in, and waits for the write to
// take it.
func (s *reviewServer) sendReview(ctx context.Context, c *storage.Candidate, v governance.Verdict) error {
	h, err := s.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: c.WorkflowID, UpdateName: write.UpdateReview, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{write.ReviewRequest{CandidateID: c.ID, Verdict: v}},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return err
}

func verdictKind(d engramv1.Decision) (governance.VerdictKind, bool) {
	switch d {
	case engramv1.Decision_DECISION_CONFIRM:
		return governance.VerdictConfirm, true
	case engramv1.Decision_DECISION_REJECT:
		return governance.VerdictReject, true
	case engramv1.Decision_DECISION_EDIT:
		return governance.VerdictEdit, true
	}
	return "", false
}

func (s *reviewServer) Decide(ctx context.Context, req *connect.Request[engramv1.DecideRequest]) (*connect.Response[engramv1.DecideResponse], error) {
	p, err := require(ctx, "Decide", "reviewer")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := validUUID("candidate_id", m.CandidateId); err != nil {
		return nil, err
	}
	kind, ok := verdictKind(m.Decision)
	if !ok {
		return nil, fieldErr("decision", "must be DECISION_CONFIRM, DECISION_REJECT or DECISION_EDIT")
	}
	v := governance.Verdict{Kind: kind, Object: strings.TrimSpace(m.EditedValue), Reviewer: p.Name, Note: m.Note}
	if kind != governance.VerdictEdit && v.Object != "" {
		return nil, fieldErr("edited_value", "is only allowed with DECISION_EDIT")
	}
	if err := v.Validate(); err != nil {
		return nil, toConnect(ctx, err)
	}
	wait, err := waitTimeout("wait_timeout", m.WaitTimeout, m.WaitTimeout == nil)
	if err != nil {
		return nil, err
	}
	// The candidate must belong to the caller's tenant; another tenant's id is
	// indistinguishable from one that does not exist.
	c, err := s.Store.GetCandidate(ctx, p.TenantID, m.CandidateId)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("candidate_id: no candidate %s", m.CandidateId))
	}
	if err != nil {
		return nil, toConnect(ctx, fmt.Errorf("load candidate: %w", err))
	}
	if c.Status != memory.CandidateNeedsConfirmation {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("candidate_id: candidate %s is %s, not awaiting review", c.ID, c.Status))
	}
	if c.ReviewedAt != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("candidate_id: candidate %s was already decided by %s at %s; it commits once the other candidates of its write are decided", c.ID, c.Reviewer, c.ReviewedAt.UTC().Format(time.RFC3339)))
	}
	if c.WorkflowID == "" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("candidate_id: candidate %s has no write workflow to decide in", c.ID))
	}
	if err := s.sendReview(ctx, c, v); err != nil {
		return nil, toConnect(ctx, fmt.Errorf("send review: %w", err))
	}
	// Decided, it leaves the pending list now, though its write may wait for the
	// verdicts of its other candidates before it commits them all.
	if err := s.Store.MarkDecided(ctx, p.TenantID, c.ID, v.Reviewer, v.Note); err != nil {
		return nil, toConnect(ctx, err)
	}
	also, err := s.decideIdentical(ctx, p.TenantID, c, v)
	if err != nil {
		return nil, toConnect(ctx, err)
	}
	s.Logger.InfoContext(ctx, "review decided", "tenant", p.TenantID, "candidate_id", c.ID, "workflow_id", c.WorkflowID, "decision", kind, "reviewer", p.Name, "identical", len(also))
	out := &engramv1.DecideResponse{Status: candidateStatusOut(c.Status), AlsoDecided: also}
	deadline := time.Now().Add(wait)
	for {
		c, err = s.Store.GetCandidate(ctx, p.TenantID, c.ID)
		if err != nil {
			return nil, toConnect(ctx, fmt.Errorf("reload candidate: %w", err))
		}
		if c.Status != memory.CandidateNeedsConfirmation {
			out.Status, out.Committed, out.FactId, out.Reason = candidateStatusOut(c.Status), true, str(c.FactID), c.Reason
			return connect.NewResponse(out), nil
		}
		others, err := s.othersPending(ctx, c)
		if err != nil {
			return nil, toConnect(ctx, err)
		}
		out.OthersPending = int32(others)
		if !m.Wait || others > 0 || time.Now().After(deadline) {
			return connect.NewResponse(out), nil
		}
		select {
		case <-ctx.Done():
			return nil, toConnect(ctx, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// othersPending counts the candidates of c's workflow still awaiting a verdict.
func (s *reviewServer) othersPending(ctx context.Context, c *storage.Candidate) (int, error) {
	v, err := s.Temporal.QueryWorkflow(ctx, c.WorkflowID, "", write.QueryPending)
	if err != nil {
		return 0, nil // finished meanwhile: the commit is on its way
	}
	var pending []write.PendingCandidate
	if err := v.Get(&pending); err != nil {
		return 0, fmt.Errorf("decode pending: %w", err)
	}
	n := 0
	for _, pc := range pending {
		if pc.CandidateID != c.ID {
			n++
		}
	}
	return n, nil
}
