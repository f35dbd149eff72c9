package recallstack

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// The largest history the bench grows is dated before today: Ingest refuses a turn
// more than a day ahead, which stopped a 100k run at turn 87,000 when sessions were a
// day apart from 2015.
func TestHistoryDatesStayInThePast(t *testing.T) {
	last := historyTurn("hist", heavyUser, MaxHistoryTurns-1).GetOccurredAt().AsTime()
	if !last.Before(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("turn %d is dated %s, too close to today", MaxHistoryTurns-1, last)
	}
	prev := historyTurn("hist", heavyUser, 0).GetOccurredAt().AsTime()
	for _, i := range []int{1, 19, 20, 21, 99_999, 100_000} {
		at := historyTurn("hist", heavyUser, i).GetOccurredAt().AsTime()
		if !at.After(prev) {
			t.Fatalf("turn %d at %s is not after the turn before it (%s)", i, at, prev)
		}
		prev = at
	}
}

func TestHistoryRefusesSizesPastTheDatedRange(t *testing.T) {
	_, err := RunHistory(context.Background(), HistoryConfig{Sizes: []int{1000, MaxHistoryTurns + 1}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--history") {
		t.Fatalf("RunHistory(%d turns) = %v, want an error naming --history", MaxHistoryTurns+1, err)
	}
}

// --reload with --database-url is refused before anything is touched: the bench
// drops only its own database, and would otherwise grow the named one unasked.
func TestHistoryReloadRefusesANamedDatabase(t *testing.T) {
	_, err := RunHistory(context.Background(), HistoryConfig{Sizes: []int{10}, Reload: true, DatabaseURL: "postgres://nobody@127.0.0.1:1/x"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--reload") || !strings.Contains(err.Error(), HistoryDatabase) {
		t.Fatalf("RunHistory = %v, want the --reload refusal naming %s", err, HistoryDatabase)
	}
}
