package writepath

// Valid time decides, not commit order (issue 28), on the real stack: random users
// state a budget 2–6 times with explicit occurred_at (a minute apart, values from
// a pool of three, so some restate an earlier value), and the statements are sent
// in a random order, in waves of one to three at once for the same key, some in a
// MemoryWriteBatch, some through a worker whose governance sends every new value
// to review (a reviewer confirms it). After each user's last write: one ACTIVE
// revision, holding the latest statement's value; at every statement's time
// exactly one live revision valid, holding that statement's value; no two live
// revisions of a key valid at once; and known at the end of each wave (known_at),
// the values the statements sent by then say. TestValidTimeProperty runs it with an
// in-process worker; the crash tests run it with worker processes SIGKILLed and
// with a private Temporal dev server restarted.

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// reviewGov is the governance of the review queue's worker: every statement that
// writes a value waits for a reviewer (confidence below 1).
func reviewGov() governance.Config {
	g := governance.DefaultConfig()
	g.ConfirmBelow = 1
	return g
}

type vtRoute int

const (
	routeDirect vtRoute = iota
	routeBatch
	routeReview
)

func (r vtRoute) String() string { return [...]string{"direct", "batch", "review"}[r] }

type vtStmt struct {
	at    time.Time
	value int
	route vtRoute
}

type vtCase struct {
	n     int
	user  string
	stmts []vtStmt // in time order
	waves [][]int  // indexes into stmts, in the order they are sent
}

func (c vtCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %d (%s): statements", c.n, c.user)
	for i, s := range c.stmts {
		fmt.Fprintf(&b, " #%d %s=%d", i, s.at.Format("15:04"), s.value)
	}
	b.WriteString("; sent")
	for _, w := range c.waves {
		b.WriteString(" [")
		for j, i := range w {
			if j > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "#%d %s", i, c.stmts[i].route)
		}
		b.WriteString("]")
	}
	return b.String()
}

// vtCases draws n cases from rng.
func vtCases(rng *rand.Rand, n int, tenant string) []vtCase {
	values := []int{2319, 2385, 2400}
	out := make([]vtCase, n)
	for ci := range out {
		c := vtCase{n: ci, user: fmt.Sprintf("vt-%d", ci)}
		k := 2 + rng.Intn(5)
		start := base.Add(time.Duration(ci) * 24 * time.Hour)
		for i := 0; i < k; i++ {
			r := routeDirect
			switch x := rng.Intn(10); {
			case x < 2:
				r = routeBatch
			case x < 4:
				r = routeReview
			}
			c.stmts = append(c.stmts, vtStmt{at: start.Add(time.Duration(i) * time.Minute), value: values[rng.Intn(len(values))], route: r})
		}
		order := rng.Perm(k)
		for len(order) > 0 {
			w := 1 + rng.Intn(3)
			if w > len(order) {
				w = len(order)
			}
			c.waves = append(c.waves, order[:w])
			order = order[w:]
		}
		out[ci] = c
	}
	return out
}

type vtRunner struct {
	st             *storage.Store
	c              client.Client
	tenant         string
	direct, review string // task queues
	keys           atomic.Int64
}

func (r *vtRunner) event(c vtCase, i int) memory.IngestEvent {
	s := c.stmts[i]
	return memory.IngestEvent{
		TenantID: r.tenant, IdempotencyKey: fmt.Sprintf("%s-%d", c.user, i), UserID: c.user, SessionID: "s-" + c.user,
		Schema: "travel", Content: fmt.Sprintf("预算不超过%d元", s.value), OccurredAt: s.at,
	}
}

// retry runs fn until it succeeds or ctx ends (a worker or the server may be down
// for a while): every call it makes is idempotent.
func retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	var err error
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finished waits for the workflow id's result.
func (r *vtRunner) finished(ctx context.Context, id string, out any) error {
	return retry(ctx, "wait for "+id, func(ctx context.Context) error {
		return r.c.GetWorkflow(ctx, id, "").Get(ctx, out)
	})
}

