package use

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelDir is where the tests find the model: $ENGRAM_MODEL_DIR, else the default
// cache directory. When the model is missing there, the tests run scripts/fetch-model
// (which needs npm and a registry) and fail with its output if that fails.
func modelDir(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "fetch-model"))
		if err != nil {
			modelErr = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command(script) // uses $ENGRAM_MODEL_DIR or the default, prints the directory
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			modelErr = errors.New("the Universal Sentence Encoder model is missing and scripts/fetch-model failed " +
				"(run it by hand, or set ENGRAM_MODEL_DIR to a fetched model): " + err.Error() + "\n" + stderr.String())
			return
		}
		modelPath = strings.TrimSpace(string(out))
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelPath
}

var (
	modelOnce sync.Once
	modelPath string
	modelErr  error

	loadedOnce  sync.Once
	loadedModel *Model
	loadedErr   error
)

func loadModel(t testing.TB) *Model {
	t.Helper()
	dir := modelDir(t)
	loadedOnce.Do(func() { loadedModel, loadedErr = Load(dir) })
	require.NoError(t, loadedErr)
	return loadedModel
}

type referenceCase struct {
	Text   string    `json:"text"`
	Tokens []int32   `json:"tokens"`
	Vector []float64 `json:"vector"`
}

func readReference(t *testing.T) []referenceCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "reference.json"))
	require.NoError(t, err)
	var doc struct {
		Cases []referenceCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.GreaterOrEqual(t, len(doc.Cases), 20)
	return doc.Cases
}

func short(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

func cosine(a []float32, b []float64) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * b[i]
		na += float64(a[i]) * float64(a[i])
		nb += b[i] * b[i]
	}
	return dot / math.Sqrt(na*nb)
}

func TestTokenizerMatchesReference(t *testing.T) {
	m := loadModel(t)
	for _, c := range readReference(t) {
		assert.Equal(t, c.Tokens, m.Tokenize(c.Text), "tokens of %q", c.Text)
	}
}

// TestVectorsMatchReference compares the Go vectors with those the package's own
// TensorFlow.js runtime computed (scripts/use-reference.mjs), one text at a time and
// all in one batch.
func TestVectorsMatchReference(t *testing.T) {
	m := loadModel(t)
	cases := readReference(t)
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	batched, err := m.Embed(context.Background(), texts)
	require.NoError(t, err)
	worst := 1.0
	for i, c := range cases {
		single, err := m.Embed(context.Background(), []string{c.Text})
		require.NoError(t, err)
		require.Len(t, single[0], Dim)
		cs := cosine(single[0], c.Vector)
		cb := cosine(batched[i], c.Vector)
		var maxDiff float64
		for k, v := range single[0] {
			maxDiff = max(maxDiff, math.Abs(float64(v)-c.Vector[k]))
		}
		t.Logf("cos %.7f (batched %.7f) max|Δ| %.1e  %q", cs, cb, maxDiff, short(c.Text))
		assert.GreaterOrEqual(t, cs, 0.9999, "single %q", c.Text)
		assert.GreaterOrEqual(t, cb, 0.9999, "batched %q", c.Text)
		worst = min(worst, cs, cb)
	}
	t.Logf("worst cosine %.7f over %d texts", worst, len(cases))
}

func TestEmbedEdgeCases(t *testing.T) {
	m := loadModel(t)
	ctx := context.Background()
	vecs, err := m.Embed(ctx, []string{"", "我想", "hello", "", "   "})
	require.NoError(t, err)
	require.Len(t, vecs, 5)
	for i, v := range vecs {
		require.Len(t, v, Dim, "vector %d", i)
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		assert.InDelta(t, 1, n, 1e-4, "vector %d is unit length", i)
	}
	assert.Equal(t, vecs[0], vecs[3], "empty texts share a vector")
	none, err := m.Embed(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Embed(cctx, []string{"hello"})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestSemanticSimilarity(t *testing.T) {
	m := loadModel(t)
	v, err := m.Embed(context.Background(), []string{
		"How do I reset my password?",
		"I forgot my login credentials.",
		"The weather is sunny today.",
	})
	require.NoError(t, err)
	dot := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	assert.Greater(t, dot(v[0], v[1]), dot(v[0], v[2]), "paraphrase closer than an unrelated sentence")
}

func TestConcurrentEmbed(t *testing.T) {
	m := loadModel(t)
	want, err := m.Embed(context.Background(), []string{"concurrent use is safe", "another sentence"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := m.Embed(context.Background(), []string{"another sentence", "concurrent use is safe"})
			if err != nil {
				errs <- err
				return
			}
			if !slices.Equal(got[0], want[1]) || !slices.Equal(got[1], want[0]) {
				errs <- errors.New("vectors differ under concurrency")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope"))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.Contains(t, err.Error(), "scripts/fetch-model")

	// A copy with a truncated shard is corrupt, not missing.
	src := modelDir(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		if e.Name() == "group1-shard7of7" {
			b = b[:len(b)/2]
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	_, err = Load(dir)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNoModel)
	assert.Contains(t, err.Error(), "corrupt")

	require.NoError(t, os.Remove(filepath.Join(dir, "group1-shard3of7")))
	_, err = Load(dir)
	assert.ErrorIs(t, err, ErrNoModel)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.json"), []byte("{not json"), 0o644))
	_, err = Load(dir)
	assert.Contains(t, err.Error(), "corrupt")
}

var sink [][]float32

// BenchmarkEmbed reports sentences per second, one at a time and in batches of 64.
func BenchmarkEmbed(b *testing.B) {
	m := loadModel(b)
	sentences := benchSentences()
	ctx := context.Background()
	b.Run("single", func(b *testing.B) {
		k := 0
		for b.Loop() {
			v, err := m.Embed(ctx, sentences[k%len(sentences):k%len(sentences)+1])
			if err != nil {
				b.Fatal(err)
			}
			sink = v
			k++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sentences/s")
	})
	b.Run("batch64", func(b *testing.B) {
		for b.Loop() {
			v, err := m.Embed(ctx, sentences[:64])
			if err != nil {
				b.Fatal(err)
			}
			sink = v
		}
		b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "sentences/s")
	})
}

// BenchmarkLoad reports the load time and the heap the loaded model holds.
func BenchmarkLoad(b *testing.B) {
	dir := modelDir(b)
	var held uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(m)
	}
	b.ReportMetric(float64(held)/(1<<20), "MiB-held")
}

func benchSentences() []string {
	base := []string{
		"How do I reset my password?",
		"Book a flight from Paris to New York next Tuesday, window seat please.",
		"The customer prefers vegetarian meals and an aisle seat on long-haul flights.",
		"Order #A-12345 was shipped on 2024-03-15 to London.",
		"Remind me to call the dentist tomorrow morning.",
		"What is the refund policy for cancelled hotel bookings?",
		"Our quarterly revenue grew by twelve percent year over year.",
		"She moved to Berlin last spring and works as a data engineer.",
	}
	var out []string
	for i := 0; len(out) < 128; i++ {
		out = append(out, base[i%len(base)]+strings.Repeat(" indeed", i%5))
	}
	return out
}
