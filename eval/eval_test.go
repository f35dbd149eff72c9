package eval

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShippedSuitesParseWithEnoughProbes(t *testing.T) {
	suites, err := Shipped()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, s := range suites {
		names[s.Name] = true
		for _, sc := range s.Scenarios {
			for _, p := range sc.Probes {
				assert.NotEmpty(t, p.Question, "%s/%s/%s", s.Name, sc.Name, p.ID)
				assert.False(t, p.When().IsZero(), "%s/%s/%s has an as_of", s.Name, sc.Name, p.ID)
			}
		}
	}
	for _, n := range []string{"seed_zh", "seed_en", "hallucination", "temporal"} {
		assert.True(t, names[n], "suite %s is shipped", n)
	}
	assert.GreaterOrEqual(t, ProbeCount(suites), 300)
}

func TestGoldOfShippedSuitesValidates(t *testing.T) {
	suites, err := Shipped()
	require.NoError(t, err)
	var jobs []job
	for _, s := range suites {
		for i := range s.Scenarios {
			jobs = append(jobs, job{s, &s.Scenarios[i]})
		}
	}
	script, n, err := GoldScript(jobs)
	require.NoError(t, err)
	assert.Greater(t, n, 50)
	// Rules that tell identical texts apart come before the plain ones.
	assert.NotEmpty(t, script.Rules)
}

func TestVarsExpandAndParaphrasesBecomeProbes(t *testing.T) {
	s, err := ParseSuite([]byte(`
name: x
scenarios:
  - name: a
    start: "2026-01-01T00:00:00Z"
    users: [{id: u1}]
    vars: [{v: "1"}, {v: "2"}]
    turns:
      - {id: t1, speaker: u1, time: "+1h", text: "budget ${v}"}
    probes:
      - {id: p, user: u1, questions: ["q ${v}", "r"], must_recall: [{content: "${v}"}], evidence: [t1]}
`), "x.yaml")
	require.NoError(t, err)
	require.Len(t, s.Scenarios, 2)
	assert.Equal(t, "budget 2", s.Scenarios[1].Turns[0].Text)
	require.Len(t, s.Scenarios[1].Probes, 2)
	assert.Equal(t, "q 2", s.Scenarios[1].Probes[0].Question)
	assert.Equal(t, "2", s.Scenarios[1].Probes[1].MustRecall[0].Content)
	assert.Equal(t, time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC), s.Scenarios[0].Probes[0].When(), "default as_of: an hour after the last turn")
}

func TestBadScenariosAreRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown speaker":  `{name: a, users: [{id: u1}], turns: [{speaker: u2, time: "2026-01-01", text: hi}], probes: []}`,
		"unknown turn":     `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, time: "2026-01-01", text: hi}], probes: [{user: u1, question: q, evidence: [t9]}]}`,
		"no expectation":   `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, time: "2026-01-01", text: hi}], probes: [{user: u1, question: q}]}`,
		"unknown task":     `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, task: x, time: "2026-01-01", text: hi}], probes: []}`,
		"bad reason":       `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, time: "2026-01-01", text: hi}], probes: [{user: u1, question: q, must_not_recall: [{content: x, reason: nope}]}]}`,
		"unreadable time":  `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, time: "yesterday", text: hi}], probes: []}`,
		"unknown field":    `{name: a, users: [{id: u1}], turns: [{id: t1, speaker: u1, time: "2026-01-01", text: hi, colour: red}], probes: []}`,
		"user not in list": `{name: a, users: [{id: u1, tenant: t9}], turns: [], probes: []}`,
	} {
		_, err := ParseSuite([]byte("name: x\nscenarios:\n  - "+doc+"\n"), "x.yaml")
		assert.Error(t, err, name)
	}
}

func TestNormaliseEvidence(t *testing.T) {
	ids, repaired, bad := NormaliseEvidence([]string{"D8:6; D9:17", "D:11:26", "D30:05", "D1:3", "see"})
	assert.Equal(t, []string{"D8:6", "D9:17", "D11:26", "D30:5", "D1:3"}, ids)
	assert.Equal(t, 3, repaired)
	assert.Equal(t, []string{"see"}, bad)
}

func TestParseLoCoMoTime(t *testing.T) {
	got, err := ParseLoCoMoTime("1:56 pm on 8 May, 2023")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), got)
	got, err = ParseLoCoMoTime("10:04 am on 20 January, 2023")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2023, 1, 20, 10, 4, 0, 0, time.UTC), got)
	_, err = ParseLoCoMoTime("tomorrow")
	assert.Error(t, err)
}

