package embedding

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"unicode"
)

// CompositeEmbedder is the offline default embedder: a neural sentence encoder (the
// Universal Sentence Encoder lite, package embedding/use) for the text it can represent and
// the character n-gram embedder for the rest — Chinese, Japanese and Korean, which
// the encoder's 8,000-piece vocabulary does not cover (it maps every CJK sentence to
// nearly the same vector).
//
// Both embedders give unit vectors of the same dimension, and the composite's vector
// has that dimension too (the database column is fixed). For each text it is
//
//	normalise( (1−s)·neural + (λ + (1−λ)·s)·ngram )
//
// where s ∈ [0, 1] is the text's CJK share (CJKShare) and λ = CompositeNGramWeight.
// English text (s = 0) is mostly the neural vector with the n-gram vector at weight λ,
// which keeps exact words, names and ids counting; Chinese text (s = 1) is the n-gram
// vector alone; mixed text blends the two by its share. Because the two halves come
// from unrelated spaces, their cross terms in a dot product are near zero, so the
// cosine of two composite vectors is close to a weighted sum of the neural and the
// n-gram cosines: semantic similarity and character overlap both count, each where it
// is meaningful. The weighting was chosen on a bilingual paraphrase retrieval set
// (composite_eval_test.go), against routing by script and a fixed blend.
//
// It is safe for concurrent use when both parts are.
type CompositeEmbedder struct {
	neural, ngram Embedder
	lambda        float64
}

// CompositeNGramWeight is λ, the weight of the n-gram vector for text with no CJK
// (the neural vector's weight being 1).
const CompositeNGramWeight = 0.5

// NewCompositeEmbedder combines a neural embedder and an n-gram embedder of the same
// dimension.
func NewCompositeEmbedder(neural, ngram Embedder) (*CompositeEmbedder, error) {
	return newComposite(neural, ngram, CompositeNGramWeight)
}

func newComposite(neural, ngram Embedder, lambda float64) (*CompositeEmbedder, error) {
	if neural == nil || ngram == nil {
		return nil, fmt.Errorf("llm: composite embedder needs both a neural and an n-gram embedder")
	}
	if neural.Dim() != ngram.Dim() {
		return nil, fmt.Errorf("llm: composite embedder parts differ in dimension: %s has %d, %s has %d",
			neural.Name(), neural.Dim(), ngram.Name(), ngram.Dim())
	}
	return &CompositeEmbedder{neural: neural, ngram: ngram, lambda: lambda}, nil
}

// Name records both parts and the combination, e.g.
// "composite(use-lite+ngram-v1;cjk-share;ngram=0.5)": vectors change with any of them.
func (e *CompositeEmbedder) Name() string {
	return "composite(" + e.neural.Name() + "+" + e.ngram.Name() + ";cjk-share;ngram=" +
		strconv.FormatFloat(e.lambda, 'g', -1, 64) + ")"
}

// Dim is the dimension of both parts.
func (e *CompositeEmbedder) Dim() int { return e.neural.Dim() }

// Embed runs both parts on the texts (texts entirely in CJK skip the neural part)
// and combines their vectors.
func (e *CompositeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	shares := make([]float64, len(texts))
	var neuralIdx []int
	var neuralTexts []string
	for i, t := range texts {
		shares[i] = CJKShare(t)
		if shares[i] < 1 {
			neuralIdx = append(neuralIdx, i)
			neuralTexts = append(neuralTexts, t)
		}
	}
	ng, err := e.ngram.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(ng) != len(texts) {
		return nil, fmt.Errorf("llm: %s returned %d vectors for %d texts", e.ngram.Name(), len(ng), len(texts))
	}
	neural := make([][]float32, len(texts))
	if len(neuralTexts) > 0 {
		nv, err := e.neural.Embed(ctx, neuralTexts)
		if err != nil {
			return nil, err
		}
		if len(nv) != len(neuralTexts) {
			return nil, fmt.Errorf("llm: %s returned %d vectors for %d texts", e.neural.Name(), len(nv), len(neuralTexts))
		}
		for k, i := range neuralIdx {
			neural[i] = nv[k]
		}
	}
	dim := e.Dim()
	out := make([][]float32, len(texts))
	for i := range texts {
		s := shares[i]
		wn, wg := 1-s, e.lambda+(1-e.lambda)*s
		v := make([]float64, dim)
		if len(ng[i]) != dim || (neural[i] != nil && len(neural[i]) != dim) {
			return nil, fmt.Errorf("llm: composite embedder got a vector of the wrong dimension for input %d", i)
		}
		for k, x := range ng[i] {
			v[k] = wg * float64(x)
		}
		if neural[i] != nil {
			for k, x := range neural[i] {
				v[k] += wn * float64(x)
			}
		}
		var sum float64
		for _, x := range v {
			sum += x * x
		}
		inv := 1 / math.Sqrt(sum)
		if sum == 0 || math.IsInf(inv, 0) {
			inv = 0
		}
		vec := make([]float32, dim)
		for k, x := range v {
			vec[k] = float32(x * inv)
		}
		out[i] = vec
	}
	return out, nil
}

// CJKShare is the share of a text's content in Chinese, Japanese or Korean script, in
// [0, 1]: every Han, kana or Hangul character counts one, every other word of letters
// or digits counts two (an English word carries about as much as two Chinese
// characters). Text with neither counts as not CJK.
func CJKShare(text string) float64 {
	var cjk, other float64
	inWord := false
	for _, r := range text {
		switch {
		case isCJK(r):
			cjk++
			inWord = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				other += 2
			}
			inWord = true
		case unicode.Is(unicode.Mn, r):
			// combining marks continue a word
		default:
			inWord = false
		}
	}
	if cjk == 0 {
		return 0
	}
	return cjk / (cjk + other)
}

func isCJK(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}
