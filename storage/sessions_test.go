package storage_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

func turn(i int) storage.Turn {
	return storage.Turn{EvidenceID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Speaker: "USER:u1", Text: fmt.Sprintf("turn %d", i), At: t0.Add(time.Duration(i) * time.Minute)}
}

func TestAppendTurnKeepsTheLastTurnsInOrder(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	for i := 0; i < 15; i++ {
		_, appended, err := st.AppendTurn(ctx, "tA", "s1", "u1", turn(i), 12)
		require.NoError(t, err)
		assert.True(t, appended)
	}
	s, err := st.GetSession(ctx, "tA", "s1")
	require.NoError(t, err)
	require.Len(t, s.Recent, 12)
	assert.Equal(t, "turn 3", s.Recent[0].Text)
	assert.Equal(t, "turn 14", s.Recent[11].Text)
	assert.Equal(t, 15, s.TurnCount)
	assert.Equal(t, "u1", s.UserID)

	// Idempotent: a turn kept, or one that aged out of a full window, is not added.
	_, appended, err := st.AppendTurn(ctx, "tA", "s1", "u1", turn(10), 12)
	require.NoError(t, err)
	assert.False(t, appended)
	_, appended, err = st.AppendTurn(ctx, "tA", "s1", "u1", turn(1), 12)
	require.NoError(t, err)
	assert.False(t, appended)
	s, _ = st.GetSession(ctx, "tA", "s1")
	assert.Equal(t, 15, s.TurnCount)

	// A late turn is put in time order.
	late := turn(100)
	late.At = t0.Add(10*time.Minute + 30*time.Second)
	_, appended, err = st.AppendTurn(ctx, "tA", "s1", "u1", late, 12)
	require.NoError(t, err)
	assert.True(t, appended)
	s, _ = st.GetSession(ctx, "tA", "s1")
	assert.Equal(t, "turn 100", s.Recent[7].Text)

	// Another user cannot write into this session; another tenant has its own.
	_, _, err = st.AppendTurn(ctx, "tA", "s1", "u2", turn(200), 12)
	var fe memory.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "session_id", fe.Field)
	_, appended, err = st.AppendTurn(ctx, "tB", "s1", "u2", turn(1), 12)
	require.NoError(t, err)
	assert.True(t, appended)
}

// A turn that aged out of a full window at the same instant as the oldest turn
// kept (turns of one instant are common in imports) is still a replay: sent
// again it is not appended, and the session's count does not move.
func TestAppendTurnReplayOfATieThatAgedOut(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	a, b, c := turn(1), turn(2), turn(3)
	b.At, c.At = a.At, a.At.Add(time.Minute)
	for _, tu := range []storage.Turn{a, b, c} {
		_, appended, err := st.AppendTurn(ctx, "tA", "s1", "u1", tu, 2)
		require.NoError(t, err)
		require.True(t, appended)
	}
	s, err := st.GetSession(ctx, "tA", "s1")
	require.NoError(t, err)
	require.Equal(t, []string{"turn 2", "turn 3"}, []string{s.Recent[0].Text, s.Recent[1].Text})
	_, appended, err := st.AppendTurn(ctx, "tA", "s1", "u1", a, 2)
	require.NoError(t, err)
	assert.False(t, appended, "the replay of a turn that aged out at the oldest kept instant")
	s, _ = st.GetSession(ctx, "tA", "s1")
	assert.Equal(t, 3, s.TurnCount)
}

func TestAppendTurnConcurrentWritersLoseNothing(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, err := st.AppendTurn(ctx, "tA", "s1", "u1", turn(i), 12)
			assert.NoError(t, err)
		}(i)
	}
	wg.Wait()
	s, err := st.GetSession(ctx, "tA", "s1")
	require.NoError(t, err)
	assert.Len(t, s.Recent, 8)
	assert.Equal(t, 8, s.TurnCount)
}

func TestSessionSummaryEveryMTurnsNeverGoesBack(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	var s *storage.Session
	var err error
	for i := 0; i < 5; i++ {
		s, _, err = st.AppendTurn(ctx, "tA", "s1", "u1", turn(i), 12)
		require.NoError(t, err)
	}
	_, due := s.SummaryDue(6)
	assert.False(t, due)
	s, _, err = st.AppendTurn(ctx, "tA", "s1", "u1", turn(5), 12)
	require.NoError(t, err)
	turns, due := s.SummaryDue(6)
	require.True(t, due)
	assert.Len(t, turns, 6)
	ok, err := st.SetSessionSummary(ctx, "tA", "s1", 6, "summary at 6")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = st.SetSessionSummary(ctx, "tA", "s1", 6, "a retried summary")
	require.NoError(t, err)
	assert.False(t, ok, "a summary never replaces one as new")
	s, _ = st.GetSession(ctx, "tA", "s1")
	assert.Equal(t, "summary at 6", s.Summary)
	_, due = s.SummaryDue(6)
	assert.False(t, due)

	_, _, err = st.AppendTurn(ctx, "", "s1", "u1", turn(9), 12)
	assert.Error(t, err)
	_, _, err = st.AppendTurn(ctx, "tA", "s1", "u1", storage.Turn{Text: "x", At: t0}, 12)
	assert.Error(t, err)
}
