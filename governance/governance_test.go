package governance

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/memory"
)

var (
	t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	t1 = t0.Add(1 * time.Hour)
	t2 = t0.Add(2 * time.Hour)
	t3 = t0.Add(3 * time.Hour)
	t4 = t0.Add(4 * time.Hour)

	userRef = memory.ScopeRef{Scope: memory.ScopeUser, UserID: "u1"}
	taskRef = memory.ScopeRef{Scope: memory.ScopeTask, UserID: "u1", TaskID: "trip-1"}
)

const (
	userKey = "USER:u1|user|budget"
	taskKey = "TASK:trip-1|user|budget"
)

// prop is a STATED user-scope budget of the given value at t2 with confidence 0.9.
func prop(object string, mod ...func(*Proposal)) Proposal {
	p := Proposal{
		Candidate: memory.Candidate{
			MemoryType: memory.TypeConstraint,
			Scope:      memory.ScopeUser,
			Subject:    "user",
			Predicate:  "budget",
			Object:     object,
			Content:    "budget is " + object,
			Confidence: 0.9,
			Origin:     memory.OriginStated,
			Extractor:  "rules",
			Version:    "1",
		},
		MemoryKey: userKey,
		Scope:     userRef,
		EventTime: t2,
	}
	for _, m := range mod {
		m(&p)
	}
	return p
}

func inTask(p *Proposal) {
	p.MemoryKey, p.Scope, p.Candidate.Scope = taskKey, taskRef, memory.ScopeTask
}
func inferred(p *Proposal) { p.Candidate.Origin = memory.OriginInferred }
func saidBy(actor string, assertedBy ...string) func(*Proposal) {
	return func(p *Proposal) { p.Actor, p.AssertedBy = actor, assertedBy }
}
func retract(p *Proposal)            { p.Candidate.Retraction = true }
func conf(c float64) func(*Proposal) { return func(p *Proposal) { p.Candidate.Confidence = c } }
func at(t time.Time) func(*Proposal) { return func(p *Proposal) { p.EventTime = t } }

// rev is a revision of the user-scope budget observed (and valid from) at obs.
func rev(id string, n int, object string, status memory.FactStatus, obs time.Time, mod ...func(*Existing)) Existing {
	e := Existing{
		FactID: id, MemoryKey: userKey, Scope: userRef, Subject: "user", Predicate: "budget",
		Object: object, Status: status, Revision: n, Confidence: 0.8, ValidFrom: obs, ObservedAt: obs,
	}
	for _, m := range mod {
		m(&e)
	}
	return e
}

func sim(s float64) func(*Existing) { return func(e *Existing) { e.Similarity = s } }

