package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engramhq/engram/bench/recallstack"
	"github.com/engramhq/engram/bench/writebench"
	"github.com/engramhq/engram/eval"
	"github.com/engramhq/engram/recall/recallbench"
	"github.com/engramhq/engram/storage"
)

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"tenant_id": "tenantId", "TenantID": "tenantId", "ID": "id", "FactIDs": "factIds", "EvidenceIDs": "evidenceIds",
		"HTTPServer": "httpServer", "p95_ms": "p95Ms", "P95Ms": "p95Ms", "Counts": "counts", "URL": "url", "key": "key",
		"write_p50_ms": "writeP50Ms", "StepsDone": "stepsDone", "recall_at_10": "recallAt10",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

// printValue keeps struct order, renames fields (not map keys), honours json tags
// and omitempty, and leaves time.Time to write itself.
func TestPrintValueCamel(t *testing.T) {
	type inner struct {
		SubjectID string `json:"subject_id"`
	}
	type rec struct {
		TenantID  string
		Counts    map[string]int64
		FactIDs   []string
		At        time.Time
		Skipped   string `json:"-"`
		Empty     string `json:"empty_field,omitempty"`
		Inner     *inner
		hiddenOne int
	}
	var b bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := printValue(&b, []rec{{TenantID: "t", Counts: map[string]int64{"fact_evidence": 2}, FactIDs: []string{"f"}, At: at, Skipped: "x", Inner: &inner{SubjectID: "u"}}}); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	want := `[{"tenantId":"t","counts":{"fact_evidence":2},"factIds":["f"],"at":"2026-01-02T03:04:05Z","inner":{"subjectId":"u"}}]`
	if compact := compactOf(t, b.Bytes()); compact != want {
		t.Errorf("printValue:\n got %s\nwant %s", compact, want)
	}
}

func compactOf(t *testing.T, b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// No flag's usage has a back-quoted word: pflag prints it as the flag's value name
// (`--no-worker engram serve` in mcp --help).
func TestNoBackQuotedFlagUsage(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			n++
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: its usage has a back-quoted word, shown as the value name %q: %s", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd())
	if n < 100 {
		t.Fatalf("walked only %d flags", n)
	}
}

// The figures eval and bench print with --json are written in the same casing:
// every field name of their reports, nested ones included, is lowerCamelCase.
func TestReportsJSONCamel(t *testing.T) {
	for name, v := range map[string]any{
		"eval":                       &eval.Report{Suites: []eval.SuiteReport{{}}},
		"eval --tune":                []eval.TuneRow{{}},
		"bench recall":               recallbench.Report{},
		"bench recall --history":     &recallstack.HistoryReport{},
		"bench recall --unanalysed":  &recallstack.UnanalysedReport{},
		"bench write":                &writebench.Report{},
		"audit --erasures (storage)": []storage.ErasureRequest{{Counts: map[string]int64{"fact_evidence": 1}}},
		"audit (storage)":            []storage.AccessEntry{{}},
	} {
		var b bytes.Buffer
		if err := printValue(&b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var parsed any
		if err := json.Unmarshal(b.Bytes(), &parsed); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		var walk func(v any, path string)
		walk = func(v any, path string) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					n++
					if strings.Contains(k, "_") || k == "" || !unicode.IsLower([]rune(k)[0]) && !unicode.IsDigit([]rune(k)[0]) {
						t.Errorf("%s: key %s.%s is not lowerCamelCase", name, path, k)
					}
					if k != "counts" {
						walk(e, path+"."+k)
					}
				}
			case []any:
				for _, e := range x {
					walk(e, path+"[]")
				}
			}
		}
		walk(parsed, "")
		if n == 0 {
			t.Errorf("%s: no keys at all: %s", name, b.String())
		}
	}
}
