package recall

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
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
// It is read by column name (evidenceRow's bun tags).
type adjacentRow struct {
	evidenceRow
	Anchor string `col:"anchor"`
	// AnchorSpeaker is who said the anchor and AnchorAt when (Fusion.AdjacentBursts).
	AnchorSpeaker string    `col:"anchor_speaker"`
	AnchorAt      time.Time `col:"anchor_at"`
	Dist          int       `col:"dist"`
	// KeyID names the key the content is sealed with ('' = in the clear).
	KeyID string `col:"key_id"`
}

// adjacentSQL reads, for each anchor turn (@anchors), the @span turns of its
// session just before and just after it (by time, and by id among turns of the
// same instant) that the principal may see (evidenceVisibleSQL). Each side is an
// ordered scan of the index on (tenant, user, session, occurred_at), so a long
// session costs no more than a short one. A fixed text with bind parameters:
// prepared once per connection.
var adjacentSQL, adjacentParams = bindNames("SELECT a.id::text AS anchor, a.speaker AS anchor_speaker, a.occurred_at AS anchor_at, n.id::text AS id, n.content, n.speaker, n.user_id, n.session_id, n.task_id, n.occurred_at, n.key_id, n.dist " +
	"FROM evidence a CROSS JOIN LATERAL (" +
	"(SELECT x.*, (-row_number() OVER (ORDER BY x.occurred_at DESC, x.id DESC))::int AS dist FROM (" + adjacentSide + " < (a.occurred_at, a.id) ORDER BY e.occurred_at DESC, e.id DESC LIMIT @span) x) " +
	"UNION ALL " +
	"(SELECT x.*, (row_number() OVER (ORDER BY x.occurred_at, x.id))::int AS dist FROM (" + adjacentSide + " > (a.occurred_at, a.id) ORDER BY e.occurred_at, e.id LIMIT @span) x)" +
	") n WHERE a.tenant_id = @tenant AND a.id = ANY(@anchors::uuid[]) AND a.session_id <> ''")

const adjacentSide = "SELECT e.id, e.content, e.speaker, e.user_id, e.session_id, e.task_id, e.occurred_at, e.key_id FROM evidence e " +
	"WHERE " + evidenceVisibleSQL + " AND e.session_id = a.session_id AND (e.occurred_at, e.id)"

