package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/engramhq/engram/recall"
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
	// Conversations: in suites of several conversations, evidence recall@1 and
	// @10 per conversation ("suite/conversation").
	Conversations map[string][]float64 `json:"conversations,omitempty"`
	// probes are the setting's probe results per suite, for the folds.
	probes map[string][]ProbeResult
}

// TuneFold is one fold of a tuning run over a suite of several conversations:
// the setting best on one conversation (by (evidence recall@1 + @10) / 2 there),
// and what it and the default reach on the other conversations.
type TuneFold struct {
	Suite   string        `json:"suite"`
	TunedOn string        `json:"tuned_on"`
	Best    recall.Fusion `json:"best"`
	// Evidence recall@1 and @10 on the held-out conversations: the best setting's,
	// the default's and the baseline's.
	Held      []string  `json:"held_out"`
	BestAt    []float64 `json:"best_at_1_10"`
	DefaultAt []float64 `json:"default_at_1_10"`
	BaseAt    []float64 `json:"baseline_at_1_10"`
}

// Grids are the grids `engram eval --tune --tune-grid NAME` measures, by name.
var Grids = map[string]func() []recall.Fusion{
	"fusion": TuneGrid, "context": ContextGrid, "keyword": KeywordGrid,
	"adjacent": AdjacentGrid, "around": AroundGrid, "balance": BalanceGrid,
	"speaker": SpeakerGrid, "semantic-all": SemanticAllGrid, "context-all": ContextAllGrid, "feedback": FeedbackGrid,
	"when": WhenGrid, "time-asked": TimeAskedGrid, "lead-asking": LeadAskingGrid, "ablate": AblateGrid, "adjacent-bursts": AdjacentBurstsGrid,
}

// addSetting appends f to a grid unless the grid has it already.
func addSetting(grid []recall.Fusion, f recall.Fusion) []recall.Fusion {
	if slices.Contains(grid, f) {
		return grid
	}
	return append(grid, f)
}

// ContextGrid is the grid of the context and session weights (Fusion.Context,
// Fusion.Session) around the defaults, with the keyword leader kept.
func ContextGrid() []recall.Fusion {
	d := recall.DefaultFusion()
	out := []recall.Fusion{d}
	for _, c := range []float64{0, 0.25, 0.5, 0.75, 1} {
		for _, ss := range []float64{0, 0.3, 0.6, 1, 1.5, 2} {
			f := d
			f.Context, f.Session, f.Lead = c, ss, 1
			out = addSetting(out, f)
		}
	}
	return out
}

// AroundGrid is the grid the context, session and adjacency defaults were chosen
// on (engram eval --locomo FILE --tune --tune-grid around --folds 2): from the
// defaults before them (context 0, session 0.3, no adjacent turns), the context
// and session weights above those, and adjacent turns on context 0.5, session 1.
func AroundGrid() []recall.Fusion {
	before := recall.DefaultFusion()
	before.Context, before.Session, before.Adjacent, before.AdjacentFrom, before.AdjacentSpan = 0, 0.3, 0, 0, 0
	out := []recall.Fusion{before}
	for _, c := range []float64{0.5, 0.75, 1} {
		for _, ss := range []float64{1, 1.5, 2} {
			f := before
			f.Context, f.Session = c, ss
			out = addSetting(out, f)
		}
	}
	for _, share := range []float64{0.6, 0.8} {
		for _, from := range []int{1, 3} {
			for _, span := range []int{1, 2} {
				f := before
				f.Context, f.Session = 0.5, 1
				f.Adjacent, f.AdjacentFrom, f.AdjacentSpan = share, from, span
				out = addSetting(out, f)
			}
		}
	}
	return out
}

// KeywordGrid is the grid of the turn keyword score's length normalisation
// (Fusion.KeywordLengthNorm) against the semantic weight, which it trades with
// (without length normalisation short turns score lower beside long ones), and of
// the weight of a turn's questions (Fusion.Asked) against the normalisation.
func KeywordGrid() []recall.Fusion {
	d := recall.DefaultFusion()
	out := []recall.Fusion{d}
	for _, b := range []float64{0, 0.25, 0.5, 0.75} {
		for _, sem := range []float64{2, 3, 4} {
			f := d
			f.KeywordLengthNorm, f.Semantic = b, sem
			if f != d {
				out = append(out, f)
			}
		}
	}
	for _, asked := range []float64{0, 0.25, 0.5, 1} {
		for _, b := range []float64{0, 0.25} {
			f := d
			f.Asked, f.KeywordLengthNorm = asked, b
			out = addSetting(out, f)
		}
	}
	return out
}

