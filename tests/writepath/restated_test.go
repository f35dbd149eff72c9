package writepath

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/app"
	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/governance"
	"github.com/engramhq/engram/internal/fakeopenai"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/internal/writetest"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
)

func prefers(object, content string) memory.Candidate {
	return memory.Candidate{
		MemoryType: memory.TypePreference, Scope: memory.ScopeUser, Subject: "user", Predicate: "prefers",
		Object: object, Content: content, Confidence: 0.9, Origin: memory.OriginStated,
	}
}

// A value restated in other words is the fact it restates: "I prefer direct
// flights" then "I'd rather fly direct" (the LLM, here the local fake server,
// proposes "direct flights" and "flying direct", two values of the many-valued
// "prefers", so two memory keys) becomes one fact with two evidence links once
// the values' cosine reaches ENGRAM_DUPLICATE_SIMILARITY. A different value
// ("window seats") stays its own fact.
//
// The embedder is the composite users get offline. It puts "direct flights" and
// "flying direct" at about 0.63 and "direct flights" and "window seats" at about
// 0.45, but also "green tea" and "black tea" at 0.77: offline vectors cannot tell
// a restatement from a neighbouring value, so the default threshold (0.95) keeps
// offline deployments to exact matches, and this test sets 0.6 to show the
// mechanism end to end. With an OpenAI-compatible embedder the threshold is the
// operator's to choose.
func TestRestatedPreferenceIsOneFactTwoEvidence(t *testing.T) {
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	cfg.Embedder = "composite"
	em, err := app.Embedder(cfg)
	require.NoError(t, err, "composite embedder (ENGRAM_MODEL_DIR: scripts/fetch-model)")

	const (
		first  = "I prefer direct flights"
		second = "I'd rather fly direct"
		other  = "I prefer window seats"
	)
	fake := fakeopenai.New(fakeopenai.Script{Rules: []fakeopenai.Rule{
		{Contains: said(first), Responses: []fakeopenai.Response{answer(t, "general", prefers("direct flights", "The user prefers direct flights."))}},
		{Contains: said(second), Responses: []fakeopenai.Response{answer(t, "general", prefers("flying direct", "The user would rather fly direct."))}},
		{Contains: said(other), Responses: []fakeopenai.Response{answer(t, "general", prefers("window seats", "The user prefers window seats."))}},
	}})
	t.Cleanup(fake.Close)
	x, err := llm.NewOpenAIExtractor(llm.OpenAIConfig{BaseURL: fake.BaseURL(), APIKey: "k", Model: "fake-model", Timeout: llmTimeout})
	require.NoError(t, err)

	gov := governance.DefaultConfig()
	gov.DuplicateSimilarity = 0.6
	st, c, q := testenv.Store(t), testenv.Temporal(t), testenv.TaskQueue(t)
	acts := writetest.Activities(st)
	acts.Extractor, acts.Embedder, acts.Gov = x, em, gov
	writetest.Worker(t, c, q, acts)
	e := &env{t: t, st: st, c: c, queue: q}

	r1 := e.write(writetest.Event("t1", "u1", "general", first, base))
	r2 := e.write(writetest.Event("t1", "u1", "general", second, base.Add(time.Hour)))
	require.Len(t, r2.Results, 1)
	assert.Equal(t, string(governance.ActionDuplicate), r2.Results[0].Action, r2.Results[0].Reason)
	assert.Contains(t, r2.Results[0].Reason, "similar value (cosine")

	fs := e.active("t1", "u1")
	require.Len(t, fs, 1, "one fact for the value stated twice")
	assert.Equal(t, "direct flights", fs[0].Object)
	ids, err := e.st.FactEvidenceIDs(context.Background(), "t1", fs[0].ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{r1.EvidenceID, r2.EvidenceID}, ids)

	r3 := e.write(writetest.Event("t1", "u1", "general", other, base.Add(2*time.Hour)))
	require.Len(t, r3.Results, 1)
	assert.Equal(t, string(governance.ActionCreate), r3.Results[0].Action, r3.Results[0].Reason)
	var objects []string
	for _, f := range e.active("t1", "u1") {
		objects = append(objects, f.Object)
	}
	assert.ElementsMatch(t, []string{"direct flights", "window seats"}, objects)
	assert.Equal(t, 2, e.count("facts", "tenant_id = 't1' AND predicate = 'prefers'"), "no revision was written for the restatement")
}
