package writepath

// The seed cases and the retry paths again, with the LLM extractor (llm.OpenAIExtractor)
// against internal/fakeopenai. The fake is scripted with the candidates a good model
// would return; every scripted answer is checked against the schema before use, so a
// test never passes on output a real model could not have produced.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/fakeopenai"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/write"
)

// llmTimeout is the extractor's per-call timeout in these tests: short, so a slow
// answer (fakeopenai.Delayed) drives the client into it quickly.
const llmTimeout = time.Second

type llmEnv struct {
	*env
	fake *fakeopenai.Server
}

func newLLMEnv(t *testing.T, script fakeopenai.Script) *llmEnv {
	t.Helper()
	fake := fakeopenai.New(script)
	t.Cleanup(fake.Close)
	x, err := llm.NewOpenAIExtractor(llm.OpenAIConfig{BaseURL: fake.BaseURL(), APIKey: "test-key", Model: "fake-model", Timeout: llmTimeout})
	require.NoError(t, err)
	return &llmEnv{env: newEnv(t, x), fake: fake}
}

// said matches the user prompt of an extraction of exactly this event text (the
// prompt also carries recent turns, so the bare text would match later events too).
func said(text string) string { return "<<<\n" + text + "\n>>>" }

// answer is the document a model following the strict json_schema would return for
// the candidates: {"candidates":[…]} with extractor fields null, as the prompt asks.
// It fails the test if the document does not validate against the schema.
func answer(t testing.TB, schemaName string, cs ...memory.Candidate) fakeopenai.Response {
	t.Helper()
	items := make([]map[string]any, 0, len(cs))
	for _, c := range cs {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		m["extractor"], m["extractor_version"] = nil, nil
		items = append(items, m)
	}
	doc, err := json.Marshal(map[string]any{"candidates": items})
	require.NoError(t, err)
	s, err := schema.Builtin(schemaName)
	require.NoError(t, err)
	got, errs := s.ParseCandidates(doc)
	require.Empty(t, errs, "scripted answer must validate: %s", doc)
	require.Len(t, got, len(cs))
	return fakeopenai.Raw(string(doc))
}

// The candidates a good model returns for the seed sentences.

func orderNotReceived(user string) memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypeEvent, Scope: memory.ScopeUser, Subject: "Order:12345", Predicate: "order_not_received",
		Object: "NOT_RECEIVED", Content: "The user's order 12345 has not arrived.", EntityType: "Order", EntityID: "12345",
		Attributes: map[string]any{"state": "NOT_RECEIVED"}, Confidence: 0.95, Origin: memory.OriginStated,
		Relations: []memory.Relation{{Type: "PLACED", FromType: "User", FromID: user, ToType: "Order", ToID: "12345"}},
	}
}

func orderInquiry(user string) memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypeEvent, Scope: memory.ScopeUser, Subject: "Order:12345", Predicate: "order_inquiry",
		Object: "Order:12345", Content: "The user asks about order 12345, which has not arrived.", EntityType: "Order", EntityID: "12345",
		Confidence: 0.9, Origin: memory.OriginStated,
		Relations: []memory.Relation{{Type: "ASKED_ABOUT", FromType: "User", FromID: user, ToType: "Order", ToID: "12345"}},
	}
}

func budget(amount float64, scope memory.Scope, content string) memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypeConstraint, Scope: scope, Subject: "user", Predicate: "budget",
		Object: fmt.Sprintf("%.0f CNY", amount), Content: content,
		Attributes: map[string]any{"max": amount, "currency": "CNY"}, Confidence: 0.95, Origin: memory.OriginStated,
	}
}

func directFlights() memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypePreference, Scope: memory.ScopeUser, Subject: "user", Predicate: "flight_type",
		Object: "direct", Content: "The user prefers direct flights.", Confidence: 0.9, Origin: memory.OriginStated,
	}
}

