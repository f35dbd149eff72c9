package writepath

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// agentTurn is text the trip's agent said to user in tenant, in the task trip.
func agentTurn(tenant, user, schemaName, trip, text string, at time.Time) memory.IngestEvent {
	ev := writetest.Event(tenant, user, schemaName, text, at)
	ev.ActorType, ev.ActorID, ev.TaskID = "AGENT", "trip-agent", trip
	return ev
}

// rejectedAsAgents checks that every candidate the rules read from an agent's
// turn was rejected for its speaker, and that there was one (the rules did
// propose the budget: the test would pass vacuously otherwise).
func rejectedAsAgents(t *testing.T, r write.MemoryWriteResult, predicate string) {
	t.Helper()
	require.Equal(t, write.WriteCommitted, r.Status, r.Reason)
	require.NotEmpty(t, r.Results, "the rule extractor proposed the agent's %s", predicate)
	for _, res := range r.Results {
		assert.Equal(t, memory.CandidateRejected, res.Status, res.Reason)
		assert.Equal(t, string(governance.ActionNoop), res.Action)
		assert.Empty(t, res.FactID)
		assert.Contains(t, res.Reason, "said by AGENT, which the schema does not let assert "+predicate)
	}
}

// The user says the budget; the agent then echoes another budget (the trip's,
// from its own memory) and the user's own. The agent's turns are kept as
// evidence and recalled, but they are no source of the user's facts: the budget
// is the user's 8000 CNY, its only evidence the user's turn, and as_of answers
// for the agent's window are the user's value.
func TestAgentWordsAreEvidenceNotUserFacts(t *testing.T) {
	e, eng := storedSchemaEnv(t)
	ctx := context.Background()
	tenant, user, trip := "agw-"+testenv.RandomID(6), "u1", "trip-1"

	said := writetest.Event(tenant, user, "travel", "预算不超过8000元", base)
	said.TaskID = trip
	r := e.write(said)
	require.Equal(t, write.WriteCommitted, r.Status, r.Reason)
	require.Len(t, r.Results, 1)
	require.Equal(t, string(governance.ActionCreate), r.Results[0].Action, r.Results[0].Reason)

	echo := e.write(agentTurn(tenant, user, "travel", trip, "Searching flights with what I remember: budget = 10000 CNY (task scope);", base.Add(time.Hour)))
	rejectedAsAgents(t, echo, "budget")
	same := e.write(agentTurn(tenant, user, "travel", trip, "Got it. I remember: budget = 8000 CNY (user scope).", base.Add(2*time.Hour)))
	rejectedAsAgents(t, same, "budget")

	// Memory holds the user's budget alone, in the user's scope, one revision.
	all, err := e.st.ListFacts(ctx, tenant, storage.FactFilter{UserID: user})
	require.NoError(t, err)
	require.Len(t, all, 1, "one fact: %+v", all)
	f := all[0]
	assert.Equal(t, "budget", f.Predicate)
	assert.Equal(t, memory.ScopeUser, f.Scope, "no trip was named: the user's budget")
	assert.Equal(t, "8000 CNY", f.Object)
	assert.Equal(t, memory.FactActive, f.Status)
	assert.Equal(t, 1, f.Revision)
	ev, err := e.st.FactEvidenceIDs(ctx, tenant, f.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{r.EvidenceID}, ev, "the fact's only evidence is the user's turn; the agent's restatement is not linked")

	// The agent's turns are stored as its evidence, with their rejected candidates.
	for _, a := range []write.MemoryWriteResult{echo, same} {
		assert.Equal(t, 1, e.count("evidence", "tenant_id = ? AND id = ? AND speaker = 'AGENT:trip-agent'", tenant, a.EvidenceID))
		assert.Equal(t, 0, e.count("fact_evidence", "tenant_id = ? AND evidence_id = ?", tenant, a.EvidenceID))
		assert.Equal(t, len(a.Results), e.count("candidates", "tenant_id = ? AND event_id = ? AND status = 'REJECTED' AND reason LIKE 'said by AGENT%'", tenant, a.EventID))
		assert.Equal(t, "COMMITTED", eventStatus(t, e, tenant, a.EventID))
	}

	// as_of inside the agent's window (after its 10000 CNY) is the user's 8000 CNY;
	// before the user spoke there is none.
	for _, at := range []time.Time{base.Add(90 * time.Minute), base.Add(3 * time.Hour)} {
		fs, err := e.st.FactsAsOf(ctx, tenant, at, storage.FactFilter{UserID: user, Predicate: "budget"})
		require.NoError(t, err)
		require.Len(t, fs, 1, "as of %s", at)
		assert.Equal(t, "8000 CNY", fs[0].Object, "as of %s", at)
		assert.Equal(t, memory.ScopeUser, fs[0].Scope)
	}
	fs, err := e.st.FactsAsOf(ctx, tenant, base.Add(-time.Minute), storage.FactFilter{UserID: user, Predicate: "budget"})
	require.NoError(t, err)
	assert.Empty(t, fs)

	// Recall shows the agent's turn (what it said is still found) and answers the
	// budget with the user's fact, citing the user's words.
	res, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: tenant, UserID: user},
		Query: "budget 10000 CNY flights", Schema: "travel", TaskID: trip, AsOf: base.Add(90 * time.Minute), K: 10})
	require.NoError(t, err)
	var agentFound bool
	for _, it := range res.Items {
		if it.Kind == recall.KindEvidence && it.ID == echo.EvidenceID {
			agentFound = true
		}
		if it.Kind == recall.KindFact {
			assert.Equal(t, f.ID, it.ID, "the only fact is the user's budget")
			assert.Equal(t, []string{r.EvidenceID}, it.EvidenceIDs)
		}
	}
	assert.True(t, agentFound, "the agent's turn is recalled as evidence: %+v", res.Items)
	assert.Contains(t, res.Context, `8000 CNY (USER scope): "预算不超过8000元"`)
	for _, sec := range res.Sections {
		if sec.Title == "evidence" || sec.Title == "recent turns" || sec.Title == "summary" {
			continue
		}
		for _, line := range sec.Lines {
			assert.NotContains(t, line, "10000", "no fact line holds the agent's 10000 CNY (%s)", sec.Title)
		}
	}
}

