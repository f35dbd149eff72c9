package storage_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// indexDrift lists where the kept keyword statistics and postings of tenant differ
// from a count over the evidence itself: turns and lengths per user
// (evidence_stats), turns per lexeme (evidence_terms), and one posting per lexeme
// of each turn with its cheap score (evidence_postings).
func indexDrift(t *testing.T, st *storage.Store, tenant string) []string {
	t.Helper()
	ctx := context.Background()
	checks := []struct{ name, kept, counted string }{
		{"evidence_stats", "SELECT user_id, docs, lex_docs, lex_len FROM evidence_stats WHERE tenant_id = ?0",
			"SELECT user_id, count(*), count(search), coalesce(sum(greatest(length(ts_filter(search, '{a,b,d}')), 1)) FILTER (WHERE search IS NOT NULL), 0) FROM evidence WHERE tenant_id = ?0 GROUP BY user_id"},
		{"evidence_terms", "SELECT user_id, lexeme, df FROM evidence_terms WHERE tenant_id = ?0",
			"SELECT e.user_id, l.lexeme, count(*) FROM evidence e CROSS JOIN LATERAL unnest(e.search) l WHERE e.tenant_id = ?0 GROUP BY 1, 2"},
		{"evidence_postings", "SELECT user_id, lexeme, w, evidence_id FROM evidence_postings WHERE tenant_id = ?0",
			"SELECT e.user_id, l.lexeme, l.w, e.id FROM evidence e CROSS JOIN LATERAL evidence_lexemes(e.search) l WHERE e.tenant_id = ?0"},
	}
	var drift []string
	for _, c := range checks {
		var n int
		q := fmt.Sprintf("SELECT count(*) FROM ((%[1]s EXCEPT ALL %[2]s) UNION ALL (%[2]s EXCEPT ALL %[1]s)) d", c.kept, c.counted)
		require.NoError(t, st.DB().NewRaw(q, tenant).Scan(ctx, &n))
		if n > 0 {
			drift = append(drift, fmt.Sprintf("%s: %d rows differ", c.name, n))
		}
	}
	return drift
}

// The keyword statistics and postings are kept in step with the evidence by its
// triggers: under concurrent commits of many turns of the same users (the same
// lexemes' rows upserted at once), a rolled-back insert, an update of what turns
// are found by (redaction), and the erasure of a user, after which nothing of the
// user's words is left.
func TestEvidenceIndexKeptUnderConcurrency(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	const tenant = "t-idx"
	words := strings.Fields("hiking lisbon priya pottery concert kayak bread garden chess camera tent yoga museum berlin coffee train")
	users := []string{"u1", "u2", "u3"}
	inParallel(t, 8, func(w int) error {
		r := rand.New(rand.NewPCG(uint64(w), 3))
		for i := range 40 {
			u := users[r.IntN(len(users))]
			var own, prev []string
			for range 2 + r.IntN(6) {
				own = append(own, words[r.IntN(len(words))])
			}
			for range r.IntN(4) {
				prev = append(prev, words[r.IntN(len(words))])
			}
			e, _, err := st.InsertEvent(ctx, tenant, &storage.Event{IdempotencyKey: fmt.Sprintf("w%d-%d", w, i), ActorType: "USER", ActorID: u, UserID: u, EventType: "MESSAGE", Content: strings.Join(own, " "), OccurredAt: t0})
			if err == nil {
				_, err = st.InsertEvidence(ctx, tenant, &storage.Evidence{EventID: e.ID, Kind: "TURN", Content: strings.Join(own, " "), UserID: u, OccurredAt: t0},
					storage.SearchText(strings.Join(own, " ")), strings.Join(prev, " "))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.Equal(t, 320, count(t, st, "evidence", "tenant_id = ?", tenant))
	require.Empty(t, indexDrift(t, st, tenant), "after concurrent commits")
	require.Equal(t, 320, sumDocs(t, st, tenant))

	// A write that rolls back leaves the statistics as they were.
	tx, err := st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `INSERT INTO evidence (tenant_id, event_id, kind, content, locator, user_id, occurred_at, search)
		SELECT tenant_id, event_id, kind, content, 'again', user_id, occurred_at, to_tsvector('english', 'zeppelin hiking') FROM evidence WHERE tenant_id = ? LIMIT 5`, tenant)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.Empty(t, indexDrift(t, st, tenant), "after a rollback")
	require.Zero(t, count(t, st, "evidence_terms", "tenant_id = ? AND lexeme = 'zeppelin'", tenant))

	// Redaction rewrites what a turn is found by; setting its vector does not.
	_, err = st.DB().ExecContext(ctx, "UPDATE evidence SET search = to_tsvector('english', 'redacted words') WHERE tenant_id = ? AND user_id = 'u2' AND content LIKE '%lisbon%'", tenant)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, "UPDATE evidence SET importance = 0.5 WHERE tenant_id = ?", tenant)
	require.NoError(t, err)
	require.Empty(t, indexDrift(t, st, tenant), "after redaction")

	// Erasure of u1 through its steps: no row of u1's is left in the three tables.
	subj := storage.ErasureSubject{TenantID: tenant, UserID: "u1"}
	eraseAll(t, st, subj, 25)
	require.Zero(t, count(t, st, "evidence", "tenant_id = ? AND user_id = 'u1'", tenant))
	for _, table := range []string{"evidence_stats", "evidence_terms", "evidence_postings"} {
		require.Zero(t, count(t, st, table, "tenant_id = ? AND user_id = 'u1'", tenant), "%s keeps u1's rows after its erasure", table)
	}
	require.Empty(t, indexDrift(t, st, tenant), "after erasure")
	require.NotZero(t, count(t, st, "evidence_postings", "tenant_id = ? AND user_id = 'u2'", tenant))
}

func sumDocs(t *testing.T, st *storage.Store, tenant string) int {
	var n int
	require.NoError(t, st.DB().NewRaw("SELECT coalesce(sum(docs), 0) FROM evidence_stats WHERE tenant_id = ?", tenant).Scan(context.Background(), &n))
	return n
}
