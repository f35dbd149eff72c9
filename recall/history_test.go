package recall_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

var historyWords = strings.Fields(`hiking lisbon priya pottery concert kayak bread garden chess camera tent yoga museum berlin coffee train
	marcus elena sourdough tahoe seattle climbing dinner birthday guitar swimming painting wine cycling library dentist beach
	interview volunteer photography market bakery cinema napa portland kyoto laptop jacket helmet cookbook headphones plant`)

// addTurns stores n turns of user in tenant, 200 to a session, with one statement per table (a test
// of recall's plans needs thousands; the write path is tested elsewhere), each a
// few words of historyWords and a word of its own, with its n-gram vector (200
// a statement: each pays an HNSW insert per row). The
// evidence triggers keep the keyword statistics as for any insert.
func addTurns(t *testing.T, st *storage.Store, emb *embedding.NGramEmbedder, tenant, user string, n int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 5))
	keys, texts, vecs := make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		var w []string
		for range 3 + r.IntN(5) {
			w = append(w, historyWords[r.IntN(len(historyWords))])
		}
		w = append(w, fmt.Sprintf("note%s%d", user, i))
		texts[i] = strings.Join(w, " ")
		keys[i] = fmt.Sprintf("%s-%d", user, i)
		vecs[i] = pgvector.NewVector(emb.Vector(texts[i])).String()
		ats[i] = base.Add(time.Duration(i) * time.Minute)
	}
	for i := 0; i < n; i += 200 {
		j := min(i+200, n)
		_, err := st.DB().ExecContext(ctx, `WITH x AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::timestamptz[]) x(k, c, v, at)),
		ev AS (INSERT INTO events (tenant_id, idempotency_key, content_hash, actor_type, actor_id, user_id, session_id, event_type, content, occurred_at)
			SELECT ?, k, md5(c), 'USER', ?, ?, ?, 'MESSAGE', c, at FROM x RETURNING id, idempotency_key)
		INSERT INTO evidence (tenant_id, event_id, kind, content, locator, user_id, session_id, occurred_at, embedding, search)
		SELECT ?, ev.id, 'TURN', x.c, 'turn', ?, ?, x.at, x.v::vector, to_tsvector('english', x.c) FROM x JOIN ev ON ev.idempotency_key = x.k`,
			storage.TextArray(keys[i:j]), storage.TextArray(texts[i:j]), storage.TextArray(vecs[i:j]), pgTimes(ats[i:j]),
			tenant, user, user, sessionOf(user, i), tenant, user, sessionOf(user, i))
		require.NoError(t, err)
		_, err = st.DB().ExecContext(ctx, `INSERT INTO sessions (tenant_id, id, user_id, turn_count) VALUES (?, ?, ?, ?)`, tenant, sessionOf(user, i), user, j-i)
		require.NoError(t, err)
	}
}

// sessionOf is the session of user's turn i in addTurns: 200 turns each.
func sessionOf(user string, i int) string { return fmt.Sprintf("%s-s%d", user, i/200) }

// functionPlan is EXPLAIN ANALYZE of the query a plpgsql function returns (its
// RETURN QUERY), planned as the function plans it: under the function's own
// settings, a generic plan, params (its parameter names in order) bound to args.
func functionPlan(t *testing.T, st *storage.Store, name, types, params string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var body string
	var settings []string
	require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT prosrc, proconfig FROM pg_proc WHERE proname = ?", name).Scan(&body, pgdialect.Array(&settings)))
	_, q, ok := strings.Cut(body, "RETURN QUERY")
	require.True(t, ok, body)
	q, _, _ = strings.Cut(q, ";")
	var pairs []string
	for i, p := range strings.Fields(params) {
		pairs = append(pairs, p, fmt.Sprintf("$%d", i+1))
	}
	q = strings.NewReplacer(pairs...).Replace(q)
	conn, err := st.DB().Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, kv := range append(settings, "plan_cache_mode=force_generic_plan") {
		k, v, _ := strings.Cut(kv, "=")
		_, err := conn.ExecContext(ctx, "SELECT set_config(?, ?, false)", k, v)
		require.NoError(t, err)
	}
	_, err = conn.ExecContext(ctx, "PREPARE fn_plan ("+types+") AS "+q)
	require.NoError(t, err)
	var lines []string
	require.NoError(t, conn.NewRaw("EXPLAIN (ANALYZE) EXECUTE fn_plan ("+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+")", args...).Scan(ctx, &lines))
	return strings.Join(lines, "\n")
}

