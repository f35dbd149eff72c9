package recall

import (
	"strings"
	"testing"
)

func TestParseHits(t *testing.T) {
	hs, err := parseHits("semantic 3 0.125,keyword 1 2.5,structured 7 ")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 {
		t.Fatalf("got %d hits, want 3", len(hs))
	}
	if hs[0].src != RetrieverSemantic || hs[0].rk != 3 || hs[0].d == nil || *hs[0].d != 0.125 {
		t.Errorf("first hit %+v", hs[0])
	}
	if hs[1].src != RetrieverKeyword || hs[1].rk != 1 || hs[1].d == nil || *hs[1].d != 2.5 {
		t.Errorf("second hit %+v", hs[1])
	}
	if hs[2].src != RetrieverStructured || hs[2].rk != 7 || hs[2].d != nil {
		t.Errorf("a hit without a score has none: %+v", hs[2])
	}
	if hs, err := parseHits(""); err != nil || len(hs) != 0 {
		t.Errorf("no hits: %v, %v", hs, err)
	}
	for _, bad := range []string{"semantic", "semantic x 0.1", "semantic 1 abc"} {
		if _, err := parseHits(bad); err == nil {
			t.Errorf("%q must be an error", bad)
		}
	}
}

// The context and session retrievers are in the statement only when their
// fusion weights are set, and only in the parts with the lexical retrievers;
// the sentence vectors are in every part with the semantic ones.
func TestRecallSQLFragments(t *testing.T) {
	for _, c := range []struct{ ctx, sess bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, part := range []int{partAll, partSemantic, partLexical} {
			sql := buildRecallSQL(true, sqlShape{n: 40, part: part, ctx: c.ctx, sess: c.sess})
			if got := strings.Contains(sql, "evidence_context AS ("); got != (c.ctx && part != partSemantic) {
				t.Errorf("ctx %v part %d: context retriever in the statement: %v", c.ctx, part, got)
			}
			if got := strings.Contains(sql, "evidence_session AS ("); got != (c.sess && part != partSemantic) {
				t.Errorf("sess %v part %d: session scores in the statement: %v", c.sess, part, got)
			}
			if got := strings.Contains(sql, "'session_match', '', r,"); got != (c.sess && part != partSemantic) {
				t.Errorf("sess %v part %d: session rows returned: %v", c.sess, part, got)
			}
			if got := strings.Contains(sql, "FROM evidence_sentences s"); got != (part != partLexical) {
				t.Errorf("part %d: sentence vectors in the statement: %v", part, got)
			}
			if strings.Contains(sql, "false AND") {
				t.Errorf("part %d: a text gate", part)
			}
		}
	}
}
