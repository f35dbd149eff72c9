package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/lifecycle"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/privacy"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

func key32(t *testing.T) []byte {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// storeEvidence stores one text the way the write path does once the lead's Record
// patch is in: protect, insert event and evidence, index from the redacted text.
func storeEvidence(t *testing.T, st *storage.Store, tenant, user, text string) (eventID, evidenceID string, p storage.ProtectedContent) {
	ctx := context.Background()
	p, err := st.ProtectContent(text)
	require.NoError(t, err)
	ev, _, err := st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: "k-" + testenv.RandomID(8), ActorType: "USER", UserID: user, EventType: "MESSAGE", Content: p.EventContent, OccurredAt: base})
	require.NoError(t, err)
	evd, err := st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: ev.ID, Kind: "TURN", Content: p.Stored, KeyID: p.KeyID, Locator: "l", UserID: user, OccurredAt: base}, storage.SearchText(p.Redacted))
	require.NoError(t, err)
	require.NoError(t, st.SetEvidenceOriginal(ctx, tenant, evd.ID, p))
	return ev.ID, evd.ID, p
}

func TestRedactionAndEncryptionAtRest(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	// Written before encryption was turned on.
	_, legacyID, _ := storeEvidence(t, st, "t1", "u1", "旧数据：我以后尽量都坐直飞")

	k1 := key32(t)
	ring, err := privacy.NewKeyring("k1", map[string][]byte{"k1": k1})
	require.NoError(t, err)
	require.NoError(t, st.SetProtection(storage.Protection{Redactor: privacy.NewRedactor(), KeepOriginal: true, Keyring: ring}))
	text := "我的手机号是13812345678，邮箱 li.na@example.com，订单12345没收到"
	_, evID, p := storeEvidence(t, st, "t1", "u1", text)
	assert.Equal(t, "我的手机号是[CN_MOBILE]，邮箱 [EMAIL]，订单12345没收到", p.Redacted)
	assert.Equal(t, map[privacy.Kind]int{privacy.CNMobile: 1, privacy.Email: 1}, p.Redactions)

	// At rest: the content columns hold no clear text; no column of the row holds
	// the personal data. (The search column holds the redacted text's terms: that
	// is what keeps keyword search working.)
	var raw, content string
	require.NoError(t, st.DB().NewRaw("SELECT e::text, e.content || e.original_sealed FROM evidence e WHERE id = ?", evID).Scan(ctx, &raw, &content))
	for _, s := range []string{"13812345678", "li.na@example.com"} {
		assert.NotContains(t, raw, s)
	}
	assert.NotContains(t, content, "订单")
	require.NoError(t, st.DB().NewRaw("SELECT ev::text FROM events ev JOIN evidence e ON e.event_id = ev.id WHERE e.id = ?", evID).Scan(ctx, &raw))
	assert.NotContains(t, raw, "13812345678")
	assert.NotContains(t, raw, "订单")

	// Keyword search still works: the index was built from the redacted text.
	n := countWhere(t, st, "evidence", "id = ? AND search @@ plainto_tsquery('english', ?)", evID, storage.SearchText("订单"))
	assert.Equal(t, 1, n)
	assert.Zero(t, countWhere(t, st, "evidence", "id = ? AND search @@ plainto_tsquery('english', '13812345678')", evID), "the phone number is not indexed")

	// Reads: new rows decrypt, old rows pass through, the original opens sealed.
	var evs []storage.Evidence
	require.NoError(t, st.DB().NewSelect().Model(&evs).ExcludeColumn("embedding").Where("id IN (?, ?)", evID, legacyID).Order("created_at").Scan(ctx))
	require.NoError(t, st.DecryptEvidence(evs))
	assert.Equal(t, "旧数据：我以后尽量都坐直飞", evs[0].Content)
	assert.Equal(t, p.Redacted, evs[1].Content)
	orig, err := st.EvidenceOriginal(ctx, "t1", evID)
	require.NoError(t, err)
	assert.Equal(t, text, orig)

	// The same event retried is the same fingerprint (deterministic event sealing).
	p2, err := st.ProtectContent(text)
	require.NoError(t, err)
	assert.Equal(t, p.EventContent, p2.EventContent)
	assert.NotEqual(t, p.Stored, p2.Stored, "evidence is sealed with a fresh nonce")

	// A wrong key fails loudly.
	wrong, err := privacy.NewKeyring("k1", map[string][]byte{"k1": key32(t)})
	require.NoError(t, err)
	require.NoError(t, st.SetProtection(storage.Protection{Keyring: wrong}))
	_, err = st.DecryptContent(evs[1].KeyID, p.Stored)
	require.Error(t, err)
	assert.True(t, errors.Is(err, privacy.ErrWrongKey), "%v", err)
	assert.Contains(t, err.Error(), "wrong ENGRAM_ENCRYPTION_KEY")
	// No key at all: also an error naming the key.
	require.NoError(t, st.SetProtection(storage.Protection{}))
	_, err = st.DecryptContent("k1", p.Stored)
	assert.ErrorIs(t, err, privacy.ErrUnknownKey)
	assert.Contains(t, err.Error(), `"k1"`)
}

