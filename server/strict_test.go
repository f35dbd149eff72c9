package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/suggest"
	"github.com/engramhq/engram/server"
)

// writeTables are every table a request can write to; a rejected request leaves
// each as it was.
var writeTables = []string{"events", "evidence", "candidates", "facts", "tasks", "schemas", "outbox"}

func (e *env) counts() map[string]int {
	out := map[string]int{}
	for _, tb := range writeTables {
		out[tb] = e.count(tb)
	}
	return out
}

// post sends body to the API's procedure ("engram.v1.MemoryService/Ingest") with
// the key's token and returns the HTTP status and the Connect error's code and
// message.
func (e *env) post(key, procedure, contentType string, body []byte) (status int, code, message string) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.url+"/"+procedure, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+e.keys[key])
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(b, &out)
	return res.StatusCode, out.Code, out.Message
}

// Finding 1 of issue 50: misspelled JSON fields were dropped and the write stored
// as something else (a task's budget as the user's, dated now). Each is now
// INVALID_ARGUMENT naming the field as the client spelled it and the closest
// known one, and nothing is written. Binary protobuf still ignores an unknown
// field (forward compatibility).
func TestUnknownJSONFieldsAreRefused(t *testing.T) {
	e := newEnv(t)
	before := e.counts()
	cases := []struct {
		name, proc, body string
		want             []string
	}{
		{"finding 1", "engram.v1.MemoryService/Ingest",
			`{"event":{"userId":"u","taskID":"trip-9","occured_at":"2024-01-01T00:00:00Z","content":"这次旅行预算调整到10000元"}}`,
			[]string{"event.taskID: unknown field; did you mean `taskId`?", "event.occured_at: unknown field; did you mean `occurred_at`?"}},
		{"budgetTokens", "engram.v1.MemoryService/Recall", `{"query":"budget","budgetTokens":500}`,
			[]string{"budgetTokens: unknown field; did you mean `tokenBudget`?"}},
		{"colour on an event", "engram.v1.MemoryService/Ingest", `{"event":{"userId":"u1","content":"I like red","colour":"red"}}`,
			[]string{"event.colour: unknown field; the known fields here are ", "userId", "content"}},
		{"colour in a batch", "engram.v1.MemoryService/Ingest",
			`{"events":[{"userId":"u1","content":"a"},{"userId":"u1","content":"b","colour":"red"}]}`,
			[]string{"events[1].colour: unknown field"}},
		{"colour on a filter", "engram.v1.MemoryService/ListFacts", `{"colour":"red","limit":5}`, []string{"colour: unknown field"}},
		{"beside a known filter", "engram.v1.MemoryService/ListFacts", `{"future":1,"statuses":["FACT_STATUS_ACTIVE"]}`, []string{"future: unknown field"}},
		{"a plan step", "engram.v1.TaskService/UpdateTask", `{"taskId":"t1","plan":{"goal":"g","steps":[{"name":"s","acton":"book"}]}}`,
			[]string{"plan.steps[0].acton: unknown field; did you mean `action`?"}},
		{"a review", "engram.v1.ReviewService/Decide", `{"candidateID":"x","decision":"DECISION_CONFIRM"}`,
			[]string{"candidateID: unknown field; did you mean `candidateId`?"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, code, msg := e.post("adminA", tc.proc, "application/json", []byte(tc.body))
			assert.Equal(t, http.StatusBadRequest, status, msg)
			assert.Equal(t, "invalid_argument", code, msg)
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
		})
	}
	assert.Equal(t, before, e.counts(), "nothing is written for a rejected request")

	// Binary protobuf: a field this server does not know (number 999) is skipped.
	b, err := proto.Marshal(&engramv1.ListFactsRequest{Limit: 5})
	require.NoError(t, err)
	b = protowire.AppendString(protowire.AppendTag(b, 999, protowire.BytesType), "from a newer client")
	status, code, msg := e.post("agentA", "engram.v1.MemoryService/ListFacts", "application/proto", b)
	assert.Equal(t, http.StatusOK, status, "%s: %s", code, msg)
}

// requestField is a field of a request message, reached from the request by
// JSON names (a list's first element for a repeated message).
type requestField struct {
	procedure string
	parents   []protoreflect.FieldDescriptor
	field     protoreflect.FieldDescriptor
}