func TestLoadLoCoMoSmall(t *testing.T) {
	s, st, err := LoadLoCoMo("testdata/locomo_small.json")
	require.NoError(t, err)
	require.Len(t, s.Scenarios, 2)
	assert.Equal(t, 2, st.Samples)
	assert.Equal(t, 12, st.Turns)
	assert.Equal(t, 13, st.Questions)
	assert.Equal(t, 2, st.Unresolved, "D9:99 and D30:5 name no turn")
	assert.Equal(t, 2, st.Unreadable, `"see above" is no evidence id`)
	assert.Equal(t, 4, st.Normalised)
	assert.Equal(t, 2, st.NoEvidence)
	c := s.Scenarios[0]
	assert.Equal(t, "locomo-conv-small-1", c.Users[0].ID)
	assert.Equal(t, time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), c.Turns[0].At())
	assert.Equal(t, time.Date(2023, 5, 25, 13, 14, 1, 0, time.UTC), c.Turns[5].At())
	assert.Contains(t, c.Turns[3].Text, "shares a photo")
	assert.Equal(t, "D1:1", c.Turns[0].Locator)
	cats := map[string]int{}
	for _, sc := range s.Scenarios {
		for _, p := range sc.Probes {
			cats[p.Category]++
		}
	}
	assert.Equal(t, map[string]int{"1-multi-hop": 2, "2-temporal": 2, "3-open-domain": 1, "4-single-hop": 5, "5-adversarial": 1}, cats)
}

func TestThresholdsAndReports(t *testing.T) {
	rep := &Report{Mode: "rules", K: 10, Suites: []SuiteReport{{
		Suite: "s", Mode: "rules",
		Overall:    Metrics{Probes: 2, RecallProbes: 2, RecallAt: map[string]float64{"1": 0.5, "5": 0.8, "10": 1}, MRR: 0.7, StaleRate: 0.5, TenantLeaks: 1},
		Categories: map[string]Metrics{"a": {Probes: 2, RecallAt: map[string]float64{"5": 0.8}}},
		Thresholds: Thresholds{"all": {Min: map[string]float64{"recall@5": 0.9}}, "rules": {Max: map[string]float64{"stale_fact_rate": 0}}}.For("rules"),
	}}}
	rep.Check()
	f := strings.Join(rep.Failures(), "\n")
	assert.Contains(t, f, "recall@5 = 0.800 is below the threshold 0.900")
	assert.Contains(t, f, "stale_fact_rate = 0.500 is above")
	assert.Contains(t, f, "cross_tenant_leaks = 1.000 is above the threshold 0.000", "no tenant leak is allowed on any suite")
	var b strings.Builder
	rep.WriteTable(&b)
	assert.Contains(t, b.String(), "FAIL")
	b.Reset()
	rep.WriteMarkdown(&b)
	assert.Contains(t, b.String(), "| s | **all** |")
	var doc struct{ XMLName xml.Name }
	require.NoError(t, xml.Unmarshal([]byte(rep.SVG()), &doc), "the chart is well-formed XML")
	assert.Equal(t, "svg", doc.XMLName.Local)
}

func TestAggregate(t *testing.T) {
	ps := []ProbeResult{
		{Score: ProbeScore{HasRecall: true, RecallAt: map[int]float64{1: 1, 5: 1, 10: 1}, RR: 1, PrecisionAt: 0.5, Facts: 2, Unsupported: 1}},
		{Score: ProbeScore{HasRecall: true, RecallAt: map[int]float64{1: 0, 5: 0.5, 10: 1}, RR: 0.25, HasMustNot: true, FalseRecall: true, Stale: true}},
		{Score: ProbeScore{HasMustNot: true}},
	}
	m := aggregate(ps, 10)
	assert.InDelta(t, 0.5, m.RecallAt["1"], 1e-9)
	assert.InDelta(t, 0.75, m.RecallAt["5"], 1e-9)
	assert.InDelta(t, 0.625, m.MRR, 1e-9)
	assert.InDelta(t, 0.5, m.FalseRecallRate, 1e-9)
	assert.InDelta(t, 1.0/3, m.StaleRate, 1e-9)
	assert.InDelta(t, 0.5, m.UnsupportedRate, 1e-9)
}

func TestComparisonTable(t *testing.T) {
	rep := func(r10, mrr float64) *Report {
		return &Report{Suites: []SuiteReport{{Suite: "s1", Overall: Metrics{RecallProbes: 4, RecallAt: map[string]float64{"10": r10}, MRR: mrr}}}}
	}
	c := &Comparison{
		Variants:  []Variant{{Name: "semantic-only", Retrievers: []string{"semantic"}}, {Name: "hybrid"}},
		Embedders: []string{"ngram", "composite"},
		Reports:   [][]*Report{{rep(0.5, 0.25), rep(1, 0.9)}, {rep(0.75, 0.5), rep(1, 0.95)}},
	}
	var b strings.Builder
	c.WriteTable(&b)
	out := b.String()
	for _, want := range []string{"ngram R@10", "composite MRR", "semantic-only", "50.0%", "75.0%", "0.950"} {
		assert.Contains(t, out, want)
	}
}
