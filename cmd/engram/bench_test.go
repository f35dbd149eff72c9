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
