package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// The structured retriever over a tenant's TENANT facts takes the best of each
// way a fact can match (tenantStructured) instead of sorting every match: its
// ranking must be exactly the full sort's. Random tenants of shared facts
// (predicates, memory types, entities, tasks, importance, some expired) and
// random questions, against the order computed here from every fact.
func TestTenantStructuredIsTheFullSort(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(16, 3))
	now := time.Now().UTC()
	preds := []string{"rule", "tool", "budget", "hours"}
	types := []memory.MemoryType{memory.TypeConstraint, memory.TypePreference, memory.TypeFact, memory.TypeDecision}
	rows := seedTenantFacts(t, st, r, now, preds, types)
	e := New(st, nil, nil, nil, Options{AccessLog: AccessLogOff})
	defer e.Close()
	on, _ := parseRetrievers([]string{RetrieverStructured})
	n := max(e.opts.CandidateLimit/2, 10)
	byID := map[string]scoredFact{}
	for _, rw := range rows {
		byID[rw.id] = scoredFact{tenantFact: rw}
	}
	checked := 0
	for q := 0; q < 60; q++ {
		pq, task := randomStructuredQuestion(r, preds, types)
		vis := Visibility{TenantID: "tS", UserID: "u1", TaskID: task, AsOf: now}
		facts, _, err := e.runRecallSQL(ctx, plan{vis: vis, current: true, parsed: pq, limit: e.opts.CandidateLimit, hops: 1, speaker: "User"}, on, &taskSession{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := fullStructuredSort(rows, pq, task, n)
		// Compared by (priority, importance, validity) in rank order: facts tied on
		// all three may come in either order.
		key := func(x scoredFact) string {
			return fmt.Sprintf("%d/%.2f/%s", x.pri, x.imp, x.from.Format(time.RFC3339Nano))
		}
		var gotKeys []string
		for _, f := range facts {
			if f.Src == RetrieverStructured {
				gotKeys = append(gotKeys, "")
			}
		}
		for _, f := range facts {
			if f.Src != RetrieverStructured {
				continue
			}
			x, ok := byID[f.ID]
			if !ok || f.Rk < 1 || f.Rk > len(gotKeys) {
				t.Fatalf("question %d: structured hit %s at rank %d is not one of the tenant's facts", q, f.ID, f.Rk)
			}
			for _, w := range want {
				if w.id == f.ID {
					x.pri = w.pri
				}
			}
			gotKeys[f.Rk-1] = key(x)
		}
		wantKeys := make([]string, len(want))
		for i, w := range want {
			wantKeys[i] = key(w)
		}
		if !slices.Equal(gotKeys, wantKeys) {
			t.Fatalf("question %d (%+v, task %q):\n got %v\nwant %v", q, *pq, task, gotKeys, wantKeys)
		}
		checked += len(want)
	}
	if checked < 300 {
		t.Fatalf("only %d ranked facts compared", checked)
	}
	t.Logf("%d ranked facts compared over 60 questions", checked)
}

type tenantFact struct {
	id, pred, entity, task string
	typ                    memory.MemoryType
	imp                    float64
	from                   time.Time
	current                bool
}

type scoredFact struct {
	tenantFact
	pri int
}

// seedTenantFacts writes 240 TENANT facts of random predicates, types,
// entities, tasks and importance, a tenth of them expired.
func seedTenantFacts(t *testing.T, st *storage.Store, r *rand.Rand, now time.Time, preds []string, types []memory.MemoryType) []tenantFact {
	var rows []tenantFact
	for i := 0; i < 240; i++ {
		f := &storage.Fact{
			MemoryKey: fmt.Sprintf("k%d", i), Scope: memory.ScopeTenant, MemoryType: types[r.IntN(3)+r.IntN(2)],
			Subject: "company", Predicate: preds[r.IntN(len(preds))], Object: "x", Content: fmt.Sprintf("shared fact %d", i),
			Confidence: 0.9, Importance: float64(r.IntN(5)) / 4, ValidFrom: now.Add(-time.Duration(1+r.IntN(1000)) * time.Hour),
		}
		if r.IntN(6) == 0 {
			f.EntityType, f.EntityID = "Tool", fmt.Sprintf("tool-%d", r.IntN(4))
		}
		if r.IntN(8) == 0 {
			f.TaskID = fmt.Sprintf("task-%d", r.IntN(3))
		}
		expired := r.IntN(10) == 0
		if expired {
			until := now.Add(-time.Minute)
			f.ValidUntil = &until
		}
		out, err := st.WriteFact(context.Background(), "tS", f, storage.WriteCurrent, f.Content)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, tenantFact{out.ID, f.Predicate, f.EntityID, f.TaskID, f.MemoryType, f.Importance, out.ValidFrom, !expired})
	}
	return rows
}

// randomStructuredQuestion names some predicates, memory types, an entity and
// a task at random.
func randomStructuredQuestion(r *rand.Rand, preds []string, types []memory.MemoryType) (*ParsedQuery, string) {
	pq := &ParsedQuery{}
	for _, p := range preds {
		if r.IntN(3) == 0 {
			pq.Predicates = append(pq.Predicates, p)
		}
	}
	for _, ty := range types {
		if r.IntN(3) == 0 {
			pq.MemoryTypes = append(pq.MemoryTypes, ty)
		}
	}
	if r.IntN(3) == 0 {
		pq.EntityIDs = []string{fmt.Sprintf("tool-%d", r.IntN(4))}
	}
	task := ""
	if r.IntN(3) == 0 {
		task = fmt.Sprintf("task-%d", r.IntN(3))
	}
	return pq, task
}

// fullStructuredSort is the structured retriever's answer worked out in Go: the
// current facts that match, by priority, importance and validity, the best n.
func fullStructuredSort(rows []tenantFact, pq *ParsedQuery, task string, n int) []scoredFact {
	types := pq.MemoryTypes
	if task != "" { // a task's recall also asks for its constraints and preferences (stmtArgs)
		types = addUnique(addUnique(slices.Clone(types), memory.TypeConstraint), memory.TypePreference)
	}
	b := func(ok bool) int {
		if ok {
			return 1
		}
		return 0
	}
	var want []scoredFact
	for _, rw := range rows {
		pri := 4*b(slices.Contains(pq.Predicates, rw.pred)) + 4*b(rw.entity != "" && slices.Contains(pq.EntityIDs, rw.entity)) +
			2*b(task != "" && rw.task == task) + b(slices.Contains(types, rw.typ))
		if rw.current && pri > 0 {
			want = append(want, scoredFact{rw, pri})
		}
	}
	slices.SortFunc(want, func(a, b scoredFact) int {
		if a.pri != b.pri {
			return b.pri - a.pri
		}
		if a.imp != b.imp {
			if a.imp > b.imp {
				return -1
			}
			return 1
		}
		return b.from.Compare(a.from)
	})
	return want[:min(len(want), n)]
}
