package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

// A --file line is read as strictly as the API reads JSON: an unknown key is an
// input error (exit 2) naming the file's line, the key and the closest field;
// nothing is sent, since the file is checked completely first.
func TestReadEventsRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, lines, want string }{
		{"issue 50 finding 1", `{"content":"我喜欢靠窗"}` + "\n" + `{"userId":"u","taskID":"trip-9","occured_at":"2024-01-01T00:00:00Z","content":"这次旅行预算调整到10000元"}`,
			"--file: " + filepath.Join(dir, "issue 50 finding 1") + ":2: not an engram.v1.Event: taskID: unknown field; did you mean `taskId`?; occured_at: unknown field; did you mean `occurred_at`?"},
		{"snake_case", `{"content":"hi","user_ID":"u1"}`, ":1: not an engram.v1.Event: user_ID: unknown field; did you mean `user_id`?"},
		{"nothing close", `{"content":"hi","colour":"red"}`, ":1: not an engram.v1.Event: colour: unknown field; the known fields here are "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(path, []byte(tc.lines+"\n"), 0o644))
			events, err := readEvents(path, &engramv1.Event{UserId: "u1"})
			require.Error(t, err)
			assert.Nil(t, events)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, exitBadInput, exitCodeOf(err))
		})
	}
}
