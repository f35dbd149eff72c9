package recall

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/engramhq/engram/schema"
)

// Every pattern a question is read with, over every line of the shipped suites
// and conversations and their case variants (with the runes that fold with ASCII
// letters: 'ſ' with s, the Kelvin sign with k): the prefilter never skips a
// pattern that matches, and it does skip most of those that do not.
func TestPrefilterNeverRejectsAMatch(t *testing.T) {
	var res []*regexp.Regexp
	for _, name := range schema.BuiltinNames() {
		s, err := schema.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.AllPredicates() {
			res = append(res, p.MentionRes...)
			for _, pt := range p.Patterns {
				if pt.Re != nil {
					res = append(res, pt.Re)
				}
			}
		}
		for _, re := range s.Cues.ScopeRes {
			if re != nil {
				res = append(res, re)
			}
		}
	}
	for _, w := range memoryTypeWords {
		res = append(res, w.re)
	}
	for _, tw := range timeWords {
		res = append(res, tw.re)
	}
	res = append(res, latestRe,
		regexp.MustCompile(`(?i)ſtraße|KELVIN|x{2,}y`), regexp.MustCompile(`a|b*`), regexp.MustCompile(`(?i)[ab]cd(?:ef|g+h)`))

	var texts []string
	for _, glob := range []string{"../eval/suites/*.yaml", "../eval/open/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(b), "\n")
			for i := 0; i < len(lines); i += 1 + len(lines)/600 { // up to about 600 lines a file
				texts = append(texts, lines[i])
			}
		}
	}
	if len(texts) < 500 {
		t.Fatalf("only %d lines of text to test with", len(texts))
	}
	texts = append(texts, "STRASSE ſtrasse", "ſtraße", "kelvin", "xxy", "", "ABCDGGH", "bcdef")
	n := len(texts)
	for _, s := range texts[:n] {
		texts = append(texts, strings.ToUpper(s), strings.ToLower(s),
			strings.NewReplacer("s", "ſ", "k", "\u212a", "S", "ſ", "K", "\u212a").Replace(s))
	}
	matches, skipped := 0, 0
	for _, s := range texts {
		folded := foldKey(s)
		for _, re := range res {
			may := mayMatch(re, s, folded)
			if re.MatchString(s) {
				matches++
				if !may {
					t.Fatalf("prefilter of %q skips %q, which it matches", re, s)
				}
			} else if !may {
				skipped++
			}
		}
	}
	t.Logf("%d patterns × %d texts: %d matches, all kept; %d of the rest skipped", len(res), len(texts), matches, skipped)
	if matches < 1000 || skipped < len(res)*len(texts)/2 {
		t.Fatalf("too few matches (%d) or too few skipped (%d) for the test to mean anything", matches, skipped)
	}
}

func TestFoldKey(t *testing.T) {
	for _, c := range [][2]string{{"Budget", "BUDGET"}, {"ſ\u212a", "SK"}, {"预算ok", "预算OK"}, {"Straße", "STRAßE"}} {
		if a, b := foldKey(c[0]), foldKey(c[1]); a != b {
			t.Errorf("foldKey(%q) = %q, foldKey(%q) = %q", c[0], a, c[1], b)
		}
	}
}
