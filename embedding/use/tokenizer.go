package use

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// tokenizer is the SentencePiece-style tokenizer of the TensorFlow.js Universal
// Sentence Encoder (@energetic-ai/embeddings 0.2.0, lib/tokenizer.ts, itself from
// tfjs-models), reproduced step for step, quirks included, because the model's
// vectors depend on the exact ids:
//
//   - the input is NFKC-normalised; a non-empty input gets "▁" prepended and every
//     ASCII space replaced by "▁" (other whitespace is left alone);
//   - the pieces are held in a trie keyed by code point, ids 0–5 being reserved and
//     left out; at each position every piece that starts there is a candidate, and a
//     position where none starts yields the unknown piece (id 0, score 0) for one code
//     point;
//   - a Viterbi pass keeps, for each end position, the best total score, visiting
//     candidates by increasing start position and replacing on ties (>=); a best score
//     of exactly 0 counts as "none yet", as in the reference;
//   - the path is walked back from the end by the length of each piece's text in
//     UTF-16 code units, as JavaScript measures strings;
//   - runs of unknown pieces collapse to one.
type tokenizer struct {
	pieces []string // by id
	utf16  []int    // length of each piece in UTF-16 code units
	root   *trieNode
}

type trieNode struct {
	children map[rune]*trieNode
	end      bool
	score    float64
	index    int
	depth    int // code points from the root
}

const reservedSymbols = 6

// loadVocab reads vocab.json: an array of [piece, score] pairs, the index being the id.
func loadVocab(path string) (*tokenizer, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries [][2]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("vocab.json: %w", err)
	}
	if len(entries) <= reservedSymbols {
		return nil, fmt.Errorf("vocab.json: %d entries, want a vocabulary", len(entries))
	}
	tk := &tokenizer{
		pieces: make([]string, len(entries)),
		utf16:  make([]int, len(entries)),
		root:   &trieNode{},
	}
	for i, e := range entries {
		var piece string
		var score float64
		if err := json.Unmarshal(e[0], &piece); err != nil {
			return nil, fmt.Errorf("vocab.json: entry %d: %w", i, err)
		}
		if err := json.Unmarshal(e[1], &score); err != nil {
			return nil, fmt.Errorf("vocab.json: entry %d: %w", i, err)
		}
		tk.pieces[i] = piece
		tk.utf16[i] = len(utf16.Encode([]rune(piece)))
		if i >= reservedSymbols {
			tk.insert(piece, score, i)
		}
	}
	return tk, nil
}

func (tk *tokenizer) insert(piece string, score float64, index int) {
	n := tk.root
	rs := []rune(piece)
	for k, r := range rs {
		child := n.children[r]
		if child == nil {
			if n.children == nil {
				n.children = map[rune]*trieNode{}
			}
			child = &trieNode{depth: n.depth + 1}
			n.children[r] = child
		}
		n = child
		if k == len(rs)-1 {
			n.end, n.score, n.index = true, score, index
		}
	}
}

// candidate is a piece matched at a position.
type candidate struct {
	length int // code points
	score  float64
	index  int
}

// prefixes lists the pieces that are prefixes of s, shortest first, or the unknown
// piece for s[0] when there are none.
func (tk *tokenizer) prefixes(s []rune, out []candidate) []candidate {
	out = out[:0]
	n := tk.root.children[s[0]]
	for k := 0; k < len(s) && n != nil; k++ {
		if n.end {
			out = append(out, candidate{length: n.depth, score: n.score, index: n.index})
		}
		if k+1 < len(s) {
			n = n.children[s[k+1]]
		} else {
			n = nil
		}
	}
	if len(out) == 0 {
		out = append(out, candidate{length: 1})
	}
	return out
}

// encode returns the piece ids of text.
func (tk *tokenizer) encode(text string) []int32 {
	s := norm.NFKC.String(text)
	if s == "" {
		return nil
	}
	s = "▁" + strings.ReplaceAll(s, " ", "▁")
	symbols := []rune(s)
	n := len(symbols)

	// ends[e] lists the candidates ending at e, by increasing start position: a
	// start's candidates all end at distinct positions, so appending while
	// scanning starts in order keeps that order.
	ends := make([][]candidate, n+1)
	var buf []candidate
	for i := range n {
		buf = tk.prefixes(symbols[i:], buf)
		for _, c := range buf {
			ends[i+c.length] = append(ends[i+c.length], c)
		}
	}
	best := make([]float64, n+1)
	words := make([]int, n+1)
	for e := 0; e <= n; e++ {
		for _, c := range ends[e] {
			score := c.score + best[e-c.length]
			if best[e] == 0 || score >= best[e] {
				best[e] = score
				words[e] = c.index
			}
		}
	}
	var rev []int32
	for it := n; it > 0; {
		id := words[it]
		rev = append(rev, int32(id))
		it -= tk.utf16[id]
	}
	out := make([]int32, 0, len(rev))
	prevUnk := false
	for _, id := range rev {
		if !(prevUnk && id == 0) {
			out = append(out, id)
		}
		prevUnk = id == 0
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
