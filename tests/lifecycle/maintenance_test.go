package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// seedInquiries writes n EVENT facts "asked about order 12345" for a user, each with
// its own evidence, an hour apart from start.
func seedInquiries(t *testing.T, st *storage.Store, tenant, user string, n int, start time.Time) (factIDs, evidenceIDs []string) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * time.Hour)
		text := fmt.Sprintf("第%d次询问：我的订单12345到哪了？", i+1)
		ev, _, err := st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: "inq-" + testenv.RandomID(8), ActorType: "USER", UserID: user, EventType: "MESSAGE", Content: text, OccurredAt: at, Status: "COMMITTED"})
		require.NoError(t, err)
		evd, err := st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: text, Locator: "l", UserID: user, OccurredAt: at}, storage.SearchText(text))
		require.NoError(t, err)
		f, err := st.WriteFact(ctx, tenant, &storage.Fact{MemoryKey: fmt.Sprintf("USER:%s|order:12345|order_inquiry|%d", user, i), Scope: memory.ScopeUser, UserID: user,
			MemoryType: memory.TypeEvent, Subject: "Order:12345", Predicate: "order_inquiry", Object: at.Format(time.RFC3339),
			Content: text, EntityType: "Order", EntityID: "12345", Confidence: 0.9, ValidFrom: at, ObservedAt: at}, storage.WriteCurrent, storage.SearchText(text))
		require.NoError(t, err)
		require.NoError(t, storage.LinkFactEvidence(ctx, st.DB(), tenant, f.ID, evd.ID, memory.RelSupport))
		factIDs, evidenceIDs = append(factIDs, f.ID), append(evidenceIDs, evd.ID)
	}
	return factIDs, evidenceIDs
}

// afterSleep runs a maintenance workflow as a child after a durable sleep, so the
// test suite's time skipping moves the workflow clock past validity windows.
func afterSleep(ctx workflow.Context, d time.Duration, name string, arg any) (string, error) {
	if err := workflow.Sleep(ctx, d); err != nil {
		return "", err
	}
	var out any
	err := workflow.ExecuteChildWorkflow(ctx, name, arg).Get(ctx, &out)
	return fmt.Sprint(out), err
}

func timeSkippingEnv(t *testing.T, st *storage.Store) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(afterSleep)
	env.RegisterWorkflowWithOptions(lifecycle.MaintenanceExpire, workflow.RegisterOptions{Name: lifecycle.MaintenanceExpireName})
	env.RegisterWorkflowWithOptions(lifecycle.MaintenanceConsolidate, workflow.RegisterOptions{Name: lifecycle.MaintenanceConsolidateName})
	env.RegisterActivity(&lifecycle.MaintenanceActivities{Store: st, Embedder: embedding.NewNGramEmbedder(storage.EmbeddingDim)})
	return env
}

// Expiry with the SDK's time skipping: a fact valid for one day is ACTIVE when the
// workflow clock is at its start, EXPIRED (not deleted) two days later.
func TestExpiryTimeSkipping(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	until := now.Add(24 * time.Hour)
	f, err := st.WriteFact(ctx, "t1", &storage.Fact{MemoryKey: "USER:u1|user|location", Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeFact,
		Subject: "user", Predicate: "location", Object: "Beijing", Content: "this week the user is in Beijing", Confidence: 0.9, ValidFrom: now, ValidUntil: &until}, storage.WriteCurrent, "beijing")
	require.NoError(t, err)
	keep, err := st.WriteFact(ctx, "t1", &storage.Fact{MemoryKey: "USER:u1|user|flight_type", Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypePreference,
		Subject: "user", Predicate: "flight_type", Object: "direct", Content: "prefers direct flights", Confidence: 0.9, ValidFrom: now}, storage.WriteCurrent, "direct")
	require.NoError(t, err)

	env := timeSkippingEnv(t, st)
	env.SetStartTime(now.Add(time.Minute))
	env.ExecuteWorkflow(afterSleep, time.Hour, lifecycle.MaintenanceExpireName, lifecycle.MaintenanceExpireInput{})
	require.NoError(t, env.GetWorkflowError())
	got, err := st.GetFact(ctx, "t1", f.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.FactActive, got.Status, "an hour in, the fact is still valid")

	env = timeSkippingEnv(t, st)
	env.SetStartTime(now.Add(time.Minute))
	env.ExecuteWorkflow(afterSleep, 48*time.Hour, lifecycle.MaintenanceExpireName, lifecycle.MaintenanceExpireInput{})
	require.NoError(t, env.GetWorkflowError())
	var out string
	require.NoError(t, env.GetWorkflowResult(&out))
	assert.Equal(t, "1", out)
	got, err = st.GetFact(ctx, "t1", f.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.FactExpired, got.Status)
	assert.Contains(t, got.Reason, "expired")
	assert.NotNil(t, got.ClosedAt)
	assert.True(t, got.ValidUntil.Equal(until), "the validity window is kept")
	other, err := st.GetFact(ctx, "t1", keep.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.FactActive, other.Status)
	var outbox int
	require.NoError(t, st.DB().NewRaw("SELECT count(*) FROM outbox WHERE ref_id = ?", f.ID).Scan(ctx, &outbox))
	assert.Equal(t, 1, outbox, "the indexes are told")
}

