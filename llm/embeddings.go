package llm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/engramhq/engram/embedding"
	openai "github.com/sashabaranov/go-openai"
)

// OpenAIEmbedderConfig configures an embedder behind an OpenAI-compatible
// /embeddings endpoint.
type OpenAIEmbedderConfig struct {
	BaseURL string
	APIKey  string
	Model   string // e.g. "text-embedding-3-small"; required
	// Dim is the vector dimension to request and to expect; zero means
	// embedding.DefaultEmbeddingDim. Models that cannot shorten their vectors (the
	// "dimensions" parameter) must be configured with their native size.
	Dim int
	// Timeout bounds one request; zero means DefaultLLMTimeout.
	Timeout time.Duration
	// BatchSize bounds the inputs per request; zero means 256 (OpenAI accepts up
	// to 2048, local servers often far fewer).
	BatchSize int
}

// OpenAIEmbedder embeds through an OpenAI-compatible endpoint. It is safe for
// concurrent use.
type OpenAIEmbedder struct {
	cfg    OpenAIEmbedderConfig
	client *openai.Client
}

// NewOpenAIEmbedder checks the configuration and builds the embedder. It does not
// contact the endpoint: the first Embed reveals a wrong dimension.
func NewOpenAIEmbedder(cfg OpenAIEmbedderConfig) (*OpenAIEmbedder, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("llm: openai embedder needs a model")
	}
	if cfg.Dim < 0 {
		return nil, fmt.Errorf("llm: openai embedder dimension %d must be positive", cfg.Dim)
	}
	if cfg.Dim == 0 {
		cfg.Dim = embedding.DefaultEmbeddingDim
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultLLMTimeout
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	client := newOpenAIClient(OpenAIConfig{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model})
	return &OpenAIEmbedder{cfg: cfg, client: client}, nil
}

func (e *OpenAIEmbedder) Name() string { return "openai:" + e.cfg.Model }
func (e *OpenAIEmbedder) Dim() int     { return e.cfg.Dim }

// Embed requests vectors of the configured dimension, in batches, and checks that
// every vector has it: a vector of another length would be rejected by the database
// much later, far from its cause. Failed calls are *CallError.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(start+e.cfg.BatchSize, len(texts))]
		input := make([]string, len(batch))
		for i, t := range batch {
			// The API rejects empty strings; a blank has no meaning either way.
			if strings.TrimSpace(t) == "" {
				t = " "
			}
			input[i] = t
		}
		var resp openai.EmbeddingResponse
		err := callOpenAI(ctx, "embeddings", e.cfg.Timeout, func(ctx context.Context) error {
			var err error
			resp, err = e.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
				Input:      input,
				Model:      openai.EmbeddingModel(e.cfg.Model),
				Dimensions: e.cfg.Dim,
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(resp.Data) != len(batch) {
			return nil, fmt.Errorf("llm: embeddings model %q returned %d vectors for %d inputs", e.cfg.Model, len(resp.Data), len(batch))
		}
		// The API may answer out of order; Index says which input each vector is for.
		sort.SliceStable(resp.Data, func(i, j int) bool { return resp.Data[i].Index < resp.Data[j].Index })
		for i, d := range resp.Data {
			if d.Index != i {
				return nil, fmt.Errorf("llm: embeddings model %q returned indexes that do not cover inputs 0..%d", e.cfg.Model, len(batch)-1)
			}
			if len(d.Embedding) != e.cfg.Dim {
				return nil, &DimensionError{Model: e.cfg.Model, Input: start + i, Got: len(d.Embedding), Want: e.cfg.Dim}
			}
			out = append(out, d.Embedding)
		}
	}
	return out, nil
}

// DimensionError is a vector whose length is not the configured dimension: the model
// ignored the "dimensions" parameter or the configuration names the wrong size. It is
// a configuration error, not worth retrying.
type DimensionError struct {
	Model string
	Input int // index of the input whose vector was wrong
	Got   int
	Want  int
}

func (e *DimensionError) Error() string {
	return fmt.Sprintf("llm: embeddings model %q returned a vector of %d dimensions for input %d, configured %d; "+
		"set the embedding dimension to the model's size or use a model that supports the dimensions parameter",
		e.Model, e.Got, e.Input, e.Want)
}
