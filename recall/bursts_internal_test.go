package recall

import (
	"maps"
	"testing"
	"time"
)

// inBursts keeps, of each burst next to an anchor, the message nearest it, at
// its distance in bursts: the question before, the reply's first message 1
// away, the next burst's first 2; not the rest of the anchor's own burst, nor
// past the span. Where speakers alternate on every message, nothing changes.
func TestInBursts(t *testing.T) {
	t0 := time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC)
	// Messages 5 s apart, the anchor at t0.
	row := func(id, speaker string, dist int) adjacentRow {
		return adjacentRow{evidenceRow: evidenceRow{ID: id, Speaker: speaker, OccurredAt: t0.Add(time.Duration(dist) * 5 * time.Second)},
			Anchor: "a", AnchorSpeaker: "USER:maya", AnchorAt: t0, Dist: dist}
	}
	// … ben: "how did you two meet?" | maya (anchor): "oh that's a story" / "in college" / "engineering class" | ben: "no way" / "same here" | maya: "ha"
	rows := []adjacentRow{
		row("q", "USER:ben", -1),
		row("m2", "USER:maya", 1), row("m3", "USER:maya", 2),
		row("b1", "USER:ben", 3), row("b2", "USER:ben", 4),
		row("m4", "USER:maya", 5),
	}
	got := func(rs []adjacentRow) map[string]int {
		out := map[string]int{}
		for _, r := range rs {
			out[r.ID] = r.Dist
		}
		return out
	}
	want := map[string]int{"q": -1, "b1": 1, "m4": 2}
	if g := got(inBursts(append([]adjacentRow{}, rows...), 2)); !maps.Equal(g, want) {
		t.Errorf("span 2: %v, want %v", g, want)
	}
	want = map[string]int{"q": -1, "b1": 1}
	if g := got(inBursts(append([]adjacentRow{}, rows...), 1)); !maps.Equal(g, want) {
		t.Errorf("span 1: %v, want %v", g, want)
	}
	alternating := []adjacentRow{row("x1", "USER:maya", -2), row("x2", "USER:ben", -1), row("y1", "USER:ben", 1), row("y2", "USER:maya", 2)}
	if g := got(inBursts(append([]adjacentRow{}, alternating...), 2)); !maps.Equal(g, map[string]int{"x1": -2, "x2": -1, "y1": 1, "y2": 2}) {
		t.Errorf("alternating: %v, want the distances in messages", g)
	}
	// One speaker alone, a minute between messages: each message is a burst.
	alone := []adjacentRow{row("p1", "USER:maya", -1), row("n1", "USER:maya", 1), row("n2", "USER:maya", 2)}
	for i := range alone {
		alone[i].OccurredAt = t0.Add(time.Duration(alone[i].Dist) * time.Minute)
	}
	if g := got(inBursts(alone, 2)); !maps.Equal(g, map[string]int{"p1": -1, "n1": 1, "n2": 2}) {
		t.Errorf("one speaker, pausing: %v, want the distances in messages", g)
	}
}
