package recall

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"

	"github.com/engramhq/engram/storage"
)

// Feedback from the leaders (Fusion.Feedback): the turns most like the
// question and the best turns together, by cosine to the question's vector plus
// the mean of the leaders' vectors (Rocchio's pseudo-relevance feedback on the
// dense retriever). An answer spread over several turns ("What kind of music
// does Dave listen to?": classic rock in one session, a festival's bands in
// another) shares its topic with the part that was found more than with the
// question's words. What it says counts in the score below the leaders only (as
// the context does: Fusion.Lead), and only for turns that match the question on
// their own or by their meaning (cosine to the question at least
// SemanticMatch): it fills the list, it does not pick the first item nor make
// a turn merely like the leaders relevant.

// sourceFeedback is the retriever name of the feedback pass.
const sourceFeedback = "feedback"

// feedbackSQL is the feedback pass: the @limit visible turns nearest the
// question's vector plus the mean of @leaders' vectors (cosine does not mind the
// sum's length; a turn's distance is the nearer of the turn's and its best
// sentence's), by an exact scan for a user with few turns and a walk of the
// index three times as long for one with many (as the semantic retriever:
// evidenceSemanticSQL, heavyWalk), with
// each turn's columns, its similarity to the question itself (the nearer of the
// turn and its best sentence, as the semantic retriever scores it) and whether it
// backs only superseded values.
var feedbackSQL, feedbackParams = bindNames("WITH fb AS (SELECT @query_vector::vector + avg(l.embedding) AS v FROM evidence l " +
	"WHERE l.tenant_id = @tenant AND l.id = ANY(@leaders::uuid[]) AND l.embedding IS NOT NULL), " +
	"many_turns AS (SELECT (" + manyTurnsSQL + ") AS many), " +
	"near AS (SELECT id, tid, d FROM ((SELECT e.id, e.ctid AS tid, least(e.embedding <=> (SELECT v FROM fb), " + sentenceDistSQL("e.id", "(SELECT v FROM fb)") + ") AS d FROM evidence e " +
	"WHERE NOT (SELECT many FROM many_turns) AND (SELECT v FROM fb) IS NOT NULL AND " + evidenceVisibleSQL + " AND e.embedding IS NOT NULL ORDER BY 3 LIMIT @limit) " +
	"UNION ALL (SELECT w.id, w.tid, least(w.d, " + sentenceDistSQL("w.id", "(SELECT v FROM fb)") + ") FROM evidence_walk(@tenant, @user, (SELECT v FROM fb), @as_of, 3 * @limit::int) w " +
	"WHERE (SELECT many FROM many_turns) AND (SELECT v FROM fb) IS NOT NULL)) y ORDER BY d LIMIT @limit) " +
	"SELECT e.id::text AS id, e.content, e.speaker, e.user_id, e.department_id, e.agent_id, e.session_id, e.task_id, e.occurred_at, e.importance, e.key_id, n.d AS fd, " +
	"1 - least(e.embedding <=> @query_vector::vector, " + bestSentenceSQL("e.id") + ") AS sim, " + staleSQL + " AS stale " +
	"FROM near n JOIN evidence e ON e.ctid = n.tid AND e.tenant_id = @tenant AND e.id = n.id ORDER BY n.d, e.id")

// feedbackRow is one row of feedbackSQL.
type feedbackRow struct {
	evidenceRow
	// KeyID names the key the content is sealed with ('' = in the clear).
	KeyID string `col:"key_id"`
	// FD is the distance to the question and the leaders together, QSim the
	// similarity to the question.
	FD   float64 `col:"fd"`
	QSim float64 `col:"sim"`
}

// feedback runs the feedback pass from the best Fusion.FeedbackFrom turns of
// ranked, as rows of source "feedback" (ranked by their nearness to the question
// and the leaders together, their Sim the similarity to the question itself).
// Without the question's vector, or with no turn among the best, it returns
// nothing.
func (e *Engine) feedback(ctx context.Context, p plan, ranked []Item) ([]evidenceRow, error) {
	if p.vec == nil {
		return nil, nil
	}
	var leaders []string
	for _, it := range ranked {
		if len(leaders) == e.opts.Fusion.FeedbackFrom {
			break
		}
		if it.Kind == KindEvidence && !slices.Contains(leaders, it.ID) {
			leaders = append(leaders, it.ID)
		}
	}
	sp := visibilityParams(p.vis)
	if len(leaders) == 0 || (!sp.UserVisible && sp.Session == "" && sp.Task == "") {
		return nil, nil
	}
	sp.QueryVector, sp.Leaders, sp.Limit = p.vec.String(), storage.TextArray(leaders), int64(p.limit)
	release, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var out []evidenceRow
	err = e.onConn(ctx, func(c *storage.Conn) error {
		var sc rowScanner[feedbackRow]
		return c.EachRow(ctx, feedbackSQL, sp.args(feedbackParams), func(cols []string, vals []driver.Value) error {
			var r feedbackRow
			if err := sc.scan(cols, vals, &r); err != nil {
				return err
			}
			var err error
			if r.Content, err = e.opened(r.KeyID, r.Content); err != nil {
				return err
			}
			ev := r.evidenceRow
			ev.TenantID, ev.Src, ev.Rk, ev.D, ev.Sim = p.vis.TenantID, sourceFeedback, len(out)+1, &r.FD, r.QSim
			out = append(out, ev)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("feedback from the best turns: %w", err)
	}
	return out, nil
}