func committed(res write.MemoryWriteResult) error {
	if res.Status != write.WriteCommitted {
		return fmt.Errorf("write %s: %s (%s)", res.EventID, res.Status, res.Reason)
	}
	for _, cr := range res.Results {
		if cr.Status != memory.CandidateAccepted {
			return fmt.Errorf("write %s: candidate %s %s (%s)", res.EventID, cr.CandidateID, cr.Status, cr.Reason)
		}
	}
	return nil
}

// sendOne writes statement i of c and waits for it; through review, a reviewer
// confirms what waits.
func (r *vtRunner) sendOne(ctx context.Context, c vtCase, i int) error {
	q := r.direct
	if c.stmts[i].route == routeReview {
		q = r.review
	}
	in := write.MemoryWriteInput{Event: r.event(c, i), ReviewTimeout: 30 * time.Minute}
	var id string
	if err := retry(ctx, "start", func(ctx context.Context) error {
		run, err := write.Start(ctx, r.c, q, in)
		if err == nil {
			id = run.GetID()
		}
		return err
	}); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	if c.stmts[i].route == routeReview {
		go r.confirm(ctx, id, done)
	}
	var res write.MemoryWriteResult
	if err := r.finished(ctx, id, &res); err != nil {
		return err
	}
	return committed(res)
}

// confirm confirms every candidate that write id holds for review, until done.
func (r *vtRunner) confirm(ctx context.Context, id string, done <-chan struct{}) {
	sent := map[string]bool{}
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var pending []write.PendingCandidate
		v, err := r.c.QueryWorkflow(qctx, id, "", write.QueryPending)
		if err == nil {
			err = v.Get(&pending)
		}
		for _, p := range pending {
			if sent[p.CandidateID] {
				continue
			}
			if r.c.SignalWorkflow(qctx, id, "", write.SignalReview, write.ReviewRequest{CandidateID: p.CandidateID,
				Verdict: governance.Verdict{Kind: governance.VerdictConfirm, Reviewer: "property-test"}}) == nil {
				sent[p.CandidateID] = true
			}
		}
		cancel()
	}
}

// sendBatch writes statements is of c in one MemoryWriteBatch and waits for it.
func (r *vtRunner) sendBatch(ctx context.Context, c vtCase, is []int) error {
	in := write.MemoryWriteBatchInput{}
	for _, i := range is {
		in.Events = append(in.Events, r.event(c, i))
	}
	key := fmt.Sprintf("%s-batch-%d", c.user, r.keys.Add(1))
	if err := retry(ctx, "start batch", func(ctx context.Context) error {
		_, err := write.StartBatch(ctx, r.c, r.direct, r.tenant, key, in)
		return err
	}); err != nil {
		return err
	}
	var res write.MemoryWriteBatchResult
	if err := r.finished(ctx, write.MemoryWriteBatchWorkflowID(r.tenant, key), &res); err != nil {
		return err
	}
	for _, wr := range res.Results {
		if err := committed(wr); err != nil {
			return err
		}
	}
	return nil
}