// byConversation is evidence recall@1 and @10 per conversation of the suites of
// several conversations.
func byConversation(probes map[string][]ProbeResult) map[string][]float64 {
	out := map[string][]float64{}
	for suite, ps := range probes {
		by := map[string][]ProbeResult{}
		for _, p := range ps {
			if p.Score.HasEvidence {
				by[p.Scenario] = append(by[p.Scenario], p)
			}
		}
		if len(by) < 2 {
			continue
		}
		for c, ps := range by {
			m := aggregate(ps, 10)
			out[suite+"/"+c] = []float64{m.EvidenceAt["1"], m.EvidenceAt["10"]}
		}
	}
	return out
}

// tuneFolds: per suite of several conversations and per conversation, the
// setting best on it and how it, the default and the baseline do on the others.
func tuneFolds(rows []TuneRow, base TuneRow) []TuneFold {
	var out []TuneFold
	if len(rows) == 0 {
		return nil
	}
	for _, suite := range sortedKeys(rows[0].probes) {
		var convs []string
		for _, p := range rows[0].probes[suite] {
			if !slices.Contains(convs, p.Scenario) {
				convs = append(convs, p.Scenario)
			}
		}
		if len(convs) < 2 {
			continue
		}
		sort.Strings(convs)
		at := func(ps []ProbeResult, keep func(string) bool) []float64 {
			var sel []ProbeResult
			for _, p := range ps {
				if keep(p.Scenario) && p.Score.HasEvidence {
					sel = append(sel, p)
				}
			}
			m := aggregate(sel, 10)
			return []float64{m.EvidenceAt["1"], m.EvidenceAt["10"]}
		}
		for _, x := range convs {
			on := func(c string) bool { return c == x }
			off := func(c string) bool { return c != x }
			best, bestObj := -1, -1.0
			def := -1
			for i, r := range rows {
				v := at(r.probes[suite], on)
				if o := (v[0] + v[1]) / 2; o > bestObj+1e-12 {
					best, bestObj = i, o
				}
				if r.Default {
					def = i
				}
			}
			f := TuneFold{Suite: suite, TunedOn: x, Best: rows[best].Fusion, BestAt: at(rows[best].probes[suite], off), BaseAt: at(base.probes[suite], off)}
			for _, c := range convs {
				if c != x {
					f.Held = append(f.Held, c)
				}
			}
			if def >= 0 {
				f.DefaultAt = at(rows[def].probes[suite], off)
			}
			out = append(out, f)
		}
	}
	return out
}