func windowSeatInferred() memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypePreference, Scope: memory.ScopeUser, Subject: "user", Predicate: "seat",
		Object: "window", Content: "The user probably prefers a window seat.", Confidence: 0.6, Origin: memory.OriginInferred,
	}
}

// seedScript answers every seed sentence as a good model would.
func seedScript(t testing.TB, user string) fakeopenai.Script {
	return fakeopenai.Script{Rules: []fakeopenai.Rule{
		{Contains: said(textOrder), Responses: []fakeopenai.Response{answer(t, "customer_service", orderNotReceived(user))}},
		{Contains: said(textInquiry), Responses: []fakeopenai.Response{answer(t, "customer_service", orderInquiry(user))}},
		{Contains: said(textBudget), Responses: []fakeopenai.Response{answer(t, "travel", budget(8000, memory.ScopeUser, "The user's budget is at most 8000 CNY."))}},
		{Contains: said(textTrip), Responses: []fakeopenai.Response{answer(t, "travel", budget(10000, memory.ScopeTask, "The budget for this trip is 10000 CNY."))}},
		{Contains: said(textBudget9k), Responses: []fakeopenai.Response{answer(t, "travel", budget(9000, memory.ScopeUser, "From now on the user's budget is at most 9000 CNY."))}},
		{Contains: said(textDirect), Responses: []fakeopenai.Response{answer(t, "travel", directFlights())}},
		{Contains: said(textInferred), Responses: []fakeopenai.Response{answer(t, "travel", windowSeatInferred())}},
	}}
}

// chatFor returns the chat requests the fake received for one event text.
func (e *llmEnv) chatFor(text string) []fakeopenai.Request {
	var out []fakeopenai.Request
	for _, r := range e.fake.ChatRequests() {
		if strings.Contains(r.UserText(), said(text)) {
			out = append(out, r)
		}
	}
	return out
}

