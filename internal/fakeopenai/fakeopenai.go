// Package fakeopenai is a fake OpenAI-compatible HTTP server for tests.
//
// It exists only because no LLM endpoint is reachable from the machines Engram is
// developed and tested on. It does not imitate a model: every answer is scripted by
// the test (a queue of responses, content rules and a default), so that the paths
// real endpoints exercise — good structured output, broken JSON, an invalid enum,
// slow answers that hit the client's timeout, 429 with Retry-After, 5xx, 401 — can
// be driven deterministically. It records every request so a test can assert what
// the client sent (the prompt, the feedback of a previous attempt, the strict
// json_schema response format) and counts calls per endpoint.
//
// It serves the two endpoints Engram uses:
//
//	POST /v1/chat/completions   answers from the script
//	POST /v1/embeddings         deterministic vectors derived from a hash of each input
//
// Use New in tests (an httptest server on a free loopback port) and Serve to run it
// as a standalone process, e.g. for end-to-end tests of a worker binary.
package fakeopenai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// DefaultEmbeddingDim is the dimension of the vectors the fake returns when neither the
// script nor the request names one. It matches Engram's storage dimension.
const DefaultEmbeddingDim = 512

// EmptyCandidates is the chat content answered when the script has nothing else to
// say: a valid extraction document that proposes nothing.
const EmptyCandidates = `{"candidates":[]}`

// Response is one scripted answer. The zero value answers 200 with the script's
// default content. Fields combine: Delay is waited first, then Status decides between
// an error body and a completion with Content.
type Response struct {
	// Content is the assistant message content of a chat completion, sent verbatim
	// (it may be broken JSON on purpose). Empty means the default content.
	Content string `json:"content,omitempty"`
	// Status, when set and not 200, answers with that HTTP status and an
	// OpenAI-style error body instead of a completion.
	Status int `json:"status,omitempty"`
	// ErrorMessage is the message of the error body; a generic one when empty.
	ErrorMessage string `json:"error_message,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header in whole seconds
	// (rounded up), as OpenAI does on 429.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Delay is waited before answering, to drive a client into its timeout. The wait
	// ends early when the client goes away, so a test's Close does not hang.
	Delay time.Duration `json:"delay,omitempty"`
}

// JSON is a response whose content is v marshalled as JSON: the well-formed output of
// a model that followed the schema. It panics if v cannot be marshalled, which is a
// bug in the test that called it.
func JSON(v any) Response {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeopenai.JSON: %v", err))
	}
	return Response{Content: string(b)}
}

// Raw is a response whose content is s verbatim, e.g. broken JSON or a document with
// an invalid enum value.
func Raw(s string) Response { return Response{Content: s} }

// Status is an error response with the given HTTP status.
func Status(code int) Response { return Response{Status: code} }

// RateLimited is a 429 response with a Retry-After header.
func RateLimited(retryAfter time.Duration) Response {
	return Response{Status: http.StatusTooManyRequests, RetryAfter: retryAfter, ErrorMessage: "Rate limit reached"}
}

// Delayed returns r answered only after d.
func Delayed(d time.Duration, r Response) Response {
	r.Delay = d
	return r
}

// Rule answers chat requests whose last user message contains Contains. Its
// Responses are used in order, one per matching request, and the last one repeats,
// so a rule can script "broken JSON, then an invalid enum, then good output" for one
// statement regardless of how requests for other statements interleave.
type Rule struct {
	Contains  string     `json:"contains"`
	Responses []Response `json:"responses"`
}

// Script decides every answer. For a chat request the fake takes, in this order: the
// next response of Queue; else the first Rule that matches; else Default. Embedding
// requests take the next response of EmbeddingQueue (useful for errors and delays;
// its Content is ignored), else they succeed.
//
// A Script is plain data with JSON tags, so a standalone fake can read it from a
// file; durations are time.Duration, i.e. nanoseconds, in JSON.
type Script struct {
	Queue   []Response `json:"queue,omitempty"`
	Rules   []Rule     `json:"rules,omitempty"`
	Default Response   `json:"default,omitempty"`
	// DefaultContent replaces EmptyCandidates as the content of responses that do
	// not set one.
	DefaultContent string `json:"default_content,omitempty"`

	EmbeddingQueue []Response `json:"embedding_queue,omitempty"`
	// EmbeddingDim, when positive, is the dimension of every returned vector whatever
	// the request asks for (to test a client's dimension check). Otherwise the
	// request's "dimensions" is honoured, else DefaultEmbeddingDim.
	EmbeddingDim int `json:"embedding_dim,omitempty"`

	// APIKey, when set, makes every request without "Authorization: Bearer <APIKey>"
	// fail with 401, as a real endpoint does.
	APIKey string `json:"api_key,omitempty"`
}

// Request is one request as the fake received it.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Chat is the decoded body of a chat completion request, nil otherwise.
	Chat *openai.ChatCompletionRequest
	// Embedding is the decoded body of an embeddings request, nil otherwise.
	Embedding *EmbeddingRequest
	// Answered is the status the fake answered with.
	Answered int
}

// EmbeddingRequest is the part of an embeddings request the fake reads.
type EmbeddingRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"-"`
	Dimensions int      `json:"dimensions,omitempty"`
}