// TuneGrid is the grid of fusion weights `engram eval --tune` measures around
// the defaults.
func TuneGrid() []recall.Fusion {
	d := recall.DefaultFusion()
	out := []recall.Fusion{d}
	// Semantic weight against the second hop's, the two that trade most.
	for _, sem := range []float64{0, 0.5, 1, 1.5, 2, 3} {
		for _, exp := range []float64{0, 0.15, 0.3, 0.6} {
			for _, fk := range []float64{0.5, 0.8} {
				f := d
				f.Semantic, f.Expand, f.FactKeyword = sem, exp, fk
				out = addSetting(out, f)
			}
		}
	}
	// Then one weight at a time around the defaults.
	one := func(set func(*recall.Fusion, float64), vs ...float64) {
		for _, v := range vs {
			f := d
			set(&f, v)
			out = addSetting(out, f)
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
	var suites []*Suite
	if cfg.LoCoMo != "" {
		s, _, err := LoadLoCoMoAs(cfg.LoCoMo, LoCoMoOptions{Bursts: cfg.Bursts})
		if err != nil {
			return nil, err
		}
		suites = []*Suite{s}
	} else {
		all, err := Shipped()
		if err != nil {
			return nil, err
		}
		names := cfg.Suites
		if len(names) == 0 {
			names = []string{OpenConversationSuite, "seed_en", "seed_zh"}
		}
		if slices.Contains(names, HeldOutConversationSuite) {
			return nil, fmt.Errorf("eval: --tune on %s: it is the test split, never tuned on (tune on %s, report on both)", HeldOutConversationSuite, OpenConversationSuite)
		}
		if suites, err = Select(all, names); err != nil {
			return nil, err
		}
	}
	if cfg.Folds != 0 && (cfg.Folds != 2 || cfg.LoCoMo == "") {
		return nil, fmt.Errorf("eval: --folds %d: only 2 (halves of the conversations) with --locomo", cfg.Folds)
	}
	variants := []Variant{{Name: "baseline", NewRecaller: NewBaseline}}
	for i, f := range grid {
		f := f
		variants = append(variants, Variant{Name: fmt.Sprintf("fusion-%d", i), NewRecaller: EngineRecaller(cfg.Serve, recall.Options{Fusion: f, AccessLog: recall.AccessLogOff})})
	}
	reps, err := runFresh(ctx, cfg, suites, cfg.Embedder, variants)
	if err != nil {
		return nil, err
	}
	row := func(r *Report, f recall.Fusion) TuneRow {
		tr := TuneRow{Fusion: f, EvidenceAt1: map[string]float64{}, EvidenceAt10: map[string]float64{}, RecallAt10: map[string]float64{}, probes: map[string][]ProbeResult{}}
		n := 0
		for _, s := range r.Suites {
			tr.probes[s.Suite] = s.Probes
			if cfg.LoCoMo != "" {
				// LoCoMo is tuned on categories 1-4; category 5 is reported.
				var ps []ProbeResult
				for _, p := range s.Probes {
					if notAdversarial(p) {
						ps = append(ps, p)
					}
				}
				s.Overall = aggregate(ps, 10)
			}
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
	folds := tuneFolds(rows, base)
	var halves []HalfFold
	if cfg.Folds == 2 {
		var convs []string
		for _, sc := range suites[0].Scenarios {
			convs = append(convs, scenarioLabel(sc))
		}
		halves = Halves(rows, base, convs)
	}
	for i := range rows {
		rows[i].Conversations = byConversation(rows[i].probes)
	}
	base.Conversations = byConversation(base.probes)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Objective > rows[j].Objective })
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return rows, enc.Encode(map[string]any{"baseline": base, "settings": rows, "folds": folds, "halves": halves})
	}
	var ss []string
	for _, s := range reps[0].Suites {
		ss = append(ss, s.Suite)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "keyword\tkw-b\tasked\tsemantic\tsem-match\tfact-kw\tbacking\texpand\tstructured\tcontext\tsession\tlead\tadjacent\tspeaker\tfeedback\twhen\ttime-asked\tlead-asking\tobjective\t")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s EvR@1\t%s EvR@10\t%s R@10\t", s, s, s)
	}
	fmt.Fprintln(tw)
	line := func(label string, r TuneRow) {
		f := r.Fusion
		if label != "" {
			fmt.Fprintf(tw, "%s%s%.3f\t", label, strings.Repeat("\t", 18), r.Objective)
		} else {
			fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.2f/%d/%d%s\t%.2f\t%.2f/%d\t%s\t%.2f\t%.2f\t%.3f\t", f.Keyword, f.KeywordLengthNorm, f.Asked, semanticCol(f), f.SemanticMatch, f.FactKeyword, f.Backing, f.Expand, f.Structured, f.Context, f.Session, f.Lead, f.Adjacent, f.AdjacentFrom, f.AdjacentSpan, burstsCol(f), f.SpeakerNamed, f.Feedback, f.FeedbackFrom, whenCol(f), f.TimeAsked, f.LeadAsking, r.Objective)
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
	if len(folds) > 0 {
		fmt.Fprintln(out, "\nfolds: the setting best on one conversation, on the others (evidence recall @1 / @10)")
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "suite\ttuned on\tbest: kw-b\tasked\tsemantic\texpand\tcontext\tsession\tlead\tbest @1\tbest @10\tdefault @1\tdefault @10\tbaseline @1\tbaseline @10\t\n")
		for _, f := range folds {
			d := f.DefaultAt
			if d == nil {
				d = []float64{0, 0}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", f.Suite, f.TunedOn, f.Best.KeywordLengthNorm, f.Best.Asked, f.Best.Semantic, f.Best.Expand, f.Best.Context, f.Best.Session, f.Best.Lead,
				f.BestAt[0], f.BestAt[1], d[0], d[1], f.BaseAt[0], f.BaseAt[1])
		}
		tw.Flush()
	}
	writeHalves(out, halves)
	return rows, nil
}

func getf(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%.3f", v)
	}
	return "-"
}