// history returns every event of a workflow run.
func history(t testing.TB, c client.Client, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// activityEvents summarises an activity type's history: how often it was scheduled,
// the attempt of each recorded start, and how often it completed.
type activityEvents struct {
	scheduled int
	attempts  []int32
	completed int
}

func activitySummary(h []*historypb.HistoryEvent, name string) activityEvents {
	var s activityEvents
	ofType := map[int64]bool{}
	for _, ev := range h {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == name {
				ofType[ev.GetEventId()] = true
				s.scheduled++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); ofType[a.GetScheduledEventId()] {
				s.attempts = append(s.attempts, a.GetAttempt())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if ofType[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				s.completed++
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			// A local activity is one marker per attempt that ended (scheduled,
			// started and completed or failed in the worker).
			if typ, attempt, failed, ok := localActivityMarker(ev); ok && typ == name {
				s.scheduled++
				s.attempts = append(s.attempts, attempt)
				if !failed {
					s.completed++
				}
			}
		}
	}
	return s
}

// localActivityMarker reads the activity type and attempt of a local activity's
// marker.
func localActivityMarker(ev *historypb.HistoryEvent) (typ string, attempt int32, failed, ok bool) {
	a := ev.GetMarkerRecordedEventAttributes()
	if a.GetMarkerName() != "LocalActivity" || len(a.GetDetails()["data"].GetPayloads()) == 0 {
		return "", 0, false, false
	}
	var d struct {
		ActivityType string
		Attempt      int32
	}
	if err := json.Unmarshal(a.GetDetails()["data"].GetPayloads()[0].GetData(), &d); err != nil {
		return "", 0, false, false
	}
	return d.ActivityType, d.Attempt, a.GetFailure() != nil, true
}

func TestLLMSeedOrderNeverArrived(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	types := e.seedOrder()
	assert.True(t, types["ASKED_ABOUT"], "User ASKED_ABOUT Order")

	// What the model was given: a strict json_schema format, and for the follow-up
	// the known order with its state and the earlier turn, to resolve "那个没到的订单".
	first := e.chatFor(textOrder)
	require.Len(t, first, 1)
	rf := first[0].Chat.ResponseFormat
	require.NotNil(t, rf)
	assert.Equal(t, "json_schema", string(rf.Type))
	require.NotNil(t, rf.JSONSchema)
	assert.True(t, rf.JSONSchema.Strict)
	follow := e.chatFor(textInquiry)
	require.Len(t, follow, 1)
	assert.Contains(t, follow[0].UserText(), "Order:12345 (state NOT_RECEIVED)")
	assert.Contains(t, follow[0].UserText(), "- "+textOrder, "the earlier turn is in the recent context")
}

func TestLLMSeedBudgetTaskDoesNotOverwriteUser(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	e.seedBudget()
	reqs := e.chatFor(textTrip)
	require.Len(t, reqs, 1)
	assert.Contains(t, reqs[0].UserText(), "Current task: trip-1")
}

func TestLLMSeedDirectFlightPreference(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	r, f := e.seedDirect()
	assert.Equal(t, 1, r.Attempts)
	assert.Equal(t, "The user prefers direct flights.", f.Content)
}

// Candidates should record which extractor proposed them (issue 3: "Each candidate
// carries … the extractor's name and version"). The LLM is told to leave the
// extractor fields null; the workflow stamps them from ExtractOutput.
func TestLLMCandidatesRecordTheExtractor(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	r := e.write(writetest.Event("t1", "u1", "travel", textDirect, base))
	require.Len(t, r.Results, 1)
	c, err := e.st.GetCandidate(context.Background(), "t1", r.Results[0].CandidateID)
	require.NoError(t, err)
	assert.Equal(t, "openai:fake-model", c.Extractor)
	assert.Equal(t, llm.OpenAIPromptVersion, c.ExtractorVersion)
}

func TestLLMInferredPreferenceNeedsConfirmation(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", "u1", "travel", textInferred, base)})
	p := pendingOf(t, e.c, run)
	require.Len(t, p, 1)
	assert.Equal(t, "INFERRED", p[0].Origin)
	assert.Equal(t, "window", p[0].Object)
	c, err := e.st.GetCandidate(context.Background(), "t1", p[0].CandidateID)
	require.NoError(t, err)
	assert.Equal(t, memory.CandidateNeedsConfirmation, c.Status)
	assert.Nil(t, find(e.active("t1", "u1"), "seat", memory.ScopeUser), "nothing is active before the review")
	require.NoError(t, e.c.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), write.SignalReview,
		write.ReviewRequest{CandidateID: p[0].CandidateID, Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "alice"}}))
	res := e.wait(run)
	require.Len(t, res.Results, 1)
	assert.Equal(t, memory.CandidateAccepted, res.Results[0].Status)
	assert.Equal(t, "alice", res.Results[0].Reviewer)
	f := find(e.active("t1", "u1"), "seat", memory.ScopeUser)
	require.NotNil(t, f)
	assert.Equal(t, memory.FactActive, f.Status)
	assert.Equal(t, memory.OriginInferred, f.Origin)
}

func TestLLMSameStatementTwiceIsOneFactTwoEvidence(t *testing.T) {
	e := newLLMEnv(t, seedScript(t, "u1"))
	e.seedDirectTwice()
	assert.Len(t, e.chatFor(textDirect), 2)
}

// invalidEnum is the direct-flight answer with values the schema does not allow.
const invalidEnum = `{"candidates":[{"memory_type":"PREFERENCE","scope":"FOREVER","subject":"user","predicate":"flight_type","object":"nonstop-only","content":"The user prefers direct flights.","entity_type":null,"entity_id":null,"attributes":null,"confidence":0.9,"origin":"STATED","retraction":false,"valid_from":null,"valid_until":null,"relations":[],"extractor":null,"extractor_version":null}]}`

const brokenJSON = `{"candidates":[{"memory_type":"PREFERENCE","scope":"USER","subject":"user","predicate":"flight_`

