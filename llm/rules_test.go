package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// now is a Wednesday: 昨天 is 2024-05-14, 下周五 / next Friday 2024-05-24.
var now = time.Date(2024, 5, 15, 10, 0, 0, 0, time.FixedZone("CST", 8*3600))

// want describes one candidate the extractor must produce. Zero fields are not checked.
type want struct {
	pred       string
	typ        memory.MemoryType
	scope      memory.Scope
	object     *string // nil: not checked; "" must be empty
	origin     memory.Origin
	retraction bool
	entityID   *string
	minConf    float64
	maxConf    float64
	attrs      map[string]any
	relation   string // "User:u1 PLACED Order:12345"
	subject    string
	validFrom  string // YYYY-MM-DD
}

func str(s string) *string { return &s }

type ruleCase struct {
	name   string
	schema string
	in     ExtractInput
	want   []want
	absent []string // predicates that must not appear
}

func input(text string) ExtractInput {
	return ExtractInput{Text: text, OccurredAt: now, UserID: "u1", SessionID: "s1"}
}

func withTask(in ExtractInput) ExtractInput { in.TaskID = "trip-1"; return in }
func withDept(in ExtractInput) ExtractInput { in.DepartmentID = "d1"; return in }
func withKnown(in ExtractInput, k ...memory.EntityRef) ExtractInput {
	in.Known = k
	return in
}

var knownOrders = []memory.EntityRef{
	{Type: "Order", ID: "12345", State: "NOT_RECEIVED"},
	{Type: "Order", ID: "777", State: "DELIVERED"},
}