func pgTimes(ts []time.Time) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = `"` + t.Format(time.RFC3339) + `"`
	}
	return "{" + strings.Join(s, ",") + "}"
}

// A heavy user (6,000 turns) and a light one (200) in the same tenant. The one
// generic plan of the recall statement reads the light user's turns exactly
// (evidence_tenant_user_time; the HNSW walk and the postings never run) and the
// heavy user's from the indexes (evidence_embedding_hnsw and evidence_postings;
// the exact read never runs), as EXPLAIN ANALYZE of each shows. The light user's
// semantic evidence hits are the exact nearest turns (cosine distance over all of
// the user's vectors, computed here), and every turn of the light user's that
// matches a rare query word is a keyword hit.
func TestEvidenceFromIndexesOnlyForManyTurns(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	addTurns(t, st, emb, "t1", "heavy", 6000, 1)
	addTurns(t, st, emb, "t1", "light", 200, 2)
	// Many other users: a generic plan takes a user's share of the table for
	// 1/(number of users), and with a few hundred it sorted the whole table
	// rather than walk the index (see the migration evidence_walk).
	for i := range 300 {
		addTurns(t, st, emb, "t1", fmt.Sprintf("other%d", i), 5, uint64(10+i))
	}
	_, err := st.DB().ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	req := func(user, q string) recall.Request {
		return recall.Request{Principal: recall.Principal{TenantID: "t1", ID: "test", UserID: user}, Query: q, K: 10, Explain: true}
	}
	for _, c := range []struct {
		user         string
		exact, byIdx bool
	}{
		{"light", true, false},
		{"heavy", false, true},
	} {
		plan, err := eng.Explain(ctx, req(c.user, "hiking in lisbon with priya"))
		require.NoError(t, err)
		require.Equal(t, c.exact, planUsed(plan, "evidence_tenant_user_time"), "%s: exact read of the turns\n%s", c.user, plan)
		require.Equal(t, c.byIdx, planRan(plan, "Function Scan on evidence_walk "), "%s: HNSW walk\n%s", c.user, plan)
		require.Equal(t, c.byIdx, planUsed(plan, "evidence_postings_pkey"), "%s: keyword postings\n%s", c.user, plan)
		// Both score sessions as documents (a heavy user's sessions' lengths are
		// the kept turn counts): a turn of a matching session says so.
		resp, err := eng.Recall(ctx, req(c.user, "hiking in lisbon with priya"))
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(resp.Items, func(it recall.Item) bool { return strings.Contains(it.Why, "session matches") }), "%s: no hit lifted by its session", c.user)
	}

	// The walk (evidence_walk, a plan of its own) is the HNSW index's.
	walk := functionPlan(t, st, "evidence_walk", "text, text, vector, timestamptz, int", "p_tenant p_user p_q p_at p_k",
		"t1", "heavy", pgvector.NewVector(emb.Vector("hiking in lisbon with priya")), time.Now(), 40)
	require.True(t, planUsed(walk, "evidence_embedding_hnsw"), "the walk's plan\n%s", walk)

	// The light user's answers are the exact scan's.
	checkLightUserExact(t, st, emb, eng, req)
}

// planRan reports whether the plan has a node that ran whose line has node.
func planRan(plan, node string) bool {
	for _, l := range strings.Split(plan, "\n") {
		if strings.Contains(l, node) && !strings.Contains(l, "(never executed)") {
			return true
		}
	}
	return false
}

// planUsed reports whether the plan has a node on index that ran.
func planUsed(plan, index string) bool { return planRan(plan, "using "+index+" on ") }