// `engram keys rotate-data`: the RotateDataKeys workflow re-seals every row under
// the new key (and, when asked, seals rows written before encryption); reads work
// with the new key alone afterwards.
func TestRotateDataKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	storeEvidence(t, e.st, "t1", "u1", "明文旧数据 13900001111")
	k1, k2 := key32(t), key32(t)
	r1, err := privacy.NewKeyring("k1", map[string][]byte{"k1": k1})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Redactor: privacy.NewRedactor(), KeepOriginal: true, Keyring: r1}))
	var evIDs []string
	for _, s := range []string{"我的手机号是13812345678", "email a@b.io", "我以后尽量都坐直飞"} {
		_, id, _ := storeEvidence(t, e.st, "t1", "u1", s)
		evIDs = append(evIDs, id)
	}
	kid, sealed, err := e.st.SealContent("prefers direct flights")
	require.NoError(t, err)
	f, err := e.st.WriteFact(ctx, "t1", &storage.Fact{MemoryKey: "USER:u1|user|flight_type", Scope: memory.ScopeUser, UserID: "u1", MemoryType: memory.TypePreference,
		Subject: "user", Predicate: "flight_type", Object: "direct", Content: sealed, KeyID: kid, Confidence: 0.9, ValidFrom: base}, storage.WriteCurrent, "direct")
	require.NoError(t, err)

	// Rotate: k2 current, k1 kept to open.
	r2, err := privacy.NewKeyring("k2", map[string][]byte{"k1": k1, "k2": k2})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Redactor: privacy.NewRedactor(), KeepOriginal: true, Keyring: r2}))
	e.inProcessWorker(lifecycle.Deps{})
	run, err := e.c.ExecuteWorkflow(ctx, rotateOptions(e.queue), lifecycle.RotateDataKeysName, lifecycle.RotateInput{IncludeClear: true, Batch: 2})
	require.NoError(t, err)
	var res map[string]int
	require.NoError(t, run.Get(ctx, &res))
	t.Logf("re-sealed: %v", res)
	assert.Equal(t, 4, res["evidence"], "three k1 rows and one clear row")
	assert.Equal(t, 1, res["facts"])
	assert.Equal(t, 2, res["evidence_original"], "originals of the two redacted texts")
	assert.Equal(t, 4, res["events"])
	usage, err := e.st.KeyUsage(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"k2": 4}, usage["evidence"])
	assert.Equal(t, map[string]int64{"k2": 1}, usage["facts"])
	assert.Equal(t, map[string]int64{"k2": 4}, usage["events"])

	// k1 can go: everything opens with k2 alone.
	only2, err := privacy.NewKeyring("k2", map[string][]byte{"k2": k2})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Keyring: only2}))
	got, err := e.st.GetFact(ctx, "t1", f.ID) // GetFact returns clear text
	require.NoError(t, err)
	assert.Equal(t, "prefers direct flights", got.Content)
	var evs []storage.Evidence
	require.NoError(t, e.st.DB().NewSelect().Model(&evs).ExcludeColumn("embedding").Where("tenant_id = 't1'").Scan(ctx))
	require.NoError(t, e.st.DecryptEvidence(evs))
	orig, err := e.st.EvidenceOriginal(ctx, "t1", evIDs[0])
	require.NoError(t, err)
	assert.Equal(t, "我的手机号是13812345678", orig)
	// A retried ingest of a rotated event still matches its fingerprint.
	var ev storage.Event
	require.NoError(t, e.st.DB().NewSelect().Model(&ev).Where("tenant_id = 't1' AND content LIKE 'ev1:k2:%'").Limit(1).Scan(ctx))
	assert.Equal(t, storage.HashEventContent(&ev), ev.ContentHash)
	assert.True(t, strings.HasPrefix(ev.Content, "ev1:k2:"))
}