func TestRuleExtractorSeedCases(t *testing.T) {
	notReceived := func(id string) want {
		return want{pred: "order_not_received", typ: memory.TypeEvent, scope: memory.ScopeUser, object: str("NOT_RECEIVED"),
			origin: memory.OriginStated, entityID: str(id), minConf: 0.85, attrs: map[string]any{"state": "NOT_RECEIVED"},
			relation: "User:u1 PLACED Order:" + id, subject: "Order:" + id}
	}
	inquiry := func(id string, minConf, maxConf float64) want {
		w := want{pred: "order_inquiry", typ: memory.TypeEvent, scope: memory.ScopeUser, entityID: str(id), minConf: minConf, maxConf: maxConf}
		if id != "" {
			w.relation = "User:u1 ASKED_ABOUT Order:" + id
		}
		return w
	}
	budget := func(scope memory.Scope, obj string, max float64, cur string) want {
		return want{pred: "budget", typ: memory.TypeConstraint, scope: scope, object: str(obj), origin: memory.OriginStated,
			minConf: 0.8, attrs: map[string]any{"max": max, "currency": cur}, subject: "user"}
	}
	flight := func(obj string) want {
		return want{pred: "flight_type", typ: memory.TypePreference, scope: memory.ScopeUser, object: str(obj), origin: memory.OriginStated, minConf: 0.85}
	}
	seatInferred := want{pred: "seat", typ: memory.TypePreference, scope: memory.ScopeUser, object: str("window"), origin: memory.OriginInferred, minConf: 0.5, maxConf: 0.7}
	retract := func(pred, obj string) want {
		return want{pred: pred, retraction: true, object: str(obj), origin: memory.OriginStated, scope: memory.ScopeUser}
	}
	uses := func(scope memory.Scope, subject string) want {
		return want{pred: "uses", typ: memory.TypeFact, scope: scope, object: str("Flink 1.17"), subject: subject,
			attrs: map[string]any{"tool": "Flink", "version": "1.17"}}
	}

	tests := []ruleCase{
		// customer service: an order that never arrived, then a question about it
		{name: "zh order not received", schema: "customer_service", in: input("我的订单12345没收到"), want: []want{notReceived("12345")}, absent: []string{"order_inquiry"}},
		{name: "en order not received", schema: "customer_service", in: input("My order 12345 never arrived"), want: []want{notReceived("12345")}},
		{name: "zh order not received, id before", schema: "customer_service", in: input("12345号订单还没到。"), want: []want{notReceived("12345")}},
		{name: "en never received order", schema: "customer_service", in: input("I never received order #A-7788."), want: []want{notReceived("A-7788")}},
		{name: "zh inquiry resolved from known", schema: "customer_service", in: withKnown(input("我那个没到的订单怎么样了"), knownOrders...),
			want: []want{inquiry("12345", 0.8, 1)}, absent: []string{"order_not_received"}},
		{name: "en inquiry resolved from known", schema: "customer_service", in: withKnown(input("what happened to my order that didn't arrive?"), knownOrders...),
			want: []want{inquiry("12345", 0.8, 1)}, absent: []string{"order_not_received"}},
		{name: "zh inquiry resolved from recent turns", schema: "customer_service",
			in: func() ExtractInput {
				in := input("我那个没到的订单怎么样了")
				in.Recent = []string{"你好", "我的订单12345没收到"}
				return in
			}(),
			want: []want{inquiry("12345", 0.6, 0.8)}},
		{name: "en inquiry resolved from recent turns", schema: "customer_service",
			in: func() ExtractInput {
				in := input("Any news on the missing order?")
				in.Recent = []string{"My order 4242 never arrived."}
				return in
			}(),
			want: []want{inquiry("4242", 0.6, 0.8)}},
		{name: "zh inquiry unresolved", schema: "customer_service", in: input("我那个没到的订单怎么样了"), want: []want{inquiry("", 0, 0.5)}},
		{name: "en inquiry unresolved", schema: "customer_service", in: input("What happened to my order that didn't arrive?"), want: []want{inquiry("", 0, 0.5)}},
		{name: "zh inquiry ignores known order in another state", schema: "customer_service",
			in: withKnown(input("我那个没收到的订单呢"), memory.EntityRef{Type: "Order", ID: "777", State: "DELIVERED"}), want: []want{inquiry("", 0, 0.5)}},
		{name: "zh inquiry with id", schema: "customer_service", in: input("订单12345现在怎么样了？"), want: []want{inquiry("12345", 0.8, 1)}},
		{name: "zh refund", schema: "customer_service", in: input("订单12345我要退款"), want: []want{{pred: "refund_requested", entityID: str("12345"), object: str("REFUND_REQUESTED"), relation: "User:u1 PLACED Order:12345"}}},
		{name: "zh event with relative time", schema: "customer_service", in: input("我昨天查了，订单67890还没到"),
			want: []want{{pred: "order_not_received", entityID: str("67890"), validFrom: "2024-05-14", attrs: map[string]any{"date": "2024-05-14", "time_text": "昨天"}}}},
		{name: "en event with relative time", schema: "customer_service", in: input("Yesterday I noticed order 55501 has not arrived"),
			want: []want{{pred: "order_not_received", entityID: str("55501"), validFrom: "2024-05-14", attrs: map[string]any{"date": "2024-05-14"}}}},

		// travel: budgets and their scopes
		{name: "zh user budget", schema: "travel", in: input("预算不超过8000元"), want: []want{budget(memory.ScopeUser, "8000 CNY", 8000, "CNY")}},
		{name: "en user budget", schema: "travel", in: input("my budget is at most 8000 yuan"), want: []want{budget(memory.ScopeUser, "8000 CNY", 8000, "CNY")}},
		{name: "zh task budget", schema: "travel", in: withTask(input("这次旅行预算调整到10000元")), want: []want{budget(memory.ScopeTask, "10000 CNY", 10000, "CNY")}},
		{name: "en task budget", schema: "travel", in: withTask(input("for this trip the budget is now 10000")), want: []want{budget(memory.ScopeTask, "10000 CNY", 10000, "CNY")}},
		{name: "zh this-trip budget without task id is session", schema: "travel", in: input("这次旅行预算调整到10000元"), want: []want{budget(memory.ScopeSession, "10000 CNY", 10000, "CNY")}},
		{name: "en this-trip budget without task id is session", schema: "travel", in: input("For this trip the budget is now 10000."), want: []want{budget(memory.ScopeSession, "10000 CNY", 10000, "CNY")}},
		{name: "zh from-now-on budget is user even in a task", schema: "travel", in: withTask(input("以后预算都不超过1.2万")), want: []want{budget(memory.ScopeUser, "12000 CNY", 12000, "CNY")}},
		{name: "en from-now-on budget in dollars", schema: "travel", in: withTask(input("From now on my budget is $5,000")), want: []want{budget(memory.ScopeUser, "5000 USD", 5000, "USD")}},
		{name: "zh minimum budget", schema: "travel", in: input("预算至少3000元"), want: []want{{pred: "budget", object: str("3000 CNY"), attrs: map[string]any{"min": 3000.0}}}},

		// travel: stated preferences and negations
		{name: "zh direct flights from now on", schema: "travel", in: input("我以后尽量都坐直飞"), want: []want{flight("direct")}, absent: []string{"prefers"}},
		{name: "en direct flights from now on", schema: "travel", in: input("from now on I prefer direct flights"), want: []want{flight("direct")}, absent: []string{"prefers"}},
		{name: "zh negated direct", schema: "travel", in: input("不要直飞"), want: []want{flight("connecting")}},
		{name: "zh no connection", schema: "travel", in: input("我不想转机"), want: []want{flight("direct")}},
		{name: "en no layovers", schema: "travel", in: input("I don't want layovers"), want: []want{flight("direct")}},
		{name: "zh negation stays in its clause", schema: "travel", in: input("我不喜欢转机，以后尽量直飞"), want: []want{flight("direct")}, absent: []string{"prefers"}},
		{name: "zh no red-eye", schema: "travel", in: input("我不喜欢红眼航班"), want: []want{{pred: "red_eye_flights", object: str("avoid"), scope: memory.ScopeUser, origin: memory.OriginStated}}, absent: []string{"prefers", "dislikes"}},
		{name: "en no red-eye", schema: "travel", in: input("I hate red-eye flights"), want: []want{{pred: "red_eye_flights", object: str("avoid")}}, absent: []string{"dislikes", "prefers"}},
		{name: "zh stated seat", schema: "travel", in: input("我喜欢靠窗的座位"), want: []want{{pred: "seat", object: str("window"), origin: memory.OriginStated, minConf: 0.8}}, absent: []string{"prefers"}},
		{name: "en stated seat", schema: "travel", in: input("I prefer aisle seats"), want: []want{{pred: "seat", object: str("aisle"), origin: memory.OriginStated}}, absent: []string{"prefers"}},

		// travel: an inferred preference
		{name: "zh inferred window seat", schema: "travel", in: input("我上次坐了靠窗的位置，挺好"), want: []want{seatInferred}, absent: []string{"experience"}},
		{name: "en inferred window seat", schema: "travel", in: input("I took a window seat last time, it was nice"), want: []want{seatInferred}},

		// retractions
		{name: "zh forget budget", schema: "travel", in: input("忘掉我说的预算"), want: []want{retract("budget", "")}},
		{name: "zh no longer direct", schema: "travel", in: input("不再需要直飞"), want: []want{retract("flight_type", "direct")}},
		{name: "en forget direct flights", schema: "travel", in: input("forget that I prefer direct flights"), want: []want{retract("flight_type", "direct")}, absent: []string{"prefers"}},
		{name: "en forget budget", schema: "travel", in: input("Please forget my budget."), want: []want{retract("budget", "")}},
		{name: "zh forget this trip's budget", schema: "travel", in: withTask(input("忘掉这次的预算")), want: []want{{pred: "budget", retraction: true, scope: memory.ScopeTask}}},

		// travel: dates
		{name: "zh leave next Friday", schema: "travel", in: withTask(input("我们下周五出发")), want: []want{{pred: "departure_date", object: str("2024-05-24"), scope: memory.ScopeTask, attrs: map[string]any{"time_text": "下周五"}}}},
		{name: "en leave next Friday", schema: "travel", in: withTask(input("We're leaving next Friday")), want: []want{{pred: "departure_date", object: str("2024-05-24"), scope: memory.ScopeTask}}},
		{name: "zh destination", schema: "travel", in: withTask(input("这次想去三亚度假")), want: []want{{pred: "destination", object: str("三亚"), scope: memory.ScopeTask}}},
		{name: "en hotel preference", schema: "travel", in: input("I always want hotels with a pool"), want: []want{{pred: "hotel_preference", object: str("pool"), scope: memory.ScopeUser}}},

		// enterprise seed
		{name: "zh prefers Flink SQL", schema: "general", in: withDept(input("我更喜欢用Flink SQL")), want: []want{{pred: "prefers", typ: memory.TypePreference, scope: memory.ScopeUser, object: str("Flink SQL"), origin: memory.OriginStated, subject: "user"}}},
		{name: "en prefers Flink SQL", schema: "general", in: input("I prefer Flink SQL"), want: []want{{pred: "prefers", scope: memory.ScopeUser, object: str("Flink SQL")}}},
		{name: "zh team uses Flink (department known)", schema: "general", in: withDept(input("我们团队生产环境用的是Flink 1.17")),
			want: []want{uses(memory.ScopeDepartment, "department")}},
		{name: "zh team uses Flink (no department: user)", schema: "general", in: input("我们团队生产环境用的是Flink 1.17"),
			want: []want{uses(memory.ScopeUser, "user")}},
		{name: "en team uses Flink", schema: "general", in: withDept(input("Our team uses Flink 1.17 in production")),
			want: []want{uses(memory.ScopeDepartment, "department")}},
		{name: "zh fact with relative time", schema: "general", in: withDept(input("我们团队昨天开始使用Flink 1.18")),
			want: []want{{pred: "uses", object: str("Flink 1.18"), scope: memory.ScopeDepartment, validFrom: "2024-05-14"}}},
		{name: "zh dislike via negated preference", schema: "general", in: input("我不喜欢香菜"), want: []want{{pred: "dislikes", object: str("香菜")}}, absent: []string{"prefers"}},
		{name: "zh allergy", schema: "general", in: input("我对花生过敏"), want: []want{{pred: "allergy", typ: memory.TypeConstraint, object: str("花生")}}},
		{name: "en decision with date", schema: "general", in: input("Yesterday we decided to move to Kafka"), want: []want{{pred: "decided", typ: memory.TypeDecision, object: str("move to Kafka"), attrs: map[string]any{"date": "2024-05-14"}}}},
		{name: "nothing to remember", schema: "travel", in: input("你好，今天天气不错"), want: nil, absent: []string{"budget", "flight_type", "seat", "prefers"}},
	}
	runRuleCases(t, tests)
}

