// Command travelagent is a small agent that uses Engram through its Go client. It
// plays the seed travel story and prints what Engram recalls after each turn:
//
//  1. "预算不超过8000元"            the user's budget (USER scope)
//  2. "我以后尽量都坐直飞"          from now on, direct flights (a preference)
//  3. "这次旅行预算调整到10000元"   this trip's budget (TASK scope: it leads for the
//     trip and does not overwrite the user's 8000)
//  4. the trip is planned and confirmed through TaskService, and the hotel booking
//     step runs against an action endpoint. The endpoint here (served by this
//     program) books the hotel on the first call and then stalls, so Engram cannot
//     know whether the booking happened: the task goes to OUTCOME_UNKNOWN, Engram
//     looks the booking up by its idempotency key, finds it applied and carries on
//     without booking twice.
//
// Run it against `engram dev` (which points ENGRAM_ACTION_URL at
// http://127.0.0.1:8091/actions, where this program serves the action endpoint):
//
//	export ENGRAM_ADDR=http://127.0.0.1:8080 ENGRAM_API_KEY=egk_…   # printed by engram dev
//	go run ./examples/travelagent
//
// With `engram serve`, start the server with ENGRAM_ACTION_URL pointing at
// --action-addr (and, to see the stall sooner, ENGRAM_ACTION_TIMEOUT=3s).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

func main() {
	log.SetFlags(0)
	run := randomID()
	addr := flag.String("addr", envOr("ENGRAM_ADDR", "http://127.0.0.1:8080"), "Engram API base URL (ENGRAM_ADDR)")
	key := flag.String("api-key", os.Getenv("ENGRAM_API_KEY"), "API key with the agent role (ENGRAM_API_KEY)")
	user := flag.String("user", "traveler-"+run, "the user")
	trip := flag.String("task", "trip-"+run, "the trip's task id")
	actionAddr := flag.String("action-addr", "127.0.0.1:8091", "where this program serves the action endpoint (path /actions)")
	flag.Parse()
	if *key == "" {
		log.Fatal("travelagent: no API key: set ENGRAM_API_KEY (engram dev prints one)")
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}

	actions := &hotelDesk{stallFirst: true, applied: map[string]json.RawMessage{}}
	ln, err := net.Listen("tcp", *actionAddr)
	if err != nil {
		log.Fatalf("travelagent: serve the action endpoint on %s: %v", *actionAddr, err)
	}
	go func() { _ = http.Serve(ln, actions.routes()) }()
	fmt.Printf("action endpoint: http://%s/actions (the server's ENGRAM_ACTION_URL must point here)\n", ln.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := &agent{c: client.New(base, *key), user: *user, trip: *trip, desk: actions}
	if err := a.play(ctx); err != nil {
		log.Fatalf("travelagent: %v", err)
	}
}

type agent struct {
	c          *client.Client
	user, trip string
	turn       int
	desk       *hotelDesk
}

func (a *agent) play(ctx context.Context) error {
	fmt.Printf("user %s, trip %s\n", a.user, a.trip)

	if err := a.say(ctx, "预算不超过8000元", "", "预算是多少"); err != nil {
		return err
	}
	if err := a.say(ctx, "我以后尽量都坐直飞", "", "订机票有什么偏好"); err != nil {
		return err
	}

	// The trip becomes a task: its budget is TASK-scoped.
	if _, err := a.c.StartTask(ctx, &engramv1.StartTaskRequest{TaskId: a.trip, UserId: a.user}); err != nil {
		return fmt.Errorf("start task: %w", err)
	}
	fmt.Printf("\ntask %s started\n", a.trip)
	if err := a.say(ctx, "这次旅行预算调整到10000元", a.trip, "这次旅行的预算是多少"); err != nil {
		return err
	}

	// Plan the trip, have it confirmed, and book the hotel.
	input, _ := structpb.NewStruct(map[string]any{"city": "Lisbon", "nights": 3, "max_total_cny": 10000})
	if _, err := a.c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: a.trip, Op: &engramv1.UpdateTaskRequest_Plan{Plan: &engramv1.PlanOp{
		Goal: "Lisbon, 3 nights, direct flights, within this trip's budget", Steps: []*engramv1.TaskStep{{Name: "hotel", Action: "book_hotel", Input: input}},
	}}}); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if _, err := a.c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: a.trip, Op: &engramv1.UpdateTaskRequest_RequestConfirmation{
		RequestConfirmation: &engramv1.RequestConfirmationOp{Reason: "books a hotel"}}}); err != nil {
		return fmt.Errorf("request confirmation: %w", err)
	}
	if _, err := a.c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: a.trip, Op: &engramv1.UpdateTaskRequest_Confirm{
		Confirm: &engramv1.ConfirmOp{Reason: "user: 好的，订吧"}}}); err != nil {
		return fmt.Errorf("confirm: %w", err)
	}
	fmt.Printf("\nturn %d — plan confirmed; booking the hotel (the action endpoint will stall on the first call)\n", a.turn+1)
	a.turn++
	t, err := a.bookHotel(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("task %s is %s; step hotel: %s after %d send(s), result %s\n", t.TaskId, state(t.State), stepStatus(t, "hotel"), stepSends(t, "hotel"), stepResult(t, "hotel"))
	fmt.Println("transitions:")
	for _, tr := range t.Transitions {
		fmt.Printf("  %2d %-22s → %-22s %s\n", tr.Seq, state(tr.From), state(tr.To), tr.Reason)
	}
	fmt.Printf("the hotel was booked %d time(s)\n", a.desk.bookings())
	if _, err := a.c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: a.trip, Op: &engramv1.UpdateTaskRequest_Complete{Complete: &engramv1.CompleteOp{Reason: "booked"}}}); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return a.recall(ctx, a.trip, "这次旅行的预算和酒店")
}

