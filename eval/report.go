package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Metrics are the figures of a group of probes (a suite, or one category of it).
type Metrics struct {
	Probes          int                `json:"probes"`
	Errors          int                `json:"errors"`
	RecallProbes    int                `json:"recall_probes"`
	RecallAt        map[string]float64 `json:"recall_at"` // "1", "5", "10"
	PrecisionAtK    float64            `json:"precision_at_k"`
	MRR             float64            `json:"mrr"`
	EvidenceProbes  int                `json:"evidence_probes"`
	EvidenceAt      map[string]float64 `json:"evidence_recall_at"`
	MustNotProbes   int                `json:"must_not_probes"`
	FalseRecallRate float64            `json:"false_recall_rate"`
	StaleRate       float64            `json:"stale_fact_rate"`
	ScopeLeakRate   float64            `json:"scope_leak_rate"`
	TenantLeaks     int                `json:"cross_tenant_leaks"`
	FactsReturned   int                `json:"facts_returned"`
	UnsupportedRate float64            `json:"unsupported_fact_rate"`
	RecallP50MS     float64            `json:"recall_p50_ms"`
	RecallP95MS     float64            `json:"recall_p95_ms"`
	RecallP99MS     float64            `json:"recall_p99_ms"`
}

// Values names every figure, as thresholds refer to them.
func (m Metrics) Values() map[string]float64 {
	v := map[string]float64{
		"precision@k": m.PrecisionAtK, "mrr": m.MRR, "false_recall_rate": m.FalseRecallRate,
		"stale_fact_rate": m.StaleRate, "scope_leak_rate": m.ScopeLeakRate, "cross_tenant_leaks": float64(m.TenantLeaks),
		"unsupported_fact_rate": m.UnsupportedRate, "recall_p50_ms": m.RecallP50MS, "recall_p95_ms": m.RecallP95MS,
		"recall_p99_ms": m.RecallP99MS, "errors": float64(m.Errors),
	}
	for k, x := range m.RecallAt {
		v["recall@"+k] = x
	}
	for k, x := range m.EvidenceAt {
		v["evidence_recall@"+k] = x
	}
	return v
}

// Extraction compares the extractor's candidates with the gold ones.
type Extraction struct {
	GoldCandidates int     `json:"gold_candidates"`
	Extracted      int     `json:"extracted"`
	Matched        int     `json:"matched"`
	Precision      float64 `json:"precision"`
	Recall         float64 `json:"recall"`
}

// SuiteReport is one suite's figures.
type SuiteReport struct {
	Suite      string             `json:"suite"`
	Mode       string             `json:"mode"`
	Scenarios  int                `json:"scenarios"`
	Turns      int                `json:"turns"`
	Statuses   map[string]int     `json:"write_statuses"`
	WriteP50MS float64            `json:"write_p50_ms"`
	WriteP95MS float64            `json:"write_p95_ms"`
	WriteP99MS float64            `json:"write_p99_ms"`
	Overall    Metrics            `json:"overall"`
	Categories map[string]Metrics `json:"categories"`
	Extraction *Extraction        `json:"extraction,omitempty"`
	// Baseline and BaselineCategories are the baseline recaller's figures (plain
	// BM25 over the raw turns) on the same ingested memory and probes.
	Baseline           *Metrics           `json:"baseline,omitempty"`
	BaselineCategories map[string]Metrics `json:"baseline_categories,omitempty"`
	// BaselineMargin: how far above the baseline the engine's figures must be
	// (evidence_recall@1, @10; 0 when unset: not below it).
	BaselineMargin map[string]float64 `json:"baseline_margin,omitempty"`
	// Folds: in a suite of several conversations, per conversation tuned on, the
	// engine and the baseline on the other conversations (see Folds).
	Folds []FoldRow `json:"folds,omitempty"`
	// MissCauses and BaselineMissCauses: the evidence turns missed at @10 by
	// category and cause (see MissCauses), the engine's and the baseline's.
	MissCauses         map[string]map[string]int `json:"miss_causes,omitempty"`
	BaselineMissCauses map[string]map[string]int `json:"baseline_miss_causes,omitempty"`
	// baselineProbes are the baseline's probe results, for the folds.
	baselineProbes []ProbeResult
	Thresholds     Bounds             `json:"thresholds"`
	Failures       []string           `json:"failures,omitempty"`
	Probes         []ProbeResult      `json:"probes,omitempty"`
	Extra          map[string]float64 `json:"extra,omitempty"`
	Notes          []string           `json:"notes,omitempty"`
}