func runRuleCases(t *testing.T, tests []ruleCase) {
	t.Helper()
	schemas := map[string]*schema.Schema{}
	r := NewRuleExtractor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := schemas[tt.schema]
			if s == nil {
				var err error
				if s, err = schema.Builtin(tt.schema); err != nil {
					t.Fatal(err)
				}
				schemas[tt.schema] = s
			}
			out, err := r.Extract(context.Background(), s, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if out.Extractor != "rules" || out.Version != RulesVersion {
				t.Errorf("output names %s %s", out.Extractor, out.Version)
			}
			cands, errs := s.ParseCandidates([]byte(out.Raw))
			if len(errs) > 0 {
				t.Fatalf("ParseCandidates rejected the rule extractor's output: %v\n%s", errs, out.Raw)
			}
			validateStrict(t, s, out.Raw)
			for _, w := range tt.want {
				if problems := findCandidate(cands, w); problems != "" {
					t.Errorf("%s\noutput: %s", problems, out.Raw)
				}
			}
			if tt.want == nil && len(cands) > 0 {
				t.Errorf("expected no candidates, got %s", out.Raw)
			}
			for _, a := range tt.absent {
				for _, c := range cands {
					if c.Predicate == a {
						t.Errorf("unexpected %s candidate: %+v", a, c)
					}
				}
			}
			for _, c := range cands {
				if c.Extractor != "rules" || c.Version != RulesVersion || c.Confidence <= 0 || c.Content == "" || !c.Origin.Valid() {
					t.Errorf("candidate lacks provenance: %+v", c)
				}
			}
		})
	}
}