// bookHotel runs the next step and, while it runs, watches the task so the
// OUTCOME_UNKNOWN state and its reconciliation show.
func (a *agent) bookHotel(ctx context.Context) (*engramv1.Task, error) {
	type result struct {
		t   *engramv1.Task
		err error
	}
	done := make(chan result, 1)
	go func() {
		t, err := a.c.RunStep(ctx, a.trip, "")
		done <- result{t, err}
	}()
	last := engramv1.TaskState_TASK_STATE_UNSPECIFIED
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, fmt.Errorf("run step: %w", r.err)
			}
			return r.t, nil
		case <-tick.C:
			t, err := a.c.GetTask(ctx, a.trip)
			if err != nil || t.State == last {
				continue
			}
			last = t.State
			fmt.Printf("  … task is %s", state(t.State))
			if t.State == engramv1.TaskState_TASK_STATE_OUTCOME_UNKNOWN {
				fmt.Printf(" (%s): Engram looks the booking up by its idempotency key instead of booking again", t.LastError)
			}
			fmt.Println()
		}
	}
}

// say ingests one user turn, waits for the write, and prints the recalled context.
func (a *agent) say(ctx context.Context, text, task, query string) error {
	a.turn++
	fmt.Printf("\nturn %d — user: %s\n", a.turn, text)
	res, err := a.c.Ingest(ctx, &engramv1.Event{UserId: a.user, TaskId: task, Schema: "travel", Content: text, Source: "travelagent"}, client.WaitFor(2*time.Minute))
	if err != nil {
		return fmt.Errorf("ingest %q: %w", text, err)
	}
	fmt.Printf("write: %s", strings.TrimPrefix(res.Status.String(), "WRITE_STATUS_"))
	for _, o := range res.Outcomes {
		fmt.Printf("; %s %s (%s)", o.Action, o.MemoryKey, o.Reason)
	}
	fmt.Println()
	return a.recall(ctx, task, query)
}