// The access log records who read which memories; the audit lists them per user.
func TestAccessLogAndSchemaSuggestions(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	fids, evs := seedInquiries(t, st, "t1", "u1", 2, base)
	require.NoError(t, st.LogAccess(ctx, "t1", "agent:support-bot", "answer ticket", "u1", "where is my order", fids, evs))
	require.NoError(t, st.LogAccess(ctx, "t1", "admin:alice", "audit", "u1", "", fids[:1], nil))
	require.NoError(t, st.LogAccess(ctx, "t1", "agent:support-bot", "answer ticket", "u2", "hello", nil, nil))
	list, err := st.ListAccess(ctx, "t1", storage.AccessFilter{UserID: "u1"})
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "admin:alice", list[0].Principal)
	assert.Equal(t, fids, list[1].FactIDs)

	// Schema suggestions: an attribute the schema lacks, and an unknown predicate.
	ev, _, err := st.InsertEvent(ctx, "t1", &storage.Event{IdempotencyKey: "s1", ActorType: "USER", UserID: "u1", EventType: "MESSAGE", SchemaName: "customer_service", Content: "x", OccurredAt: base})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		attrs, _ := json.Marshal(map[string]any{"courier": []string{"SF Express", "JD", "EMS"}[i]})
		require.NoError(t, storage.UpsertCandidate(ctx, st.DB(), "t1", &storage.Candidate{ID: write.CandidateID(ev.ID, i), EventID: ev.ID, MemoryType: memory.TypeEvent, Scope: memory.ScopeUser, UserID: "u1",
			Predicate: "order_not_received", EntityType: "Order", EntityID: "12345", Attributes: attrs, Confidence: 0.9, Origin: memory.OriginStated, SchemaName: "customer_service"}))
	}
	for i := 0; i < 2; i++ {
		_, _, err := st.InsertEvent(ctx, "t1", &storage.Event{IdempotencyKey: "bad-" + testenv.RandomID(4), ActorType: "USER", UserID: "u1", EventType: "MESSAGE", SchemaName: "customer_service", Content: "退款", OccurredAt: base,
			Status: "UNPARSED", StatusReason: `extraction did not validate after 3 attempts: candidates[0].predicate: unknown "refund_request" (allowed: …)`})
		require.NoError(t, err)
	}
	sugg, err := lifecycle.SuggestSchemaChanges(ctx, st, nil, "t1", base.Add(-time.Hour*24*365*10), 2)
	require.NoError(t, err)
	t.Logf("suggestions: %+v", sugg)
	require.Len(t, sugg, 2)
	assert.Equal(t, lifecycle.SchemaSuggestion{Schema: "customer_service", Kind: "attribute", Predicate: "order_not_received", Attribute: "courier", Count: 3, Examples: []string{"EMS", "JD", "SF Express"}}, sugg[0])
	assert.Equal(t, "refund_request", sugg[1].Predicate)
	assert.Equal(t, 2, sugg[1].Count)
}

func rotateOptions(queue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: lifecycle.RotateDataKeysWorkflowID + "-" + testenv.RandomID(6), TaskQueue: queue}
}
