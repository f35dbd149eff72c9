package recall

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/engramhq/engram/storage"
)

// Every turn's meaning (Fusion.SemanticAll): the semantic retriever returns its
// best turns with their similarity to the question; a turn only the keyword
// retriever found (by a rare word of the question: "research" in "What did
// Caroline research?") would count no meaning at all, and chat merely like the
// question ("Cool! What did it look like?") outranks it. The lexical part of the
// statement runs before the question is embedded, so those turns' similarity is
// read after it, in one statement by id.

// similarSQL is the similarity to the question of each of @turns, as the
// semantic retriever scores a turn: the nearer of the turn and its best
// sentence. The turns were found by the recall statement, so they are visible.
var similarSQL, similarParams = bindNames("SELECT e.id::text AS id, 1 - least(e.embedding <=> @query_vector::vector, " + bestSentenceSQL("e.id") + ") AS sim " +
	"FROM evidence e WHERE e.tenant_id = @tenant AND e.id = ANY(@turns::uuid[]) AND e.embedding IS NOT NULL")

// similarRow is one row of similarSQL.
type similarRow struct {
	ID  string  `col:"id"`
	Sim float64 `col:"sim"`
}

// similarities sets Sim on each of evs that the semantic retriever did not
// return, read on the engine's read pool; evs the semantic retriever returned
// take their retriever's score. Without the question's vector it does nothing.
func (e *Engine) similarities(ctx context.Context, p plan, evs []evidenceRow) error {
	if p.vec == nil || len(evs) == 0 {
		return nil
	}
	sims := map[string]float64{}
	for _, ev := range evs {
		if ev.Src == RetrieverSemantic && ev.D != nil {
			sims[ev.ID] = 1 - *ev.D
		}
	}
	var ids []string
	for _, ev := range evs {
		if _, ok := sims[ev.ID]; !ok {
			sims[ev.ID] = noSim
			ids = append(ids, ev.ID)
		}
	}
	if len(ids) > 0 {
		sp := stmtParams{Tenant: p.vis.TenantID, QueryVector: p.vec.String(), Turns: storage.TextArray(ids)}
		release, err := e.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		err = e.onConn(ctx, func(c *storage.Conn) error {
			var sc rowScanner[similarRow]
			return c.EachRow(ctx, similarSQL, sp.args(similarParams), func(cols []string, vals []driver.Value) error {
				var r similarRow
				if err := sc.scan(cols, vals, &r); err != nil {
					return err
				}
				sims[r.ID] = r.Sim
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("similarity of the turns found: %w", err)
		}
	}
	for i := range evs {
		evs[i].Sim = sims[evs[i].ID]
	}
	return nil
}

// noSim is the Sim of a turn whose similarity is not known (no vector).
const noSim = -9.0
