package recall

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/engramhq/engram/storage"
)

// PostgresKeyword is the default keyword index: Postgres full-text search over the
// search columns of facts and evidence (english configuration; CJK split into
// characters and bigrams by storage.SearchText when written). The engine runs the
// same conditions inside its one statement per table; Search serves callers that
// want keyword hits alone.
type PostgresKeyword struct {
	store *storage.Store
}

// NewPostgresKeyword returns the Postgres full-text keyword index.
func NewPostgresKeyword(store *storage.Store) *PostgresKeyword { return &PostgresKeyword{store: store} }

// Name implements KeywordIndex.
func (*PostgresKeyword) Name() string { return "postgres" }

// Search implements KeywordIndex: the query's terms OR-ed (words stemmed, CJK
// bigrams), ranked by ts_rank, within v's tenant, scopes and time. Facts are the
// ACTIVE revisions valid at v.AsOf (the revisions valid then, when v.AsOf is in
// the past).
func (k *PostgresKeyword) Search(ctx context.Context, v Visibility, query string, kinds []Kind, limit int) ([]KeywordHit, error) {
	if v.TenantID == "" || v.UserID == "" {
		return nil, fmt.Errorf("keyword search needs a tenant and a user")
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	if len(query) > MaxQueryBytes {
		return nil, fmt.Errorf("query is longer than %d bytes", MaxQueryBytes)
	}
	terms := keywordTerms(query, 24)
	if len(terms) == 0 {
		return nil, nil
	}
	now := time.Now()
	if v.AsOf.IsZero() {
		v.AsOf = now
	}
	current := !v.AsOf.Before(now.Add(-currentSlack))
	tsq := tsQueryText(terms)
	var out []KeywordHit
	if len(kinds) == 0 || slices.Contains(kinds, KindFact) {
		if branches := factBranches(v); len(branches) > 0 {
			s := &sqlb{}
			s.w("SELECT id, r FROM (")
			branchUnion(s, branches, factTime(v, current),
				frag{sql: "f.id, ts_rank(f.search, to_tsquery('english', ?)) AS r", args: []any{tsq}},
				frag{sql: "f.search @@ to_tsquery('english', ?)", args: []any{tsq}},
				"r DESC", limit)
			s.w(fmt.Sprintf(") x ORDER BY r DESC LIMIT %d", limit))
			var rows []struct {
				ID string  `bun:"id"`
				R  float64 `bun:"r"`
			}
			if err := k.store.DB().NewRaw(s.b.String(), s.args...).Scan(ctx, &rows); err != nil {
				return nil, fmt.Errorf("keyword facts: %w", err)
			}
			for _, r := range rows {
				out = append(out, KeywordHit{Kind: KindFact, ID: r.ID, Score: r.R})
			}
		}
	}
	if len(kinds) == 0 || slices.Contains(kinds, KindEvidence) {
		if ev, ok := evidenceVisible(v); ok {
			s := &sqlb{}
			s.w("SELECT e.id, ts_rank(e.search, to_tsquery('english', ?)) AS r FROM evidence e WHERE ", tsq)
			s.f(ev)
			s.w(fmt.Sprintf(" AND e.search @@ to_tsquery('english', ?) ORDER BY r DESC LIMIT %d", limit), tsq)
			var rows []struct {
				ID string  `bun:"id"`
				R  float64 `bun:"r"`
			}
			if err := k.store.DB().NewRaw(s.b.String(), s.args...).Scan(ctx, &rows); err != nil {
				return nil, fmt.Errorf("keyword evidence: %w", err)
			}
			for _, r := range rows {
				out = append(out, KeywordHit{Kind: KindEvidence, ID: r.ID, Score: r.R})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b KeywordHit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