// run sends c's statements wave by wave (a wave's at once) and checks the key,
// now and as known after each wave.
func (r *vtRunner) run(ctx context.Context, c vtCase) error {
	var marks []time.Time // when each wave had committed
	for _, w := range c.waves {
		var batch []int
		var wg sync.WaitGroup
		errs := make(chan error, len(w)+1)
		for _, i := range w {
			if c.stmts[i].route == routeBatch {
				batch = append(batch, i)
				continue
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if err := r.sendOne(ctx, c, i); err != nil {
					errs <- fmt.Errorf("statement #%d: %w", i, err)
				}
			}(i)
		}
		if len(batch) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.sendBatch(ctx, c, batch); err != nil {
					errs <- fmt.Errorf("batch %v: %w", batch, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		marks = append(marks, time.Now())
	}
	if err := r.check(ctx, c); err != nil {
		return err
	}
	return r.checkKnown(ctx, c, marks)
}

// budgetsAsOf are the values of the facts ff selects that were true at at (ACTIVE
// or SUPERSEDED revisions valid then).
func (r *vtRunner) budgetsAsOf(ctx context.Context, at time.Time, ff storage.FactFilter) ([]string, error) {
	fs, err := r.st.FactsAsOf(ctx, r.tenant, at, ff)
	if err != nil {
		return nil, err
	}
	var got []string
	for _, f := range fs {
		if f.Status == memory.FactActive || f.Status == memory.FactSuperseded {
			got = append(got, f.Object)
		}
	}
	return got, nil
}

// checkKnown: known at the end of each wave, the memory held what the statements
// sent so far say, at every statement's time (a statement sent later, once
// governed, changes what is known after it, never what was known before).
func (r *vtRunner) checkKnown(ctx context.Context, c vtCase, marks []time.Time) error {
	sent := map[int]bool{}
	for j, w := range c.waves {
		for _, i := range w {
			sent[i] = true
		}
		ff := storage.FactFilter{UserID: c.user, Predicate: "budget", KnownAt: marks[j]}
		for i, s := range c.stmts {
			want := "" // the latest statement sent by then at or before s.at
			for k := i; k >= 0; k-- {
				if sent[k] {
					want = strconv.Itoa(c.stmts[k].value) + " CNY"
					break
				}
			}
			got, err := r.budgetsAsOf(ctx, s.at, ff)
			if err != nil {
				return err
			}
			if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
				return fmt.Errorf("known after wave %d, as of statement #%d: %v, want [%s]", j, i, got, want)
			}
		}
	}
	return nil
}

// check: one ACTIVE revision with the latest statement's value; at each
// statement's time (and half a minute after) one live revision valid, with that
// statement's value; no overlapping live revisions of the key.
func (r *vtRunner) check(ctx context.Context, c vtCase) error {
	obj := func(v int) string { return strconv.Itoa(v) + " CNY" }
	ff := storage.FactFilter{UserID: c.user, Predicate: "budget"}
	all, err := r.st.ListFacts(ctx, r.tenant, ff)
	if err != nil {
		return err
	}
	var active []string
	history := make([]string, 0, len(all))
	sort.Slice(all, func(i, j int) bool { return all[i].Revision < all[j].Revision })
	for _, f := range all {
		history = append(history, fmt.Sprintf("rev %d %s %s [%s, %v)", f.Revision, f.Status, f.Object, f.ValidFrom.UTC().Format("15:04"), until(f.ValidUntil)))
		if f.Status == memory.FactActive {
			active = append(active, f.Object)
		}
	}
	want := obj(c.stmts[len(c.stmts)-1].value)
	if len(active) != 1 || active[0] != want {
		return fmt.Errorf("ACTIVE %v, want [%s]; history %v", active, want, history)
	}
	for i, s := range c.stmts {
		for _, at := range []time.Time{s.at, s.at.Add(30 * time.Second)} {
			got, err := r.budgetsAsOf(ctx, at, ff)
			if err != nil {
				return err
			}
			if len(got) != 1 || got[0] != obj(s.value) {
				return fmt.Errorf("as of statement #%d (%s): %v, want [%s]; history %v", i, at.Format("15:04:05"), got, obj(s.value), history)
			}
		}
	}
	ov, err := r.st.Overlaps(ctx, r.tenant)
	if err != nil {
		return err
	}
	for _, o := range ov {
		if len(all) > 0 && o.MemoryKey == all[0].MemoryKey {
			return fmt.Errorf("revisions %d and %d valid at once from %s; history %v", o.RevisionA, o.RevisionB, o.From.UTC().Format("15:04"), history)
		}
	}
	return nil
}

func until(t *time.Time) string {
	if t == nil {
		return "∞"
	}
	return t.UTC().Format("15:04")
}

// vtSeed is ENGRAM_PROPERTY_SEED, or the clock.
func vtSeed(t *testing.T) int64 {
	if s := os.Getenv("ENGRAM_PROPERTY_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "ENGRAM_PROPERTY_SEED")
		return n
	}
	return time.Now().UnixNano()
}

// runProperty runs n cases, parallel at once, and fails the test with every wrong
// case (and the seed that draws them again).
func runProperty(t *testing.T, r *vtRunner, n, parallel int, within time.Duration) {
	seed := vtSeed(t)
	t.Logf("seed %d (ENGRAM_PROPERTY_SEED=%d draws these cases again)", seed, seed)
	cases := vtCases(rand.New(rand.NewSource(seed)), n, r.tenant)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var mu sync.Mutex
	var wrong []string
	next := make(chan vtCase)
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if err := r.run(ctx, c); err != nil {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%v: %v", c, err))
					mu.Unlock()
				}
			}
		}()
	}
	start := time.Now()
	for _, c := range cases {
		next <- c
	}
	close(next)
	wg.Wait()
	stmts := 0
	for _, c := range cases {
		stmts += len(c.stmts)
	}
	t.Logf("%d cases, %d statements in %s, %d wrong", n, stmts, time.Since(start).Round(time.Millisecond), len(wrong))
	if len(wrong) > 0 {
		if len(wrong) > 10 {
			wrong = wrong[:10]
		}
		t.Fatalf("seed %d: %d of %d cases wrong, first:\n%s", seed, len(wrong), n, strings.Join(wrong, "\n"))
	}
}