// Consolidation with time skipping: ten order inquiries become one summary whose
// evidence is every inquiry's; the originals are SUPERSEDED with consolidated_into,
// still readable. Recent ones (younger than MinAge) are left alone until time passes.
func TestConsolidationTimeSkipping(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	ids, evs := seedInquiries(t, st, "t1", "u1", 10, start)
	seedInquiries(t, st, "t1", "u2", 2, start) // too few to fold
	before, err := st.FactCounts(ctx, "t1", "u1")
	require.NoError(t, err)
	require.Equal(t, 10, before["ACTIVE"])

	in := lifecycle.MaintenanceConsolidateInput{MinFacts: 5, MinAge: 24 * time.Hour}
	env := timeSkippingEnv(t, st)
	env.SetStartTime(start.Add(11 * time.Hour))
	env.ExecuteWorkflow(afterSleep, time.Minute, lifecycle.MaintenanceConsolidateName, in)
	require.NoError(t, env.GetWorkflowError())
	c, _ := st.FactCounts(ctx, "t1", "u1")
	assert.Equal(t, 10, c["ACTIVE"], "younger than MinAge: nothing folded yet")

	env = timeSkippingEnv(t, st)
	env.SetStartTime(start.Add(11 * time.Hour))
	env.ExecuteWorkflow(afterSleep, 72*time.Hour, lifecycle.MaintenanceConsolidateName, in)
	require.NoError(t, env.GetWorkflowError())

	after, err := st.FactCounts(ctx, "t1", "u1")
	require.NoError(t, err)
	assert.Equal(t, 1, after["ACTIVE"], "ten inquiries became one summary")
	assert.Equal(t, 10, after["SUPERSEDED"])
	sums, err := st.ListFacts(ctx, "t1", storage.FactFilter{UserID: "u1", Statuses: []memory.FactStatus{memory.FactActive}})
	require.NoError(t, err)
	require.Len(t, sums, 1)
	s := sums[0]
	t.Logf("summary: %s", s.Content)
	assert.Contains(t, s.Content, "10 × order_inquiry")
	assert.Contains(t, s.Content, "12345")
	assert.Equal(t, "Order", s.EntityType)
	assert.Equal(t, memory.OriginInferred, s.Origin)
	links, err := st.FactEvidenceIDs(ctx, "t1", s.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, evs, links, "every source's evidence supports the summary")
	for _, id := range ids {
		var into string
		require.NoError(t, st.DB().NewRaw("SELECT coalesce(consolidated_into::text, '') FROM facts WHERE id = ?", id).Scan(ctx, &into))
		assert.Equal(t, s.ID, into)
	}
	u2, _ := st.FactCounts(ctx, "t1", "u2")
	assert.Equal(t, 2, u2["ACTIVE"])
	assert.Equal(t, 1, countWhere(t, st, "facts", "id = ? AND embedding IS NOT NULL", s.ID), "the summary is indexed")

	// Five more inquiries fold into a new revision of the same summary, which
	// keeps all fifteen sources.
	more, moreEv := seedInquiries(t, st, "t1", "u1", 5, start.Add(20*time.Hour))
	env = timeSkippingEnv(t, st)
	env.SetStartTime(start.Add(30 * time.Hour))
	env.ExecuteWorkflow(afterSleep, 72*time.Hour, lifecycle.MaintenanceConsolidateName, in)
	require.NoError(t, env.GetWorkflowError())
	sums, err = st.ListFacts(ctx, "t1", storage.FactFilter{UserID: "u1", Statuses: []memory.FactStatus{memory.FactActive}})
	require.NoError(t, err)
	require.Len(t, sums, 1)
	assert.Equal(t, 2, sums[0].Revision)
	assert.Contains(t, sums[0].Content, "15 × order_inquiry")
	links, err = st.FactEvidenceIDs(ctx, "t1", sums[0].ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, append(evs, moreEv...), links)
	_ = more
}

