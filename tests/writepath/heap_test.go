package writepath

// BenchmarkHeldWrites measures the memory a worker holds for writes that wait for
// review (each one a cached workflow with its event, up to days): the heap in use
// after N such writes, per 100 writes, at the configured workflow cache size.
// Run it once per size, e.g.
//
//	ENGRAM_WORKFLOW_CACHE=10000 go test ./tests/writepath/ -run x -bench HeldWrites -benchtime 600x
//	ENGRAM_WORKFLOW_CACHE=200   go test ./tests/writepath/ -run x -bench HeldWrites -benchtime 600x

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
	"github.com/engramhq/engram/write"
)

// unsureExtractor proposes one low-confidence preference per event, so every
// write waits for a reviewer.
type unsureExtractor struct{}

func (unsureExtractor) Name() string { return "unsure" }
func (unsureExtractor) Extract(_ context.Context, _ *schema.Schema, in llm.ExtractInput) (llm.ExtractOutput, error) {
	c := memory.Candidate{MemoryType: memory.TypePreference, Scope: memory.ScopeUser, Subject: "user", Predicate: "prefers",
		Object: "option " + in.Text[:8], Content: "The user may prefer option " + in.Text[:8], Confidence: 0.4, Origin: memory.OriginStated}
	b, _ := json.Marshal(map[string]any{"candidates": []memory.Candidate{c}})
	return llm.ExtractOutput{Raw: string(b), Extractor: "unsure", Version: "1"}, nil
}

func heapInUse() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

func BenchmarkHeldWrites(b *testing.B) {
	cfg, err := config.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	cfg.Embedder = "ngram"
	st, c, q := testenv.Store(b), testenv.Temporal(b), testenv.TaskQueue(b)
	cfg.TaskQueue = q
	em, err := app.Embedder(cfg)
	if err != nil {
		b.Fatal(err)
	}
	w, err := app.NewWorkerWith(c, cfg, st, em, unsureExtractor{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ctx := context.Background()
	tenant := "heap-" + testenv.RandomID(6)
	body := strings.Repeat("a long tool result line of the agent's history. ", 1200) // ≈ 58 KiB
	before := heapInUse()
	var ids []string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := memory.IngestEvent{TenantID: tenant, IdempotencyKey: fmt.Sprintf("k%d", i), UserID: "u1", Schema: "general",
			Content: fmt.Sprintf("%08d ", i) + body, OccurredAt: time.Now().UTC()}
		run, err := write.Start(ctx, c, q, write.MemoryWriteInput{Event: ev})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, run.GetID())
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n, err := st.DB().NewSelect().Table("events").Where("tenant_id = ? AND status = ?", tenant, memory.EventPendingReview).Count(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == int64(b.N) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.StopTimer()
	after := heapInUse()
	b.ReportMetric(after-before, "heap-MiB")
	b.ReportMetric((after-before)/float64(b.N)*100, "MiB/100-waiting")
	b.ReportMetric(float64(cfg.WorkflowCache), "cache-size")
	for _, id := range ids {
		_ = c.TerminateWorkflow(ctx, id, "", "benchmark done")
	}
}
