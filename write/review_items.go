package write

import (
	"context"
	"fmt"
	"sort"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// One review item per key and value: a candidate that needs a reviewer while an
// identical one (same memory key, value and retraction) already waits joins that
// item instead of opening a second. It is stored PENDING with the item's id, its
// evidence is linked to the item as well (the reviewer sees every statement of
// it), and when the item is decided it takes the item's outcome: the same fact,
// its evidence linked to it, its event settled. Both sides run under the key's
// lock (Govern here, Commit of the item), so a candidate joins an item that is
// still open, or finds it decided.

// openOrJoin records the candidates of items (indexes review) that need a reviewer:
// each opens a review item, or joins the open one of its key and value. Keys are
// locked in sorted order, as Commit locks them.
func openOrJoin(ctx context.Context, tx bun.Tx, in GovernInput, s *schema.Schema, items []Governed, review []int) error {
	tenant := in.Event.TenantID
	sort.SliceStable(review, func(x, y int) bool { return items[review[x]].Proposal.MemoryKey < items[review[y]].Proposal.MemoryKey })
	for k, i := range review {
		g := &items[i]
		key := g.Proposal.MemoryKey
		if k == 0 || items[review[k-1]].Proposal.MemoryKey != key {
			if err := storage.LockMemoryKey(ctx, tx, tenant, key); err != nil {
				return err
			}
		}
		item, err := storage.OpenReviewItem(ctx, tx, tenant, key, g.Candidate.Object, g.Candidate.Retraction, g.CandidateID)
		if err != nil {
			return err
		}
		if item != "" {
			g.JoinedTo = item
			g.Decision = governance.Decision{Status: memory.CandidatePending, Action: governance.ActionNoop, Confidence: g.Decision.Confidence,
				Reason: joinedReason(item, key, g.Candidate.Object)}
		}
		if err := storage.UpsertCandidate(ctx, tx, tenant, candidateRow(in, *g, s)); err != nil {
			return err
		}
		if err := storage.LinkCandidateEvidence(ctx, tx, tenant, g.CandidateID, in.EvidenceID, memory.RelSupport); err != nil {
			return err
		}
		if item != "" {
			if err := storage.LinkCandidateEvidence(ctx, tx, tenant, item, in.EvidenceID, memory.RelSupport); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinedReason(item, key, object string) string {
	return fmt.Sprintf("joins review item %s: %s = %s already awaits a reviewer", item, key, object)
}

// commitJoined commits a candidate that joined review item it.JoinedTo: it waits
// (PENDING) while the item does, else it takes the item's outcome.
func (a *MemoryActivities) commitJoined(ctx context.Context, tx bun.Tx, tenant string, it Governed, row *storage.Candidate) (CommittedResult, error) {
	res := CommittedResult{CandidateID: it.CandidateID, MemoryKey: it.Proposal.MemoryKey}
	item, err := a.Store.GetCandidate(ctx, tenant, it.JoinedTo)
	if err != nil {
		return res, fmt.Errorf("load review item %s: %w", it.JoinedTo, err)
	}
	if item.Status == memory.CandidateNeedsConfirmation {
		row.Status, row.Action, row.Reason = memory.CandidatePending, string(governance.ActionNoop), joinedReason(item.ID, item.MemoryKey, item.Object)
		if err := storage.UpsertCandidate(ctx, tx, tenant, row); err != nil {
			return res, err
		}
	} else if err := a.settleJoined(ctx, tx, tenant, row, item); err != nil {
		return res, err
	}
	res.Status, res.Action, res.Reason, res.Reviewer = row.Status, row.Action, row.Reason, row.Reviewer
	if row.FactID != nil {
		res.FactID = *row.FactID
	}
	return res, nil
}

// settleJoinedTo gives every candidate waiting on review item item (just decided
// and stored) the item's outcome.
func (a *MemoryActivities) settleJoinedTo(ctx context.Context, tx bun.Tx, tenant string, item *storage.Candidate) error {
	joined, err := storage.JoinedCandidates(ctx, tx, tenant, item.ID)
	if err != nil {
		return err
	}
	for i := range joined {
		if err := a.settleJoined(ctx, tx, tenant, &joined[i], item); err != nil {
			return err
		}
	}
	return nil
}

// settleJoined gives j, which joined the decided review item, the item's outcome:
// its status and reviewer, and when accepted the item's fact, supported by j's
// evidence too (a DUPLICATE of it); then settles j's event.
func (a *MemoryActivities) settleJoined(ctx context.Context, tx bun.Tx, tenant string, j, item *storage.Candidate) error {
	j.Status, j.Reviewer, j.ReviewNote, j.ReviewedAt = item.Status, item.Reviewer, item.ReviewNote, item.ReviewedAt
	j.Action, j.FactID = string(governance.ActionNoop), nil
	j.Reason = fmt.Sprintf("decided with review item %s: %s", item.ID, item.Reason)
	j.JoinedCandidateID = &item.ID
	if item.Status == memory.CandidateAccepted && item.FactID != nil {
		j.Action, j.FactID = string(governance.ActionDuplicate), item.FactID
		ev, err := a.Store.CandidateEvidenceIDs(ctx, tenant, []storage.Candidate{*j})
		if err != nil {
			return err
		}
		for _, e := range ev[j.ID] {
			if err := storage.LinkFactEvidence(ctx, tx, tenant, *item.FactID, e, memory.RelSupport); err != nil {
				return err
			}
		}
	}
	if err := storage.UpsertCandidate(ctx, tx, tenant, j); err != nil {
		return err
	}
	return storage.SettleEventStatus(ctx, tx, tenant, j.EventID)
}
