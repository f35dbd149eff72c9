package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// JSON bodies (what curl and most agents send): an enum name the API does not
// define is an error naming the field (it used to be dropped, so a ListFacts
// filter matched everything); an unknown field is ignored (newer clients, older
// servers); every decode error names the field by its path in the body, never
// only a line and column.
func TestJSONErrorsNameTheField(t *testing.T) {
	e := newEnv(t)
	post := func(proc, body string) (int, string) {
		req, err := http.NewRequest("POST", e.url+"/engram.v1.MemoryService/"+proc, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.keys["agentA"])
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var out struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &out)
		return res.StatusCode, out.Code + ": " + out.Message
	}
	cases := []struct{ name, proc, body, want string }{
		{"unknown enum name", "ListFacts", `{"scope":"NOT_A_VALUE"}`, "scope"},
		{"unknown enum name beside an unknown field", "ListFacts", `{"future":1,"statuses":["FACT_STATUS_ACTIVE","NOPE"]}`, "statuses"},
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
	status, msg := post("ListFacts", `{"future":"field","scope":"SCOPE_USER","limit":5}`)
	assert.Equal(t, http.StatusOK, status, "an unknown field alone is ignored: %s", msg)
}