// Prompt concatenates the contents of every message of a chat request, in order, so a
// test can look for a phrase without caring which message holds it.
func (r Request) Prompt() string {
	if r.Chat == nil {
		return ""
	}
	var b strings.Builder
	for _, m := range r.Chat.Messages {
		b.WriteString(m.Content)
		for _, p := range m.MultiContent {
			b.WriteString(p.Text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// UserText is the content of the last user message of a chat request: what Rules
// match against.
func (r Request) UserText() string {
	if r.Chat == nil {
		return ""
	}
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		if r.Chat.Messages[i].Role == openai.ChatMessageRoleUser {
			return r.Chat.Messages[i].Content
		}
	}
	return ""
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	mu        sync.Mutex
	script    Script
	ruleNext  []int
	requests  []Request
	calls     map[string]int
	httpSrv   *httptest.Server
	closeOnce sync.Once
}

// New starts a fake on a free loopback port. Close it when the test ends
// (t.Cleanup(srv.Close)).
func New(script Script) *Server {
	s := newServer(script)
	s.httpSrv = httptest.NewServer(s)
	return s
}

func newServer(script Script) *Server {
	return &Server{script: script, ruleNext: make([]int, len(script.Rules)), calls: map[string]int{}}
}

// Serve runs a fake on addr (e.g. "127.0.0.1:8089") until the listener fails. It is
// the entry point for running the fake as its own process.
func Serve(addr string, script Script) error {
	srv := &http.Server{Addr: addr, Handler: newServer(script), ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}

// Handler returns the fake as an http.Handler, for mounting in another server. Its
// BaseURL and Close are those of New only; the other methods work.
func Handler(script Script) *Server { return newServer(script) }

// BaseURL is the OpenAI base URL of a fake started by New, ending in /v1, as clients
// expect it (go-openai appends /chat/completions).
func (s *Server) BaseURL() string {
	if s.httpSrv == nil {
		panic("fakeopenai: BaseURL of a Server not started by New")
	}
	return s.httpSrv.URL + "/v1"
}

// Close stops a fake started by New. It waits for requests in flight, which end
// early because scripted delays stop when the client goes away.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.httpSrv != nil {
			s.httpSrv.CloseClientConnections()
			s.httpSrv.Close()
		}
	})
}

// Enqueue appends chat responses to the queue.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script.Queue = append(s.script.Queue, rs...)
}

// EnqueueEmbedding appends embedding responses to their queue.
func (s *Server) EnqueueEmbedding(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script.EmbeddingQueue = append(s.script.EmbeddingQueue, rs...)
}

// SetDefault replaces the default chat response.
func (s *Server) SetDefault(r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script.Default = r
}

// Requests returns a copy of every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ChatRequests returns the chat completion requests received so far.
func (s *Server) ChatRequests() []Request {
	return slices.DeleteFunc(s.Requests(), func(r Request) bool { return r.Chat == nil })
}

// Calls counts the requests received for a path, e.g. "/v1/chat/completions".
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// ChatCalls counts chat completion requests.
func (s *Server) ChatCalls() int { return s.Calls(chatPath) }

// EmbeddingCalls counts embeddings requests.
func (s *Server) EmbeddingCalls() int { return s.Calls(embeddingsPath) }

const (
	chatPath       = "/v1/chat/completions"
	embeddingsPath = "/v1/embeddings"
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "cannot read body: "+err.Error(), 0)
		return
	}
	// Accept the paths with or without the /v1 prefix, as base URLs are written both ways.
	path := r.URL.Path
	if !strings.HasPrefix(path, "/v1/") {
		path = "/v1" + path
	}
	rec := Request{Method: r.Method, Path: path, Header: r.Header.Clone(), Body: body}

	var status int
	switch {
	case r.Method != http.MethodPost || (path != chatPath && path != embeddingsPath):
		status = http.StatusNotFound
		s.record(rec, status)
		writeError(w, status, fmt.Sprintf("unknown endpoint %s %s", r.Method, r.URL.Path), 0)
		return
	case s.script.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.script.APIKey:
		status = http.StatusUnauthorized
		s.record(rec, status)
		writeError(w, status, "Incorrect API key provided", 0)
		return
	}

	if path == chatPath {
		s.chat(w, r, rec)
		return
	}
	s.embeddings(w, r, rec)
}

func (s *Server) record(rec Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Answered = status
	s.requests = append(s.requests, rec)
	s.calls[rec.Path]++
}

