package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/write"
)

// reviewBatch is the 24-event batch: 20 stated budgets (committed at once)
// and 4 inferred seat preferences (the travel schema sends inferred preferences to
// a reviewer), each review event a user of its own.
func reviewBatch(tag string) (evs []*engramv1.Event, review map[int]bool) {
	review = map[int]bool{}
	for i := range 24 {
		at := timestamppb.New(base.Add(time.Duration(i) * time.Minute))
		if i%6 == 5 {
			review[i] = true
			evs = append(evs, &engramv1.Event{UserId: fmt.Sprintf("%s-r%d", tag, i), Content: "我上次坐了靠窗的位置，挺好", Schema: "travel", OccurredAt: at})
			continue
		}
		evs = append(evs, &engramv1.Event{UserId: fmt.Sprintf("%s-u%d", tag, i%5), Content: fmt.Sprintf("预算不超过%d元", 5000+100*i), Schema: "travel", OccurredAt: at})
	}
	return evs, review
}

// A batch whose reviews are awaited answers each event's own status: the 20
// committed events COMMITTED with their outcomes, the 4 waiting PENDING_REVIEW
// with their candidates; once reviewed the batch finishes and all 24 are COMMITTED.
// Each decided candidate leaves the pending list when it is decided.
func TestBatchStatusesWhileReviewing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agent := e.client("anyA")
	reviewer := e.client("reviewerA")
	evs, review := reviewBatch("bs")
	res, err := agent.IngestBatch(ctx, evs, client.WaitFor(2*time.Minute))
	require.NoError(t, err)
	require.Len(t, res.Results, 24)
	counts := map[engramv1.WriteStatus]int{}
	var pending []string
	for i, r := range res.Results {
		counts[r.Status]++
		if review[i] {
			assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, r.Status, "event %d", i)
			require.Len(t, r.Pending, 1, "event %d", i)
			pending = append(pending, r.Pending[0].CandidateId)
			continue
		}
		assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, "event %d: %s", i, r.Reason)
		require.NotEmpty(t, r.Outcomes, "event %d: a committed event says what it committed", i)
		assert.NotEmpty(t, r.Outcomes[0].FactId, "event %d", i)
		assert.Empty(t, r.Pending, "event %d", i)
	}
	assert.Equal(t, map[engramv1.WriteStatus]int{engramv1.WriteStatus_WRITE_STATUS_COMMITTED: 20, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW: 4}, counts)

	// Asked again while it waits (a retried call joins the batch), the answer is the same.
	again, err := agent.IngestBatch(ctx, evs, client.WaitFor(time.Minute))
	require.NoError(t, err)
	for i, r := range again.Results {
		assert.Equal(t, res.Results[i].Status, r.Status, "event %d", i)
	}

	// A decided candidate leaves the pending list at once, though the batch commits
	// it only with the others: decided through the API, and through the review
	// signal the Temporal Web UI sends.
	listed := func() []string {
		ps, err := reviewer.ListPending(ctx, "", 0)
		require.NoError(t, err)
		var ids []string
		for _, p := range ps {
			ids = append(ids, p.CandidateId)
		}
		return ids
	}
	require.ElementsMatch(t, pending, listed())
	d, err := reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: pending[0], Decision: engramv1.Decision_DECISION_CONFIRM, Note: "asked", Wait: true})
	require.NoError(t, err)
	assert.False(t, d.Committed, "the batch commits once all four are decided")
	assert.EqualValues(t, 3, d.OthersPending)
	assert.ElementsMatch(t, pending[1:], listed(), "a confirmed candidate leaves the pending list")
	_, err = reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: pending[0], Decision: engramv1.Decision_DECISION_REJECT})
	assert.Equal(t, connect.CodeFailedPrecondition, codeOf(t, err), "a decided candidate cannot be decided again")
	assert.Contains(t, err.Error(), "already decided by alice")

	require.NoError(t, e.tc.SignalWorkflow(ctx, res.BatchWorkflowId, "", write.SignalReview,
		write.ReviewRequest{CandidateID: pending[1], Verdict: governance.Verdict{Kind: governance.VerdictReject, Reviewer: "bob-in-the-ui"}}))
	require.Eventually(t, func() bool { return !slices.Contains(listed(), pending[1]) }, 20*time.Second, 100*time.Millisecond,
		"a candidate rejected from the Web UI leaves the pending list")
	assert.ElementsMatch(t, pending[2:], listed())

	for _, id := range pending[2:] {
		_, err := reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: id, Decision: engramv1.Decision_DECISION_CONFIRM, Wait: true})
		require.NoError(t, err)
	}
	assert.Empty(t, listed())
	// The decisions stay where they are shown: the confirmed fact's reason names
	// its reviewer, the rejected user has no seat fact.
	facts, err := agent.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: evs[5].UserId, Predicate: "seat"})
	require.NoError(t, err)
	require.Len(t, facts, 1)
	assert.Contains(t, facts[0].Reason, "alice")
	facts, err = agent.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: evs[11].UserId, Predicate: "seat"})
	require.NoError(t, err)
	assert.Empty(t, facts, "rejected in the Web UI")
	done, err := agent.IngestBatch(ctx, evs, client.WaitFor(time.Minute))
	require.NoError(t, err)
	for i, r := range done.Results {
		assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_COMMITTED, r.Status, "event %d after review", i)
	}
}

