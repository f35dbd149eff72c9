package eval

import (
	"context"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
)

// Okapi BM25 parameters of the baseline, the values every reader recognises.
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// Baseline is Okapi BM25 (k1 = 1.2, b = 0.75) over the raw turns of the
// principal's user up to as_of, analysed the way BEIR and Pyserini's baselines
// are (Lucene's EnglishAnalyzer): each turn (its speaker's name, its text and a
// shared photo's caption) is a document of its own corpus; terms are lower-cased
// words without the Snowball English stop words, stemmed by the Snowball English
// (Porter 2) stemmer, and CJK bigrams (AnalyzedTokens). It knows nothing the
// engine adds (facts, dates, neighbours, sessions, meaning), so it is the floor
// every eval report prints beside the engine's figures, on the same ingested data.
type Baseline struct{ st *storage.Store }

// NewBaseline is a RecallerFactory.
func NewBaseline(st *storage.Store, _ embedding.Embedder) (Recaller, error) {
	return &Baseline{st: st}, nil
}

// Recall implements Recaller.
func (b *Baseline) Recall(ctx context.Context, req recall.Request) (recall.Response, error) {
	at := req.AsOf
	if at.IsZero() {
		at = time.Now()
	}
	p := req.Principal
	evs, err := b.st.EvidenceOfUser(ctx, p.TenantID, p.UserID, at)
	if err != nil {
		return recall.Response{}, err
	}
	docs := make([][]string, len(evs))
	for i, e := range evs {
		docs[i] = AnalyzedTokens(turnText(e, p.UserID))
	}
	scores := BM25(AnalyzedTokens(req.Query), docs)
	var items []recall.Item
	for i, e := range evs {
		if scores[i] <= 0 {
			continue
		}
		items = append(items, recall.Item{Kind: recall.KindEvidence, ID: e.ID, Content: e.Content,
			Scope: memory.ScopeRef{Scope: memory.ScopeUser, UserID: e.UserID}, Score: scores[i],
			Retrievers: []string{"baseline"}, OccurredAt: e.OccurredAt, ValidFrom: e.OccurredAt})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Score != items[j].Score {
			return items[i].Score > items[j].Score
		}
		return items[i].OccurredAt.After(items[j].OccurredAt)
	})
	k := req.K
	if k <= 0 {
		k = 10
	}
	if len(items) > k {
		items = items[:k]
	}
	return recall.Response{Items: items, AsOf: at}, nil
}

// turnText is a turn as a reader sees it: "Maya: …" when a named person said it.
func turnText(e storage.Evidence, user string) string {
	sp := e.Speaker
	if i := strings.IndexByte(sp, ':'); i >= 0 {
		sp = sp[i+1:]
	}
	if sp == "" || sp == user {
		return e.Content
	}
	return sp + ": " + e.Content
}

// BM25 scores every document for the query with Okapi BM25 (k1 = 1.2, b = 0.75,
// idf = ln(1 + (N − df + 0.5)/(df + 0.5))); a document sharing no term scores 0.
func BM25(query []string, docs [][]string) []float64 {
	n := float64(len(docs))
	scores := make([]float64, len(docs))
	if n == 0 || len(query) == 0 {
		return scores
	}
	df := map[string]float64{}
	var total float64
	tfs := make([]map[string]float64, len(docs))
	for i, d := range docs {
		total += float64(len(d))
		tf := map[string]float64{}
		for _, t := range d {
			tf[t]++
		}
		tfs[i] = tf
		for t := range tf {
			df[t]++
		}
	}
	avgdl := total / n
	if avgdl == 0 {
		avgdl = 1
	}
	for i, d := range docs {
		dl := float64(len(d))
		for _, q := range query {
			f := tfs[i][q]
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-df[q]+0.5)/(df[q]+0.5))
			scores[i] += idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*dl/avgdl))
		}
	}
	return scores
}

// AnalyzedTokens are the terms of s as the baseline indexes them: Tokens without
// the Snowball English stop words, each word stemmed by the Snowball English
// stemmer (Porter 2, the stemmer of Postgres's english configuration, which the
// engine's keyword retriever uses); CJK bigrams and numbers are kept as they are.
// "Priya's running shoes" → [priya run shoe].
func AnalyzedTokens(s string) []string {
	toks := Tokens(s)
	out := toks[:0]
	for _, t := range toks {
		if english.IsStopWord(t) {
			continue
		}
		if r, _ := utf8.DecodeRuneInString(t); unicode.Is(unicode.Latin, r) {
			t = english.Stem(t, false)
		}
		out = append(out, t)
	}
	return out
}

// Tokens are the lower-cased words (letters and digits) and CJK bigrams of s, in
// order, repeats kept (term frequency counts them).
func Tokens(s string) []string {
	var out []string
	var word []rune
	var prev rune
	flush := func() {
		if len(word) > 0 {
			out = append(out, string(word))
		}
		word = word[:0]
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.Is(unicode.Han, r):
			flush()
			if prev != 0 {
				out = append(out, string([]rune{prev, r}))
			}
			prev = r
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			prev = 0
			word = append(word, r)
		default:
			prev = 0
			flush()
		}
	}
	flush()
	return out
}
