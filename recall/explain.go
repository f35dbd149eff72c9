package recall

import (
	"encoding/json"
	"fmt"
	"time"
)

// retrieverCTEs names the recall statement's retriever CTEs (buildRecallSQL) as
// the timings report them.
var retrieverCTEs = map[string]string{
	"fact_semantic":     "sql.semantic.facts",
	"fact_keyword":      "sql.keyword.facts",
	"fact_structured":   "sql.structured.facts",
	"fact_graph":        "sql.graph.facts",
	"evidence_semantic": "sql.semantic.evidence",
	"evidence_keyword":  "sql.keyword.evidence",
	"evidence_context":  "sql.context.evidence",
	"evidence_session":  "sql.session.evidence",
}

type explainNode struct {
	NodeType  string        `json:"Node Type"`
	Alias     string        `json:"Alias"`
	TotalTime float64       `json:"Actual Total Time"`
	Loops     float64       `json:"Actual Loops"`
	Plans     []explainNode `json:"Plans"`
}

// retrieverTimesFromPlan reads an EXPLAIN (ANALYZE, FORMAT JSON) of the recall
// statement: the inclusive time of each retriever CTE's scan (what the CTEs it
// reads cost included: visible_facts and visible_evidence, which several
// retrievers read, count in the first that runs, semantic when it is on), the
// statement's execution time, and the rest ("rows").
func retrieverTimesFromPlan(js string) (map[string]time.Duration, error) {
	var doc []struct {
		Plan          explainNode `json:"Plan"`
		ExecutionTime float64     `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		return nil, fmt.Errorf("read the plan: %w", err)
	}
	if len(doc) != 1 {
		return nil, fmt.Errorf("read the plan: %d plans, want 1", len(doc))
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	out := map[string]time.Duration{}
	var sum float64
	var walk func(n explainNode)
	walk = func(n explainNode) {
		if name, ok := retrieverCTEs[n.Alias]; ok && n.NodeType == "Subquery Scan" {
			t := n.TotalTime * max(n.Loops, 1)
			out[name] += ms(t)
			sum += t
			return
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	out["sql.statement"] = ms(doc[0].ExecutionTime)
	out["sql.rows"] = ms(max(doc[0].ExecutionTime-sum, 0))
	return out, nil
}
