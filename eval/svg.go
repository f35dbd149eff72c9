package eval

import (
	"fmt"
	"html"
	"strings"
)

// svgSeries are the bars drawn per category.
var svgSeries = []struct {
	name  string
	color string
	value func(m Metrics, base *Metrics) (float64, bool)
}{
	{"recall@5", "#2b6cb0", func(m Metrics, _ *Metrics) (float64, bool) { v, ok := m.RecallAt["5"]; return v, ok }},
	{"MRR", "#38a169", func(m Metrics, _ *Metrics) (float64, bool) { return m.MRR, m.RecallProbes > 0 }},
	{"evidence recall@10", "#805ad5", func(m Metrics, _ *Metrics) (float64, bool) {
		v, ok := m.EvidenceAt["10"]
		return v, ok && m.EvidenceProbes > 0
	}},
	{"baseline evidence recall@10", "#b7a6dc", func(_ Metrics, b *Metrics) (float64, bool) {
		if b == nil || b.EvidenceProbes == 0 {
			return 0, false
		}
		return b.EvidenceAt["10"], true
	}},
	{"false recall", "#dd6b20", func(m Metrics, _ *Metrics) (float64, bool) { return m.FalseRecallRate, m.MustNotProbes > 0 }},
	{"stale", "#e53e3e", func(m Metrics, _ *Metrics) (float64, bool) { return m.StaleRate, true }},
	{"scope leak", "#000000", func(m Metrics, _ *Metrics) (float64, bool) { return m.ScopeLeakRate, true }},
}

// SVG draws the per-category figures as grouped bars (0..1), one group per suite
// and category, written by hand so it needs no plotting library.
func (r *Report) SVG() string {
	type group struct {
		label string
		m     Metrics
		base  *Metrics
	}
	var groups []group
	for _, s := range r.Suites {
		groups = append(groups, group{s.Suite + " (all)", s.Overall, s.Baseline})
		for _, c := range sortedKeys(s.Categories) {
			var base *Metrics
			if b, ok := s.BaselineCategories[c]; ok {
				base = &b
			}
			groups = append(groups, group{s.Suite + " / " + c, s.Categories[c], base})
		}
	}
	const barW, gap, left, top, plotH, bottom = 10, 16, 50, 60, 260, 170
	groupW := len(svgSeries)*barW + gap
	width := left + len(groups)*groupW + 40
	if width < 700 {
		width = 700
	}
	height := top + plotH + bottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">Engram eval — mode %s, k = %d: figures per suite and category</text>`+"\n", left, html.EscapeString(r.Mode), r.K)
	x := left
	for _, s := range svgSeries {
		fmt.Fprintf(&b, `<rect x="%d" y="32" width="10" height="10" fill="%s"/><text x="%d" y="41">%s</text>`+"\n", x, s.color, x+14, s.name)
		x += 14 + 7*len(s.name) + 24 // the label's width at 11 px, and a gap
	}
	for i := 0; i <= 4; i++ {
		v := float64(i) / 4
		y := top + plotH - int(v*plotH)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/><text x="%d" y="%d" text-anchor="end">%.2f</text>`+"\n", left, y, width-20, y, left-6, y+4, v)
	}
	for gi, g := range groups {
		x0 := left + gi*groupW + gap/2
		for si, s := range svgSeries {
			v, ok := s.value(g.m, g.base)
			if !ok {
				continue
			}
			h := int(v * plotH)
			if h == 0 && v > 0 {
				h = 1
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s %s: %.3f</title></rect>`+"\n",
				x0+si*barW, top+plotH-h, barW-1, h, s.color, html.EscapeString(g.label), s.name, v)
		}
		lx := x0 + len(svgSeries)*barW/2
		ly := top + plotH + 10
		fmt.Fprintf(&b, `<text x="%d" y="%d" transform="rotate(55 %d %d)">%s (%d)</text>`+"\n", lx, ly, lx, ly, html.EscapeString(g.label), g.m.Probes)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, top+plotH, width-20, top+plotH)
	b.WriteString("</svg>\n")
	return b.String()
}
