package writebench

import "testing"

func TestLevelWrites(t *testing.T) {
	for _, c := range []struct{ writes, callers, rounds, want int }{
		{200, 1, 4, 200},   // plenty per caller already
		{200, 8, 4, 256},   // 8 callers × 8 × 4 rounds
		{200, 32, 4, 1024}, // 32 callers × 8 × 4 rounds
		{5000, 32, 4, 5000},
		{200, 32, 0, 256}, // rounds below one count as one
		{0, 32, 4, 0},     // --writes 0 skips the level
	} {
		if got := LevelWrites(c.writes, c.callers, c.rounds); got != c.want {
			t.Errorf("LevelWrites(%d, %d, %d) = %d, want %d", c.writes, c.callers, c.rounds, got, c.want)
		}
	}
}
