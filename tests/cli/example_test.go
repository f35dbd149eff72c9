package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/testenv"
)

// TestTravelAgentExample runs examples/travelagent against a real `engram serve`
// whose action endpoint is the example's own (stalling) hotel desk.
func TestTravelAgentExample(t *testing.T) {
	actionAddr := freePort(t)
	s := startServe(t, "ENGRAM_ACTION_URL=http://"+actionAddr+"/actions", "ENGRAM_ACTION_TIMEOUT=2s")
	key := s.key("ex-"+testenv.RandomID(6), "travelagent", "agent")
	bin := testenv.Build(t, "./examples/travelagent")

	r := run(t, bin, append(cleanEnv(), "ENGRAM_API_KEY="+key), "", "--addr", s.url, "--action-addr", actionAddr, "--user", "u1", "--task", "trip-1")
	out := r.ok(t, "travelagent")
	t.Logf("travelagent printed:\n%s", out)

	// After turn 3 the context names this trip's 10000 above the user's 8000.
	_, turn3, ok := strings.Cut(out, "--- recalled context after turn 3")
	require.True(t, ok, "a context after turn 3")
	turn3, _, _ = strings.Cut(turn3, "\n---\n")
	i10, i8 := strings.Index(turn3, "10000 CNY"), strings.Index(turn3, "8000 CNY")
	require.True(t, i10 >= 0 && i8 >= 0, "both budgets in the context:\n%s", turn3)
	assert.Less(t, i10, i8, "the task budget 10000 comes above the user budget 8000:\n%s", turn3)
	assert.Contains(t, turn3, "TASK scope")

	// Each turn prints its context; the direct-flight preference is remembered.
	for _, turn := range []string{"turn 1", "turn 2", "turn 3", "turn 4"} {
		assert.Contains(t, out, "--- recalled context after "+turn)
	}
	assert.Contains(t, out, "flight_type: direct")

	// The hotel step went OUTCOME_UNKNOWN, was reconciled, and the hotel was booked once.
	assert.Contains(t, out, "task is OUTCOME_UNKNOWN")
	assert.Contains(t, out, "→ OUTCOME_UNKNOWN")
	assert.Contains(t, out, "reconciled after")
	assert.Contains(t, out, "step hotel: DONE after 1 send(s)")
	assert.Contains(t, out, "the hotel was booked 1 time(s)")
	assert.Contains(t, out, "state: COMPLETED")
}
