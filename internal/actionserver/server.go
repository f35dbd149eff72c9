// Package actionserver is a local HTTP action endpoint for tests. It speaks the
// contract in activities/TASK_ACTIONS.md, records every effect by idempotency key,
// and can be scripted to misbehave the ways a real endpoint does: apply and then
// stall past the caller's timeout, drop a request without applying it, answer FAILED,
// or be down (listener closed) for a while.
//
// Unlike a well-behaved endpoint it can also be told not to deduplicate (Dedup=false),
// so a test that counts effects proves the engine never resent a step, not merely that
// the endpoint absorbed a duplicate.
package actionserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Behavior is what the server does with one action request.
type Behavior struct {
	kind     string
	stall    time.Duration
	failText string
}

var (
	// Normal applies the effect (once per key when deduplicating) and answers APPLIED.
	Normal = Behavior{kind: "normal"}
	// Drop reads the request, applies nothing and closes the connection without an answer.
	Drop = Behavior{kind: "drop"}
)

// ApplyThenStall applies the effect, then holds the answer for d (or until the client
// goes away), so the client times out not knowing the effect happened.
func ApplyThenStall(d time.Duration) Behavior { return Behavior{kind: "stall", stall: d} }

// Fail applies nothing and answers {status: FAILED, error: reason}.
func Fail(reason string) Behavior { return Behavior{kind: "fail", failText: reason} }

// Request is one action request as the server saw it.
type Request struct {
	Key      string          `json:"-"`
	TenantID string          `json:"tenant_id"`
	TaskID   string          `json:"task_id"`
	Step     string          `json:"step"`
	Action   string          `json:"action"`
	Input    json.RawMessage `json:"input"`
	Outcome  string          `json:"-"` // APPLIED, DUPLICATE, DROPPED, FAILED, STALLED
}

// Server is the scripted action endpoint.
type Server struct {
	// Dedup makes a repeated key return the first result instead of applying again.
	// A real endpoint must deduplicate; tests turn it off to catch any resend.
	Dedup bool

	mu       sync.Mutex
	addr     string
	srv      *http.Server
	ln       net.Listener
	script   []Behavior
	applied  map[string]int    // effects per key
	results  map[string][]byte // first result per key
	failed   map[string]string // FAILED reason per key
	inflight map[string]int    // requests received and not yet finished
	requests []Request
	lookups  map[string]int
	hold     bool
	// release frees the port held while down (holdPort).
	release func()
}

// Path is where actions are posted; status lookups are under Path + "/status/".
const Path = "/actions"

// Start listens on a free loopback port and serves until Close.
func Start() (*Server, error) {
	s := &Server{
		Dedup:    true,
		applied:  map[string]int{},
		results:  map[string][]byte{},
		failed:   map[string]string{},
		inflight: map[string]int{},
		lookups:  map[string]int{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, s.handleAction)
	mux.HandleFunc("GET "+Path+"/status/{key}", s.handleStatus)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// URL is the action endpoint base URL to configure in TaskActivities.
func (s *Server) URL() string { return "http://" + s.addr + Path }

// Addr is the host:port the server listens on, also while it is down.
func (s *Server) Addr() string { return s.addr }

// Script queues behaviors for the next action requests, in order; when the queue is
// empty a request is handled Normally.
func (s *Server) Script(b ...Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, b...)
}

// Down closes the listener and every open connection: new calls are refused.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	// Keep the port while down, so a call meets a refusal, not another test's
	// listener that took the freed port (seen in CI: a reset after the request
	// was sent, an unknown outcome where nothing should have been sent).
	var release func()
	for i := 0; i < 50 && release == nil; i++ {
		var err error
		if release, err = holdPort(s.addr); err != nil {
			time.Sleep(time.Millisecond)
		}
	}
	s.mu.Lock()
	s.release = release
	s.mu.Unlock()
}

// Up listens again on the same address after Down.
func (s *Server) Up() error {
	s.mu.Lock()
	up := s.srv != nil
	s.mu.Unlock()
	if up {
		return nil
	}
	s.mu.Lock()
	if s.release != nil {
		s.release()
		s.release = nil
	}
	s.mu.Unlock()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; TIME_WAIT does not block a listening socket on
	// Linux, but retry briefly in case the kernel is slow to release it.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// DownFor takes the server down now and brings it back after d.
func (s *Server) DownFor(d time.Duration) {
	s.Down()
	time.AfterFunc(d, func() { _ = s.Up() })
}

// Close stops the server for good and frees its port.
func (s *Server) Close() {
	s.Down()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// HoldStatus makes every status lookup answer PENDING while on, as an endpoint
// does that cannot tell yet; tests use it to look at a task in OUTCOME_UNKNOWN.
func (s *Server) HoldStatus(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// Applied is how many times the effect for key was applied.
func (s *Server) Applied(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[key]
}

// TotalApplied is the number of effects over all keys.
func (s *Server) TotalApplied() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.applied {
		n += v
	}
	return n
}

// Requests returns every action request received, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsFor returns the requests received with key.
func (s *Server) RequestsFor(key string) []Request {
	return slices.DeleteFunc(s.Requests(), func(r Request) bool { return r.Key != key })
}

// Lookups is how many status lookups were made for key.
func (s *Server) Lookups(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups[key]
}

func (s *Server) next() Behavior {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return Normal
	}
	b := s.script[0]
	s.script = s.script[1:]
	return b
}

func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	if key == "" || req.TenantID == "" || req.TaskID == "" || req.Step == "" || req.Action == "" {
		http.Error(w, "Idempotency-Key, tenant_id, task_id, step and action are required", http.StatusBadRequest)
		return
	}
	req.Key = key
	b := s.next()

	switch b.kind {
	case "drop":
		req.Outcome = "DROPPED"
		s.record(req)
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("actionserver: connection cannot be hijacked")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case "fail":
		req.Outcome = "FAILED"
		s.mu.Lock()
		s.failed[key] = b.failText
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		writeJSON(w, map[string]any{"status": "FAILED", "error": b.failText})
		return
	}

	s.mu.Lock()
	s.inflight[key]++
	result, dup := s.results[key]
	if dup && s.Dedup {
		req.Outcome = "DUPLICATE"
	} else {
		s.applied[key]++
		result, _ = json.Marshal(map[string]any{"confirmation": fmt.Sprintf("%s-%d", req.Step, s.applied[key]), "action": req.Action})
		if !dup {
			s.results[key] = result
		}
		req.Outcome = "APPLIED"
	}
	if b.kind == "stall" {
		req.Outcome = "STALLED"
	}
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight[key]--
		s.mu.Unlock()
	}()

	if b.kind == "stall" {
		select {
		case <-time.After(b.stall):
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, map[string]any{"status": "APPLIED", "result": json.RawMessage(result)})
}

func (s *Server) record(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	s.lookups[key]++
	var status string
	var reason string
	var result []byte
	switch {
	case s.hold:
		status = "PENDING"
	case s.applied[key] > 0:
		status, result = "APPLIED", s.results[key]
	case s.failed[key] != "":
		status, reason = "FAILED", s.failed[key]
	case s.inflight[key] > 0:
		status = "PENDING"
	default:
		status = "NOT_APPLIED"
	}
	s.mu.Unlock()
	out := map[string]any{"status": status}
	if result != nil {
		out["result"] = json.RawMessage(result)
	}
	if reason != "" {
		out["error"] = reason
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