func TestLLMRetriesWithValidationFeedback(t *testing.T) {
	s, err := schema.Builtin("travel")
	require.NoError(t, err)
	_, enumErrs := s.ParseCandidates([]byte(invalidEnum))
	require.NotEmpty(t, enumErrs)
	_, jsonErrs := s.ParseCandidates([]byte(brokenJSON))
	require.NotEmpty(t, jsonErrs)

	e := newLLMEnv(t, fakeopenai.Script{Rules: []fakeopenai.Rule{{Contains: said(textDirect), Responses: []fakeopenai.Response{
		fakeopenai.Raw(brokenJSON), fakeopenai.Raw(invalidEnum), answer(t, "travel", directFlights()),
	}}}})
	ev := writetest.Event("t1", "u1", "travel", textDirect, base)
	run := e.start(write.MemoryWriteInput{Event: ev})
	res := e.wait(run)
	require.Equal(t, write.WriteCommitted, res.Status, res.Reason)
	assert.Equal(t, 3, res.Attempts)
	require.Len(t, res.Results, 1)
	assert.Equal(t, memory.CandidateAccepted, res.Results[0].Status)
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1'"))
	assert.Equal(t, 1, e.count("candidates", "tenant_id = 't1'"), "only the valid extraction becomes a candidate")
	f := find(e.active("t1", "u1"), "flight_type", memory.ScopeUser)
	require.NotNil(t, f)
	assert.Equal(t, "direct", f.Object)

	// The retries are in the workflow history: three extractions, three validations.
	h := history(t, e.c, run.GetID(), run.GetRunID())
	ex := activitySummary(h, "Extract")
	assert.Equal(t, 3, ex.scheduled, "Extract scheduled once per attempt")
	assert.Equal(t, 3, ex.completed)
	assert.Equal(t, 3, activitySummary(h, "Validate").scheduled, "Validate runs as a local activity, recorded as a marker per attempt")
	assert.Equal(t, 1, activitySummary(h, "GovernCommit").scheduled, "governed and committed in one step")

	// Each re-extraction carries the previous attempt's validation errors.
	reqs := e.chatFor(textDirect)
	require.Len(t, reqs, 3)
	assert.NotContains(t, reqs[0].UserText(), "rejected by validation")
	for _, fe := range jsonErrs {
		assert.Contains(t, reqs[1].UserText(), strings.Join(strings.Fields(fe.Error()), " "))
	}
	for _, fe := range enumErrs {
		assert.Contains(t, reqs[2].UserText(), strings.Join(strings.Fields(fe.Error()), " "))
	}
	assert.Contains(t, reqs[2].UserText(), "FOREVER")
	assert.NotContains(t, reqs[2].UserText(), "invalid JSON", "only the latest attempt's errors are fed back")
}

func TestLLMBrokenEveryTimeIsUnparsed(t *testing.T) {
	e := newLLMEnv(t, fakeopenai.Script{Default: fakeopenai.Raw("Sure! Here are the memories: direct flights.")})
	ev := writetest.Event("t1", "u1", "travel", textDirect, base)
	run := e.start(write.MemoryWriteInput{Event: ev})
	res := e.wait(run)
	require.Equal(t, write.WriteUnparsed, res.Status)
	assert.Equal(t, 3, res.Attempts)
	assert.Contains(t, res.Reason, "did not validate after 3 attempts")
	assert.Empty(t, res.Results)

	ctx := context.Background()
	stored, err := e.st.GetEvent(ctx, "t1", res.EventID)
	require.NoError(t, err)
	assert.Equal(t, memory.EventUnparsed, stored.Status)
	assert.Contains(t, stored.StatusReason, "invalid JSON")
	evd, err := e.st.EvidenceForEvent(ctx, "t1", res.EventID)
	require.NoError(t, err)
	require.Len(t, evd, 1, "the evidence is kept")
	assert.Equal(t, res.EvidenceID, evd[0].ID)
	assert.Equal(t, textDirect, evd[0].Content)
	assert.Equal(t, 0, e.count("facts", "TRUE"), "no fact is invented")
	assert.Equal(t, 0, e.count("candidates", "TRUE"))
	assert.Equal(t, 3, e.fake.ChatCalls())
	assert.Equal(t, 3, activitySummary(history(t, e.c, run.GetID(), run.GetRunID()), "Extract").scheduled)
}