// adjacentRows runs adjacentSQL for the anchors on the engine's read pool (its
// statement slot, deadline and cancel, as the recall statement's).
func (e *Engine) adjacentRows(ctx context.Context, p plan, anchors []string, span int) ([]adjacentRow, error) {
	sp := visibilityParams(p.vis)
	if !sp.UserVisible && sp.Session == "" && sp.Task == "" {
		return nil, nil
	}
	sp.Span, sp.Anchors = int64(span), storage.TextArray(anchors)
	args := sp.args(adjacentParams)
	release, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var rows []adjacentRow
	err = e.onConn(ctx, func(c *storage.Conn) error {
		var sc rowScanner[adjacentRow]
		return c.EachRow(ctx, adjacentSQL, args, func(cols []string, vals []driver.Value) error {
			var r adjacentRow
			if err := sc.scan(cols, vals, &r); err != nil {
				return err
			}
			var err error
			if r.Content, err = e.opened(r.KeyID, r.Content); err != nil {
				return err
			}
			r.TenantID = p.vis.TenantID
			rows = append(rows, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("adjacent turns: %w", err)
	}
	return rows, nil
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
	for _, it := range ranked {
		if it.Kind == KindEvidence && it.Scope.SessionID != "" && len(anchors) < fw.AdjacentFrom {
			anchors = append(anchors, it.ID)
		}
	}
	if len(anchors) == 0 {
		return ranked, nil
	}
	fetch := fw.AdjacentSpan
	if fw.AdjacentBursts {
		fetch *= burstFetch
	}
	rows, err := e.adjacentRows(ctx, p, anchors, fetch)
	if err != nil {
		return nil, err
	}
	if fw.AdjacentBursts {
		rows = inBursts(rows, fw.AdjacentSpan)
	}
	lifted := liftAdjacent(fw, ranked, rows)
	if len(lifted) == 0 {
		return ranked, nil
	}
	return placeLifted(ranked, lifted, fw.Lead), nil
}

// burstFetch is how many messages a side are read for each burst of the span
// when the span counts bursts (Fusion.AdjacentBursts): past a burst longer than
// that, the next one is not reached.
const burstFetch = 6

// burstGap is the longest pause inside a burst: one speaker's next message
// after a longer one starts a burst of its own (a user who writes alone, a
// message an hour later).
const burstGap = 30 * time.Second

// inBursts counts the turns next to each anchor in bursts (one speaker's
// messages in a row, each less than burstGap after the one before;
// Fusion.AdjacentBursts): of each burst on a side it keeps the message nearest
// the anchor (the question just before it, the first message of the reply), 1
// burst away, 2 for the next, up to span; the rest of the anchor's own burst,
// and the other messages of each burst, are left out. Where speakers alternate
// on every message, or pause, it changes nothing.
func inBursts(rows []adjacentRow, span int) []adjacentRow {
	type side struct {
		anchor string
		after  bool
	}
	bySide := map[side][]int{}
	for i, r := range rows {
		k := side{r.Anchor, r.Dist > 0}
		bySide[k] = append(bySide[k], i)
	}
	keep := make([]bool, len(rows))
	dist := make([]int, len(rows))
	for k, idx := range bySide {
		sort.Slice(idx, func(a, b int) bool { return abs(rows[idx[a]].Dist) < abs(rows[idx[b]].Dist) })
		bursts, prev, prevAt := 0, rows[idx[0]].AnchorSpeaker, rows[idx[0]].AnchorAt
		for _, i := range idx {
			r := rows[i]
			gap := r.OccurredAt.Sub(prevAt)
			same := r.Speaker == prev && max(gap, -gap) < burstGap
			prev, prevAt = r.Speaker, r.OccurredAt
			if same {
				continue // the anchor's own burst, or a burst's later message
			}
			if bursts++; bursts > span {
				break
			}
			keep[i] = true
			if dist[i] = bursts; !k.after {
				dist[i] = -bursts
			}
		}
	}
	out := rows[:0:0]
	for i, r := range rows {
		if keep[i] {
			r.Dist = dist[i]
			out = append(out, r)
		}
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// liftAdjacent is each turn next to an anchor at the anchor's score times
// fw.Adjacent per turn between them, where that lifts it (never one of the first
// fw.Lead), by id.
func liftAdjacent(fw Fusion, ranked []Item, rows []adjacentRow) map[string]Item {
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
	return lifted
}

// placeLifted takes the lifted items out of ranked and puts each back before
// the first item (after the first lead) that scores below it.
func placeLifted(ranked []Item, lifted map[string]Item, lead int) []Item {
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
	// Highest first, equal scores as tied (tiedBefore), so the order is stable.
	sort.Slice(ids, func(i, j int) bool {
		a, b := lifted[ids[i]], lifted[ids[j]]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return tiedBefore(&a, &b)
	})
	for _, id := range ids {
		it := lifted[id]
		at := len(out)
		for j := min(lead, len(out)); j < len(out); j++ {
			if out[j].Score < it.Score {
				at = j
				break
			}
		}
		out = append(out, Item{})
		copy(out[at+1:], out[at:])
		out[at] = it
	}
	return out
}

func joinWhy(a, b string) string {
	if strings.TrimSpace(a) == "" {
		return b
	}
	return a + "; " + b
}

// opened is content as it is stored, opened when it is sealed at rest (keyID
// names the key; ENGRAM_ENCRYPTION_KEY): a wrong key is an error, never garbage.
func (e *Engine) opened(keyID, content string) (string, error) {
	if keyID == "" {
		return content, nil
	}
	return e.store.DecryptContent(keyID, content)
}