// Report is a run's outcome.
type Report struct {
	Mode          string        `json:"mode"`
	K             int           `json:"k"`
	Started       time.Time     `json:"started"`
	IngestSeconds float64       `json:"ingest_seconds"`
	Suites        []SuiteReport `json:"suites"`
	Notes         []string      `json:"notes,omitempty"`
}

// Failures lists every threshold a suite missed.
func (r *Report) Failures() []string {
	var out []string
	for _, s := range r.Suites {
		for _, f := range s.Failures {
			out = append(out, s.Suite+": "+f)
		}
	}
	return out
}

// Suite returns the report of a suite by name.
func (r *Report) Suite(name string) *SuiteReport {
	for i := range r.Suites {
		if r.Suites[i].Suite == name {
			return &r.Suites[i]
		}
	}
	return nil
}

func aggregate(ps []ProbeResult, k int) Metrics {
	m := Metrics{Probes: len(ps), RecallAt: map[string]float64{}, EvidenceAt: map[string]float64{}}
	var lat []time.Duration
	var rr, prec float64
	var stale, leak, falseRecall, unsupported int
	for _, p := range ps {
		s := p.Score
		if p.Err != "" {
			m.Errors++
		}
		lat = append(lat, p.Latency)
		if s.HasRecall {
			m.RecallProbes++
			for _, kk := range Ks {
				m.RecallAt[fmt.Sprint(kk)] += s.RecallAt[kk]
			}
			rr += s.RR
			prec += s.PrecisionAt
		}
		if s.HasEvidence {
			m.EvidenceProbes++
			for _, kk := range Ks {
				m.EvidenceAt[fmt.Sprint(kk)] += s.EvidenceAt[kk]
			}
		}
		if s.HasMustNot {
			m.MustNotProbes++
			if s.FalseRecall {
				falseRecall++
			}
		}
		if s.Stale {
			stale++
		}
		if s.ScopeLeak {
			leak++
		}
		m.TenantLeaks += s.TenantLeaks
		m.FactsReturned += s.Facts
		unsupported += s.Unsupported
	}
	for _, kk := range Ks {
		key := fmt.Sprint(kk)
		if m.RecallProbes > 0 {
			m.RecallAt[key] /= float64(m.RecallProbes)
		}
		if m.EvidenceProbes > 0 {
			m.EvidenceAt[key] /= float64(m.EvidenceProbes)
		} else {
			delete(m.EvidenceAt, key)
		}
	}
	if m.RecallProbes > 0 {
		m.MRR = rr / float64(m.RecallProbes)
		m.PrecisionAtK = prec / float64(m.RecallProbes)
	} else {
		m.RecallAt = map[string]float64{}
	}
	m.FalseRecallRate = ratio(falseRecall, m.MustNotProbes, 0)
	m.StaleRate = ratio(stale, m.Probes, 0)
	m.ScopeLeakRate = ratio(leak, m.Probes, 0)
	m.UnsupportedRate = ratio(unsupported, m.FactsReturned, 0)
	m.RecallP50MS = ms(percentile(lat, 0.50))
	m.RecallP95MS = ms(percentile(lat, 0.95))
	m.RecallP99MS = ms(percentile(lat, 0.99))
	_ = k
	return m
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func buildReport(opt Options, suites []*Suite, jobs []job, turns []*TurnResult, probes []ProbeResult) *Report {
	rep := &Report{Mode: opt.Mode, K: opt.K, Started: time.Now().UTC()}
	for _, s := range suites {
		sr := SuiteReport{Suite: s.Name, Mode: opt.Mode, Statuses: map[string]int{}, Categories: map[string]Metrics{}, Thresholds: s.Thresholds.For(opt.Mode),
			BaselineMargin: s.BaselineMargin}
		for _, j := range jobs {
			if j.suite == s {
				sr.Scenarios++
			}
		}
		if sr.Scenarios == 0 {
			continue
		}
		var wl []time.Duration
		for _, t := range turns {
			if t.Suite != s.Name {
				continue
			}
			sr.Turns++
			sr.Statuses[t.Status]++
			wl = append(wl, t.Latency)
		}
		sr.WriteP50MS, sr.WriteP95MS, sr.WriteP99MS = ms(percentile(wl, .5)), ms(percentile(wl, .95)), ms(percentile(wl, .99))
		var mine []ProbeResult
		byCat := map[string][]ProbeResult{}
		for _, p := range probes {
			if p.Suite != s.Name {
				continue
			}
			mine = append(mine, p)
			byCat[p.Category] = append(byCat[p.Category], p)
		}
		sr.Probes = mine
		sr.Overall = aggregate(mine, opt.K)
		for c, ps := range byCat {
			sr.Categories[c] = aggregate(ps, opt.K)
		}
		rep.Suites = append(rep.Suites, sr)
	}
	return rep
}

// Check compares each suite with its thresholds (and the rules that hold for every
// suite: no cross-tenant leak, no scope leak) and records the failures.
func (r *Report) Check() {
	for i := range r.Suites {
		s := &r.Suites[i]
		s.Failures = nil
		v := s.Overall.Values()
		if s.Extraction != nil {
			v["extraction_precision"] = s.Extraction.Precision
			v["extraction_recall"] = s.Extraction.Recall
		}
		v["write_p95_ms"] = s.WriteP95MS
		for k, x := range s.Extra {
			v[k] = x
		}
		mins, maxs := map[string]float64{}, map[string]float64{"cross_tenant_leaks": 0, "scope_leak_rate": 0}
		for k, x := range s.Thresholds.Min {
			mins[k] = x
		}
		for k, x := range s.Thresholds.Max {
			maxs[k] = x
		}
		for _, k := range sortedKeys(mins) {
			got, ok := v[k]
			if !ok {
				s.Failures = append(s.Failures, fmt.Sprintf("%s: no such figure in this run (threshold min %.3f)", k, mins[k]))
				continue
			}
			if got+1e-9 < mins[k] {
				s.Failures = append(s.Failures, fmt.Sprintf("%s = %.3f is below the threshold %.3f", k, got, mins[k]))
			}
		}
		if b := s.Baseline; b != nil && s.Overall.EvidenceProbes > 0 && b.EvidenceProbes > 0 {
			for _, k := range []string{"1", "10"} {
				name := "evidence_recall@" + k
				margin := s.BaselineMargin[name]
				got, base := s.Overall.EvidenceAt[k], b.EvidenceAt[k]
				if got+1e-9 < base+margin {
					if margin > 0 {
						s.Failures = append(s.Failures, fmt.Sprintf("%s = %.3f is below the baseline's %.3f + %.2f", name, got, base, margin))
					} else {
						s.Failures = append(s.Failures, fmt.Sprintf("%s = %.3f is below the baseline's %.3f (plain BM25 over the raw turns)", name, got, base))
					}
				}
			}
		}
		for _, k := range sortedKeys(maxs) {
			got, ok := v[k]
			if !ok {
				s.Failures = append(s.Failures, fmt.Sprintf("%s: no such figure in this run (threshold max %.3f)", k, maxs[k]))
				continue
			}
			if got > maxs[k]+1e-9 {
				s.Failures = append(s.Failures, fmt.Sprintf("%s = %.3f is above the threshold %.3f", k, got, maxs[k]))
			}
		}
	}
}

// sortedKeys are the keys of the maps, each once, in order.
func sortedKeys[V any](ms ...map[string]V) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// eachFigures calls row with each suite's overall figures (as category all), then
// with each of its categories', in name order: the rows of the report's tables.
func (r *Report) eachFigures(all string, row func(suite, category string, m Metrics)) {
	for _, s := range r.Suites {
		row(s.Suite, all, s.Overall)
		for _, c := range sortedKeys(s.Categories) {
			row(s.Suite, c, s.Categories[c])
		}
	}
}

// figureCells are a category's figures in the tables' columns, from probes to
// unsupported.
func figureCells(m Metrics) []string {
	return []string{fmt.Sprint(m.Probes),
		get(m.RecallAt, "1"), get(m.RecallAt, "5"), get(m.RecallAt, "10"), pct(m.PrecisionAtK), pct(m.MRR),
		get(m.EvidenceAt, "5"), get(m.EvidenceAt, "10"), pct(m.FalseRecallRate), pct(m.StaleRate), pct(m.ScopeLeakRate),
		fmt.Sprint(m.TenantLeaks), pct(m.UnsupportedRate)}
}

func pct(x float64) string { return fmt.Sprintf("%.3f", x) }

func get(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return pct(v)
	}
	return "-"
}

