package recall

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/privacy"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// With redaction and encryption at rest on, the rows hold sealed text, yet recall
// finds memories by keyword and meaning (indexes are built from the redacted clear
// text) and returns clear text; personal data never reaches the index or the answer.
func TestRecallWithRedactionAndEncryption(t *testing.T) {
	e := newEnv(t)
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	kr, err := privacy.NewKeyring("k1", map[string][]byte{"k1": key})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Redactor: privacy.NewRedactor(), Keyring: kr}))

	e.write("t1", ev{user: "u1", schema: "travel", text: "我以后尽量都坐直飞", at: base})
	e.write("t1", ev{user: "u1", schema: "general", session: "s1", text: "I just got home from work", at: base.Add(30 * time.Minute)})
	r := e.write("t1", ev{user: "u1", schema: "general", session: "s1", text: "my cat is called Mochi, call me at 13812345678", at: base.Add(time.Hour)})

	ctx := context.Background()
	var sealed int
	require.NoError(t, e.st.DB().NewRaw("SELECT count(*) FROM evidence WHERE tenant_id = 't1' AND key_id = 'k1' AND content LIKE 'ev1:%'").Scan(ctx, &sealed))
	assert.Equal(t, 3, sealed, "evidence is sealed at rest")
	var clear int
	require.NoError(t, e.st.DB().NewRaw("SELECT count(*) FROM facts WHERE tenant_id = 't1' AND content NOT LIKE 'ev1:%'").Scan(ctx, &clear))
	assert.Zero(t, clear, "fact content is sealed at rest")

	resp := e.recall(recall.Request{Principal: principal("t1", "u1"), Query: "what is my cat's name?"})
	require.NotEmpty(t, resp.Items)
	assert.Equal(t, r.EvidenceID, resp.Items[0].ID)
	assert.Contains(t, resp.Context, "Mochi")
	assert.NotContains(t, resp.Context, "13812345678", "the phone number was redacted before storing")
	assert.NotContains(t, resp.Context, "ev1:", "recall opens sealed content")
	// The turn before it in its session comes as an adjacent turn, opened too.
	adjacent := false
	for _, it := range resp.Items {
		assert.False(t, strings.HasPrefix(it.Content, "ev1:"), "sealed content returned: %+v", it)
		if slices.Contains(it.Retrievers, "adjacent") && it.Content == "I just got home from work" {
			adjacent = true
		}
	}
	assert.True(t, adjacent, "the turn before the answer follows it (adjacent), opened: %+v", resp.Items)

	resp = e.recall(recall.Request{Principal: principal("t1", "u1"), Schema: "travel", Query: "用户喜欢什么样的航班"})
	found := false
	for _, it := range resp.Items {
		if it.Predicate == "flight_type" {
			found = true
			assert.False(t, strings.HasPrefix(it.Content, "ev1:"))
		}
	}
	assert.True(t, found, "the sealed preference fact is found and opened")

	// A wrong key fails loudly rather than returning garbage.
	other := make([]byte, 32)
	_, _ = rand.Read(other)
	bad, err := privacy.NewKeyring("k1", map[string][]byte{"k1": other})
	require.NoError(t, err)
	require.NoError(t, e.st.SetProtection(storage.Protection{Keyring: bad}))
	_, err = e.eng.Recall(ctx, recall.Request{Principal: principal("t1", "u1"), Query: "what is my cat's name?"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ENGRAM_ENCRYPTION_KEY")
}