// findCandidate returns "" when a candidate matches w, else why the closest did not.
func findCandidate(cands []memory.Candidate, w want) string {
	var why []string
	for _, c := range cands {
		if c.Predicate != w.pred || c.Retraction != w.retraction {
			continue
		}
		var p []string
		check := func(ok bool, format string, args ...any) {
			if !ok {
				p = append(p, fmt.Sprintf(format, args...))
			}
		}
		check(w.typ == "" || c.MemoryType == w.typ, "memory_type %s, want %s", c.MemoryType, w.typ)
		check(w.scope == "" || c.Scope == w.scope, "scope %s, want %s", c.Scope, w.scope)
		check(w.object == nil || c.Object == *w.object, "object %q, want %q", c.Object, deref(w.object))
		check(w.origin == "" || c.Origin == w.origin, "origin %s, want %s", c.Origin, w.origin)
		check(w.entityID == nil || c.EntityID == *w.entityID, "entity_id %q, want %q", c.EntityID, deref(w.entityID))
		check(c.Confidence >= w.minConf, "confidence %v < %v", c.Confidence, w.minConf)
		check(w.maxConf == 0 || c.Confidence <= w.maxConf, "confidence %v > %v", c.Confidence, w.maxConf)
		check(w.subject == "" || c.Subject == w.subject, "subject %q, want %q", c.Subject, w.subject)
		for k, v := range w.attrs {
			check(fmt.Sprint(c.Attributes[k]) == fmt.Sprint(v), "attributes.%s = %v, want %v", k, c.Attributes[k], v)
		}
		if w.relation != "" {
			found := false
			for _, r := range c.Relations {
				found = found || fmt.Sprintf("%s:%s %s %s:%s", r.FromType, r.FromID, r.Type, r.ToType, r.ToID) == w.relation
			}
			check(found, "no relation %s in %+v", w.relation, c.Relations)
		} else if w.entityID != nil && *w.entityID == "" {
			check(len(c.Relations) == 0, "unresolved entity but relations %+v", c.Relations)
		}
		if w.validFrom != "" {
			check(c.ValidFrom != nil && c.ValidFrom.Format(time.DateOnly) == w.validFrom, "valid_from %v, want %s", c.ValidFrom, w.validFrom)
		}
		if len(p) == 0 {
			return ""
		}
		why = append(why, strings.Join(p, "; "))
	}
	if len(why) == 0 {
		return fmt.Sprintf("no %s candidate (retraction %v)", w.pred, w.retraction)
	}
	return fmt.Sprintf("%s candidate does not match: %s", w.pred, strings.Join(why, " | "))
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestRuleExtractorFollowsTheSchema(t *testing.T) {
	// A new schema brings its own patterns, in its own language, and nothing else.
	s, err := schema.Load([]byte(`name: pets
version: 1
predicates:
  - name: pet
    description: An animal the person keeps.
    memory_type: FACT
    value_type: enum
    enum: [cat, dog]
    aliases: {cat: [猫, ねこ], dog: [狗, いぬ]}
    cardinality: many
    patterns:
      - {lang: zh, regex: '我养了一[只条](?P<value>猫|狗)'}
      - {lang: ja, regex: '(?P<value>ねこ|いぬ)を飼っています'}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRuleExtractor()
	for text, want := range map[string]string{"我养了一只猫": "cat", "いぬを飼っています": "dog"} {
		out, err := r.Extract(context.Background(), s, input(text))
		if err != nil {
			t.Fatal(err)
		}
		cands, errs := s.ParseCandidates([]byte(out.Raw))
		if len(errs) > 0 || len(cands) != 1 || cands[0].Object != want || cands[0].Scope != memory.ScopeUser {
			t.Errorf("%s: %v %s", text, errs, out.Raw)
		}
	}
	// The travel schema's budget patterns do not exist here.
	out, _ := r.Extract(context.Background(), s, input("预算不超过8000元"))
	if out.Raw != `{"candidates":[]}` {
		t.Errorf("unrelated text gave %s", out.Raw)
	}
}

func TestRuleExtractorBasics(t *testing.T) {
	r := NewRuleExtractor()
	if r.Name() != "rules" || r.Version() == "" {
		t.Errorf("name %q version %q", r.Name(), r.Version())
	}
	s, _ := schema.Builtin("travel")
	if _, err := r.Extract(context.Background(), nil, input("x")); err == nil {
		t.Error("nil schema accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Extract(ctx, s, input("预算8000")); err == nil {
		t.Error("cancelled context ignored")
	}
	// Several sentences give several candidates; a repeated statement is one.
	out, err := r.Extract(context.Background(), s, withTask(input("预算不超过8000元。我以后尽量都坐直飞！预算不超过8000元")))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Candidates []memory.Candidate }
	if err := json.Unmarshal([]byte(out.Raw), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Candidates) != 2 {
		t.Errorf("want budget and flight_type, got %s", out.Raw)
	}
}

func TestFindTime(t *testing.T) {
	tests := []struct{ text, want, phrase string }{
		{"昨天", "2024-05-14", "昨天"},
		{"前天下单的", "2024-05-13", "前天"},
		{"明天", "2024-05-16", "明天"},
		{"大后天走", "2024-05-18", "大后天"},
		{"下周五", "2024-05-24", "下周五"},
		{"这周五", "2024-05-17", "这周五"},
		{"上周一", "2024-05-06", "上周一"},
		{"星期天", "2024-05-19", "星期天"},
		{"周三", "2024-05-22", "周三"},
		{"3天后", "2024-05-18", "3天后"},
		{"2天前", "2024-05-13", "2天前"},
		{"6月1日", "2024-06-01", "6月1日"},
		{"2025年1月2号", "2025-01-02", "2025年1月2号"},
		{"on 2024-07-01", "2024-07-01", "2024-07-01"},
		{"yesterday", "2024-05-14", "yesterday"},
		{"Tomorrow morning", "2024-05-16", "Tomorrow"},
		{"the day after tomorrow", "2024-05-17", "the day after tomorrow"},
		{"next Friday", "2024-05-24", "next Friday"},
		{"this friday", "2024-05-17", "this friday"},
		{"last Monday", "2024-05-06", "last Monday"},
		{"on Monday", "2024-05-20", "on Monday"},
		{"2 days ago", "2024-05-13", "2 days ago"},
		{"in 10 days", "2024-05-25", "in 10 days"},
	}
	for _, tt := range tests {
		got := findTime(tt.text, now)
		if got == nil || got.date.Format(time.DateOnly) != tt.want || got.text != tt.phrase {
			t.Errorf("findTime(%q) = %+v, want %s (%s)", tt.text, got, tt.want, tt.phrase)
		}
	}
	if got := findTime("没有时间", now); got != nil {
		t.Errorf("findTime found %+v", got)
	}
}

func TestSplitSentences(t *testing.T) {
	got := splitSentences("预算8000.5元。Flink 1.17 is fine. 好的！ok?")
	want := []string{"预算8000.5元。", "Flink 1.17 is fine.", "好的！", "ok?"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitSentences = %q", got)
	}
}

// validateStrict checks the output against the schema's strict JSON Schema, after
// writing the absent optional fields as null the way strict structured output does:
// what the rule extractor writes, an LLM held to JSONSchema() could write too.
func validateStrict(t *testing.T, s *schema.Schema, raw string) {
	t.Helper()
	js := s.JSONSchema()
	b, _ := json.Marshal(js)
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	fillNulls(js, v)
	if err := sch.Validate(v); err != nil {
		t.Errorf("output does not match JSONSchema(): %v\n%s", err, raw)
	}
}

func fillNulls(node map[string]any, v any) {
	switch val := v.(type) {
	case map[string]any:
		props, _ := node["properties"].(map[string]any)
		for k, p := range props {
			sub, _ := p.(map[string]any)
			if _, ok := val[k]; !ok {
				switch {
				case sub["type"] == "array":
					val[k] = []any{}
				case sub["type"] == "boolean":
					val[k] = false
				default:
					val[k] = nil
				}
			}
			fillNulls(sub, val[k])
		}
	case []any:
		items, _ := node["items"].(map[string]any)
		for _, x := range val {
			fillNulls(items, x)
		}
	}
}

func TestRuleExtractorDatesStayInTheirClause(t *testing.T) {
	s, _ := schema.Builtin("travel")
	cands := NewRuleExtractor().Candidates(s, withTask(input("我想下周五去三亚玩，预算1万，酒店要带泳池")))
	got := map[string]memory.Candidate{}
	for _, c := range cands {
		got[c.Predicate] = c
	}
	if got["destination"].Attributes["date"] != "2024-05-24" {
		t.Errorf("destination not dated: %+v", got["destination"])
	}
	if b := got["budget"]; b.Object != "10000 CNY" || b.Attributes["date"] != nil {
		t.Errorf("budget = %+v", b)
	}
	if h := got["hotel_preference"]; h.Object != "泳池" || h.Attributes["date"] != nil {
		t.Errorf("hotel_preference = %+v", h)
	}
}