// "I live in Berlin" said four times, a minute apart (the general schema sends
// where a person lives to a reviewer: sensitive), sent one after another or all
// at once, is one review item holding the four statements' evidence. Deciding
// the item decides the other three, each in its own write (so each keeps its
// statement's place in the key's valid time): one fact, supported by all four,
// every event committed and nothing left to review.
func TestIdenticalCandidatesAreOneReviewItem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agent := e.client("anyA")
	reviewer := e.client("reviewerA")
	for _, concurrent := range []bool{false, true} {
		user := fmt.Sprintf("berlin-%v", concurrent)
		t.Run(user, func(t *testing.T) {
			results := make([]*engramv1.IngestResult, 4)
			errs := make([]error, 4)
			send := func(i int) {
				ev := &engramv1.Event{UserId: user, Content: "I live in Berlin", Schema: "general", OccurredAt: timestamppb.New(base.Add(time.Duration(i) * time.Minute))}
				results[i], errs[i] = agent.Ingest(ctx, ev, client.WaitFor(time.Minute))
			}
			if concurrent {
				var wg sync.WaitGroup
				for i := range 4 {
					wg.Add(1)
					go func() { defer wg.Done(); send(i) }()
				}
				wg.Wait()
			} else {
				for i := range 4 {
					send(i)
				}
			}
			var events []string
			for i := range 4 {
				require.NoError(t, errs[i])
				assert.Equal(t, engramv1.WriteStatus_WRITE_STATUS_PENDING_REVIEW, results[i].Status, "event %d: %s", i, results[i].Reason)
				events = append(events, results[i].EventId)
			}
			pending, err := reviewer.ListPending(ctx, user, 0)
			require.NoError(t, err)
			require.Len(t, pending, 1, "one review item")
			item := pending[0]
			assert.Len(t, item.IdenticalCandidateIds, 3, "the three statements said again")
			assert.Len(t, item.EvidenceIds, 4, "the item holds every statement's evidence")
			assert.Equal(t, "Berlin", item.Object)

			d, err := reviewer.Decide(ctx, &engramv1.DecideRequest{CandidateId: item.CandidateId, Decision: engramv1.Decision_DECISION_CONFIRM, Wait: true})
			require.NoError(t, err)
			require.True(t, d.Committed)
			assert.ElementsMatch(t, item.IdenticalCandidateIds, d.AlsoDecided)
			p, err := reviewer.ListPending(ctx, user, 0)
			require.NoError(t, err)
			assert.Empty(t, p, "nothing left to review once the item is decided")

			// Each identical candidate commits in its own write: wait for the four.
			var statuses []string
			deadline := time.Now().Add(30 * time.Second)
			for {
				statuses = nil
				require.NoError(t, e.st.DB().NewSelect().Table("events").Column("status").Where("id IN (?)", bun.In(events)).Scan(ctx, &statuses))
				if slices.Equal(statuses, []string{"COMMITTED", "COMMITTED", "COMMITTED", "COMMITTED"}) || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			assert.Equal(t, []string{"COMMITTED", "COMMITTED", "COMMITTED", "COMMITTED"}, statuses)
			facts, err := agent.ListFacts(ctx, &engramv1.ListFactsRequest{UserId: user, Predicate: "lives_in"})
			require.NoError(t, err)
			require.Len(t, facts, 1, "one fact")
			f, err := agent.GetFact(ctx, facts[0].Id)
			require.NoError(t, err)
			assert.Equal(t, "Berlin", f.Object)
			assert.Len(t, f.EvidenceIds, 4, "the fact is supported by all four statements")
		})
	}
}
