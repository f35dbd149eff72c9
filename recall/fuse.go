package recall

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

type cand struct {
	item    Item
	ranks   map[string]int
	imp     float64
	boosts  []string
	entity  string
	subject string
}

// fuse merges what the retrievers found: reciprocal-rank fusion (k=60) over each
// retriever's ranks, then boosts for recency, importance, confidence, the task
// and session at hand and what the parser recognised; one revision per memory key;
// a task-scope fact leads the facts of the same predicate it narrows.
func (e *Engine) fuse(p plan, req Request, facts []factRow, evs []evidenceRow, recent []storage.Turn) []Item {
	k := e.opts.RRFK
	byID := map[string]*cand{}
	var order []string
	get := func(kind Kind, id string) (*cand, bool) {
		key := string(kind) + ":" + id
		c, ok := byID[key]
		if !ok {
			c = &cand{ranks: map[string]int{}}
			byID[key] = c
			order = append(order, key)
		}
		return c, ok
	}
	addRank := func(c *cand, src string, rk int) {
		if rk <= 0 {
			rk = 1
		}
		if old, ok := c.ranks[src]; !ok || rk < old {
			c.ranks[src] = rk
		}
	}
	for _, f := range facts {
		c, seen := get(KindFact, f.ID)
		if !seen {
			ref := memory.ScopeRef{Scope: f.Scope, DepartmentID: f.DepartmentID, UserID: f.UserID, AgentID: f.AgentID, SessionID: f.SessionID, TaskID: f.TaskID}
			c.item = Item{
				Kind: KindFact, ID: f.ID, Content: f.Content, MemoryType: f.MemoryType, Scope: ref, Status: f.Status,
				MemoryKey: f.MemoryKey, Predicate: f.Predicate, Object: f.Object, EntityType: f.EntityType, EntityID: f.EntityID, Revision: f.Revision,
				ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil, Confidence: f.Confidence, EvidenceIDs: f.Evidence, OccurredAt: f.ObservedAt,
			}
			c.imp, c.entity, c.subject = f.Importance, f.EntityID, f.Subject
		}
		addRank(c, f.Src, f.Rk)
	}
	for _, ev := range evs {
		c, seen := get(KindEvidence, ev.ID)
		if !seen {
			ref := memory.ScopeRef{Scope: memory.ScopeUser, UserID: ev.UserID, SessionID: ev.SessionID, TaskID: ev.TaskID}
			c.item = Item{Kind: KindEvidence, ID: ev.ID, Content: ev.Content, Scope: ref, ValidFrom: ev.OccurredAt, OccurredAt: ev.OccurredAt, Confidence: 1}
			c.imp = ev.Importance
		}
		addRank(c, ev.Src, ev.Rk)
	}
	// Recent turns of the session, newest first.
	for i := len(recent) - 1; i >= 0; i-- {
		tr := recent[i]
		c, seen := get(KindEvidence, tr.EvidenceID)
		if !seen {
			ref := memory.ScopeRef{Scope: memory.ScopeSession, UserID: p.vis.UserID, SessionID: p.vis.SessionID}
			c.item = Item{Kind: KindEvidence, ID: tr.EvidenceID, Content: tr.Text, Scope: ref, ValidFrom: tr.At, OccurredAt: tr.At, Confidence: 1}
			c.imp = 0.3
		}
		addRank(c, RetrieverRecent, len(recent)-i)
	}

	// Evidence that a candidate fact already stands on adds little on its own.
	backing := map[string]bool{}
	for _, key := range order {
		c := byID[key]
		if c.item.Kind == KindFact {
			for _, id := range c.item.EvidenceIDs {
				backing[id] = true
			}
		}
	}
	q := p.parsed
	out := make([]*cand, 0, len(order))
	for _, key := range order {
		c := byID[key]
		var rrf float64
		var why []string
		srcs := make([]string, 0, len(c.ranks))
		for src := range c.ranks {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		for _, src := range srcs {
			rk := c.ranks[src]
			w := 1.0
			switch src {
			case RetrieverGraph, RetrieverStructured:
				w = 1.2
			case RetrieverRecent:
				w = 0.8
			}
			rrf += w / (k + float64(rk))
			why = append(why, fmt.Sprintf("%s #%d", src, rk))
		}
		c.item.Retrievers = srcs
		it := &c.item
		age := p.vis.AsOf.Sub(it.OccurredAt)
		if it.Kind == KindFact && it.ValidFrom.After(it.OccurredAt) {
			age = p.vis.AsOf.Sub(it.ValidFrom)
		}
		recency := math.Exp(-math.Max(age.Hours(), 0) / (24 * 30))
		score := rrf * (1 + 0.25*recency + 0.25*c.imp + 0.25*it.Confidence)
		boost := func(f float64, reason string) {
			score *= f
			c.boosts = append(c.boosts, reason)
		}
		if it.Kind == KindFact {
			score *= 1.1
			if it.Scope.Scope == memory.ScopeTask && it.Scope.TaskID == p.vis.TaskID && p.vis.TaskID != "" {
				boost(1.3, "the task at hand")
			}
			if it.Scope.Scope == memory.ScopeSession && it.Scope.SessionID == p.vis.SessionID && p.vis.SessionID != "" {
				boost(1.1, "this session")
			}
			if slices.Contains(q.Predicates, it.Predicate) {
				boost(1.3, "predicate "+it.Predicate+" asked for")
			}
			if c.entity != "" && slices.Contains(q.EntityIDs, c.entity) {
				boost(1.3, "entity "+c.entity+" named")
			}
			if slices.Contains(q.MemoryTypes, it.MemoryType) {
				boost(1.15, strings.ToLower(string(it.MemoryType))+" asked for")
			}
			if slices.Contains(q.Scopes, it.Scope.Scope) {
				boost(1.1, "scope cue")
			}
		} else if backing[it.ID] {
			boost(0.6, "backs a fact already shown")
		}
		if q.From != nil && q.To != nil && !it.OccurredAt.Before(*q.From) && !it.OccurredAt.After(*q.To) {
			boost(1.25, "in the time asked about")
		}
		if q.Latest {
			score *= 1 + 0.2*recency
		}
		it.Score = score
		it.Why = strings.Join(append(why, c.boosts...), "; ")
		out = append(out, c)
	}

	// One revision per memory key: the current one (or, as of a past time, the one
	// valid then; the latest by validity if several are).
	best := map[string]*cand{}
	for _, c := range out {
		if c.item.Kind != KindFact {
			continue
		}
		b, ok := best[c.item.MemoryKey]
		if !ok || better(c, b) {
			best[c.item.MemoryKey] = c
		}
	}
	kept := out[:0]
	for _, c := range out {
		if c.item.Kind == KindFact {
			b := best[c.item.MemoryKey]
			if b != c {
				if c.item.Score > b.item.Score {
					b.item.Score = c.item.Score
				}
				continue
			}
		}
		kept = append(kept, c)
	}
	out = kept

	// Narrower scope wins for the task at hand: a TASK fact leads every other fact
	// of the same subject and predicate; both are kept, with their scopes shown.
	if p.vis.TaskID != "" {
		group := map[string][]*cand{}
		for _, c := range out {
			if c.item.Kind == KindFact && c.item.Predicate != "" {
				g := strings.ToLower(c.subject) + "|" + c.item.Predicate
				group[g] = append(group[g], c)
			}
		}
		for _, g := range group {
			var task *cand
			top := 0.0
			for _, c := range g {
				if c.item.Scope.Scope == memory.ScopeTask && c.item.Scope.TaskID == p.vis.TaskID {
					task = c
				}
				top = math.Max(top, c.item.Score)
			}
			if task == nil || len(g) < 2 {
				continue
			}
			task.item.Score = math.Max(task.item.Score, top*1.01)
			task.item.Why += "; task scope leads"
			for _, c := range g {
				if c != task {
					c.item.Why += fmt.Sprintf("; overridden for task %s by %s", p.vis.TaskID, short(task.item.ID))
				}
			}
		}
	}

	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].item, out[j].item
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.Kind != b.Kind {
			return a.Kind == KindFact
		}
		return a.ID < b.ID
	})
	items := make([]Item, len(out))
	for i, c := range out {
		items[i] = c.item
	}
	return items
}

// better prefers an ACTIVE revision, then the later validity, then the higher
// revision.
func better(a, b *cand) bool {
	ai, bi := a.item, b.item
	if (ai.Status == memory.FactActive) != (bi.Status == memory.FactActive) {
		return ai.Status == memory.FactActive
	}
	if !ai.ValidFrom.Equal(bi.ValidFrom) {
		return ai.ValidFrom.After(bi.ValidFrom)
	}
	return ai.Revision > bi.Revision
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