func countWhere(t *testing.T, st *storage.Store, table, where string, args ...any) int {
	n, err := st.DB().NewSelect().Table(table).Where(where, args...).Count(context.Background())
	require.NoError(t, err)
	return int(n)
}

// Once for real: schedules are created idempotently on the dev server, triggering
// them runs expiry and consolidation through a real worker.
func TestMaintenanceSchedulesForReal(t *testing.T) {
	e := newEnv(t)
	e.inProcessWorker(lifecycle.Deps{})
	ctx := context.Background()
	past := time.Now().UTC().Add(-time.Hour)
	from := past.Add(-time.Hour)
	f, err := e.st.WriteFact(ctx, "t1", &storage.Fact{MemoryKey: "USER:u1|user|location", Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypeFact,
		Subject: "user", Predicate: "location", Object: "Beijing", Content: "in Beijing until an hour ago", Confidence: 0.9, ValidFrom: from, ValidUntil: &past}, storage.WriteCurrent, "beijing")
	require.NoError(t, err)
	seedInquiries(t, e.st, "t1", "u1", 6, time.Now().UTC().Add(-48*time.Hour))

	cfg := lifecycle.DefaultConfig(e.queue)
	cfg.Prefix = "test-" + testenv.RandomID(8)
	cfg.ExpiryEvery, cfg.ConsolidateEvery, cfg.DecayEvery, cfg.SchemaReportEvery = time.Hour, time.Hour, time.Hour, 0
	t.Cleanup(func() {
		for _, n := range lifecycle.ScheduleNames {
			_ = e.c.ScheduleClient().GetHandle(context.Background(), cfg.ScheduleID(n)).Delete(context.Background())
		}
	})
	require.NoError(t, lifecycle.EnsureSchedules(ctx, e.c, cfg))
	cfg.ExpiryEvery = 30 * time.Minute
	require.NoError(t, lifecycle.EnsureSchedules(ctx, e.c, cfg), "a second call updates instead of failing")
	d, err := e.c.ScheduleClient().GetHandle(ctx, cfg.ScheduleID("expiry")).Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Minute, d.Schedule.Spec.Intervals[0].Every)
	_, err = e.c.ScheduleClient().GetHandle(ctx, cfg.ScheduleID("schema-report")).Describe(ctx)
	assert.Error(t, err, "an interval of 0 means no schedule")

	for _, n := range []string{"expiry", "consolidate"} {
		require.NoError(t, e.c.ScheduleClient().GetHandle(ctx, cfg.ScheduleID(n)).Trigger(ctx, client.ScheduleTriggerOptions{}))
	}
	testenv.Eventually(t, 60*time.Second, "fact expired by the scheduled workflow", func() bool {
		got, err := e.st.GetFact(ctx, "t1", f.ID)
		return err == nil && got.Status == memory.FactExpired
	})
	testenv.Eventually(t, 60*time.Second, "inquiries consolidated by the scheduled workflow", func() bool {
		c, err := e.st.FactCounts(ctx, "t1", "u1")
		return err == nil && c["SUPERSEDED"] == 6
	})
}