func (a *agent) recall(ctx context.Context, task, query string) error {
	rc, err := a.c.Recall(ctx, &engramv1.RecallRequest{UserId: a.user, TaskId: task, Query: query, Schema: "travel", Purpose: "travelagent"})
	if err != nil {
		return fmt.Errorf("recall: %w", err)
	}
	fmt.Printf("--- recalled context after turn %d (query %q) ---\n", a.turn, query)
	for _, l := range strings.Split(strings.TrimRight(rc.Context, "\n"), "\n") {
		fmt.Printf("  %s\n", l)
	}
	fmt.Println("---")
	return nil
}

func state(s engramv1.TaskState) string {
	if s == engramv1.TaskState_TASK_STATE_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(s.String(), "TASK_STATE_")
}

func step(t *engramv1.Task, name string) *engramv1.TaskStepState {
	for _, s := range t.Steps {
		if s.Step.GetName() == name {
			return s
		}
	}
	return nil
}

func stepStatus(t *engramv1.Task, name string) string {
	if s := step(t, name); s != nil {
		return s.Status
	}
	return "-"
}

func stepSends(t *engramv1.Task, name string) int32 {
	if s := step(t, name); s != nil {
		return s.Sends
	}
	return 0
}

func stepResult(t *engramv1.Task, name string) string {
	if s := step(t, name); s != nil && s.Result != nil {
		b, _ := s.Result.MarshalJSON()
		return string(b)
	}
	return "-"
}

// hotelDesk is a tiny action endpoint (see activities/TASK_ACTIONS.md): it books
// a hotel once per Idempotency-Key and answers status lookups. With stallFirst,
// the very first booking is made and then the answer never comes: the caller
// times out not knowing whether the hotel was booked; the first status lookup
// then answers PENDING (still confirming), the next one APPLIED.
type hotelDesk struct {
	mu         sync.Mutex
	stallFirst bool
	calls      int
	lookups    int
	applied    map[string]json.RawMessage
	booked     int
}

func (d *hotelDesk) bookings() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.booked
}

func (d *hotelDesk) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /actions", d.act)
	mux.HandleFunc("GET /actions/status/{key}", d.status)
	return mux
}

func (d *hotelDesk) act(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var req struct {
		Step   string          `json:"step"`
		Action string          `json:"action"`
		Input  json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || key == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.calls++
	first := d.calls == 1
	res, ok := d.applied[key]
	if !ok { // apply: book the hotel (once per key)
		d.booked++
		res, _ = json.Marshal(map[string]any{"booking": fmt.Sprintf("H-%04d", 1000+d.booked), "action": req.Action})
		d.applied[key] = res
	}
	d.mu.Unlock()
	fmt.Printf("  [action endpoint] %s %s (key %s…): booked, %d booking(s) in all\n", req.Action, req.Step, key[:min(12, len(key))], d.booked)
	if first && d.stallFirst {
		fmt.Println("  [action endpoint] …and stalling: the answer is lost")
		select { // hold the answer until the caller gives up
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute):
		}
		return
	}
	writeJSON(w, map[string]any{"status": "APPLIED", "result": res})
}

func (d *hotelDesk) status(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	res, ok := d.applied[r.PathValue("key")]
	d.lookups++
	first := d.lookups == 1
	d.mu.Unlock()
	if ok && first && d.stallFirst {
		// The booking system is still confirming: Engram asks again later.
		fmt.Println("  [action endpoint] status lookup: PENDING (still confirming with the hotel)")
		writeJSON(w, map[string]any{"status": "PENDING"})
		return
	}
	fmt.Printf("  [action endpoint] status lookup: applied=%v\n", ok)
	if !ok {
		writeJSON(w, map[string]any{"status": "NOT_APPLIED"})
		return
	}
	writeJSON(w, map[string]any{"status": "APPLIED", "result": res})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil && !errors.Is(err, http.ErrHandlerTimeout) {
		log.Printf("write answer: %v", err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