// checkLightUserExact: the light user's semantic hits are the nearest of its
// turns by an exact scan, and a word one turn has finds that turn.
func checkLightUserExact(t *testing.T, st *storage.Store, emb *embedding.NGramEmbedder, eng *recall.Engine, req func(user, q string) recall.Request) {
	ctx := context.Background()
	// The light user's answers are the exact scan's.
	var rows []struct {
		ID        string `bun:"id"`
		Content   string `bun:"content"`
		Embedding pgvector.Vector
	}
	require.NoError(t, st.DB().NewRaw("SELECT id::text, content, embedding FROM evidence WHERE tenant_id = 't1' AND user_id = 'light'").Scan(ctx, &rows))
	require.Len(t, rows, 200)
	for _, q := range []string{"hiking in lisbon with priya", "sourdough bread at the bakery", "a new camera for photography", "note" + "light17"} {
		qv := emb.Vector(q)
		type scored struct {
			id string
			d  float64
		}
		var all []scored
		for _, r := range rows {
			all = append(all, scored{r.ID, 1 - embedding.Cosine(qv, r.Embedding.Slice())})
		}
		slices.SortFunc(all, func(a, b scored) int {
			switch {
			case a.d < b.d:
				return -1
			case a.d > b.d:
				return 1
			}
			return 0
		})
		resp, err := eng.Recall(ctx, req("light", q))
		require.NoError(t, err)
		var sem, kw []string
		for _, it := range resp.Candidates {
			if it.Kind != recall.KindEvidence {
				continue
			}
			if slices.Contains(it.Retrievers, recall.RetrieverSemantic) {
				sem = append(sem, it.ID)
			}
			if slices.Contains(it.Retrievers, recall.RetrieverKeyword) && strings.Contains(it.Why, "keyword #") {
				kw = append(kw, it.ID) // by its own words, not its neighbours' (context #)
			}
		}
		want := make([]string, 0, len(sem))
		for _, s := range all[:len(sem)] {
			want = append(want, s.id)
		}
		require.NotEmpty(t, sem, "%q: no semantic evidence hit", q)
		require.ElementsMatch(t, want, sem, "%q: the light user's semantic hits are not the exact nearest turns", q)
		if strings.HasPrefix(q, "note") {
			require.Len(t, kw, 1, "%q: the one turn with the word", q)
		}
	}
}

// A user with many turns gets the turns the HNSW walk brings scored as a light
// user's are: each by the nearer of itself and its best sentence. The turn the
// walk ranks last among the semantic hits is given a sentence whose vector is the
// question's; it comes back first.
func TestManyTurnsScoredByBestSentence(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	addTurns(t, st, emb, "t1", "heavy", 3000, 3)
	_, err := st.DB().ExecContext(ctx, "ANALYZE")
	require.NoError(t, err)
	eng := recall.New(st, emb, recall.NewPostgresKeyword(st), nil, recall.Options{AccessLog: recall.AccessLogOff})
	defer eng.Close()
	const q = "pottery class with elena in kyoto"
	semantic := func() []string {
		resp, err := eng.Recall(ctx, recall.Request{Principal: recall.Principal{TenantID: "t1", ID: "test", UserID: "heavy"},
			Query: q, K: 10, Explain: true, Retrievers: []string{recall.RetrieverSemantic}})
		require.NoError(t, err)
		var ids []string
		for _, it := range resp.Candidates {
			if it.Kind == recall.KindEvidence && slices.Contains(it.Retrievers, recall.RetrieverSemantic) {
				ids = append(ids, it.ID)
			}
		}
		return ids
	}
	before := semantic()
	require.Greater(t, len(before), 2)
	last := before[len(before)-1]
	v := pgvector.NewVector(emb.Vector(q))
	require.NoError(t, st.InsertEvidenceSentences(ctx, "t1", last, "heavy", []*pgvector.Vector{&v, &v}))
	after := semantic()
	require.NotEmpty(t, after)
	require.Equal(t, last, after[0], "the turn with the question's sentence: before %v, after %v", before, after)
}
