package eval

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// Ks are the cut-offs of recall@k.
var Ks = []int{1, 5, 10}

// ProbeScore is what one probe contributes to the figures.
type ProbeScore struct {
	HasRecall   bool            `json:"has_recall"`   // the probe has must_recall expectations
	RecallAt    map[int]float64 `json:"recall_at"`    // share of expectations met in the top k
	PrecisionAt float64         `json:"precision_at"` // relevant items / items in the top K
	RR          float64         `json:"rr"`           // reciprocal rank of the first relevant item
	HasEvidence bool            `json:"has_evidence"`
	EvidenceAt  map[int]float64 `json:"evidence_at"` // share of evidence turns found in the top k
	HasMustNot  bool            `json:"has_must_not"`
	FalseRecall bool            `json:"false_recall"` // a must_not_recall memory came back
	Stale       bool            `json:"stale"`        // a superseded, expired or retracted fact came back as current
	ScopeLeak   bool            `json:"scope_leak"`   // an item outside the principal's scopes came back
	TenantLeaks int             `json:"tenant_leaks"` // items of another tenant
	Facts       int             `json:"facts"`        // fact items in the top K
	Unsupported int             `json:"unsupported"`  // of those, facts without evidence
	Failed      bool            `json:"failed"`
}

func scoreFailed(p Probe) ProbeScore {
	s := ProbeScore{HasRecall: len(p.MustRecall) > 0, HasEvidence: len(p.Evidence) > 0, HasMustNot: len(p.MustNotRecall) > 0,
		RecallAt: map[int]float64{}, EvidenceAt: map[int]float64{}, Failed: true}
	for _, k := range Ks {
		s.RecallAt[k], s.EvidenceAt[k] = 0, 0
	}
	return s
}

// row is what the database says about a returned item, read without a tenant
// filter (ids are unique), so an item of another tenant is seen as such.
type row struct {
	Found        bool
	TenantID     string
	Scope        memory.Scope
	UserID       string
	DepartmentID string
	AgentID      string
	SessionID    string
	TaskID       string
	Status       memory.FactStatus
	ValidFrom    time.Time
	ValidUntil   *time.Time
	EvidenceIDs  []string
}

func lookup(ctx context.Context, st *storage.Store, items []recall.Item) (map[string]row, error) {
	var factIDs, evIDs []string
	for _, it := range items {
		switch it.Kind {
		case recall.KindFact:
			factIDs = append(factIDs, it.ID)
		case recall.KindEvidence:
			evIDs = append(evIDs, it.ID)
		}
	}
	out := map[string]row{}
	if len(factIDs) > 0 {
		fs, err := st.FactsByIDAnyTenant(ctx, factIDs)
		if err != nil {
			return nil, fmt.Errorf("look up facts: %w", err)
		}
		for _, f := range fs {
			out["fact:"+f.ID] = row{Found: true, TenantID: f.TenantID, Scope: f.Scope, UserID: f.UserID, DepartmentID: f.DepartmentID,
				AgentID: f.AgentID, SessionID: f.SessionID, TaskID: f.TaskID, Status: f.Status, ValidFrom: f.ValidFrom, ValidUntil: f.ValidUntil}
		}
		links, err := st.SupportingEvidenceAnyTenant(ctx, factIDs)
		if err != nil {
			return nil, fmt.Errorf("look up fact evidence: %w", err)
		}
		for factID, evIDs := range links {
			r := out["fact:"+factID]
			r.EvidenceIDs = append(r.EvidenceIDs, evIDs...)
			out["fact:"+factID] = r
		}
	}
	if len(evIDs) > 0 {
		evs, err := st.EvidenceByIDAnyTenant(ctx, evIDs)
		if err != nil {
			return nil, fmt.Errorf("look up evidence: %w", err)
		}
		for _, e := range evs {
			out["evidence:"+e.ID] = row{Found: true, TenantID: e.TenantID, UserID: e.UserID, DepartmentID: e.DepartmentID,
				AgentID: e.AgentID, SessionID: e.SessionID, TaskID: e.TaskID, ValidFrom: e.OccurredAt}
		}
	}
	return out, nil
}

