package recallstack

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

func TestLatencyRatio(t *testing.T) {
	for _, c := range []struct{ a, b, want float64 }{
		{30, 10, 3}, {12.5, 10, 1.25}, {10, 30, 0.33}, {5, 0, 0}, {0, 0, 0},
	} {
		if got := latencyRatio(c.a, c.b); got != c.want {
			t.Errorf("latencyRatio(%g, %g) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
}

// A database is unanalysed when no table was analysed, the planner counts evidence
// as never counted or empty, evidence has no column statistics and autovacuum is off
// on every table; each departure is named.
func TestUnanalysedStatsCheck(t *testing.T) {
	ok := UnanalysedStats{EvidenceReltuples: 0, EvidenceRows: 1200, Tables: 20}
	if err := ok.unanalysed(); err != nil {
		t.Fatalf("reltuples 0: %v", err)
	}
	ok.EvidenceReltuples = -1
	if err := ok.unanalysed(); err != nil {
		t.Fatalf("reltuples -1: %v", err)
	}
	for _, c := range []struct {
		s    UnanalysedStats
		want string
	}{
		{UnanalysedStats{AnalysedTables: []string{"evidence", "facts"}}, "analysed tables: evidence, facts"},
		{UnanalysedStats{EvidenceReltuples: 1200}, "reltuples of evidence is 1200"},
		{UnanalysedStats{EvidenceColumnStats: 3}, "3 columns of evidence"},
		{UnanalysedStats{AutovacuumOn: []string{"sessions"}}, "autovacuum on for: sessions"},
	} {
		err := c.s.unanalysed()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.s, err, c.want)
		}
	}
}

func TestPrintUnanalysed(t *testing.T) {
	un := UnanalysedPhase{P50: 9, P95: 40, LightP95: 7, Stats: UnanalysedStats{EvidenceReltuples: 0, EvidenceRows: 10200}}
	an := UnanalysedPhase{P50: 8, P95: 10, LightP95: 6, Stats: UnanalysedStats{EvidenceReltuples: 10200, EvidenceRows: 10200}}
	rep := &UnanalysedReport{Queries: 30, TargetRatio: UnanalysedTargetRatio, Points: []UnanalysedPoint{
		{Turns: 1000, Unanalysed: UnanalysedPhase{P50: 9, P95: 12, Stats: un.Stats}, Analysed: an, RatioP95: 1.2},
		{Turns: 10000, Unanalysed: un, Analysed: an, RatioP95: 4},
	}}
	var b bytes.Buffer
	PrintUnanalysed(&b, rep)
	out := b.String()
	for _, want := range []string{"ratio p95", "reltuples seen", " 1.20 ", "4.00 (> 3)", "0 → 10200 of 10200", "7.00/6.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// The bench drops the database it measures: a named one is refused before anything
// is touched, as are sizes past the dated range.
func TestUnanalysedRefusals(t *testing.T) {
	ctx := context.Background()
	_, err := RunUnanalysed(ctx, UnanalysedConfig{Sizes: []int{10}, Queries: 1, DatabaseURL: "postgres://nobody@127.0.0.1:1/x"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--database-url") || !strings.Contains(err.Error(), UnanalysedDatabase) {
		t.Errorf("RunUnanalysed(--database-url) = %v, want the refusal naming %s", err, UnanalysedDatabase)
	}
	_, err = RunUnanalysed(ctx, UnanalysedConfig{Sizes: []int{MaxHistoryTurns + 1}, Queries: 1}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--unanalysed") {
		t.Errorf("RunUnanalysed(%d turns) = %v, want an error naming --unanalysed", MaxHistoryTurns+1, err)
	}
}
