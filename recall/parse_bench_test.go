package recall

import (
	"testing"
	"time"

	"github.com/engramhq/engram/schema"
)

// The engine's share of a recall outside the database: reading the question with
// its schema, counting a context's tokens and reading whether a turn names a time
// (go test ./recall -bench 'Parse|Tokens|NamesTime').
var benchQuestions = []struct{ q, schema string }{
	{"what is my travel budget", "travel"}, {"do I prefer direct flights", "travel"}, {"where is my order A-1042", "customer_service"},
	{"what did I say about hotels in Lisbon", "travel"}, {"what are the company's rules for expense reports", "general"},
	{"我的预算是多少", "travel"}, {"我那个没到的订单怎么样了", "customer_service"}, {"去东京的酒店要带早餐吗", "travel"},
}

func BenchmarkParseQuery(b *testing.B) {
	schemas := map[string]*schema.Schema{}
	for _, q := range benchQuestions {
		s, err := schema.Builtin(q.schema)
		if err != nil {
			b.Fatal(err)
		}
		schemas[q.schema] = s
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q := benchQuestions[i%len(benchQuestions)]
		parseQuery(schemas[q.schema], q.q, now)
	}
}

func BenchmarkCountTokens(b *testing.B) {
	lines := []string{"- travel budget: at most 2,000 EUR per trip [fact:1a2b3c4d] (since 2026-03-01)", "- 用户喜欢直飞，不要转机 [fact:5e6f7a8b]"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		CountTokens(lines[i%2])
	}
}

// BenchmarkNamesTime reads turns of chat length, one in four naming a time, as
// the fusion does for each candidate of a question that asks when
// (Fusion.TimeAnswer).
func BenchmarkNamesTime(b *testing.B) {
	turns := []string{
		"Thanks! The club is lovely and the people there are so kind. I really enjoy the sessions, they help me unwind after a long shift at the hospital and honestly it is the best part of my week.",
		"haha yes 😂 that's so you",
		"Signed up for rowing two weeks ago, my arms are still sore!",
		"我们周末去爬山，顺便看看那家新开的咖啡馆",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		namesTime(turns[i%len(turns)])
	}
}
