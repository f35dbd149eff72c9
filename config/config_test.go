package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gRPC compression to Temporal: auto compresses only when the server is elsewhere;
// a bad value is refused with the variable's name.
func TestTemporalCompression(t *testing.T) {
	for _, c := range []struct {
		addr, mode string
		gzip       bool
	}{
		{"127.0.0.1:7233", "auto", false},
		{"localhost:7233", "auto", false},
		{"[::1]:7233", "auto", false},
		{"temporal.internal:7233", "auto", true},
		{"10.0.0.5:7233", "auto", true},
		{"127.0.0.1:7233", "gzip", true},
		{"10.0.0.5:7233", "none", false},
	} {
		t.Setenv("TEMPORAL_ADDRESS", c.addr)
		t.Setenv("ENGRAM_TEMPORAL_COMPRESSION", c.mode)
		cfg, err := FromEnv()
		require.NoError(t, err)
		assert.Equal(t, c.gzip, cfg.TemporalGzip, "%s %s", c.addr, c.mode)
	}
	t.Setenv("ENGRAM_TEMPORAL_COMPRESSION", "zstd")
	_, err := FromEnv()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ENGRAM_TEMPORAL_COMPRESSION")
}

// ENGRAM_RECALL_MAX_STATEMENTS: a positive bound or -1 (none); unset leaves the
// engine's default (0); anything else is refused with the variable's name.
func TestRecallMaxStatements(t *testing.T) {
	cfg, err := FromEnv()
	require.NoError(t, err)
	assert.Equal(t, 0, cfg.RecallMaxStatements)
	for v, want := range map[string]int{"3": 3, "64": 64, "-1": -1} {
		t.Setenv("ENGRAM_RECALL_MAX_STATEMENTS", v)
		cfg, err := FromEnv()
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.RecallMaxStatements, v)
	}
	for _, v := range []string{"0", "-2", "many", "2.5"} {
		t.Setenv("ENGRAM_RECALL_MAX_STATEMENTS", v)
		_, err := FromEnv()
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "ENGRAM_RECALL_MAX_STATEMENTS", v)
	}
}

// ENGRAM_RECALL_TIMEOUT: a duration from 1ms to 1h; unset leaves the engine's
// default (0); anything else is refused with the variable's name.
func TestRecallTimeout(t *testing.T) {
	cfg, err := FromEnv()
	require.NoError(t, err)
	assert.Zero(t, cfg.RecallTimeout)
	for v, want := range map[string]time.Duration{"2s": 2 * time.Second, "1ms": time.Millisecond, "1h": time.Hour, "250ms": 250 * time.Millisecond} {
		t.Setenv("ENGRAM_RECALL_TIMEOUT", v)
		cfg, err := FromEnv()
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.RecallTimeout, v)
	}
	for _, v := range []string{"0", "-1s", "500us", "2h", "soon", "2"} {
		t.Setenv("ENGRAM_RECALL_TIMEOUT", v)
		_, err := FromEnv()
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "ENGRAM_RECALL_TIMEOUT", v)
	}
}
