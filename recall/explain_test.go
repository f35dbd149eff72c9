package recall

import (
	"testing"
	"time"
)

func TestRetrieverTimesFromPlan(t *testing.T) {
	js := `[{"Plan": {"Node Type": "Append", "Actual Total Time": 9.0, "Actual Loops": 1, "Plans": [
	  {"Node Type": "Nested Loop", "Actual Total Time": 7.0, "Actual Loops": 1, "Plans": [
	    {"Node Type": "Append", "Plans": [
	      {"Node Type": "Subquery Scan", "Alias": "fact_semantic", "Actual Total Time": 3.0, "Actual Loops": 1,
	       "Plans": [{"Node Type": "Subquery Scan", "Alias": "x", "Actual Total Time": 2.5, "Actual Loops": 1}]},
	      {"Node Type": "Subquery Scan", "Alias": "fact_keyword", "Actual Total Time": 1.5, "Actual Loops": 1}]}]},
	  {"Node Type": "Subquery Scan", "Alias": "evidence_keyword", "Actual Total Time": 0.5, "Actual Loops": 2}]},
	  "Planning Time": 0.1, "Execution Time": 10.0}]`
	got, err := retrieverTimesFromPlan(js)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{
		"sql.semantic.facts": 3 * time.Millisecond, "sql.keyword.facts": 1500 * time.Microsecond,
		"sql.keyword.evidence": time.Millisecond, "sql.statement": 10 * time.Millisecond, "sql.rows": 4500 * time.Microsecond,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if d := got[k] - v; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := retrieverTimesFromPlan("not json"); err == nil {
		t.Error("a plan that is not JSON must be an error")
	}
}