// TestValidTimeProperty: 200 random cases (500 with ENGRAM_PROPERTY_FULL=1, as
// a nightly run or a benchmark session sets it) through an in-process worker
// (real Temporal, real Postgres), 0 wrong. The default size keeps the test
// command's slowest package shorter (500 cases took 63 s of tests/writepath's
// 338 s); every case is a fresh user, so 200 draw the same kinds of orders.
func TestValidTimeProperty(t *testing.T) {
	n := 200
	if os.Getenv("ENGRAM_PROPERTY_FULL") == "1" {
		n = 500
	}
	if testing.Short() {
		n = 60
	}
	st := testenv.Store(t)
	c := testenv.Temporal(t)
	emb := embedding.NewNGramEmbedder(storage.EmbeddingDim)
	r := &vtRunner{st: st, c: c, tenant: "vt-" + testenv.RandomID(6),
		direct: startWriteWorkerGov(t, c, st, llm.NewRuleExtractor(), emb, governance.DefaultConfig()),
		review: startWriteWorkerGov(t, c, st, llm.NewRuleExtractor(), emb, reviewGov())}
	runProperty(t, r, n, 24, 9*time.Minute)
}

// devServer is a private Temporal dev server (never the shared one), on free
// ports with its SQLite file in a temporary directory, so a test may restart it.
type devServer struct {
	t          *testing.T
	bin, db    string
	port, http int
	metrics    int
	proc       *testenv.Process
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startDevServer(t *testing.T) *devServer {
	bin := os.Getenv("ENGRAM_TEMPORAL_BIN")
	if bin == "" {
		gopath := strings.Split(os.Getenv("GOPATH"), ":")[0]
		if gopath == "" {
			home, _ := os.UserHomeDir()
			gopath = filepath.Join(home, "go")
		}
		bin = filepath.Join(gopath, "bin", "temporal-engram") // scripts/stack builds it (TEMPORAL_BIN_NAME)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no temporal CLI at %s (scripts/stack installs it): %v", bin, err)
	}
	d := &devServer{t: t, bin: bin, db: filepath.Join(t.TempDir(), "temporal.db"), port: freePort(t), http: freePort(t), metrics: freePort(t)}
	d.start()
	return d
}

func (d *devServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", d.port) }

// start runs the server (the flags and search attributes of scripts/stack) and
// waits until it answers.
func (d *devServer) start() {
	args := []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(d.port),
		"--http-port", strconv.Itoa(d.http), "--metrics-port", strconv.Itoa(d.metrics), "--db-filename", d.db,
		"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal", "--log-level", "error"}
	for _, sa := range []string{"EngramTenant", "EngramReview", "EngramKind", "EngramSubject", "EngramTaskState"} {
		args = append(args, "--search-attribute", sa+"=Keyword")
	}
	d.proc = testenv.StartProcess(d.t, os.Environ(), d.bin, args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := client.Dial(client.Options{HostPort: d.addr(), Namespace: "default"})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			cancel()
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("private temporal on %s did not answer within 60s: %v", d.addr(), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// restart SIGKILLs the server and starts it again on the same file and port.
func (d *devServer) restart() {
	d.proc.Kill()
	d.start()
}

// crashRunner is a vtRunner whose workers are `engram worker` processes (one per
// queue) of bin on temporal at addr.
func crashRunner(t *testing.T, addr string) (*vtRunner, func() (direct, review *testenv.Process)) {
	bin := testenv.Build(t, "./cmd/engram")
	st, dbURL := testenv.StoreURL(t)
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: testenv.Namespace()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	r := &vtRunner{st: st, c: c, tenant: "vtc-" + testenv.RandomID(6), direct: testenv.TaskQueue(t), review: testenv.TaskQueue(t) + "-review"}
	envOf := func(q string, extra ...string) []string {
		return testenv.WorkerEnv(t, dbURL, q, append([]string{"ENGRAM_EMBEDDER=ngram", "TEMPORAL_ADDRESS=" + addr}, extra...)...)
	}
	direct, review := envOf(r.direct), envOf(r.review, "ENGRAM_CONFIRM_BELOW=1")
	return r, func() (*testenv.Process, *testenv.Process) {
		return testenv.StartProcess(t, direct, bin, "worker"), testenv.StartProcess(t, review, bin, "worker")
	}
}

// chaos calls hit at random moments (0.5–2 s apart), at least min and at most
// max times, while the run goes on (until stop is closed); it returns how many.
// Each hit costs the writes it catches a task timeout (10 s) before a new worker
// or server takes them, so an unbounded chaos would only make the run long.
func chaos(stop <-chan struct{}, min, max int, hit func()) int {
	n := 0
	for n < max {
		select {
		case <-stop:
			if n >= min {
				return n
			}
		default:
		}
		time.Sleep(time.Duration(500+rand.Intn(1500)) * time.Millisecond)
		hit()
		n++
	}
	return n
}

// TestValidTimePropertyWorkerKilled: the property while both worker processes are
// SIGKILLed at random moments (a new one started after each kill).
func TestValidTimePropertyWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("worker kills during 100 cases take minutes")
	}
	r, start := crashRunner(t, testenv.TemporalAddress(t))
	direct, review := start()
	stop := make(chan struct{})
	kills := make(chan int, 1)
	go func() {
		n := 0
		// A worker that fails to start fails the test (t.Fatalf ends this goroutine):
		// the count is still sent, so the test reports it instead of waiting forever.
		defer func() { kills <- n }()
		n = chaos(stop, 10, 15, func() {
			direct.Kill()
			review.Kill()
			direct, review = start()
		})
	}()
	defer func() { t.Logf("%d worker kills", <-kills) }()
	defer close(stop)
	runProperty(t, r, 100, 16, 8*time.Minute)
}

// TestValidTimePropertyTemporalRestarted: the property while a private Temporal
// dev server is SIGKILLed and started again (same SQLite file) during the run.
func TestValidTimePropertyTemporalRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("Temporal restarts during 150 cases take minutes")
	}
	d := startDevServer(t)
	r, start := crashRunner(t, d.addr())
	start()
	stop := make(chan struct{})
	restarts := make(chan int, 1)
	go func() {
		n := 0
		defer func() { restarts <- n }() // sent even when a restart fails the test
		n = chaos(stop, 3, 5, func() {
			time.Sleep(2 * time.Second) // let writes get going between outages
			d.restart()
		})
	}()
	defer func() { t.Logf("%d Temporal restarts", <-restarts) }()
	defer close(stop)
	runProperty(t, r, 150, 16, 8*time.Minute)
}