// HalfFold is one direction of the two-fold split of a suite of several
// conversations (engram eval --locomo FILE --tune --folds 2): the setting best on
// one half of the conversations (by (evidence recall@1 + @10) / 2 on categories
// 1-4), and what it, the default and the baseline reach on the other half.
type HalfFold struct {
	TunedOn []string      `json:"tuned_on"`
	Held    []string      `json:"held_out"`
	Best    recall.Fusion `json:"best"`
	// Figures on the held-out half by recaller: "best", "default", "baseline".
	Figures map[string]HalfFigures `json:"figures"`
}

// HalfFigures are evidence recall@1 and @10 on a half: categories 1-4 together,
// and per category.
type HalfFigures struct {
	At1        float64              `json:"evidence_recall_at_1"`
	At10       float64              `json:"evidence_recall_at_10"`
	Probes     int                  `json:"probes"`
	Categories map[string][]float64 `json:"categories"` // category → [@1, @10]
}

// notAdversarial: LoCoMo's category 5 (answers that are not in the conversation)
// is reported, never tuned on.
func notAdversarial(p ProbeResult) bool { return !strings.HasPrefix(p.Category, "5") }

func halfFigures(ps []ProbeResult, keep func(string) bool) HalfFigures {
	var sel []ProbeResult
	byCat := map[string][]ProbeResult{}
	for _, p := range ps {
		if !keep(p.Scenario) || !p.Score.HasEvidence {
			continue
		}
		byCat[p.Category] = append(byCat[p.Category], p)
		if notAdversarial(p) {
			sel = append(sel, p)
		}
	}
	m := aggregate(sel, 10)
	h := HalfFigures{At1: m.EvidenceAt["1"], At10: m.EvidenceAt["10"], Probes: len(sel), Categories: map[string][]float64{}}
	for c, ps := range byCat {
		m := aggregate(ps, 10)
		h.Categories[c] = []float64{m.EvidenceAt["1"], m.EvidenceAt["10"]}
	}
	return h
}

// Halves splits the conversations of the one suite of several (in file order)
// into a first and second half, and tunes on each to report on the other.
func Halves(rows []TuneRow, base TuneRow, convs []string) []HalfFold {
	if len(rows) == 0 || len(convs) < 2 {
		return nil
	}
	var suite string
	for s := range rows[0].probes {
		suite = s
	}
	mid := len(convs) / 2
	halves := [][]string{convs[:mid], convs[mid:]}
	var out []HalfFold
	for i, on := range halves {
		held := halves[1-i]
		in := func(set []string) func(string) bool { return func(c string) bool { return slices.Contains(set, c) } }
		best, bestObj, def := -1, -1.0, -1
		for ri, r := range rows {
			h := halfFigures(r.probes[suite], in(on))
			if o := (h.At1 + h.At10) / 2; o > bestObj+1e-12 {
				best, bestObj = ri, o
			}
			if r.Default {
				def = ri
			}
		}
		f := HalfFold{TunedOn: on, Held: held, Best: rows[best].Fusion, Figures: map[string]HalfFigures{
			"best":     halfFigures(rows[best].probes[suite], in(held)),
			"baseline": halfFigures(base.probes[suite], in(held)),
		}}
		if def >= 0 {
			f.Figures["default"] = halfFigures(rows[def].probes[suite], in(held))
		}
		out = append(out, f)
	}
	return out
}

