package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// JSON bodies (what curl and most agents send): an enum name the API does not
// define is an error naming the field (it used to be dropped, so a ListFacts
// filter matched everything); every decode error names the field by its path in
// the body, never only a line and column. Unknown fields: strict_test.go.
func TestJSONErrorsNameTheField(t *testing.T) {
	e := newEnv(t)
	post := func(proc, body string) (int, string) {
		status, code, msg := e.post("agentA", "engram.v1.MemoryService/"+proc, "application/json", []byte(body))
		return status, code + ": " + msg
	}
	cases := []struct{ name, proc, body, want string }{
		{"unknown enum name", "ListFacts", `{"scope":"NOT_A_VALUE"}`, "scope"},
		{"unknown enum name in a list", "ListFacts", `{"limit":1,"statuses":["FACT_STATUS_ACTIVE","NOPE"]}`, "statuses"},
		{"unknown enum in an event", "Ingest", `{"event":{"userId":"u1","content":"hi","actorType":"ROBOT"}}`, "event.actorType"},
		{"bad timestamp", "Ingest", `{"event":{"userId":"u1","content":"hi","occurredAt":"yesterday"}}`, "event.occurredAt"},
		{"wrong type", "Ingest", `{"events":[{"userId":"u1","content":"a"},{"userId":"u1","content":42}]}`, "events[1].content"},
		{"truncated", "Ingest", `{"event":{"userId":"u1","content":"hi`, "event.content"},
		{"empty body", "Ingest", ``, "body"},
		{"not an object", "Recall", `[1,2]`, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := post(tc.proc, tc.body)
			assert.Equal(t, http.StatusBadRequest, status, msg)
			assert.Contains(t, msg, "invalid_argument")
			assert.Contains(t, msg, tc.want+":", "the message names the field")
		})
	}
}