func TestDecide(t *testing.T) {
	active8000 := rev("f1", 1, "8000 CNY", memory.FactActive, t1)
	cases := []struct {
		name       string
		cfg        func(*Config)
		p          Proposal
		existing   []Existing
		status     memory.CandidateStatus
		action     Action
		target     string // FactID of Decision.Target, "" for nil
		confidence float64
		historical bool
		validUntil *time.Time
		broader    []string
		reason     []string // substrings of Decision.Reason
	}{
		{
			name: "no existing revision → CREATE", p: prop("8000 CNY"),
			status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
			reason: []string{"user-scope budget 8000 CNY added"},
		},
		{
			name: "only closed revisions → CREATE noting the latest", p: prop("9000 CNY"),
			existing: []Existing{rev("f1", 1, "8000 CNY", memory.FactInvalidated, t1)},
			status:   memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
			reason: []string{"added", "latest rev 1 is INVALIDATED"},
		},
		{
			name: "same value → DUPLICATE, confidence raised", p: prop("8000 CNY"),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 1.0,
			reason: []string{"same value", "rev 1", "evidence linked", "0.80 → 1.00"},
		},
		{
			name: "normalised value (full width, case, separators) → DUPLICATE", p: prop(" ８,０００  cny ", conf(0.7)),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 0.9,
			reason: []string{"same value"},
		},
		{
			name: "similar embedding → DUPLICATE", p: prop("eight thousand yuan", conf(0.7)),
			existing: []Existing{rev("f1", 1, "8000 CNY", memory.FactActive, t1, sim(0.96))},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 0.9,
			reason: []string{"similar value (cosine 0.96 ≥ 0.95)"},
		},
		{
			name: "boost is capped at 1", cfg: func(c *Config) { c.DuplicateBoost = 0.5 }, p: prop("8000 CNY"),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 1.0,
		},
		{
			name: "duplicate but inferred → ACCEPTED, evidence linked, confidence not raised", p: prop("8000 CNY", inferred),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 0.8,
			reason: []string{"confidence stays 0.80"},
		},
		{
			name: "duplicate of a sensitive predicate → ACCEPTED", p: prop("8000 CNY", func(p *Proposal) { p.Sensitive = true }),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 1.0,
		},
		{
			name: "new value, newer event → SUPERSEDE", p: prop("10000 CNY"),
			existing: []Existing{rev("f0", 1, "7000 CNY", memory.FactSuperseded, t0), rev("f1", 2, "8000 CNY", memory.FactActive, t1)},
			status:   memory.CandidateAccepted, action: ActionSupersede, target: "f1", confidence: 0.9,
			reason: []string{"new value 10000 CNY supersedes 8000 CNY (rev 2)"},
		},
		{
			name: "same event time → SUPERSEDE (arrival order wins a tie)", p: prop("10000 CNY", at(t1)),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionSupersede, target: "f1", confidence: 0.9,
		},
		{
			name: "late event, current is newer → HISTORICAL before the current", p: prop("7000 CNY", at(t0)),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionHistorical, target: "f1", confidence: 0.9,
			historical: true, validUntil: &t1,
			reason: []string{"predates rev 1", "historical revision", "8000 CNY (rev 1) stays current"},
		},
		{
			name: "late event between two revisions → HISTORICAL before the next one", p: prop("9000 CNY", at(t2)),
			existing: []Existing{
				rev("f1", 1, "8000 CNY", memory.FactSuperseded, t1),
				rev("f3", 2, "10000 CNY", memory.FactSuperseded, t3),
				rev("f4", 3, "12000 CNY", memory.FactActive, t4),
			},
			status: memory.CandidateAccepted, action: ActionHistorical, target: "f3", confidence: 0.9,
			historical: true, validUntil: &t3,
			reason: []string{"predates rev 2", "12000 CNY (rev 3) stays current"},
		},
		{
			name: "late event restating the value then in force → DUPLICATE of that revision", p: prop("8000 CNY", at(t2)),
			existing: []Existing{rev("f1", 1, "8000 CNY", memory.FactSuperseded, t1), rev("f3", 2, "10000 CNY", memory.FactActive, t3)},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 1.0,
		},
		{
			name: "late event restating the current value → DUPLICATE of the current", p: prop("8000 CNY", at(t0)),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionDuplicate, target: "f1", confidence: 1.0,
		},
		{
			name: "narrower scope with broader present → CREATE task key, user fact stays ACTIVE", p: prop("10000 CNY", inTask),
			existing: []Existing{
				active8000,
				rev("other", 1, "window seat", memory.FactActive, t1, func(e *Existing) { e.MemoryKey, e.Predicate = "USER:u1|user|seat", "seat" }),
				rev("old", 0, "5000 CNY", memory.FactSuperseded, t0),
			},
			status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9, broader: []string{"f1"},
			reason: []string{"task-scope budget 10000 CNY added; user-scope 8000 CNY stays ACTIVE"},
		},
		{
			name: "narrower scope supersedes its own key, broader untouched", p: prop("12000 CNY", inTask),
			existing: []Existing{
				active8000,
				{FactID: "t1", MemoryKey: taskKey, Scope: taskRef, Subject: "user", Predicate: "budget", Object: "10000 CNY",
					Status: memory.FactActive, Revision: 1, Confidence: 0.9, ValidFrom: t1, ObservedAt: t1},
			},
			status: memory.CandidateAccepted, action: ActionSupersede, target: "t1", confidence: 0.9, broader: []string{"f1"},
			reason: []string{"supersedes 10000 CNY (rev 1); user-scope 8000 CNY stays ACTIVE"},
		},
		{
			name: "broader scope write lists no narrower facts", p: prop("9000 CNY"),
			existing: []Existing{{FactID: "t1", MemoryKey: taskKey, Scope: taskRef, Subject: "user", Predicate: "budget",
				Object: "10000 CNY", Status: memory.FactActive, Revision: 1, ObservedAt: t1}},
			status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
		},
		{
			name: "inferred → NEEDS_CONFIRMATION with CREATE pending", p: prop("8000 CNY", inferred),
			status: memory.CandidateNeedsConfirmation, action: ActionCreate, confidence: 0.9,
			reason: []string{"needs confirmation (inferred, not stated); on confirm: user-scope budget 8000 CNY added"},
		},
		{
			name: "inferred accepted when ConfirmInferred is off", cfg: func(c *Config) { c.ConfirmInferred = false },
			p: prop("8000 CNY", inferred), status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
		},
		{
			name: "low confidence → NEEDS_CONFIRMATION", p: prop("10000 CNY", conf(0.5)),
			existing: []Existing{active8000},
			status:   memory.CandidateNeedsConfirmation, action: ActionSupersede, target: "f1", confidence: 0.5,
			reason: []string{"confidence 0.50 is below 0.60", "on confirm: new value 10000 CNY supersedes 8000 CNY"},
		},
		{
			name: "sensitive → NEEDS_CONFIRMATION even for the first value", p: prop("8000 CNY", func(p *Proposal) { p.Sensitive = true }),
			status: memory.CandidateNeedsConfirmation, action: ActionCreate, confidence: 0.9,
			reason: []string{"budget is sensitive"},
		},
		{
			name: "schema confirmation on change → NEEDS_CONFIRMATION", p: prop("10000 CNY", func(p *Proposal) { p.NeedsConfirmation = true }),
			existing: []Existing{active8000},
			status:   memory.CandidateNeedsConfirmation, action: ActionSupersede, target: "f1", confidence: 0.9,
			reason: []string{"the schema requires confirmation to change budget"},
		},
		{
			name: "schema confirmation not needed for the first value", p: prop("8000 CNY", func(p *Proposal) { p.NeedsConfirmation = true }),
			status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
		},
		{
			name: "all gates listed", p: prop("10000 CNY", inferred, conf(0.4), func(p *Proposal) { p.Sensitive, p.NeedsConfirmation = true, true }),
			existing: []Existing{active8000},
			status:   memory.CandidateNeedsConfirmation, action: ActionSupersede, target: "f1", confidence: 0.4,
			reason: []string{"inferred, not stated; confidence 0.40 is below 0.60; budget is sensitive; the schema requires confirmation"},
		},
		{
			name: "very low confidence beats inferred → REJECTED", p: prop("8000 CNY", inferred, conf(0.1)),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.1,
			reason: []string{"confidence 0.10 is below the reject threshold 0.20"},
		},
		{
			name: "at the reject threshold is not rejected", p: prop("8000 CNY", conf(0.2)),
			status: memory.CandidateNeedsConfirmation, action: ActionCreate, confidence: 0.2,
		},
		{
			name: "forbidden → REJECTED", p: prop("8000 CNY", func(p *Proposal) { p.Forbidden = true }),
			existing: []Existing{active8000},
			status:   memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"policy forbids storing budget"},
		},
		{
			name: "an agent's words about a user-only key → REJECTED, the user's fact untouched", p: prop("10000 CNY", saidBy("AGENT")),
			existing: []Existing{active8000},
			status:   memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"said by AGENT, which the schema does not let assert budget (asserted_by: USER): kept as evidence"},
		},
		{
			name: "an agent restating the user's value → REJECTED, no evidence linked", p: prop("8000 CNY", saidBy("AGENT")),
			existing: []Existing{active8000},
			status:   memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"said by AGENT"},
		},
		{
			name: "a tool or the system is no source of a user-only key either", p: prop("8000 CNY", saidBy("TOOL", "USER", "AGENT")),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"said by TOOL", "asserted_by: USER, AGENT"},
		},
		{
			name: "an agent on a key the schema lets it assert → CREATE", p: prop("10000 CNY", saidBy("AGENT", "USER", "AGENT")),
			status: memory.CandidateAccepted, action: ActionCreate, confidence: 0.9,
		},
		{
			name: "no actor is the user's own words", p: prop("10000 CNY", saidBy("")),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionSupersede, target: "f1", confidence: 0.9,
		},
		{
			name: "a user on a key only an agent may assert → REJECTED", p: prop("10000 CNY", saidBy("USER", "AGENT")),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"said by USER"},
		},
		{
			name: "retraction → INVALIDATE the current", p: prop("", retract),
			existing: []Existing{rev("f0", 1, "7000 CNY", memory.FactSuperseded, t0), rev("f1", 2, "8000 CNY", memory.FactActive, t1)},
			status:   memory.CandidateAccepted, action: ActionInvalidate, target: "f1", confidence: 0.9,
			reason: []string{"retraction invalidates user-scope budget 8000 CNY (rev 2)"},
		},
		{
			name: "retraction naming the current value → INVALIDATE", p: prop("8000 cny", retract),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionInvalidate, target: "f1", confidence: 0.9,
		},
		{
			name: "retraction naming another value → NOOP", p: prop("9000 CNY", retract),
			existing: []Existing{active8000},
			status:   memory.CandidateAccepted, action: ActionNoop, confidence: 0.9,
			reason: []string{"does not match the current value 8000 CNY"},
		},
		{
			name: "retraction with nothing active → NOOP", p: prop("", retract, inferred),
			existing: []Existing{rev("f1", 1, "8000 CNY", memory.FactInvalidated, t1)},
			status:   memory.CandidateAccepted, action: ActionNoop, confidence: 0.9,
			reason: []string{"no ACTIVE revision to invalidate"},
		},
		{
			name: "inferred retraction → NEEDS_CONFIRMATION with INVALIDATE pending", p: prop("", retract, inferred),
			existing: []Existing{active8000},
			status:   memory.CandidateNeedsConfirmation, action: ActionInvalidate, target: "f1", confidence: 0.9,
		},
		{
			name: "empty memory key → REJECTED naming the field", p: prop("8000 CNY", func(p *Proposal) { p.MemoryKey = " " }),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"malformed proposal: memory_key: empty"},
		},
		{
			name: "scope ref without its id → REJECTED", p: prop("8000 CNY", func(p *Proposal) { p.Scope.UserID = "" }),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"user_id: required for scope USER"},
		},
		{
			name: "candidate scope differs → REJECTED", p: prop("8000 CNY", func(p *Proposal) { p.Candidate.Scope = memory.ScopeTask }),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"scope: candidate scope TASK differs"},
		},
		{
			name: "confidence out of range → REJECTED", p: prop("8000 CNY", conf(1.5)),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 1.5,
			reason: []string{"confidence: must be within [0, 1]"},
		},
		{
			name: "NaN confidence → REJECTED", p: prop("8000 CNY", conf(math.NaN())),
			status: memory.CandidateRejected, action: ActionNoop, confidence: math.NaN(),
			reason: []string{"confidence:"},
		},
		{
			name: "empty object on an assertion → REJECTED", p: prop(""),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"object: empty"},
		},
		{
			name: "unknown origin → REJECTED", p: prop("8000 CNY", func(p *Proposal) { p.Candidate.Origin = "GUESSED" }),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"origin:"},
		},
		{
			name: "missing event time → REJECTED", p: prop("8000 CNY", at(time.Time{})),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"event_time: missing"},
		},
		{
			name: "invalid config → REJECTED", cfg: func(c *Config) { c.DuplicateSimilarity = 0 }, p: prop("8000 CNY"),
			status: memory.CandidateRejected, action: ActionNoop, confidence: 0.9,
			reason: []string{"invalid governance config: duplicate_similarity"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			d := Decide(cfg, tc.p, tc.existing)
			assert.Equal(t, tc.status, d.Status, d.Reason)
			assert.Equal(t, tc.action, d.Action, d.Reason)
			if tc.target == "" {
				assert.Nil(t, d.Target)
			} else if assert.NotNil(t, d.Target) {
				assert.Equal(t, tc.target, d.Target.FactID)
			}
			if math.IsNaN(tc.confidence) {
				assert.True(t, math.IsNaN(d.Confidence))
			} else {
				assert.InDelta(t, tc.confidence, d.Confidence, 1e-9)
			}
			assert.Equal(t, tc.historical, d.Historical)
			assert.Equal(t, tc.validUntil, d.ValidUntil)
			var broader []string
			for _, b := range d.Broader {
				broader = append(broader, b.FactID)
			}
			assert.Equal(t, tc.broader, broader)
			assert.NotEmpty(t, d.Reason)
			for _, s := range tc.reason {
				assert.Contains(t, d.Reason, s)
			}
			switch d.Action {
			case ActionCreate, ActionSupersede, ActionHistorical:
				assert.False(t, d.ValidFrom.IsZero(), "a new revision has a valid_from")
			default:
				assert.True(t, d.ValidFrom.IsZero(), "no new revision, no valid_from")
			}
		})
	}
}