// WriteTable prints the figures per suite and category.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "suite\tcategory\tprobes\tR@1\tR@5\tR@10\tP@%d\tMRR\tEvR@5\tEvR@10\tfalse-rec\tstale\tscope-leak\ttenant-leak\tunsupp\trecall p50/p95 ms\t\n", r.K)
	r.eachFigures("(all)", func(suite, category string, m Metrics) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f/%.1f\t\n", suite, category, strings.Join(figureCells(m), "\t"), m.RecallP50MS, m.RecallP95MS)
	})
	tw.Flush()
	fmt.Fprintln(w)
	r.writeBaselineTable(w)
	r.writeFoldTable(w)
	for _, s := range r.Suites {
		if len(s.MissCauses) > 0 {
			fmt.Fprintf(w, "%s:", s.Suite)
			writeMissCauses(w, s.MissCauses, s.BaselineMissCauses)
			fmt.Fprintln(w)
		}
	}
	for _, s := range r.Suites {
		fmt.Fprintf(w, "%s [%s]: %d scenarios, %d turns %v, write p50/p95/p99 %.1f/%.1f/%.1f ms", s.Suite, s.Mode, s.Scenarios, s.Turns, statuses(s.Statuses), s.WriteP50MS, s.WriteP95MS, s.WriteP99MS)
		if e := s.Extraction; e != nil {
			fmt.Fprintf(w, "; extraction vs gold P %.3f R %.3f (%d/%d extracted, %d gold)", e.Precision, e.Recall, e.Matched, e.Extracted, e.GoldCandidates)
		}
		fmt.Fprintln(w)
		for _, k := range sortedKeys(s.Extra) {
			fmt.Fprintf(w, "  %s = %.3f\n", k, s.Extra[k])
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  FAIL %s\n", f)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func statuses(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// WriteMarkdown writes the report for humans, with every missed probe.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# Engram eval — mode `%s`, k = %d\n\n", r.Mode, r.K)
	fmt.Fprintf(w, "Run at %s; ingest took %.1f s.\n\n", r.Started.Format(time.RFC3339), r.IngestSeconds)
	fmt.Fprintf(w, "| suite | category | probes | R@1 | R@5 | R@10 | P@%d | MRR | EvR@5 | EvR@10 | false recall | stale | scope leak | tenant leaks | unsupported | recall p50 / p95 ms |\n", r.K)
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	r.eachFigures("**all**", func(suite, category string, m Metrics) {
		fmt.Fprintf(w, "| %s | %s | %s | %.1f / %.1f |\n", suite, category, strings.Join(figureCells(m), " | "), m.RecallP50MS, m.RecallP95MS)
	})
	fmt.Fprintln(w)
	if rows := r.BaselineRows(); len(rows) > 0 {
		fmt.Fprint(w, "## Evidence recall: engine vs baseline\n\nThe baseline is plain Okapi BM25 (k1 1.2, b 0.75) over the raw turns of the user, asked the same probes over the same ingested memory.\n\n")
		fmt.Fprintln(w, "| suite | category | probes | engine @1 | baseline @1 | Δ@1 | engine @5 | baseline @5 | Δ@5 | engine @10 | baseline @10 | Δ@10 |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, x := range rows {
			fmt.Fprintf(w, "| %s | %s | %d", x.Suite, x.Category, x.Probes)
			for _, k := range []string{"1", "5", "10"} {
				fmt.Fprintf(w, " | %.3f | %.3f | %+.3f", x.Engine[k], x.Baseline[k], x.Delta[k])
			}
			fmt.Fprintln(w, " |")
		}
		fmt.Fprintln(w)
	}
	for _, s := range r.Suites {
		fmt.Fprintf(w, "## %s\n\n", s.Suite)
		fmt.Fprintf(w, "- %d scenarios, %d turns %s; write latency p50 / p95 / p99: %.1f / %.1f / %.1f ms\n", s.Scenarios, s.Turns, statuses(s.Statuses), s.WriteP50MS, s.WriteP95MS, s.WriteP99MS)
		if e := s.Extraction; e != nil {
			fmt.Fprintf(w, "- extraction against gold: precision %.3f, recall %.3f (%d matched, %d extracted, %d gold)\n", e.Precision, e.Recall, e.Matched, e.Extracted, e.GoldCandidates)
		}
		for _, k := range sortedKeys(s.Extra) {
			fmt.Fprintf(w, "- %s: %.3f\n", k, s.Extra[k])
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "- note: %s\n", n)
		}
		if len(s.Thresholds.Min)+len(s.Thresholds.Max) > 0 {
			fmt.Fprintf(w, "- thresholds: min %v, max %v\n", s.Thresholds.Min, s.Thresholds.Max)
		}
		if len(s.Failures) == 0 {
			fmt.Fprintln(w, "- **thresholds met**")
		}
		for _, f := range s.Failures {
			fmt.Fprintf(w, "- **FAIL** %s\n", f)
		}
		var bad []ProbeResult
		for _, p := range s.Probes {
			if len(p.Misses) > 0 || len(p.Wrong) > 0 || p.Err != "" {
				bad = append(bad, p)
			}
		}
		if len(bad) > 0 {
			fmt.Fprintf(w, "\n### Probes with misses or wrong memories (%d of %d)\n\n", len(bad), len(s.Probes))
			for _, p := range bad {
				fmt.Fprintf(w, "- `%s/%s` [%s] %q\n", p.Scenario, p.Probe, p.Category, p.Question)
				if p.Err != "" {
					fmt.Fprintf(w, "  - error: %s\n", p.Err)
				}
				for _, m := range p.Misses {
					fmt.Fprintf(w, "  - missed: %s\n", m)
				}
				for _, x := range p.Wrong {
					fmt.Fprintf(w, "  - wrong: %s\n", x)
				}
				for i, it := range p.Top {
					if i >= 5 {
						break
					}
					fmt.Fprintf(w, "  - top %d: %s %s [%s %s] %s\n", i+1, it.Kind, it.Content, it.Scope, it.Status, it.Flags)
				}
			}
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- note: %s\n", n)
	}
}

