package governance

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/memory"
)

// TestDecideValidTime: the statement's time, not the order writes arrive in,
// decides where it goes in the key's history.
func TestDecideValidTime(t *testing.T) {
	stated := func(ts ...time.Time) func(*Existing) { return func(e *Existing) { e.StatedAt = ts } }
	until := func(u time.Time) func(*Existing) { return func(e *Existing) { e.ValidUntil = &u } }
	t5, t6 := t0.Add(5*time.Hour), t0.Add(6*time.Hour)
	cases := []struct {
		name       string
		p          Proposal
		existing   []Existing
		action     Action
		target     string
		trim       string
		extendFrom *time.Time
		validUntil *time.Time
		reopen     *Reopen
		reason     []string
	}{
		{
			// issue 28: 2385 was stated at t1 and again at t5 (the duplicate arrived
			// first); 2319 at t3 arrives last and must not become current.
			name: "late statement inside a revision restated later → HISTORICAL splitting it, its value ACTIVE again",
			p:    prop("2319", at(t3)),
			existing: []Existing{
				rev("a", 1, "2319", memory.FactSuperseded, t0, until(t1)),
				rev("b", 2, "2385", memory.FactActive, t1, stated(t1, t5)),
			},
			action: ActionHistorical, target: "b", trim: "b", validUntil: &t5,
			reopen: &Reopen{From: t5, Status: memory.FactActive, StatedAt: []time.Time{t5}},
			reason: []string{"kept as a historical revision until", "splits rev 2", "2385 is stated again from"},
		},
		{
			name: "late statement inside a closed revision → the split's second part stays SUPERSEDED",
			p:    prop("9000", at(t2)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactSuperseded, t1, until(t4), stated(t1, t3)),
				rev("b", 2, "10000", memory.FactActive, t4),
			},
			action: ActionHistorical, target: "a", trim: "a", validUntil: &t3,
			reopen: &Reopen{From: t3, Until: &t4, Status: memory.FactSuperseded, StatedAt: []time.Time{t3}},
		},
		{
			name: "late statement after the last statement of a superseded revision → HISTORICAL, that revision trimmed",
			p:    prop("9000", at(t2)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactSuperseded, t1, until(t3)),
				rev("b", 2, "10000", memory.FactActive, t3),
			},
			action: ActionHistorical, target: "b", trim: "a", validUntil: &t3,
			reason: []string{"rev 1 (8000) now ends at"},
		},
		{
			name: "statement of the next revision's value, earlier → DUPLICATE extending it back, the previous trimmed",
			p:    prop("10000", at(t2)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactSuperseded, t1, until(t3)),
				rev("b", 2, "10000", memory.FactActive, t3),
			},
			action: ActionDuplicate, target: "b", trim: "a", extendFrom: &t2,
			reason: []string{"rev 2 now valid from"},
		},
		{
			name: "statement before everything of the first value → DUPLICATE extending it",
			p:    prop("8000", at(t0)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactActive, t1),
			},
			action: ActionDuplicate, target: "a", extendFrom: &t0,
		},
		{
			name: "restating an old value later than everything → SUPERSEDE, not a duplicate of the old revision",
			p:    prop("8000", at(t5)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactSuperseded, t1, until(t3)),
				rev("b", 2, "10000", memory.FactActive, t3),
			},
			action: ActionSupersede, target: "b",
		},
		{
			name: "a later duplicate counts: a statement between it and the revision's start splits, not supersedes",
			p:    prop("7000", at(t4)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactActive, t1, stated(t1, t6)),
			},
			action: ActionHistorical, target: "a", trim: "a", validUntil: &t6,
			reopen: &Reopen{From: t6, Status: memory.FactActive, StatedAt: []time.Time{t6}},
		},
		{
			name: "the same value between two of its statements → DUPLICATE, nothing moves",
			p:    prop("8000", at(t4)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactActive, t1, stated(t1, t6)),
			},
			action: ActionDuplicate, target: "a",
		},
		{
			name: "after an invalidated revision only → CREATE; the invalidated one does not bound it",
			p:    prop("9000", at(t2)),
			existing: []Existing{
				rev("a", 1, "8000", memory.FactInvalidated, t3, until(t4)),
			},
			action: ActionCreate,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(DefaultConfig(), tc.p, tc.existing)
			assert.Equal(t, memory.CandidateAccepted, d.Status, d.Reason)
			assert.Equal(t, tc.action, d.Action, d.Reason)
			id := func(e *Existing) string {
				if e == nil {
					return ""
				}
				return e.FactID
			}
			assert.Equal(t, tc.target, id(d.Target), d.Reason)
			assert.Equal(t, tc.trim, id(d.Trim), d.Reason)
			assert.Equal(t, tc.extendFrom, d.ExtendFrom, d.Reason)
			if tc.action == ActionHistorical {
				assert.Equal(t, tc.validUntil, d.ValidUntil, d.Reason)
			}
			assert.Equal(t, tc.reopen, d.Reopen, d.Reason)
			assert.Equal(t, tc.p.EventTime, d.StatedAt)
			for _, s := range tc.reason {
				assert.Contains(t, d.Reason, s)
			}
		})
	}
}

