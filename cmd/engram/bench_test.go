package main

import (
	"io"
	"strings"
	"testing"
)

// engram bench recall refuses a --max-statements below -1 by name, before it
// touches a database.
func TestBenchRecallMaxStatementsFlag(t *testing.T) {
	c := benchRecallCmd()
	c.SetArgs([]string{"--max-statements", "-3", "--database-url", "postgres://nowhere.invalid/x"})
	c.SetOut(io.Discard)
	c.SetErr(io.Discard)
	err := c.Execute()
	if err == nil || !strings.Contains(err.Error(), "--max-statements") {
		t.Fatalf("--max-statements -3: got %v, want an error naming the flag", err)
	}
}

// engram eval refuses a --k or --parallel out of range by name, before it reads
// its configuration or touches a database.
func TestEvalFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--k", "0"}, "--k: 0 is outside [1, 100]"},
		{[]string{"--k", "101"}, "--k: 101 is outside [1, 100]"},
		{[]string{"--parallel", "0"}, "--parallel: 0 is outside [1, 64] scenarios"},
		{[]string{"--parallel", "-2"}, "--parallel: -2 is outside [1, 64] scenarios"},
	} {
		c := evalCmd()
		c.SetArgs(tc.args)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		t.Setenv("ENGRAM_DATABASE_URL", "")
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