func eventStatus(t *testing.T, e *env, tenant, id string) string {
	t.Helper()
	var status string
	require.NoError(t, e.st.DB().NewSelect().Table("events").Column("status").Where("tenant_id = ? AND id = ?", tenant, id).Scan(context.Background(), &status))
	return status
}

// agentTripsSchema lets the agent assert the trip's status (and only that).
const agentTripsSchema = `
name: agent_trips
version: 1
description: A travel agent that records where it is with a trip's booking.
extends: travel
predicates:
  - name: trip_status
    description: Where the agent is with the trip's booking.
    memory_type: FACT
    value_type: enum
    enum: [searching, booked]
    scopes: [TASK]
    asserted_by: [user, AGENT]
    patterns:
      - lang: en
        regex: '\btrip status:\s*(?P<value>searching|booked)\b'
        confidence: 0.9
`

// A key the schema lets the agent assert is committed from the agent's turn, with
// that turn as its evidence; in the same turn a user-only key is still rejected.
func TestSchemaLetsTheAgentAssertAKey(t *testing.T) {
	s, err := schema.Load([]byte(agentTripsSchema))
	require.NoError(t, err, "the test's schema is valid")
	status, _ := s.Predicate("trip_status")
	require.Equal(t, []string{"USER", "AGENT"}, status.AssertedBy, "actor types are read in any case")
	budget, _ := s.Predicate("budget")
	require.Equal(t, []string{"USER"}, budget.AssertedBy, "a key that says nothing is the user's alone")

	e, _ := storedSchemaEnv(t)
	ctx := context.Background()
	tenant, user, trip := "agk-"+testenv.RandomID(6), "u1", "trip-9"
	require.NoError(t, e.st.PutSchema(ctx, tenant, &storage.StoredSchema{Name: "agent_trips", Source: agentTripsSchema, CreatedBy: "admin"}, 0, -1))

	r := e.write(agentTurn(tenant, user, "agent_trips", trip, "Trip status: booked. Paid within the budget = 10000 CNY.", base))
	require.Equal(t, write.WriteCommitted, r.Status, r.Reason)
	byPred := map[string]write.CommittedResult{}
	for _, res := range r.Results {
		pred := res.MemoryKey[strings.LastIndex(res.MemoryKey, "|")+1:]
		byPred[pred] = res
	}
	require.Contains(t, byPred, "trip_status", "%+v", r.Results)
	require.Contains(t, byPred, "budget", "%+v", r.Results)
	assert.Equal(t, memory.CandidateAccepted, byPred["trip_status"].Status, byPred["trip_status"].Reason)
	assert.Equal(t, string(governance.ActionCreate), byPred["trip_status"].Action)
	assert.Equal(t, memory.CandidateRejected, byPred["budget"].Status)
	assert.Contains(t, byPred["budget"].Reason, "said by AGENT")

	all, err := e.st.ListFacts(ctx, tenant, storage.FactFilter{UserID: user})
	require.NoError(t, err)
	require.Len(t, all, 1, "%+v", all)
	assert.Equal(t, "trip_status", all[0].Predicate)
	assert.Equal(t, "booked", all[0].Object)
	assert.Equal(t, memory.ScopeTask, all[0].Scope)
	assert.Equal(t, trip, all[0].TaskID)
	ev, err := e.st.FactEvidenceIDs(ctx, tenant, all[0].ID)
	require.NoError(t, err)
	assert.Equal(t, []string{r.EvidenceID}, ev, "the agent's turn is the evidence of what it may assert")
}

// With the LLM extractor (internal/fakeopenai: no LLM is reachable here), an
// agent's turn under a schema that lets the agent assert nothing is not sent to
// the model: it is kept as evidence and remembers nothing, and the user's turn
// before it is extracted as usual.
func TestLLMAgentTurnIsNotExtracted(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	tenant := "agl-" + testenv.RandomID(6)
	require.Equal(t, write.WriteCommitted, e.write(writetest.Event(tenant, "u1", "travel", textBudget, base)).Status)
	text := "Got it. I remember: budget = 10000 CNY (task scope)."
	r := e.write(agentTurn(tenant, "u1", "travel", "trip-1", text, base.Add(time.Hour)))
	assert.Equal(t, write.WriteNoMemory, r.Status, r.Reason)
	assert.Empty(t, e.chatFor(text), "the model is not asked about the agent's turn")
	assert.Len(t, e.chatFor(textBudget), 1)
	assert.Equal(t, 1, e.count("evidence", "tenant_id = ? AND id = ? AND speaker = 'AGENT:trip-agent'", tenant, r.EvidenceID))
	fs := e.active(tenant, "u1")
	require.Len(t, fs, 1)
	assert.Equal(t, "8000 CNY", fs[0].Object)
}