func TestDecideValidity(t *testing.T) {
	from, until := t0.Add(24*time.Hour), t0.Add(48*time.Hour)
	p := prop("10000 CNY", func(p *Proposal) { p.Candidate.ValidFrom, p.Candidate.ValidUntil = &from, &until })
	d := Decide(DefaultConfig(), p, nil)
	assert.Equal(t, from, d.ValidFrom, "the candidate's valid_from wins over the event time")
	assert.Equal(t, &until, d.ValidUntil)

	d = Decide(DefaultConfig(), prop("10000 CNY"), nil)
	assert.Equal(t, t2, d.ValidFrom, "valid_from defaults to the event time")
	assert.Nil(t, d.ValidUntil)

	early := t0.Add(30 * time.Minute)
	p = prop("7000 CNY", at(t0), func(p *Proposal) { p.Candidate.ValidUntil = &early })
	d = Decide(DefaultConfig(), p, []Existing{rev("f1", 1, "8000 CNY", memory.FactActive, t1)})
	require.Equal(t, ActionHistorical, d.Action)
	assert.Equal(t, &early, d.ValidUntil, "a historical revision keeps an earlier end of its own")
}

func TestDecideDoesNotAliasExisting(t *testing.T) {
	existing := []Existing{rev("f1", 1, "8000 CNY", memory.FactActive, t1)}
	d := Decide(DefaultConfig(), prop("10000 CNY"), existing)
	require.NotNil(t, d.Target)
	d.Target.Object = "changed"
	assert.Equal(t, "8000 CNY", existing[0].Object)
}

