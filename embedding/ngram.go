package embedding

import (
	"context"
	"math"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// NGramEmbedder is the offline default embedder: it needs no network and no model
// weights. It hashes character and word n-grams of normalised text into a fixed
// number of dimensions (the "hashing trick"), so texts that share words, ids and
// Chinese character pairs get similar vectors. It knows nothing of synonyms — that is
// what a neural embedder adds — but it is deterministic, fast and handles CJK, which
// has no spaces to split words on.
//
// Features, after NFKC normalisation and lower-casing:
//   - words of letters and digits (English, ids such as 12345, Korean): the word, its
//     character trigrams with boundary marks (so "flight" and "flights" share most),
//     and the pair it forms with the previous word;
//   - runs of Han and kana: every character and every pair of adjacent characters
//     (Chinese words are mostly two characters long, so bigrams stand in for words).
//
// Very common function words weigh less. Each feature is hashed to a dimension and a
// sign (signed hashing keeps collisions from adding up to a bias), and the vector is
// L2-normalised, so the dot product of two vectors is their cosine similarity.
//
// The zero value is not usable; call NewNGramEmbedder. It is safe for concurrent use.
type NGramEmbedder struct{ dim int }

// NewNGramEmbedder returns an n-gram embedder of dim dimensions; dim ≤ 0 means
// DefaultEmbeddingDim.
func NewNGramEmbedder(dim int) *NGramEmbedder {
	if dim <= 0 {
		dim = DefaultEmbeddingDim
	}
	return &NGramEmbedder{dim: dim}
}

// Name includes a version: vectors change when the features do, and stored vectors
// of another version must be recomputed, not compared.
func (e *NGramEmbedder) Name() string { return "ngram-v1" }
func (e *NGramEmbedder) Dim() int     { return e.dim }

// Embed returns one vector per text. It only fails when ctx is done, checked between
// texts so a huge batch can be abandoned.
func (e *NGramEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = e.Vector(t)
	}
	return out, nil
}

// Feature weights. Words carry the meaning in English; in Chinese the character pair
// does, single characters being ambiguous.
const (
	ngWord       = 1.0
	ngWordPair   = 0.6
	ngTrigram    = 0.35
	ngHanChar    = 0.45
	ngHanPair    = 1.0
	ngStopFactor = 0.25
)

// Hash kinds keep a word and a character pair with the same runes apart.
const (
	ngKindWord byte = iota + 1
	ngKindWordPair
	ngKindTrigram
	ngKindHanChar
	ngKindHanPair
	ngKindEmpty
)

// Vector embeds one text.
func (e *NGramEmbedder) Vector(text string) []float32 {
	v := make([]float32, e.dim)
	f := featurizer{v: v, dim: uint64(e.dim)}
	if !norm.NFKC.IsNormalString(text) {
		text = norm.NFKC.String(text)
	}
	var word, han, prev []rune
	var wordBuf, hanBuf, prevBuf [48]rune
	word, han, prev = wordBuf[:0], hanBuf[:0], prevBuf[:0]

	flushWord := func() {
		if len(word) == 0 {
			return
		}
		f.word(word, prev)
		prev = append(prev[:0], word...)
		word = word[:0]
	}
	flushHan := func() {
		if len(han) == 0 {
			return
		}
		f.han(han)
		han = han[:0]
		// A CJK run separates words: "flight 直飞 hotel" is not the pair flight hotel.
		prev = prev[:0]
	}
	for _, r := range text {
		r = unicode.ToLower(r)
		switch {
		case IsHan(r):
			flushWord()
			han = append(han, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			flushHan()
			word = append(word, r)
		default:
			flushWord()
			flushHan()
		}
	}
	flushWord()
	flushHan()

	if !f.any {
		// An empty text still gets a unit vector: a zero vector has no cosine, and
		// pgvector returns NaN distances for it.
		f.add(f.hashStart(ngKindEmpty), 1)
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// IsHan reports CJK ideographs and kana, which the n-gram features and the
// summariser treat as one-character words.
func IsHan(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r))
}

type featurizer struct {
	v   []float32
	dim uint64
	any bool
}

// FNV-1a, written out so hashing a feature allocates nothing.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func (f *featurizer) hashStart(kind byte) uint64 { return (fnvOffset ^ uint64(kind)) * fnvPrime }

func ngramHash(h uint64, rs []rune) uint64 {
	var buf [utf8.UTFMax]byte
	for _, r := range rs {
		n := utf8.EncodeRune(buf[:], r)
		for _, b := range buf[:n] {
			h = (h ^ uint64(b)) * fnvPrime
		}
	}
	return h
}

// add folds feature hash h into the vector with weight w. The finaliser mixes all
// bits before taking the index and sign, which FNV alone leaves poorly spread.
func (f *featurizer) add(h uint64, w float32) {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	i := (h & 0x7fffffffffffffff) % f.dim
	if h>>63 == 1 {
		w = -w
	}
	f.v[i] += w
	f.any = true
}

func (f *featurizer) word(word, prev []rune) {
	w := float32(ngWord)
	stop := StopWord(word)
	if stop {
		w *= ngStopFactor
	}
	f.add(ngramHash(f.hashStart(ngKindWord), word), w)
	if len(prev) > 0 {
		h := ngramHash(f.hashStart(ngKindWordPair), prev)
		h = (h ^ ' ') * fnvPrime
		f.add(ngramHash(h, word), ngWordPair*w)
	}
	// Trigrams of ^word$: shared stems and ids that differ in a digit stay close.
	if len(word) < 2 || stop {
		return
	}
	var tri [3]rune
	for i := -1; i+2 <= len(word); i++ {
		for j := range 3 {
			k := i + j
			switch {
			case k < 0:
				tri[j] = '^'
			case k >= len(word):
				tri[j] = '$'
			default:
				tri[j] = word[k]
			}
		}
		f.add(ngramHash(f.hashStart(ngKindTrigram), tri[:]), ngTrigram)
	}
}

func (f *featurizer) han(run []rune) {
	for i, r := range run {
		w := float32(ngHanChar)
		if StopHan(r) {
			w *= ngStopFactor
		}
		f.add(ngramHash(f.hashStart(ngKindHanChar), run[i:i+1]), w)
		if i+1 < len(run) {
			f.add(ngramHash(f.hashStart(ngKindHanPair), run[i:i+2]), ngHanPair)
		}
	}
}

// ngramStopWords are English function words that say little about what a text is about.
var ngramStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{"a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with",
		"by", "from", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "i", "me", "my",
		"you", "your", "we", "our", "he", "she", "they", "them", "his", "her", "do", "does", "did", "have",
		"has", "had", "will", "would", "can", "could", "so", "as", "if", "not", "no", "what", "which", "please"} {
		m[w] = true
	}
	return m
}()

// StopWord reports English function words too common to carry meaning.
func StopWord(word []rune) bool {
	if len(word) > 7 {
		return false
	}
	var buf [32]byte
	b := buf[:0]
	for _, r := range word {
		b = utf8.AppendRune(b, r)
	}
	return ngramStopWords[string(b)] // the compiler does not allocate for this lookup
}

// StopHan reports Chinese particles and pronouns that occur in almost any sentence.
func StopHan(r rune) bool {
	switch r {
	case '的', '了', '吗', '呢', '吧', '啊', '是', '我', '你', '他', '她', '它', '们', '这', '那', '个', '在', '和', '就', '也', '很', '把', '被', '呀':
		return true
	}
	return false
}