// answering records the request with the status it gets, waits out resp's delay
// and writes the error an unsuccessful status carries; it says whether the
// handler still has to write its answer.
func (s *Server) answering(w http.ResponseWriter, r *http.Request, rec Request, status int, resp Response) bool {
	s.record(rec, status)
	if !wait(r, resp.Delay) {
		return false
	}
	if status != http.StatusOK {
		writeError(w, status, resp.ErrorMessage, resp.RetryAfter)
		return false
	}
	return true
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, rec Request) {
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(rec.Body, &req); err != nil {
		s.record(rec, http.StatusBadRequest)
		writeError(w, http.StatusBadRequest, "invalid chat request: "+err.Error(), 0)
		return
	}
	rec.Chat = &req

	s.mu.Lock()
	resp := s.nextChat(rec)
	content := s.script.DefaultContent
	s.mu.Unlock()
	if content == "" {
		content = EmptyCandidates
	}
	if resp.Content != "" {
		content = resp.Content
	}

	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if !s.answering(w, r, rec, status, resp) {
		return
	}
	model := req.Model
	out := openai.ChatCompletionResponse{
		ID:      fmt.Sprintf("chatcmpl-fake-%d", s.ChatCalls()),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   model,
		Choices: []openai.ChatCompletionChoice{{
			Index:        0,
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			FinishReason: openai.FinishReasonStop,
		}},
		Usage: openai.Usage{PromptTokens: len(rec.Body) / 4, CompletionTokens: len(content) / 4, TotalTokens: (len(rec.Body) + len(content)) / 4},
	}
	writeJSON(w, http.StatusOK, out)
}

// nextChat picks the scripted response for a chat request; s.mu is held.
func (s *Server) nextChat(rec Request) Response {
	if len(s.script.Queue) > 0 {
		r := s.script.Queue[0]
		s.script.Queue = s.script.Queue[1:]
		return r
	}
	text := rec.UserText()
	for i, rule := range s.script.Rules {
		if len(rule.Responses) == 0 || !strings.Contains(text, rule.Contains) {
			continue
		}
		n := min(s.ruleNext[i], len(rule.Responses)-1)
		s.ruleNext[i]++
		return rule.Responses[n]
	}
	return s.script.Default
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, rec Request) {
	var raw struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.Unmarshal(rec.Body, &raw); err != nil {
		s.record(rec, http.StatusBadRequest)
		writeError(w, http.StatusBadRequest, "invalid embeddings request: "+err.Error(), 0)
		return
	}
	// OpenAI accepts a single string or an array of strings.
	var inputs []string
	if err := json.Unmarshal(raw.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(raw.Input, &one); err != nil {
			s.record(rec, http.StatusBadRequest)
			writeError(w, http.StatusBadRequest, "input must be a string or an array of strings", 0)
			return
		}
		inputs = []string{one}
	}
	rec.Embedding = &EmbeddingRequest{Model: raw.Model, Input: inputs, Dimensions: raw.Dimensions}

	s.mu.Lock()
	var resp Response
	if len(s.script.EmbeddingQueue) > 0 {
		resp = s.script.EmbeddingQueue[0]
		s.script.EmbeddingQueue = s.script.EmbeddingQueue[1:]
	}
	dim := s.script.EmbeddingDim
	s.mu.Unlock()
	if dim <= 0 {
		dim = raw.Dimensions
	}
	if dim <= 0 {
		dim = DefaultEmbeddingDim
	}

	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	for _, in := range inputs {
		if in == "" && status == http.StatusOK {
			// The real API rejects empty input; a client must not send it.
			status = http.StatusBadRequest
			resp.ErrorMessage = "'$.input' is invalid: empty string"
		}
	}
	if !s.answering(w, r, rec, status, resp) {
		return
	}

	type item struct {
		Object    string    `json:"object"`
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	}
	out := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Model  string         `json:"model"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: raw.Model, Usage: map[string]int{"prompt_tokens": 0, "total_tokens": 0}}
	for i, in := range inputs {
		out.Data = append(out.Data, item{Object: "embedding", Embedding: Vector(in, dim), Index: i})
	}
	writeJSON(w, http.StatusOK, out)
}

// Vector is the deterministic unit vector the fake returns for text: a stream of
// pseudo-random numbers seeded by a hash of the text. Equal texts give equal vectors;
// different texts give unrelated ones (there is no semantics in it).
func Vector(text string, dim int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	state := h.Sum64()
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		// splitmix64: a cheap generator whose every output is well mixed.
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		x := float64(z>>11)/float64(1<<53)*2 - 1
		v[i] = float32(x)
		norm += x * x
	}
	if norm > 0 {
		inv := 1 / math.Sqrt(norm)
		for i := range v {
			v[i] = float32(float64(v[i]) * inv)
		}
	}
	return v
}

// wait sleeps d or until the client gives up; it reports whether to answer.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeError(w http.ResponseWriter, status int, msg string, retryAfter time.Duration) {
	if msg == "" {
		msg = fmt.Sprintf("fake error %d %s", status, http.StatusText(status))
	}
	if retryAfter > 0 {
		secs := int(math.Ceil(retryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil, "param": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