// history is a model of what the commit step stores, applying decisions the way
// storage does, so the decision table can be checked on whole histories.
type history struct {
	revs []Existing
	n    int
}

func (h *history) find(id string) *Existing {
	for i := range h.revs {
		if h.revs[i].FactID == id {
			return &h.revs[i]
		}
	}
	panic("no revision " + id)
}

func (h *history) trim(id string, at time.Time) {
	r := h.find(id)
	r.ValidUntil = &at
	if r.Status == memory.FactActive {
		r.Status = memory.FactSuperseded
	}
	var keep []time.Time
	for _, s := range r.stated() {
		if !s.After(at) {
			keep = append(keep, s)
		}
	}
	r.StatedAt = keep
}

func (h *history) add(object string, from time.Time, until *time.Time, status memory.FactStatus, stated []time.Time) {
	h.n++
	h.revs = append(h.revs, Existing{FactID: fmt.Sprintf("r%d", h.n), MemoryKey: userKey, Scope: userRef, Subject: "user",
		Predicate: "budget", Object: object, Status: status, Revision: h.n, Confidence: 0.9, ValidFrom: from, ValidUntil: until,
		ObservedAt: from, StatedAt: stated})
}

func (h *history) apply(p Proposal, d Decision) {
	if d.Trim != nil {
		h.trim(d.Trim.FactID, d.StatedAt)
	}
	switch d.Action {
	case ActionDuplicate:
		r := h.find(d.Target.FactID)
		r.StatedAt = append(r.stated(), d.StatedAt)
		if d.ExtendFrom != nil {
			r.ValidFrom = *d.ExtendFrom
		}
	case ActionSupersede:
		h.trim(d.Target.FactID, d.ValidFrom)
		h.add(p.Candidate.Object, d.ValidFrom, d.ValidUntil, memory.FactActive, []time.Time{d.StatedAt})
	case ActionCreate:
		h.add(p.Candidate.Object, d.ValidFrom, d.ValidUntil, memory.FactActive, []time.Time{d.StatedAt})
	case ActionHistorical:
		h.add(p.Candidate.Object, d.ValidFrom, d.ValidUntil, memory.FactSuperseded, []time.Time{d.StatedAt})
		if d.Reopen != nil {
			h.add(d.Target.Object, d.Reopen.From, d.Reopen.Until, d.Reopen.Status, d.Reopen.StatedAt)
		}
	}
}

// valueAt is the live revision valid at t, and how many are.
func (h *history) valueAt(t time.Time) (string, int) {
	v, n := "", 0
	for _, r := range h.revs {
		if r.live() && !r.ValidFrom.After(t) && (r.ValidUntil == nil || r.ValidUntil.After(t)) {
			v, n = r.Object, n+1
		}
	}
	return v, n
}

// TestDecideHistoryProperty: for 2–6 statements of a few values at distinct
// times, in any order of arrival, the history Decide builds has one ACTIVE
// revision holding the latest statement's value, and at every statement's time
// exactly one revision is valid, holding the value stated last by then.
func TestDecideHistoryProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	values := []string{"1000", "2000", "3000"}
	for n := 0; n < 20000; n++ {
		k := 2 + rng.Intn(5)
		type st struct {
			at    time.Time
			value string
		}
		sts := make([]st, k)
		for i := range sts {
			sts[i] = st{t0.Add(time.Duration(i) * time.Minute), values[rng.Intn(len(values))]}
		}
		order := rng.Perm(k)
		var h history
		for j, i := range order {
			p := prop(sts[i].value, at(sts[i].at))
			d := Decide(DefaultConfig(), p, h.revs)
			require.Equal(t, memory.CandidateAccepted, d.Status, "seed %d: %s", seed, d.Reason)
			h.apply(p, d)
			seen := []st{}
			for _, o := range order[:j+1] {
				seen = append(seen, sts[o])
			}
			sort.Slice(seen, func(a, b int) bool { return seen[a].at.Before(seen[b].at) })
			active := 0
			for _, r := range h.revs {
				if r.Status == memory.FactActive {
					active++
					require.Equal(t, seen[len(seen)-1].value, r.Object, "seed %d case %d: ACTIVE is not the latest statement; order %v, %+v", seed, n, order, sts)
				}
			}
			require.Equal(t, 1, active, "seed %d case %d", seed, n)
			for x, s := range seen {
				v, c := h.valueAt(s.at)
				require.Equal(t, 1, c, "seed %d case %d: %d revisions valid at statement %d; order %v, %+v", seed, n, c, x, order, sts)
				require.Equal(t, s.value, v, "seed %d case %d: wrong value at statement %d; order %v, %+v", seed, n, x, order, sts)
			}
		}
	}
}