type probeContext struct {
	probe    Probe
	tenant   string
	k        int
	items    []recall.Item
	rows     map[string]row
	evidence func(turn string) []string
}

func (pc *probeContext) row(it recall.Item) row { return pc.rows[string(it.Kind)+":"+it.ID] }

// evidenceIDs of an item: itself for evidence; for a fact, what the item says and
// what the database links.
func (pc *probeContext) evidenceIDs(it recall.Item) []string {
	if it.Kind == recall.KindEvidence {
		return []string{it.ID}
	}
	return append(append([]string{}, it.EvidenceIDs...), pc.row(it).EvidenceIDs...)
}

// stands says whether the item is, or stands on, one of the evidence ids.
func (pc *probeContext) stands(it recall.Item, ids []string) bool {
	return slices.ContainsFunc(pc.evidenceIDs(it), func(id string) bool { return slices.Contains(ids, id) })
}

func (pc *probeContext) matches(e Expect, it recall.Item, defaultKind string) bool {
	kind := e.Kind
	if kind == "" {
		kind = defaultKind
	}
	if kind != "any" && string(it.Kind) != kind {
		return false
	}
	if e.Key != "" && it.MemoryKey != e.Key {
		return false
	}
	if e.Predicate != "" && it.Predicate != e.Predicate {
		return false
	}
	if e.Scope != "" && !strings.EqualFold(string(it.Scope.Scope), e.Scope) {
		return false
	}
	if e.Object != "" && schema.NormalizeValue(it.Object) != schema.NormalizeValue(e.Object) {
		return false
	}
	if e.Content != "" {
		c := strings.ToLower(e.Content)
		if !strings.Contains(strings.ToLower(it.Content), c) && !strings.Contains(strings.ToLower(it.Object), c) {
			return false
		}
	}
	if e.Turn != "" {
		if !pc.stands(it, pc.evidence(e.Turn)) {
			return false
		}
	}
	return true
}

// leak says whether an item lies outside what the principal may see, and why.
func (pc *probeContext) leak(it recall.Item) (tenant bool, scope string) {
	r := pc.row(it)
	if !r.Found {
		return false, "" // unknown to the database: counted as unsupported, not as a leak
	}
	p := pc.probe
	if r.TenantID != pc.tenant {
		return true, "other tenant"
	}
	if it.Kind == recall.KindEvidence {
		if r.UserID != p.User {
			return false, "another user's turn"
		}
		return false, ""
	}
	switch r.Scope {
	case memory.ScopeUser:
		if r.UserID != p.User {
			return false, "another user's fact"
		}
	case memory.ScopeDepartment:
		if r.DepartmentID != p.Department || p.Department == "" {
			return false, "another department's fact"
		}
	case memory.ScopeTask:
		if r.TaskID != p.Task || p.Task == "" || r.UserID != p.User {
			return false, "another task's fact"
		}
	case memory.ScopeSession:
		if r.SessionID != p.Session || p.Session == "" || r.UserID != p.User {
			return false, "another session's fact"
		}
	case memory.ScopeAgent:
		return false, "an agent's fact"
	}
	return false, ""
}

// stale says whether a fact item was not in force at the probe's as_of.
func (pc *probeContext) stale(it recall.Item) bool {
	if it.Kind != recall.KindFact {
		return false
	}
	r := pc.row(it)
	if !r.Found {
		return false
	}
	at := pc.probe.When()
	if at.IsZero() {
		at = time.Now()
	}
	if r.ValidFrom.After(at) {
		return true
	}
	if r.ValidUntil != nil && !r.ValidUntil.After(at) {
		return true
	}
	return false
}

