package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/pgvector/pgvector-go"
	"go.temporal.io/sdk/activity"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// MaintenanceActivities are the steps of the scheduled maintenance workflows and of
// key rotation.
type MaintenanceActivities struct {
	Store      *storage.Store
	Summariser llm.Summariser     // nil: extractive
	Embedder   embedding.Embedder // nil: summary facts get no vector
	Schemas    schema.Source      // nil: built-in schemas
}

// ExpireInput runs expiry as of Now (the workflow's time, so tests can skip time).
type ExpireInput struct {
	Now   time.Time `json:"now"`
	Batch int       `json:"batch,omitempty"`
}

// ExpireFacts turns every ACTIVE fact whose valid_until passed into EXPIRED.
func (a *MaintenanceActivities) ExpireFacts(ctx context.Context, in ExpireInput) (int, error) {
	total := 0
	for {
		n, err := a.Store.ExpireDue(ctx, in.Now, in.Batch)
		total += n
		activity.RecordHeartbeat(ctx, total)
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// DecayInput is one round of importance decay and evidence pruning.
type DecayInput struct {
	Now   time.Time           `json:"now"`
	Decay storage.DecayPolicy `json:"decay"`
	Prune storage.PrunePolicy `json:"prune"`
	// PruneEnabled turns pruning on (it deletes evidence).
	PruneEnabled bool `json:"prune_enabled"`
}

// DecayResult counts what a round changed.
type DecayResult struct {
	Decayed        int `json:"decayed"`
	PrunedEvidence int `json:"pruned_evidence"`
	PrunedEvents   int `json:"pruned_events"`
}

// DecayAndPrune lowers the importance of idle facts and prunes low-value
// evidence-only episodes.
func (a *MaintenanceActivities) DecayAndPrune(ctx context.Context, in DecayInput) (DecayResult, error) {
	var r DecayResult
	var err error
	if r.Decayed, err = a.Store.DecayImportance(ctx, in.Now, in.Decay, 100000); err != nil {
		return r, err
	}
	if !in.PruneEnabled {
		return r, nil
	}
	for {
		ev, evt, err := a.Store.PruneEvidence(ctx, in.Now, in.Prune, 500)
		r.PrunedEvidence += ev
		r.PrunedEvents += evt
		activity.RecordHeartbeat(ctx, r)
		if err != nil || ev == 0 {
			return r, err
		}
	}
}

// ConsolidateInput configures one consolidation run.
type ConsolidateInput struct {
	Now time.Time `json:"now"`
	// MinFacts is how many fine-grained facts make a group worth folding (default 5).
	MinFacts int `json:"min_facts,omitempty"`
	// MinAge keeps recent facts out: only facts observed before Now-MinAge fold.
	MinAge time.Duration `json:"min_age,omitempty"`
	// Types are the episodic memory types folded (default EVENT, EXPERIENCE).
	Types     []memory.MemoryType `json:"types,omitempty"`
	MaxGroups int                 `json:"max_groups,omitempty"`
	// SummaryRunes bounds a summary (default 400).
	SummaryRunes int `json:"summary_runes,omitempty"`
}

// ConsolidateResult says what was folded.
type ConsolidateResult struct {
	Groups    int      `json:"groups"`
	Sources   int      `json:"sources"`
	Summaries []string `json:"summaries,omitempty"` // summary fact ids
}

// Consolidate folds each group of many fine-grained episodic facts (same scope,
// subject, predicate and entity) into one summary fact whose evidence links keep
// every source; the sources are marked consolidated, not deleted.
func (a *MaintenanceActivities) Consolidate(ctx context.Context, in ConsolidateInput) (ConsolidateResult, error) {
	var res ConsolidateResult
	if in.MinFacts <= 0 {
		in.MinFacts = 5
	}
	if len(in.Types) == 0 {
		in.Types = []memory.MemoryType{memory.TypeEvent, memory.TypeExperience}
	}
	if in.SummaryRunes <= 0 {
		in.SummaryRunes = 400
	}
	sum := a.Summariser
	if sum == nil {
		sum = llm.NewExtractiveSummariser(in.SummaryRunes)
	}
	before := in.Now.Add(-in.MinAge)
	groups, err := a.Store.ConsolidationCandidates(ctx, in.Types, in.MinFacts, before, in.MaxGroups)
	if err != nil {
		return res, fmt.Errorf("find groups: %w", err)
	}
	for _, g := range groups {
		facts, prev, err := a.Store.GroupFacts(ctx, g, in.Types, before)
		if err != nil {
			return res, err
		}
		if len(facts) < in.MinFacts {
			continue
		}
		if err := a.Store.DecryptFacts(facts); err != nil {
			return res, err
		}
		previous := ""
		if prev != nil {
			if previous, err = a.Store.DecryptContent(prev.KeyID, prev.Content); err != nil {
				return res, err
			}
		}
		turns := make([]string, len(facts))
		ids := make([]string, len(facts))
		objects := []string{}
		seenObj := map[string]bool{}
		conf, imp := 0.0, 0.0
		for i, f := range facts {
			turns[i], ids[i] = f.Content, f.ID
			if f.Object != "" && !seenObj[f.Object] && len(objects) < 20 {
				seenObj[f.Object] = true
				objects = append(objects, f.Object)
			}
			conf, imp = max(conf, f.Confidence), max(imp, f.Importance)
		}
		text, err := sum.Summarise(ctx, turns, previous)
		if err != nil {
			// An LLM summariser that failed falls back to the extractive one.
			if text, err = llm.NewExtractiveSummariser(in.SummaryRunes).Summarise(ctx, turns, previous); err != nil {
				return res, err
			}
		}
		first, last := facts[0].ValidFrom, facts[len(facts)-1].ObservedAt
		n := len(facts)
		if prev != nil {
			n += consolidatedCount(prev)
			first = prev.ValidFrom
		}
		about := g.Subject
		if g.EntityID != "" {
			about = g.EntityType + " " + g.EntityID
		}
		plain := fmt.Sprintf("%d × %s about %s (%s – %s): %s", n, g.Predicate, about, first.UTC().Format("2006-01-02"), last.UTC().Format("2006-01-02"), text)
		kid, stored, err := a.Store.SealContent(plain)
		if err != nil {
			return res, err
		}
		f := &storage.Fact{
			OwnerType: facts[0].OwnerType, OwnerID: facts[0].OwnerID, Scope: g.Scope, DepartmentID: g.DepartmentID, UserID: g.UserID,
			AgentID: g.AgentID, SessionID: g.SessionID, TaskID: g.TaskID, MemoryType: facts[0].MemoryType,
			Subject: g.Subject, Predicate: g.Predicate, Object: fmt.Sprintf("%d occurrences", n), Content: stored, KeyID: kid,
			Attributes: storage.SummaryAttributes(n, first, last, objects), EntityType: g.EntityType, EntityID: g.EntityID,
			Origin: memory.OriginInferred, Confidence: conf, Importance: imp, ValidFrom: first, ObservedAt: last,
			SchemaName: facts[0].SchemaName, SchemaVersion: facts[0].SchemaVersion,
			Reason: fmt.Sprintf("consolidation of %d %s facts (summary of their evidence)", len(facts), g.Predicate),
		}
		out, err := a.Store.Consolidate(ctx, g, ids, f, storage.SearchText(plain))
		if err != nil {
			return res, fmt.Errorf("consolidate %s: %w", g.Key(), err)
		}
		if out == nil {
			continue
		}
		if a.Embedder != nil {
			if vecs, err := a.Embedder.Embed(ctx, []string{plain}); err == nil && len(vecs) == 1 {
				_ = a.Store.SetFactEmbedding(ctx, g.TenantID, out.ID, pgvector.NewVector(vecs[0]))
			}
		}
		res.Groups++
		res.Sources += len(ids)
		res.Summaries = append(res.Summaries, out.ID)
		activity.RecordHeartbeat(ctx, res)
	}
	return res, nil
}

func consolidatedCount(f *storage.Fact) int {
	var a struct {
		N int `json:"consolidated_count"`
	}
	_ = json.Unmarshal(f.Attributes, &a)
	return a.N
}

// SchemaSuggestion is a change the extractor's output suggests for a schema: an
// attribute it keeps producing for a predicate that the schema does not declare,
// or a predicate it keeps proposing that does not exist.
type SchemaSuggestion struct {
	Schema    string   `json:"schema"`
	Kind      string   `json:"kind"` // attribute | predicate
	Predicate string   `json:"predicate"`
	Attribute string   `json:"attribute,omitempty"`
	Count     int      `json:"count"`
	Examples  []string `json:"examples,omitempty"`
}

var unknownPredicate = regexp.MustCompile(`predicate: unknown "([^"]+)"`)

// SuggestSchemaChanges lists schema changes the extracted data suggests for a tenant
// (every tenant when tenantID is empty) since a time, most frequent first, keeping
// those seen at least minCount times.
func SuggestSchemaChanges(ctx context.Context, st *storage.Store, schemas schema.Source, tenantID string, since time.Time, minCount int) ([]SchemaSuggestion, error) {
	if schemas == nil {
		schemas = schema.Builtins
	}
	if minCount <= 0 {
		minCount = 1
	}
	uses, err := st.AttributeUsage(ctx, tenantID, since)
	if err != nil {
		return nil, fmt.Errorf("attribute usage: %w", err)
	}
	var out []SchemaSuggestion
	for _, u := range uses {
		if u.Count < minCount || u.Attribute == "state" {
			continue
		}
		s, err := schemas(ctx, u.SchemaName)
		if err != nil {
			continue
		}
		p, ok := s.Predicate(u.Predicate)
		if !ok {
			continue
		}
		if _, ok := p.Attribute(u.Attribute); ok {
			continue
		}
		if e, ok := s.Entity(u.EntityType); ok && hasAttr(e, u.Attribute) {
			continue
		}
		out = append(out, SchemaSuggestion{Schema: u.SchemaName, Kind: "attribute", Predicate: u.Predicate, Attribute: u.Attribute, Count: u.Count, Examples: u.Examples})
	}
	reasons, err := st.RejectedReasons(ctx, tenantID, since, 0)
	if err != nil {
		return nil, fmt.Errorf("rejected extractions: %w", err)
	}
	type key struct{ schema, pred string }
	counts := map[key]int{}
	for _, r := range reasons {
		seen := map[string]bool{}
		for _, m := range unknownPredicate.FindAllStringSubmatch(r.Reason, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				counts[key{r.SchemaName, m[1]}]++
			}
		}
	}
	for k, n := range counts {
		if n >= minCount {
			out = append(out, SchemaSuggestion{Schema: k.schema, Kind: "predicate", Predicate: k.pred, Count: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Schema+out[i].Predicate+out[i].Attribute < out[j].Schema+out[j].Predicate+out[j].Attribute
	})
	return out, nil
}

func hasAttr(e *schema.Entity, name string) bool {
	for _, a := range e.Attributes {
		if a.Name == name {
			return true
		}
	}
	return false
}

// SchemaReportInput asks for the schema report.
type SchemaReportInput struct {
	TenantID string    `json:"tenant_id,omitempty"`
	Since    time.Time `json:"since"`
	MinCount int       `json:"min_count,omitempty"`
}

// SchemaReport is SuggestSchemaChanges as an activity (the scheduled report).
func (a *MaintenanceActivities) SchemaReport(ctx context.Context, in SchemaReportInput) ([]SchemaSuggestion, error) {
	return SuggestSchemaChanges(ctx, a.Store, a.Schemas, in.TenantID, in.Since, in.MinCount)
}

// RotateInput asks to re-seal rows under the current key.
type RotateInput struct {
	IncludeClear bool `json:"include_clear"` // also seal rows written before encryption
	Batch        int  `json:"batch,omitempty"`
}

// RotateKeys re-seals every table's rows sealed with an older key (and clear rows
// when asked) under the current key, in batches, heartbeating progress.
func (a *MaintenanceActivities) RotateKeys(ctx context.Context, in RotateInput) (map[string]int, error) {
	done := map[string]int{}
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &done)
	}
	for _, t := range storage.RotationTables {
		for {
			n, err := a.Store.RotateBatch(ctx, t, in.IncludeClear, in.Batch)
			if err != nil {
				return done, err
			}
			done[t] += n
			activity.RecordHeartbeat(ctx, done)
			if n == 0 {
				break
			}
		}
	}
	return done, nil
}