func TestReview(t *testing.T) {
	cfg := DefaultConfig()
	active := rev("f1", 1, "8000 CNY", memory.FactActive, t1)
	existing := []Existing{active}
	p := prop("10000 CNY", inferred)
	pending := Decide(cfg, p, existing)
	require.Equal(t, memory.CandidateNeedsConfirmation, pending.Status)
	require.Equal(t, ActionSupersede, pending.Action)

	t.Run("confirm applies the pending action", func(t *testing.T) {
		d, err := Review(cfg, p, existing, pending, Verdict{Kind: VerdictConfirm, Reviewer: "alice", Note: "checked"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateAccepted, d.Status)
		assert.Equal(t, pending.Action, d.Action)
		assert.Equal(t, pending.Target, d.Target)
		assert.Equal(t, 0.9, d.Confidence)
		assert.Contains(t, d.Reason, "confirmed by reviewer alice (note: checked): new value 10000 CNY supersedes 8000 CNY (rev 1)")
	})
	t.Run("confirm recomputes when memory changed meanwhile", func(t *testing.T) {
		now := []Existing{rev("f1", 1, "8000 CNY", memory.FactSuperseded, t1), rev("f2", 2, "10000 CNY", memory.FactActive, t1.Add(time.Minute))}
		d, err := Review(cfg, p, now, pending, Verdict{Kind: VerdictConfirm, Reviewer: "alice"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateAccepted, d.Status)
		assert.Equal(t, ActionDuplicate, d.Action)
		assert.Equal(t, "f2", d.Target.FactID)
		assert.InDelta(t, 1.0, d.Confidence, 1e-9, "a confirmed duplicate is trusted")
	})
	t.Run("reject", func(t *testing.T) {
		d, err := Review(cfg, p, existing, pending, Verdict{Kind: VerdictReject, Reviewer: "bob", Note: "wrong trip"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateRejected, d.Status)
		assert.Equal(t, ActionNoop, d.Action)
		assert.Nil(t, d.Target)
		assert.Equal(t, "rejected by reviewer bob (note: wrong trip)", d.Reason)
	})
	t.Run("edit to a new value supersedes with that value", func(t *testing.T) {
		d, err := Review(cfg, p, existing, pending, Verdict{Kind: VerdictEdit, Object: "12000 CNY", Reviewer: "carol"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateAccepted, d.Status)
		assert.Equal(t, ActionSupersede, d.Action)
		assert.Equal(t, "f1", d.Target.FactID)
		assert.Contains(t, d.Reason, "edited to 12000 CNY by reviewer carol: new value 12000 CNY supersedes 8000 CNY (rev 1)")
	})
	t.Run("edit equal to the current value is a duplicate", func(t *testing.T) {
		d, err := Review(cfg, p, existing, pending, Verdict{Kind: VerdictEdit, Object: "8000 cny", Reviewer: "carol"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateAccepted, d.Status)
		assert.Equal(t, ActionDuplicate, d.Action)
		assert.Equal(t, "f1", d.Target.FactID)
		assert.InDelta(t, 1.0, d.Confidence, 1e-9)
	})
	t.Run("edit ignores stale embedding similarity", func(t *testing.T) {
		// 0.99 is the cosine to the original value; it says nothing about the edited one.
		similar := []Existing{rev("f1", 1, "8000 CNY", memory.FactActive, t1, sim(0.99))}
		d, err := Review(cfg, p, similar, pending, Verdict{Kind: VerdictEdit, Object: "9000 CNY", Reviewer: "carol"})
		require.NoError(t, err)
		assert.Equal(t, ActionSupersede, d.Action)
	})
	t.Run("edit of a retraction asserts the edited value", func(t *testing.T) {
		pr := prop("", retract, inferred)
		pd := Decide(cfg, pr, existing)
		require.Equal(t, ActionInvalidate, pd.Action)
		d, err := Review(cfg, pr, existing, pd, Verdict{Kind: VerdictEdit, Object: "9000 CNY", Reviewer: "carol"})
		require.NoError(t, err)
		assert.Equal(t, ActionSupersede, d.Action)
	})
	t.Run("confirm of a sensitive create", func(t *testing.T) {
		ps := prop("8000 CNY", func(p *Proposal) { p.Sensitive = true })
		pd := Decide(cfg, ps, nil)
		require.Equal(t, memory.CandidateNeedsConfirmation, pd.Status)
		d, err := Review(cfg, ps, nil, pd, Verdict{Kind: VerdictConfirm, Reviewer: "alice"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateAccepted, d.Status)
		assert.Equal(t, ActionCreate, d.Action)
	})
	t.Run("an agent's candidate stays rejected when confirmed", func(t *testing.T) {
		pa := p
		pa.Actor = "AGENT"
		d, err := Review(cfg, pa, existing, pending, Verdict{Kind: VerdictConfirm, Reviewer: "alice"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateRejected, d.Status)
		assert.Contains(t, d.Reason, "said by AGENT")
	})
	t.Run("forbidden meanwhile stays rejected", func(t *testing.T) {
		pf := p
		pf.Forbidden = true
		d, err := Review(cfg, pf, existing, pending, Verdict{Kind: VerdictConfirm, Reviewer: "alice"})
		require.NoError(t, err)
		assert.Equal(t, memory.CandidateRejected, d.Status)
		assert.Contains(t, d.Reason, "confirmed by reviewer alice, but still rejected: policy forbids")
	})
}

func TestReviewErrors(t *testing.T) {
	cfg := DefaultConfig()
	p := prop("10000 CNY", inferred)
	pending := Decide(cfg, p, nil)
	accepted := Decide(cfg, prop("10000 CNY"), nil)
	cases := []struct {
		name  string
		d     Decision
		v     Verdict
		field string
	}{
		{"not pending", accepted, Verdict{Kind: VerdictConfirm, Reviewer: "a"}, "status"},
		{"unknown decision", pending, Verdict{Kind: "approve", Reviewer: "a"}, "decision"},
		{"no reviewer", pending, Verdict{Kind: VerdictConfirm, Reviewer: " "}, "reviewer"},
		{"edit without value", pending, Verdict{Kind: VerdictEdit, Reviewer: "a"}, "edited_value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Review(cfg, p, nil, tc.d, tc.v)
			var fe memory.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	cases := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"reject below negative", func(c *Config) { c.RejectBelow = -0.1 }, "reject_below"},
		{"reject above confirm", func(c *Config) { c.RejectBelow = 0.7 }, "reject_below"},
		{"confirm above 1", func(c *Config) { c.ConfirmBelow = 1.1 }, "confirm_below"},
		{"confirm NaN", func(c *Config) { c.ConfirmBelow = math.NaN() }, "confirm_below"},
		{"similarity zero", func(c *Config) { c.DuplicateSimilarity = 0 }, "duplicate_similarity"},
		{"similarity above 1", func(c *Config) { c.DuplicateSimilarity = 1.01 }, "duplicate_similarity"},
		{"boost negative", func(c *Config) { c.DuplicateBoost = -1 }, "duplicate_boost"},
		{"zero config", func(c *Config) { *c = Config{} }, "duplicate_similarity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			var fe memory.FieldError
			require.ErrorAs(t, c.Validate(), &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
	ok := DefaultConfig()
	ok.RejectBelow, ok.ConfirmBelow, ok.DuplicateSimilarity, ok.DuplicateBoost = 0.5, 0.5, 1, 0
	assert.NoError(t, ok.Validate(), "equal thresholds and bounds are allowed")
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"  8000   CNY ": "8000 cny",
		"８０００ＣＮＹ":       "8000cny",
		"8,000 CNY":     "8000 cny",
		"a, b":          "a, b",
		"直飞\u3000优先":    "直飞 优先",
		"":              "",
	} {
		assert.Equal(t, want, normalize(in), in)
	}
}

// A many-valued predicate's value restated in other words has another memory key;
// an ACTIVE fact of that other key in the same scope, of the same subject and
// predicate, at least DuplicateSimilarity close, is the value restated. The
// closest wins; other scopes, closed facts and values below the threshold do not
// count.
func TestDecideRestatedValue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DuplicateSimilarity = 0.9
	p := prop("flying direct", func(p *Proposal) {
		p.Candidate.Predicate, p.MemoryKey = "prefers", "USER:u1|user|prefers|flying direct"
	})
	other := func(id, object string, s float64, mod ...func(*Existing)) Existing {
		e := rev(id, 1, object, memory.FactActive, t1, sim(s), func(e *Existing) {
			e.Predicate, e.MemoryKey = "prefers", "USER:u1|user|prefers|"+object
		})
		for _, m := range mod {
			m(&e)
		}
		return e
	}
	cases := []struct {
		name     string
		existing []Existing
		action   Action
		target   string
	}{
		{"closest restatement → DUPLICATE of it", []Existing{other("f1", "direct flights", 0.93), other("f2", "direct flight", 0.95), other("f3", "window seats", 0.2)}, ActionDuplicate, "f2"},
		{"below the threshold → CREATE", []Existing{other("f1", "direct flights", 0.89)}, ActionCreate, ""},
		{"similarity unknown → CREATE", []Existing{other("f1", "direct flights", 0)}, ActionCreate, ""},
		{"another scope → CREATE", []Existing{other("f1", "direct flights", 0.99, func(e *Existing) { e.Scope = taskRef })}, ActionCreate, ""},
		{"closed fact → CREATE", []Existing{other("f1", "direct flights", 0.99, func(e *Existing) { e.Status = memory.FactSuperseded })}, ActionCreate, ""},
		{"another predicate → CREATE", []Existing{other("f1", "direct flights", 0.99, func(e *Existing) { e.Predicate = "dislikes" })}, ActionCreate, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(cfg, p, tc.existing)
			assert.Equal(t, tc.action, d.Action, d.Reason)
			if tc.target == "" {
				assert.Nil(t, d.Target)
			} else {
				require.NotNil(t, d.Target)
				assert.Equal(t, tc.target, d.Target.FactID)
				assert.Contains(t, d.Reason, "similar value (cosine 0.95 ≥ 0.90)")
			}
		})
	}
}
