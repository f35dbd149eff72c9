package eval

import (
	"context"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/uptrace/bun"

	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// Baseline is a deliberately plain recaller: the visible facts in force at as_of and
// the principal's own turns, ranked by shared character bigrams and words with the
// question. It is the floor the recall engine is compared with (--recall baseline),
// and it lets the harness be tested on its own.
type Baseline struct{ st *storage.Store }

// NewBaseline is a RecallerFactory.
func NewBaseline(st *storage.Store, _ llm.Embedder) (Recaller, error) { return &Baseline{st: st}, nil }

// Recall implements Recaller.
func (b *Baseline) Recall(ctx context.Context, req recall.Request) (recall.Response, error) {
	at := req.AsOf
	if at.IsZero() {
		at = time.Now()
	}
	p := req.Principal
	var facts []storage.Fact
	q := b.st.DB().NewSelect().Model(&facts).ExcludeColumn("embedding").
		Where("tenant_id = ?", p.TenantID).
		Where("valid_from <= ? AND (valid_until IS NULL OR valid_until > ?)", at, at).
		Where("status IN ('ACTIVE', 'SUPERSEDED', 'EXPIRED')").
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			q = q.WhereOr("scope = 'TENANT'")
			q = q.WhereOr("scope = 'USER' AND user_id = ?", p.UserID)
			if p.DepartmentID != "" {
				q = q.WhereOr("scope = 'DEPARTMENT' AND department_id = ?", p.DepartmentID)
			}
			if req.TaskID != "" {
				q = q.WhereOr("scope = 'TASK' AND task_id = ? AND user_id = ?", req.TaskID, p.UserID)
			}
			if req.SessionID != "" {
				q = q.WhereOr("scope = 'SESSION' AND session_id = ? AND user_id = ?", req.SessionID, p.UserID)
			}
			return q
		})
	if err := q.Scan(ctx); err != nil {
		return recall.Response{}, err
	}
	var evs []storage.Evidence
	if err := b.st.DB().NewSelect().Model(&evs).ExcludeColumn("embedding").
		Where("tenant_id = ? AND user_id = ? AND occurred_at <= ?", p.TenantID, p.UserID, at).Scan(ctx); err != nil {
		return recall.Response{}, err
	}
	qt := terms(req.Query)
	var items []recall.Item
	for _, f := range facts {
		items = append(items, recall.Item{Kind: recall.KindFact, ID: f.ID, Content: f.Content, MemoryType: f.MemoryType, Scope: f.ScopeRef(),
			Status: f.Status, MemoryKey: f.MemoryKey, Predicate: f.Predicate, Object: f.Object, Revision: f.Revision, ValidFrom: f.ValidFrom,
			ValidUntil: f.ValidUntil, Confidence: f.Confidence, Score: overlap(qt, terms(f.Content)) + 0.01, Retrievers: []string{"baseline"}, OccurredAt: f.ObservedAt})
	}
	for _, e := range evs {
		items = append(items, recall.Item{Kind: recall.KindEvidence, ID: e.ID, Content: e.Content,
			Scope: memory.ScopeRef{Scope: memory.ScopeUser, UserID: e.UserID}, Score: overlap(qt, terms(e.Content)),
			Retrievers: []string{"baseline"}, OccurredAt: e.OccurredAt, ValidFrom: e.OccurredAt})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Score != items[j].Score {
			return items[i].Score > items[j].Score
		}
		return items[i].OccurredAt.After(items[j].OccurredAt)
	})
	k := req.K
	if k <= 0 {
		k = 10
	}
	if len(items) > k {
		items = items[:k]
	}
	return recall.Response{Items: items, AsOf: at}, nil
}

// terms are the lower-cased words and CJK bigrams of s.
func terms(s string) map[string]bool {
	out := map[string]bool{}
	var word []rune
	var prev rune
	flush := func() {
		if len(word) > 1 {
			out[string(word)] = true
		}
		word = word[:0]
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.Is(unicode.Han, r):
			flush()
			if prev != 0 {
				out[string([]rune{prev, r})] = true
			}
			prev = r
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			prev = 0
			word = append(word, r)
		default:
			prev = 0
			flush()
		}
	}
	flush()
	return out
}

func overlap(q, d map[string]bool) float64 {
	if len(q) == 0 {
		return 0
	}
	n := 0
	for t := range q {
		if d[t] {
			n++
		}
	}
	return float64(n) / float64(len(q))
}
