package recall

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/memory"
)

// Adjacent turns: an answer is often said next to the turn that matches the
// question rather than in it. "How did you two meet?" matches the question; the
// reply after it ("In an engineering class in college") holds the answer and
// shares no word with it. In real chat one answer is spread over a burst of short
// messages. So the turns just before and after each of the best-ranked turns, in
// the same session, are brought in (or lifted) at a share of their anchor's score
// (Fusion.Adjacent): below the anchor, never above it, so the best turn stays
// first and its neighbours follow it instead of turns that only share a word.

// sourceAdjacent is the retriever name of turns found next to a ranked one (an
// item's Retrievers name it). Only a recall of every retriever (Request.Retrievers
// empty) brings adjacent turns: one restricted to some asks what those find.
const sourceAdjacent = "adjacent"

// adjacentRow is a turn next to an anchor: dist turns before (< 0) or after it.
type adjacentRow struct {
	evidenceRow
	Anchor string `bun:"anchor"`
	Dist   int    `bun:"dist"`
}

// adjacent lifts the turns next to the best Fusion.AdjacentFrom evidence items of
// ranked (up to Fusion.AdjacentSpan on each side, in the same session, visible to
// the principal) to the anchor's score times Fusion.Adjacent (times it again for
// each further turn), and returns the list ordered again. The first Fusion.Lead
// items keep their places.
func (e *Engine) adjacent(ctx context.Context, p plan, ranked []Item) ([]Item, error) {
	fw := e.opts.Fusion
	if fw.Adjacent <= 0 || fw.AdjacentFrom <= 0 || fw.AdjacentSpan <= 0 {
		return ranked, nil
	}
	var anchors []string
	pos := map[string]int{}
	for i, it := range ranked {
		if it.Kind == KindEvidence {
			pos[it.ID] = i
			if len(anchors) < fw.AdjacentFrom && it.Scope.SessionID != "" {
				anchors = append(anchors, it.ID)
			}
		}
	}
	vis, ok := evidenceVisible(p.vis, "e")
	if len(anchors) == 0 || !ok {
		return ranked, nil
	}
	// For each anchor, its session's turns just before and after it by time (and
	// by id among turns of the same instant), by the index on (tenant, user,
	// session, occurred_at).
	side := func(s *sqlb, before bool) {
		cmp, order, sign := ">", "ASC", ""
		if before {
			cmp, order, sign = "<", "DESC", "-"
		}
		s.w("(SELECT x.*, " + sign + "(row_number() OVER (ORDER BY x.occurred_at " + order + ", x.id " + order + "))::int AS dist FROM (SELECT " + evidenceCols + " FROM evidence e " +
			"WHERE e.session_id = a.session_id AND (e.occurred_at, e.id) " + cmp + " (a.occurred_at, a.id) AND ")
		s.f(vis)
		s.w(fmt.Sprintf(" ORDER BY e.occurred_at %s, e.id %s LIMIT %d) x)", order, order, fw.AdjacentSpan))
	}
	s := &sqlb{}
	s.w("SELECT a.id AS anchor, n.* FROM evidence a CROSS JOIN LATERAL (")
	side(s, true)
	s.w(" UNION ALL ")
	side(s, false)
	s.w(") n WHERE a.tenant_id = ? AND a.id IN (?)", p.vis.TenantID, bun.In(anchors))
	var rows []adjacentRow
	if err := e.db.NewRaw(s.b.String(), s.args...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("adjacent turns: %w", err)
	}
	byID := map[string]int{} // ranked position of each item, by evidence id
	for i, it := range ranked {
		if it.Kind == KindEvidence {
			byID[it.ID] = i
		}
	}
	lifted := map[string]Item{}
	for _, r := range rows {
		ai, ok := byID[r.Anchor]
		if !ok {
			continue
		}
		a := ranked[ai]
		share := fw.Adjacent
		d := r.Dist
		if d < 0 {
			d = -d
		}
		for i := 1; i < d; i++ {
			share *= fw.Adjacent
		}
		score := a.Score * share
		where := "after"
		if r.Dist < 0 {
			where = "before"
		}
		why := fmt.Sprintf("%s #%d: %d turn(s) %s it", sourceAdjacent, ai+1, d, where)
		if i, ok := byID[r.ID]; ok {
			if ranked[i].Score >= score || i < fw.Lead {
				continue
			}
			if prev, ok := lifted[r.ID]; ok && prev.Score >= score {
				continue
			}
			it := ranked[i]
			it.Score, it.Why = score, joinWhy(it.Why, why)
			if !slices.Contains(it.Retrievers, sourceAdjacent) {
				it.Retrievers = append(slices.Clone(it.Retrievers), sourceAdjacent)
			}
			lifted[r.ID] = it
			continue
		}
		if prev, ok := lifted[r.ID]; ok && prev.Score >= score {
			continue
		}
		lifted[r.ID] = Item{Kind: KindEvidence, ID: r.ID, Content: r.Content, Scope: memory.ScopeRef{Scope: memory.ScopeUser, UserID: r.UserID, SessionID: r.SessionID, TaskID: r.TaskID}, ValidFrom: r.OccurredAt,
			OccurredAt: r.OccurredAt, Confidence: 1, Speaker: speakerName(r.Speaker, r.UserID), Score: score, Retrievers: []string{sourceAdjacent}, Why: why}
	}
	if len(lifted) == 0 {
		return ranked, nil
	}
	// Take the lifted items out and put each back before the first item (after the
	// leaders) that scores below it.
	out := make([]Item, 0, len(ranked)+len(lifted))
	for _, it := range ranked {
		if _, ok := lifted[it.ID]; ok && it.Kind == KindEvidence {
			continue
		}
		out = append(out, it)
	}
	ids := make([]string, 0, len(lifted))
	for id := range lifted {
		ids = append(ids, id)
	}
	// Highest first, so equal scores keep a stable order (by id).
	sort.Slice(ids, func(i, j int) bool {
		if a, b := lifted[ids[i]].Score, lifted[ids[j]].Score; a != b {
			return a > b
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids {
		it := lifted[id]
		at := len(out)
		for j := min(fw.Lead, len(out)); j < len(out); j++ {
			if out[j].Score < it.Score {
				at = j
				break
			}
		}
		out = append(out, Item{})
		copy(out[at+1:], out[at:])
		out[at] = it
	}
	return out, nil
}

func joinWhy(a, b string) string {
	if strings.TrimSpace(a) == "" {
		return b
	}
	return a + "; " + b
}
