// Package governance decides what a proposed candidate does to memory: create a fact,
// confirm a duplicate, supersede the current revision, add a historical revision,
// invalidate on retraction, ask a human, or reject. It is pure: no I/O, no clock, no
// database and no Temporal, so the MemoryWrite workflow can call it from an activity
// (or deterministic code) and every rule is table-tested.
//
// The caller loads, for the proposal's memory key, every stored revision of that key,
// plus the ACTIVE facts with the same subject and predicate in other scopes, and passes
// them as []Existing. Decide returns a Decision that the commit step applies; Review
// applies a reviewer's verdict to a Decision that needed confirmation.
//
// It imports only memory.
package governance

import (
	"fmt"
	"math"

	"github.com/engramhq/engram/memory"
)

// Config holds the thresholds governance applies. Build it from DefaultConfig and
// override fields; check it with Validate.
type Config struct {
	// RejectBelow: a candidate whose confidence is below this is REJECTED (default 0.2).
	RejectBelow float64 `json:"reject_below" yaml:"reject_below"`
	// ConfirmBelow: a candidate whose confidence is below this (and at or above
	// RejectBelow) needs confirmation (default 0.6).
	ConfirmBelow float64 `json:"confirm_below" yaml:"confirm_below"`
	// ConfirmInferred: INFERRED candidates need confirmation (default true).
	ConfirmInferred bool `json:"confirm_inferred" yaml:"confirm_inferred"`
	// DuplicateSimilarity: an embedding cosine at or above this between the candidate and
	// a revision of the same key counts as a duplicate (default 0.95). Must be > 0,
	// because a Similarity of 0 means "unknown".
	DuplicateSimilarity float64 `json:"duplicate_similarity" yaml:"duplicate_similarity"`
	// DuplicateBoost is added to the confidence of a fact a trusted duplicate restates,
	// capped at 1 (default 0.1).
	DuplicateBoost float64 `json:"duplicate_boost" yaml:"duplicate_boost"`

	// NeverSupersede is a fault injected by tests only (the eval harness proves its
	// hallucination suite catches a broken rule): a new value for a key with a
	// current revision is treated as a duplicate, so the old value stays current.
	// Never set it in a deployment; configuration files cannot (no json/yaml name).
	NeverSupersede bool `json:"-" yaml:"-"`
}

// DefaultConfig returns the default thresholds.
func DefaultConfig() Config {
	return Config{
		RejectBelow:         0.2,
		ConfirmBelow:        0.6,
		ConfirmInferred:     true,
		DuplicateSimilarity: 0.95,
		DuplicateBoost:      0.1,
	}
}

// Validate checks every threshold is a number within its range and that RejectBelow
// does not exceed ConfirmBelow. The error is a memory.FieldError naming the field
// (snake_case, as in configuration files).
func (c Config) Validate() error {
	unit := []struct {
		field string
		v     float64
	}{
		{"reject_below", c.RejectBelow},
		{"confirm_below", c.ConfirmBelow},
		{"duplicate_similarity", c.DuplicateSimilarity},
		{"duplicate_boost", c.DuplicateBoost},
	}
	for _, u := range unit {
		if math.IsNaN(u.v) || u.v < 0 || u.v > 1 {
			return memory.FieldError{Field: u.field, Problem: fmt.Sprintf("must be within [0, 1], got %v", u.v)}
		}
	}
	if c.RejectBelow > c.ConfirmBelow {
		return memory.FieldError{Field: "reject_below", Problem: fmt.Sprintf("%v exceeds confirm_below %v", c.RejectBelow, c.ConfirmBelow)}
	}
	if c.DuplicateSimilarity == 0 {
		return memory.FieldError{Field: "duplicate_similarity", Problem: "must be > 0 (a similarity of 0 means unknown)"}
	}
	return nil
}