// WriteFiles writes report.md, report.json and categories.svg into dir.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := "eval-" + r.Mode
	if len(r.Suites) == 1 && r.Suites[0].Suite == "locomo" {
		base = "eval-locomo-" + r.Mode
	}
	md := filepath.Join(dir, base+".md")
	js := filepath.Join(dir, base+".json")
	svg := filepath.Join(dir, base+".svg")
	f, err := os.Create(md)
	if err != nil {
		return nil, err
	}
	r.WriteMarkdown(f)
	if err := f.Close(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(js, b, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(svg, []byte(r.SVG()), 0o644); err != nil {
		return nil, err
	}
	return []string{md, js, svg}, nil
}

// BaselineRow is one line of the engine-versus-baseline comparison: evidence
// recall@1/5/10 of both on the same probes, and the difference.
type BaselineRow struct {
	Suite    string             `json:"suite"`
	Category string             `json:"category"`
	Probes   int                `json:"probes"`
	Engine   map[string]float64 `json:"engine"`
	Baseline map[string]float64 `json:"baseline"`
	Delta    map[string]float64 `json:"delta"`
}

// BaselineRows lists, per suite with evidence probes and per category, the engine's
// and the baseline's evidence recall and their difference.
func (r *Report) BaselineRows() []BaselineRow {
	var out []BaselineRow
	for _, s := range r.Suites {
		if s.Baseline == nil || s.Overall.EvidenceProbes == 0 {
			continue
		}
		for _, c := range append([]string{"(all)"}, sortedKeys(s.Categories)...) {
			m, b := s.Overall, *s.Baseline
			if c != "(all)" {
				m = s.Categories[c]
				var ok bool
				if b, ok = s.BaselineCategories[c]; !ok || m.EvidenceProbes == 0 {
					continue
				}
			}
			row := BaselineRow{Suite: s.Suite, Category: c, Probes: m.EvidenceProbes, Engine: map[string]float64{}, Baseline: map[string]float64{}, Delta: map[string]float64{}}
			for _, k := range []string{"1", "5", "10"} {
				row.Engine[k], row.Baseline[k] = m.EvidenceAt[k], b.EvidenceAt[k]
				row.Delta[k] = m.EvidenceAt[k] - b.EvidenceAt[k]
			}
			out = append(out, row)
		}
	}
	return out
}

// FoldRow is one fold of a suite of several conversations: tuned on one
// conversation, measured on the others (Held), engine and baseline evidence recall
// per category over the held-out probes.
type FoldRow struct {
	TunedOn  string             `json:"tuned_on"`
	Held     []string           `json:"held_out"`
	Category string             `json:"category"`
	Probes   int                `json:"probes"`
	Engine   map[string]float64 `json:"engine"`
	Baseline map[string]float64 `json:"baseline"`
	Delta    map[string]float64 `json:"delta"`
}

// Folds splits a suite's probes by conversation (scenario): for each conversation,
// the engine's and the baseline's evidence recall@1/5/10 over the probes of all the
// others, overall and per category. Weights are tuned on one conversation and
// judged on the folds it did not see; a suite of one conversation has no folds.
func Folds(engine, baseline []ProbeResult, k int) []FoldRow {
	var convs []string
	for _, p := range engine {
		if !slices.Contains(convs, p.Scenario) {
			convs = append(convs, p.Scenario)
		}
	}
	if len(convs) < 2 {
		return nil
	}
	sort.Strings(convs)
	var out []FoldRow
	for _, tuned := range convs {
		held := func(ps []ProbeResult) map[string][]ProbeResult {
			by := map[string][]ProbeResult{}
			for _, p := range ps {
				if p.Scenario != tuned && p.Score.HasEvidence {
					by["(all)"] = append(by["(all)"], p)
					by[p.Category] = append(by[p.Category], p)
				}
			}
			return by
		}
		e, b := held(engine), held(baseline)
		var others []string
		for _, c := range convs {
			if c != tuned {
				others = append(others, c)
			}
		}
		for _, c := range sortedKeys(e) {
			me, mb := aggregate(e[c], k), aggregate(b[c], k)
			row := FoldRow{TunedOn: tuned, Held: others, Category: c, Probes: me.EvidenceProbes,
				Engine: map[string]float64{}, Baseline: map[string]float64{}, Delta: map[string]float64{}}
			for _, x := range []string{"1", "5", "10"} {
				row.Engine[x], row.Baseline[x] = me.EvidenceAt[x], mb.EvidenceAt[x]
				row.Delta[x] = me.EvidenceAt[x] - mb.EvidenceAt[x]
			}
			out = append(out, row)
		}
	}
	return out
}

func (r *Report) writeFoldTable(w io.Writer) {
	var any bool
	for _, s := range r.Suites {
		any = any || len(s.Folds) > 0
	}
	if !any {
		return
	}
	fmt.Fprintln(w, "folds: evidence recall on the conversations not tuned on (engine vs baseline)")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "suite	tuned on	category	probes	engine @1	base @1	Δ@1	engine @5	base @5	Δ@5	engine @10	base @10	Δ@10	\n")
	for _, s := range r.Suites {
		for _, x := range s.Folds {
			fmt.Fprintf(tw, "%s	%s	%s	%d", s.Suite, x.TunedOn, x.Category, x.Probes)
			for _, k := range []string{"1", "5", "10"} {
				fmt.Fprintf(tw, "	%.3f	%.3f	%+.3f", x.Engine[k], x.Baseline[k], x.Delta[k])
			}
			fmt.Fprint(tw, "	\n")
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func (r *Report) writeBaselineTable(w io.Writer) {
	rows := r.BaselineRows()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "evidence recall: engine vs baseline (BM25, stop words, Snowball stemming, over the raw turns), same memory, same probes")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "suite\tcategory\tprobes\tengine @1\tbase @1\tΔ@1\tengine @5\tbase @5\tΔ@5\tengine @10\tbase @10\tΔ@10\t\n")
	for _, x := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d", x.Suite, x.Category, x.Probes)
		for _, k := range []string{"1", "5", "10"} {
			fmt.Fprintf(tw, "\t%.3f\t%.3f\t%+.3f", x.Engine[k], x.Baseline[k], x.Delta[k])
		}
		fmt.Fprint(tw, "\t\n")
	}
	tw.Flush()
	fmt.Fprintln(w)
}