// 429 and 500 are failures of the call, not of the output: the Extract activity's
// retry policy retries them, within one extraction attempt of the workflow.
func TestLLMTransientErrorsAreRetriedByTheActivity(t *testing.T) {
	e := newLLMEnv(t, fakeopenai.Script{Rules: []fakeopenai.Rule{{Contains: said(textDirect), Responses: []fakeopenai.Response{
		fakeopenai.RateLimited(time.Second), fakeopenai.Status(http.StatusInternalServerError), answer(t, "travel", directFlights()),
	}}}})
	run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", "u1", "travel", textDirect, base)})
	res := e.wait(run)
	require.Equal(t, write.WriteCommitted, res.Status, res.Reason)
	assert.Equal(t, 1, res.Attempts, "one extraction; the activity retried the calls")
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1'"))
	assert.NotNil(t, find(e.active("t1", "u1"), "flight_type", memory.ScopeUser))
	assert.Equal(t, 3, e.fake.ChatCalls())
	var answered []int
	for _, r := range e.fake.ChatRequests() {
		answered = append(answered, r.Answered)
	}
	assert.Equal(t, []int{429, 500, 200}, answered)
	ex := activitySummary(history(t, e.c, run.GetID(), run.GetRunID()), "Extract")
	assert.Equal(t, 1, ex.scheduled)
	assert.Equal(t, []int32{3}, ex.attempts, "the activity succeeded on its third attempt")
}

func TestLLMTimeoutIsRetried(t *testing.T) {
	e := newLLMEnv(t, fakeopenai.Script{Rules: []fakeopenai.Rule{{Contains: said(textDirect), Responses: []fakeopenai.Response{
		fakeopenai.Delayed(3*llmTimeout, answer(t, "travel", directFlights())), answer(t, "travel", directFlights()),
	}}}})
	run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", "u1", "travel", textDirect, base)})
	res := e.wait(run)
	require.Equal(t, write.WriteCommitted, res.Status, res.Reason)
	assert.Equal(t, 1, res.Attempts)
	assert.Equal(t, 1, e.count("facts", "tenant_id = 't1'"))
	assert.Equal(t, 1, e.count("candidates", "tenant_id = 't1'"))
	assert.Equal(t, 2, e.fake.ChatCalls())
	ex := activitySummary(history(t, e.c, run.GetID(), run.GetRunID()), "Extract")
	assert.Equal(t, 1, ex.scheduled)
	assert.Equal(t, []int32{2}, ex.attempts, "the timed-out call was retried by the activity")
}

// Different users' events go to the fake concurrently; rules keep each answer with
// its statement whatever the interleaving.
func TestLLMConcurrentUsers(t *testing.T) {
	users := []string{"ua", "ub", "uc", "ud"}
	e := newLLMEnv(t, seedScript(t, "ignored"))
	done := make(chan write.MemoryWriteResult, len(users)*2)
	for _, u := range users {
		for i, text := range []string{textBudget, textDirect} {
			run := e.start(write.MemoryWriteInput{Event: writetest.Event("t1", u, "travel", text, base.Add(time.Duration(i)*time.Minute))})
			go func() {
				var res write.MemoryWriteResult
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				_ = run.Get(ctx, &res)
				done <- res
			}()
		}
	}
	for range len(users) * 2 {
		assert.Equal(t, write.WriteCommitted, (<-done).Status)
	}
	for _, u := range users {
		fs := e.active("t1", u)
		require.NotNil(t, find(fs, "budget", memory.ScopeUser), u)
		require.NotNil(t, find(fs, "flight_type", memory.ScopeUser), u)
	}
	assert.Equal(t, len(users)*2, e.count("facts", "tenant_id = 't1'"))
}
