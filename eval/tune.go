package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/storage"
)

// TuneRow is one fusion setting of a tuning run and what it reached.
type TuneRow struct {
	Fusion recall.Fusion `json:"fusion"`
	// Evidence recall@1 and @10 per suite, and the objective: the mean over the
	// tuned suites of (evidence recall@1 + @10) / 2.
	EvidenceAt1  map[string]float64 `json:"evidence_recall_at_1"`
	EvidenceAt10 map[string]float64 `json:"evidence_recall_at_10"`
	RecallAt10   map[string]float64 `json:"recall_at_10"` // must_recall suites (seeds): must stay 1
	Objective    float64            `json:"objective"`
	Default      bool               `json:"default,omitempty"`
}

// TuneGrid is the grid of fusion weights `engram eval --tune` measures around
// the defaults.
func TuneGrid() []recall.Fusion {
	d := recall.DefaultFusion()
	out := []recall.Fusion{d}
	add := func(f recall.Fusion) {
		for _, x := range out {
			if x == f {
				return
			}
		}
		out = append(out, f)
	}
	// Semantic weight against the second hop's, the two that trade most.
	for _, sem := range []float64{0, 0.5, 1, 1.5, 2, 3} {
		for _, exp := range []float64{0, 0.15, 0.3, 0.6} {
			for _, fk := range []float64{0.5, 0.8} {
				f := d
				f.Semantic, f.Expand, f.FactKeyword = sem, exp, fk
				add(f)
			}
		}
	}
	// Then one weight at a time around the defaults.
	one := func(set func(*recall.Fusion, float64), vs ...float64) {
		for _, v := range vs {
			f := d
			set(&f, v)
			add(f)
		}
	}
	one(func(f *recall.Fusion, v float64) { f.Backing = v }, 0.15, 0.6, 1)
	one(func(f *recall.Fusion, v float64) { f.FactKeyword = v }, 1)
	one(func(f *recall.Fusion, v float64) { f.SemanticMatch = v }, 0.35, 0.55, 0.7)
	one(func(f *recall.Fusion, v float64) { f.Structured = v }, 0.3, 1)
	one(func(f *recall.Fusion, v float64) { f.Superseded = v }, 0.6, 1)
	return out
}

// TuneMain ingests the suites once and asks every probe once per fusion setting of
// grid (and once of the baseline), then prints the settings best first. It is how
// recall.DefaultFusion was chosen.
func TuneMain(ctx context.Context, cfg Config, grid []recall.Fusion, out io.Writer, asJSON bool) ([]TuneRow, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("eval: ENGRAM_DATABASE_URL is not set (eval \"$(scripts/stack env)\")")
	}
	all, err := Shipped()
	if err != nil {
		return nil, err
	}
	names := cfg.Suites
	if len(names) == 0 {
		names = []string{OpenConversationSuite, "seed_en", "seed_zh"}
	}
	suites, err := Select(all, names)
	if err != nil {
		return nil, err
	}
	variants := []Variant{{Name: "baseline", NewRecaller: NewBaseline}}
	for i, f := range grid {
		f := f
		variants = append(variants, Variant{Name: fmt.Sprintf("fusion-%d", i), NewRecaller: func(st *storage.Store, em embedding.Embedder) (Recaller, error) {
			return recall.New(st, em, recall.NewPostgresKeyword(st), schema.Builtins, recall.Options{Fusion: f, AccessLog: recall.AccessLogOff}), nil
		}})
	}
	reps, err := runFresh(ctx, cfg, suites, cfg.Embedder, variants)
	if err != nil {
		return nil, err
	}
	row := func(r *Report, f recall.Fusion) TuneRow {
		tr := TuneRow{Fusion: f, EvidenceAt1: map[string]float64{}, EvidenceAt10: map[string]float64{}, RecallAt10: map[string]float64{}}
		n := 0
		for _, s := range r.Suites {
			if s.Overall.EvidenceProbes > 0 {
				tr.EvidenceAt1[s.Suite], tr.EvidenceAt10[s.Suite] = s.Overall.EvidenceAt["1"], s.Overall.EvidenceAt["10"]
				tr.Objective += (s.Overall.EvidenceAt["1"] + s.Overall.EvidenceAt["10"]) / 2
				n++
			}
			if s.Overall.RecallProbes > 0 {
				tr.RecallAt10[s.Suite] = s.Overall.RecallAt["10"]
			}
		}
		if n > 0 {
			tr.Objective /= float64(n)
		}
		return tr
	}
	base := row(reps[0], recall.Fusion{})
	var rows []TuneRow
	for i, f := range grid {
		r := row(reps[i+1], f)
		r.Default = f == recall.DefaultFusion()
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Objective > rows[j].Objective })
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return rows, enc.Encode(map[string]any{"baseline": base, "settings": rows})
	}
	var ss []string
	for _, s := range reps[0].Suites {
		ss = append(ss, s.Suite)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "keyword\tsemantic\tsem-match\tfact-kw\tbacking\texpand\tstructured\tobjective\t")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s EvR@1\t%s EvR@10\t%s R@10\t", s, s, s)
	}
	fmt.Fprintln(tw)
	line := func(label string, r TuneRow) {
		f := r.Fusion
		if label != "" {
			fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t%.3f\t", label, r.Objective)
		} else {
			fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t", f.Keyword, f.Semantic, f.SemanticMatch, f.FactKeyword, f.Backing, f.Expand, f.Structured, r.Objective)
		}
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%s\t%s\t", getf(r.EvidenceAt1, s), getf(r.EvidenceAt10, s), getf(r.RecallAt10, s))
		}
		if r.Default {
			fmt.Fprint(tw, "(default)")
		}
		fmt.Fprintln(tw)
	}
	line("baseline", base)
	for _, r := range rows {
		line("", r)
	}
	tw.Flush()
	return rows, nil
}

func getf(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%.3f", v)
	}
	return "-"
}