// requestFields walks every field of every request message of the API's services,
// into nested messages (not into well-known types such as Timestamp and Struct).
func requestFields(t *testing.T) []requestField {
	var out []requestField
	var walk func(proc string, md protoreflect.MessageDescriptor, parents []protoreflect.FieldDescriptor)
	walk = func(proc string, md protoreflect.MessageDescriptor, parents []protoreflect.FieldDescriptor) {
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			out = append(out, requestField{proc, parents, fd})
			if m := fd.Message(); m != nil && !fd.IsMap() && !strings.HasPrefix(string(m.FullName()), "google.protobuf.") && len(parents) < 4 {
				walk(proc, m, append(append([]protoreflect.FieldDescriptor{}, parents...), fd))
			}
		}
	}
	for _, name := range server.Services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		require.NoError(t, err)
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := 0; i < methods.Len(); i++ {
			walk(name+"/"+string(methods.Get(i).Name()), methods.Get(i).Input(), nil)
		}
	}
	return out
}

// body is {"parent":{"child":[{key: 1}]}} with key at f's place; path is key's
// path as the server names it.
func (f requestField) body(key string) (body []byte, path string) {
	var inner any = map[string]any{key: 1}
	path = key
	for i := len(f.parents) - 1; i >= 0; i-- {
		p := f.parents[i]
		step := p.JSONName()
		if p.IsList() {
			inner = []any{inner}
			step += "[0]"
		}
		inner = map[string]any{p.JSONName(): inner}
		path = step + "." + path
	}
	b, _ := json.Marshal(inner)
	return b, path
}

// misspell applies one or two of: a change of case, a dropped letter, two
// adjacent letters swapped, camelCase to snake_case. onlyStyle reports that it
// changed case or style alone.
func misspell(r *rand.Rand, name string) (out string, onlyStyle bool) {
	rs := []rune(name)
	onlyStyle = true
	for n := 1 + r.IntN(2); n > 0; n-- {
		i := r.IntN(len(rs))
		switch r.IntN(4) {
		case 0:
			if unicode.IsUpper(rs[i]) {
				rs[i] = unicode.ToLower(rs[i])
			} else {
				rs[i] = unicode.ToUpper(rs[i])
			}
		case 1:
			rs = append(rs[:i:i], rs[i+1:]...)
			onlyStyle = false
		case 2:
			if i+1 < len(rs) {
				rs[i], rs[i+1] = rs[i+1], rs[i]
				onlyStyle = false
			}
		case 3:
			var snake []rune
			for j, c := range rs {
				if unicode.IsUpper(c) && j > 0 {
					snake = append(snake, '_')
				}
				snake = append(snake, unicode.ToLower(c))
			}
			rs = snake
		}
		if len(rs) == 0 {
			return "", false
		}
	}
	return string(rs), onlyStyle
}

// The property of issue 50: a misspelling of any request field (random case
// changes, a dropped letter, two letters swapped, snake_case), at its place in
// any request of the API, is INVALID_ARGUMENT naming the misspelt path; a change
// of case or style alone suggests the field itself, a one-letter slip suggests
// some field; nothing is written. ENGRAM_PROPERTY_SEED draws the same cases again.
func TestMisspelledFieldsProperty(t *testing.T) {
	e := newEnv(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ENGRAM_PROPERTY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "ENGRAM_PROPERTY_SEED")
	}
	t.Logf("seed %d (ENGRAM_PROPERTY_SEED=%d draws these cases again)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	before := e.counts()
	fields := requestFields(t)
	sent := 0
	for _, f := range fields {
		taken := map[string]bool{}
		siblings := f.field.Parent().(protoreflect.MessageDescriptor).Fields()
		for i := 0; i < siblings.Len(); i++ {
			taken[siblings.Get(i).JSONName()], taken[string(siblings.Get(i).Name())] = true, true
		}
		for trial := 0; trial < 8; trial++ {
			key, onlyStyle := misspell(r, f.field.JSONName())
			if key == "" || taken[key] {
				continue // another real field's name (or its own)
			}
			body, path := f.body(key)
			sent++
			status, code, msg := e.post("adminA", f.procedure, "application/json", body)
			if !assert.Equal(t, "invalid_argument", code, "%s %s: %s", f.procedure, body, msg) {
				continue
			}
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, msg, path+": unknown field", "%s %s", f.procedure, body)
			own := []string{f.field.JSONName(), string(f.field.Name())}
			switch {
			case onlyStyle:
				assert.Regexp(t, "did you mean `("+own[0]+"|"+own[1]+")`\\?", msg, "%s %s", f.procedure, body)
			case min(suggest.Distance(strings.ToLower(key), strings.ToLower(own[0])), suggest.Distance(strings.ToLower(key), strings.ToLower(own[1]))) <= 1:
				assert.Contains(t, msg, "did you mean `", "%s %s", f.procedure, body)
			}
		}
	}
	t.Logf("%d fields, %d misspellings sent", len(fields), sent)
	require.Greater(t, sent, 2*len(fields), "most draws are misspellings")
	assert.Equal(t, before, e.counts(), "nothing is written for a rejected request")
}
