package eval

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/recall"
)

// Told as bursts, a turn of several sentences becomes several messages and its
// photo one more; each later message names the turn it is part of, carries its
// locator and follows it by a second; the questions and their evidence stay; the
// same file is told the same way twice.
func TestLoadLoCoMoBursts(t *testing.T) {
	plain, _, err := LoadLoCoMo("testdata/locomo_small.json")
	require.NoError(t, err)
	s, st, err := LoadLoCoMoAs("testdata/locomo_small.json", LoCoMoOptions{Bursts: true})
	require.NoError(t, err)
	assert.Equal(t, 12, st.Turns, "turns are counted as LoCoMo's")
	c, p := s.Scenarios[0], plain.Scenarios[0]
	require.Greater(t, len(c.Turns), len(p.Turns))
	require.Len(t, c.Probes, len(p.Probes))
	for i := range p.Probes {
		assert.Equal(t, p.Probes[i].Question, c.Probes[i].Question)
		assert.Equal(t, p.Probes[i].Evidence, c.Probes[i].Evidence)
	}

	byID := map[string]Turn{}
	parts := map[string][]string{}
	for _, tt := range c.Turns {
		byID[tt.ID] = tt
		if tt.Part != "" {
			parts[tt.Part] = append(parts[tt.Part], tt.Text)
			whole := byID[tt.Part]
			assert.Equal(t, whole.Locator, tt.Locator, tt.ID)
			assert.True(t, tt.At().After(whole.At()), "%s follows %s", tt.ID, tt.Part)
		}
	}
	// "Hi Tomasz! I harvested honey from my two beehives yesterday and got nine jars out of it."
	assert.NotEmpty(t, parts["D1:1"], "a turn of two sentences is two messages")
	assert.Equal(t, []string{"[shares a photo: a photo of a half-painted wooden sailboat on a trailer in a garage]"}, parts["D1:4"],
		"the photo is a message of its own")
	assert.NotContains(t, byID["D1:4"].Text, "shares a photo")

	again, _, err := LoadLoCoMoAs("testdata/locomo_small.json", LoCoMoOptions{Bursts: true})
	require.NoError(t, err)
	assert.Equal(t, s.Scenarios, again.Scenarios)
}

func TestNoisyMessages(t *testing.T) {
	assert.Equal(t, "bceause", swapLetters("because"))
	assert.Equal(t, "a-b-c", swapLetters("a-b-c"), "no two letters side by side")
	// Over many messages the shares come out near what they are set to.
	lower, emoji, n := 0, 0, 2000
	for i := 0; i < n; i++ {
		m := noisy("D1:1", i, "We went Hiking.")
		if m[0] == 'w' {
			lower++
		}
		if len(m) > len("we went hiking.") {
			emoji++
		}
	}
	assert.InDelta(t, burstLower, float64(lower)/float64(n), 0.05)
	assert.InDelta(t, burstEmoji, float64(emoji)/float64(n), 0.05)
}

// An evidence turn told in several messages is found when any of them is.
func TestEvidenceFoundThroughAnyMessage(t *testing.T) {
	pc := probeContext{
		probe: Probe{Evidence: []string{"D1:1"}},
		k:     10,
		items: []recall.Item{{Kind: recall.KindEvidence, ID: "ev-other"}, {Kind: recall.KindEvidence, ID: "ev-part2"}},
		evidence: func(turn string) []string {
			if turn == "D1:1" {
				return []string{"ev-part1", "ev-part2"}
			}
			return nil
		},
	}
	s, _, _, _ := pc.score()
	assert.Equal(t, 0.0, s.EvidenceAt[1])
	assert.Equal(t, 1.0, s.EvidenceAt[5], "the turn's second message, at 2")
}