func (pc *probeContext) score() (ProbeScore, []string, []string, []ItemSummary) {
	p := pc.probe
	s := ProbeScore{HasRecall: len(p.MustRecall) > 0, HasEvidence: len(p.Evidence) > 0, HasMustNot: len(p.MustNotRecall) > 0,
		RecallAt: map[int]float64{}, EvidenceAt: map[int]float64{}}
	var misses, wrong []string
	items := pc.items
	// Rank of the first item meeting each expectation (0: none).
	ranks := make([]int, len(p.MustRecall))
	relevant := make([]bool, len(items))
	for i, it := range items {
		for j, e := range p.MustRecall {
			if pc.matches(e, it, "any") {
				relevant[i] = true
				if ranks[j] == 0 {
					ranks[j] = i + 1
				}
			}
		}
	}
	evRanks := make([]int, len(p.Evidence))
	for j, turn := range p.Evidence {
		ids := pc.evidence(turn)
		for i, it := range items {
			if pc.stands(it, ids) {
				evRanks[j] = i + 1
				break
			}
		}
	}
	for _, k := range Ks {
		s.RecallAt[k] = shareWithin(ranks, k)
		s.EvidenceAt[k] = shareWithin(evRanks, k)
	}
	for j, r := range ranks {
		if r == 0 || r > pc.k {
			misses = append(misses, "must recall "+p.MustRecall[j].String())
		}
	}
	for j, r := range evRanks {
		if r == 0 || r > pc.k {
			where := "not in the list"
			if r > 0 {
				where = "at " + strconv.Itoa(r)
			}
			misses = append(misses, "evidence turn "+p.Evidence[j]+" ("+where+")")
		}
	}
	top := min(len(items), pc.k)
	nrel := 0
	for i := 0; i < top; i++ {
		if relevant[i] {
			nrel++
			if s.RR == 0 {
				s.RR = 1 / float64(i+1)
			}
		}
	}
	if top > 0 {
		s.PrecisionAt = float64(nrel) / float64(top)
	}
	var summaries []ItemSummary
	for i := 0; i < top; i++ {
		it := items[i]
		var flags []string
		for _, e := range p.MustNotRecall {
			if pc.matches(e, it, "fact") {
				s.FalseRecall = true
				flags = append(flags, "must-not("+e.Reason+")")
				wrong = append(wrong, fmt.Sprintf("#%d %s matches must_not_recall %s (%s)", i+1, short(it.Content), e, e.Reason))
				if StaleReasons[e.Reason] {
					s.Stale = true
				}
				if LeakReasons[e.Reason] {
					s.ScopeLeak = true
				}
			}
		}
		if pc.stale(it) {
			s.Stale = true
			flags = append(flags, "stale")
			wrong = append(wrong, fmt.Sprintf("#%d %s is not in force at %s", i+1, short(it.Content), p.When().Format(time.RFC3339)))
		}
		tl, why := pc.leak(it)
		if tl {
			s.TenantLeaks++
			s.ScopeLeak = true
			flags = append(flags, "TENANT-LEAK")
			wrong = append(wrong, fmt.Sprintf("#%d %s belongs to another tenant", i+1, short(it.Content)))
		} else if why != "" {
			s.ScopeLeak = true
			flags = append(flags, "scope-leak")
			wrong = append(wrong, fmt.Sprintf("#%d %s: %s", i+1, short(it.Content), why))
		}
		if it.Kind == recall.KindFact {
			s.Facts++
			if len(pc.evidenceIDs(it)) == 0 {
				s.Unsupported++
				flags = append(flags, "unsupported")
			}
		}
		if relevant[i] {
			flags = append(flags, "relevant")
		}
		summaries = append(summaries, ItemSummary{Kind: string(it.Kind), ID: it.ID, Content: short(it.Content),
			Scope: string(it.Scope.Scope), Status: string(it.Status), Flags: strings.Join(flags, ","), Score: it.Score, Why: it.Why})
	}
	return s, misses, wrong, summaries
}

func shareWithin(ranks []int, k int) float64 {
	if len(ranks) == 0 {
		return 0
	}
	n := 0
	for _, r := range ranks {
		if r > 0 && r <= k {
			n++
		}
	}
	return float64(n) / float64(len(ranks))
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:57]) + "…"
	}
	return s
}