// writeHalves prints each direction of the halves: per recaller, categories 1-4
// at @1 and @10 and each category at @10.
func writeHalves(out io.Writer, hs []HalfFold) {
	if len(hs) == 0 {
		return
	}
	var baseline []map[string][]float64
	for _, h := range hs {
		baseline = append(baseline, h.Figures["baseline"].Categories)
	}
	cats := sortedKeys(baseline...)
	fmt.Fprintln(out, "\nhalves: the setting best on one half of the conversations (categories 1-4), on the other half (evidence recall)")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "tuned on\treported on\trecaller\tprobes\t1-4 @1\t1-4 @10\t")
	for _, c := range cats {
		fmt.Fprintf(tw, "%s @10\t", c)
	}
	fmt.Fprintln(tw)
	for _, h := range hs {
		for _, name := range []string{"best", "default", "baseline"} {
			f, ok := h.Figures[name]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%.3f\t", span(h.TunedOn), span(h.Held), name, f.Probes, f.At1, f.At10)
			for _, c := range cats {
				if v, ok := f.Categories[c]; ok {
					fmt.Fprintf(tw, "%.3f\t", v[1])
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
	for _, h := range hs {
		b := h.Best
		fmt.Fprintf(out, "best on %s: keyword %.2f kw-b %.2f asked %.2f semantic %s expand %.2f context %.2f session %.2f lead %d adjacent %.2f from %d span %d%s speaker %.2f feedback %.2f from %d when %s time-asked %.2f lead-asking %.2f\n",
			span(h.TunedOn), b.Keyword, b.KeywordLengthNorm, b.Asked, semanticCol(b), b.Expand, b.Context, b.Session, b.Lead, b.Adjacent, b.AdjacentFrom, b.AdjacentSpan, burstsCol(b), b.SpeakerNamed, b.Feedback, b.FeedbackFrom, whenCol(b), b.TimeAsked, b.LeadAsking)
	}
}

// span names a half by its first and last conversation.
func span(cs []string) string {
	if len(cs) == 0 {
		return "-"
	}
	return cs[0] + ".." + cs[len(cs)-1]
}

// AdjacentGrid is the grid of the adjacent turns (Fusion.Adjacent, AdjacentFrom,
// AdjacentSpan): how much of its anchor's score a turn next to one of the best
// turns takes, from how many of the best, and how far on each side.
func AdjacentGrid() []recall.Fusion {
	d := recall.DefaultFusion()
	out := []recall.Fusion{d}
	for _, share := range []float64{0.8, 0.9} {
		for _, from := range []int{3, 5} {
			for _, span := range []int{2, 3} {
				f := d
				f.Adjacent, f.AdjacentFrom, f.AdjacentSpan = share, from, span
				out = addSetting(out, f)
			}
		}
	}
	return out
}

// semanticCol is the semantic weight as the tune tables show it, "all" after
// it when every turn found is weighed by its similarity (Fusion.SemanticAll).
func semanticCol(f recall.Fusion) string {
	if f.SemanticAll {
		return fmt.Sprintf("%.2f all", f.Semantic)
	}
	return fmt.Sprintf("%.2f", f.Semantic)
}

// whenCol is the time-answer lift as the tune tables show it, "all" after it
// when it lifts in the whole list (Fusion.TimeAnswerAll).
func whenCol(f recall.Fusion) string {
	if f.TimeAnswerAll {
		return fmt.Sprintf("%.2f all", f.TimeAnswer)
	}
	return fmt.Sprintf("%.2f", f.TimeAnswer)
}

// SpeakerGrid lifts the turns of the speaker a question names
// (Fusion.SpeakerNamed) by growing shares.
func SpeakerGrid() []recall.Fusion {
	out := []recall.Fusion{recall.DefaultFusion()}
	for _, s := range []float64{0.05, 0.1, 0.2, 0.3, 0.5, 1} {
		f := recall.DefaultFusion()
		f.SpeakerNamed = s
		out = addSetting(out, f)
	}
	return out
}

// ContextAllGrid is the grid of the context and session weights (Fusion.Context,
// Fusion.Session) rechecked now that every turn found is weighed by its meaning
// (Fusion.SemanticAll): the words of the turns around a turn and of its session.
func ContextAllGrid() []recall.Fusion {
	return pairGrid([]float64{0, 0.25, 0.5}, []float64{0.3, 0.6, 1}, func(f *recall.Fusion, c, s float64) { f.Context, f.Session = c, s })
}

// FeedbackGrid is the grid of the feedback pass (Fusion.Feedback, FeedbackFrom):
// its weight, and how many of the best turns it starts from.
func FeedbackGrid() []recall.Fusion {
	return pairGrid([]float64{0.2, 0.4, 0.6}, []float64{1, 3, 5}, func(f *recall.Fusion, w, from float64) { f.Feedback, f.FeedbackFrom = w, int(from) })
}

// WhenGrid lifts the items that name a time when the question asks when
// (Fusion.TimeAnswer) by growing shares, among the leaders only or in the whole
// list as well (TimeAnswerAll).
func WhenGrid() []recall.Fusion {
	out := pairGrid([]float64{0.2, 0.5, 0.75, 1}, []float64{0}, func(f *recall.Fusion, w, _ float64) { f.TimeAnswer = w })
	for _, f := range pairGrid([]float64{0.2, 0.5}, []float64{1}, func(f *recall.Fusion, w, _ float64) { f.TimeAnswer, f.TimeAnswerAll = w, true }) {
		out = addSetting(out, f)
	}
	return out
}

// TimeAskedGrid lifts the items said in the time the question names
// (Fusion.TimeAsked) by growing shares.
func TimeAskedGrid() []recall.Fusion {
	return pairGrid([]float64{0.5, 0.75, 1, 1.5, 2}, []float64{0}, func(f *recall.Fusion, w, _ float64) { f.TimeAsked = w })
}

// LeadAskingGrid lowers among the leaders a turn that ends by asking
// (Fusion.LeadAsking) by growing shares.
func LeadAskingGrid() []recall.Fusion {
	return pairGrid([]float64{0.1, 0.2, 0.3, 0.5}, []float64{0}, func(f *recall.Fusion, w, _ float64) { f.LeadAsking = w })
}

// AblateGrid is the defaults and, one at a time, each technique chosen on LoCoMo
// switched off (the adjacent turns, the speaker lift, every turn weighed by its
// meaning, the feedback pass, the when-lift, the time asked about, the asking
// turn): with --bursts, whether each still earns its place when the same
// conversations are told as real chat.
func AblateGrid() []recall.Fusion {
	out := []recall.Fusion{recall.DefaultFusion()}
	for _, off := range []func(f *recall.Fusion){
		func(f *recall.Fusion) { f.Adjacent = 0 },
		func(f *recall.Fusion) { f.SpeakerNamed = 0 },
		func(f *recall.Fusion) { f.SemanticAll = false },
		func(f *recall.Fusion) { f.Feedback = 0 },
		func(f *recall.Fusion) { f.TimeAnswer, f.TimeAnswerAll = 0, false },
		func(f *recall.Fusion) { f.TimeAsked = 0 },
		func(f *recall.Fusion) { f.LeadAsking = 0 },
	} {
		f := recall.DefaultFusion()
		off(&f)
		out = addSetting(out, f)
	}
	return out
}

// AdjacentBurstsGrid counts the adjacent turns' span in bursts or in messages
// (Fusion.AdjacentBursts) at shares around the default, beside no adjacent turns
// at all.
func AdjacentBurstsGrid() []recall.Fusion {
	out := pairGrid([]float64{0, 1}, []float64{0.5, 0.8}, func(f *recall.Fusion, b, a float64) { f.AdjacentBursts, f.Adjacent = b == 1, a })
	off := recall.DefaultFusion()
	off.Adjacent = 0
	return addSetting(out, off)
}

// burstsCol marks an adjacent span counted in bursts ("b"); nothing for messages.
func burstsCol(f recall.Fusion) string {
	if f.AdjacentBursts {
		return "b"
	}
	return ""
}

// pairGrid is the defaults and every pair of as and bs set on them by set.
func pairGrid(as, bs []float64, set func(f *recall.Fusion, a, b float64)) []recall.Fusion {
	out := []recall.Fusion{recall.DefaultFusion()}
	for _, a := range as {
		for _, b := range bs {
			f := recall.DefaultFusion()
			set(&f, a, b)
			out = addSetting(out, f)
		}
	}
	return out
}

// SemanticAllGrid weighs every turn a retriever found by its similarity
// (Fusion.SemanticAll), at semantic weights around the default and keyword
// weights above it, and the same weights without it.
func SemanticAllGrid() []recall.Fusion {
	out := []recall.Fusion{recall.DefaultFusion()}
	for _, all := range []bool{true, false} {
		for _, sem := range []float64{2, 3, 4} {
			for _, kw := range []float64{1, 1.5} {
				f := recall.DefaultFusion()
				f.SemanticAll, f.Semantic, f.Keyword = all, sem, kw
				out = addSetting(out, f)
			}
		}
	}
	return out
}

// BalanceGrid is the grid between the defaults before LoCoMo (context 0, session
// 0.3, no adjacent turns) and LoCoMo's best (AroundGrid): lower context and
// session weights, with and without the adjacent turns, for settings that hold
// on LoCoMo's halves and keep the shipped suites' thresholds.
func BalanceGrid() []recall.Fusion {
	before := recall.DefaultFusion()
	before.Context, before.Session, before.Adjacent, before.AdjacentFrom, before.AdjacentSpan = 0, 0.3, 0, 0, 0
	out := []recall.Fusion{recall.DefaultFusion()}
	for _, c := range []float64{0, 0.25, 0.5} {
		for _, ss := range []float64{0.3, 0.6} {
			for _, adj := range []float64{0, 0.8} {
				f := before
				f.Context, f.Session = c, ss
				if adj > 0 {
					f.Adjacent, f.AdjacentFrom, f.AdjacentSpan = adj, 3, 2
				}
				out = addSetting(out, f)
			}
		}
	}
	return out
}
