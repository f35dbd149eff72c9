package embedding

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/embedding/use"
)

// A small bilingual retrieval set: paraphrase pairs (query → the one memory it should
// find) in English, Chinese and code-switched text, plus distractors that share words
// or characters with some queries. Every query is ranked against every memory of all
// three sets, so a combination that lets one language swamp the other shows it.
var (
	evalEnglish = [][2]string{
		{"How do I reset my password?", "I forgot my login credentials and can't sign in."},
		{"The flight was cancelled because of a storm.", "Severe weather grounded our plane."},
		{"She is allergic to peanuts.", "Nuts give her a dangerous reaction."},
		{"I prefer window seats on planes.", "When flying, I like to sit looking outside."},
		{"My daughter starts kindergarten in September.", "Our little girl begins school this autumn."},
		{"The meeting has been moved to Thursday afternoon.", "We rescheduled the call for after lunch later this week."},
		{"I'm vegetarian.", "I don't eat meat."},
		{"Please send the invoice to accounting.", "The bill should go to the finance department."},
		{"Our car broke down on the highway.", "The vehicle stopped working on the motorway."},
		{"He lives in a small apartment downtown.", "His flat is a tiny place in the city centre."},
		{"I need to renew my passport before the trip.", "My travel document expires soon and must be replaced before I go abroad."},
		{"The baby was born last night.", "They welcomed a newborn yesterday evening."},
		{"I am learning to play the guitar.", "I'm taking lessons on a six-string instrument."},
		{"The restaurant was too noisy to talk.", "We couldn't hear each other over the din at dinner."},
		{"Remind me to water the plants.", "Don't let me forget to give the garden a drink."},
		{"My boss approved my vacation request.", "My manager said yes to my time off."},
		{"The package arrived damaged.", "The parcel was broken when it was delivered."},
		{"I run five kilometres every morning.", "Each day starts with a 5k jog."},
		{"The doctor prescribed antibiotics for the infection.", "The physician gave me medicine to treat the bacterial illness."},
		{"We are moving to Canada next year.", "Our family will relocate to Toronto in twelve months."},
		{"I can't stand horror movies.", "Scary films are not for me."},
		{"The laptop battery drains very quickly.", "My notebook computer loses charge fast."},
	}
	// Names, ids and rare terms: exact tokens decide, which a sentence encoder blurs.
	evalIDs = [][2]string{
		{"What is the status of ticket JIRA-4821?", "JIRA-4821: login page times out after the deploy"},
		{"Where does Priya Raghunathan work?", "Priya Raghunathan joined Stripe as a staff engineer"},
		{"Call Dr. Okonkwo about the results", "Dr. Okonkwo's office phoned about the blood test"},
		{"What's the password for BlueFalcon77?", "The home wifi BlueFalcon77 key is on the fridge"},
		{"Is flight LH761 on time?", "Booked Lufthansa LH761 Munich to Delhi on the 14th"},
		{"Which size is the Kestrel 40 backpack?", "Returned the Kestrel 40 pack, the M/L was too long"},
		{"When does the Zanzibar trip start?", "Zanzibar holiday: depart 3 March, back 12 March"},
		{"What did we decide about pgvector HNSW?", "Decision: use pgvector HNSW with m=16 for recall"},
	}
	evalChinese = [][2]string{
		{"我想订一张去北京的机票", "帮我买飞往北京的航班"},
		{"我对花生过敏", "花生会让我过敏"},
		{"明天下午开会", "会议改到明天下午"},
		{"我的护照快过期了", "护照需要尽快更新"},
		{"我是素食主义者", "我不吃肉"},
		{"这家餐厅太吵了", "餐厅里噪音很大，没法说话"},
		{"我每天早上跑步五公里", "每天早晨跑五公里"},
		{"快递到了但是包装坏了", "包裹送到时已经破损"},
		{"我女儿九月上幼儿园", "女儿秋天开始上幼儿园"},
		{"请把发票寄给财务部", "发票应该交给财务部门"},
		{"我们明年搬去加拿大", "明年我们全家移居加拿大"},
		{"提醒我给花浇水", "别忘了给植物浇水"},
		{"笔记本电脑的电池耗电很快", "电脑电池不耐用，很快没电"},
		{"老板批准了我的休假申请", "经理同意我请假"},
		{"医生给我开了抗生素", "医生开了治疗感染的药"},
		{"我在学弹吉他", "我正在上吉他课"},
	}
	evalMixed = [][2]string{
		{"帮我订 flight 去 Tokyo", "Booked a flight to Tokyo 东京 for next Monday"},
		{"我的 laptop 电池 drains 很快", "笔记本电脑 battery life is poor, 很快没电"},
		{"提醒我 call 妈妈", "Remember to phone mom 给妈妈打电话 this weekend"},
		{"这个 bug 在 production 上复现了", "The production bug 生产环境问题 was reproduced today"},
		{"我喜欢 window seat", "Prefers 靠窗座位 on flights"},
		{"周五有 team dinner", "Team dinner 团队聚餐 on Friday evening"},
		{"我对 peanuts 过敏", "Allergy: 花生 — avoid"},
		{"下周 deadline 是 Monday", "Project 截止日期 is next Monday"},
		{"kindergarten 九月开学", "幼儿园 starts in September for our daughter"},
		{"Spotify 订阅 renew 了吗", "Spotify subscription 订阅 renewed last month"},
		{"明天 standup 取消了", "Tomorrow's daily standup 站会 is cancelled"},
		{"我在学 Python 编程", "Learning to code in Python 学编程 every evening"},
	}
	evalDistractors = []string{
		"The office window is broken and needs repair.",
		"Passwords must be at least twelve characters long.",
		"The storm knocked out power across the city.",
		"Peanut butter sandwiches are my son's favourite lunch.",
		"The finance team meets every Monday morning.",
		"Our highway trip took nine hours.",
		"The guitar shop downtown closes at six.",
		"North American winters can be very cold.",
		"北京的天气今天很好",
		"我明天去超市买菜",
		"公司下午有培训",
		"这本书很有意思",
		"我的手机屏幕碎了",
		"周末我们去爬山",
		"Python 3.12 发布了新版本",
		"Monday 的天气不错",
		"JIRA-4812: logout button misaligned on mobile",
		"Priya's sister works at a hospital in Leeds",
		"Booked Lufthansa LH716 Frankfurt to Boston",
		"The Kestrel 38 jacket is waterproof",
		"Decision: keep pgvector IVFFlat for the archive table",
	}
)

// The USE model is an Embedder (embedding/use does not import llm, so the check is here).
var _ Embedder = (*use.Model)(nil)

type evalCase struct {
	slice, query string
	target       int // index into the corpus
}

func evalSet() (corpus []string, cases []evalCase) {
	add := func(slice string, pairs [][2]string) {
		for _, p := range pairs {
			cases = append(cases, evalCase{slice: slice, query: p[0], target: len(corpus)})
			corpus = append(corpus, p[1])
		}
	}
	add("en", evalEnglish)
	add("ids", evalIDs)
	add("zh", evalChinese)
	add("mixed", evalMixed)
	corpus = append(corpus, evalDistractors...)
	return corpus, cases
}

// combination builds a text's vector from its neural and n-gram vectors.
type combination struct {
	name string
	vec  func(text string, neural, ngram []float32) []float32
}

func blend(neural, ngram []float32, wn, wg float64) []float32 {
	v := make([]float32, len(ngram))
	var sum float64
	for k := range v {
		x := wn*float64(neural[k]) + wg*float64(ngram[k])
		v[k] = float32(x)
		sum += x * x
	}
	inv := float32(1 / math.Sqrt(sum))
	for k := range v {
		v[k] *= inv
	}
	return v
}

func combinations() []combination {
	cs := []combination{
		{"ngram only", func(_ string, _, g []float32) []float32 { return g }},
		{"use only", func(_ string, n, _ []float32) []float32 { return n }},
		{"route: cjk share ≥ 0.3 → ngram", func(t string, n, g []float32) []float32 {
			if CJKShare(t) >= 0.3 {
				return g
			}
			return n
		}},
	}
	for _, l := range []float64{0.25, 0.5, 1} {
		cs = append(cs, combination{fmt.Sprintf("fixed blend use + %.2g·ngram", l), func(_ string, n, g []float32) []float32 {
			return blend(n, g, 1, l)
		}})
	}
	for _, l := range []float64{0, 0.1, 0.25, 0.35, 0.5, 0.75} {
		cs = append(cs, combination{fmt.Sprintf("cjk-share blend, λ=%.2g", l), func(t string, n, g []float32) []float32 {
			s := CJKShare(t)
			return blend(n, g, 1-s, l+(1-l)*s)
		}})
	}
	return cs
}

type evalScore struct{ hit1, hit3, mrr, n float64 }

func (s evalScore) String() string {
	return fmt.Sprintf("R@1 %.2f  R@3 %.2f  MRR %.3f", s.hit1/s.n, s.hit3/s.n, s.mrr/s.n)
}

func score(cases []evalCase, queries, docs [][]float32) map[string]*evalScore {
	out := map[string]*evalScore{"all": {}}
	for qi, c := range cases {
		type ranked struct {
			doc int
			sim float64
		}
		rs := make([]ranked, len(docs))
		for d := range docs {
			var dot float64
			for k := range docs[d] {
				dot += float64(queries[qi][k]) * float64(docs[d][k])
			}
			rs[d] = ranked{d, dot}
		}
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].sim > rs[b].sim })
		rank := 0
		for r, x := range rs {
			if x.doc == c.target {
				rank = r + 1
				break
			}
		}
		for _, key := range []string{"all", c.slice} {
			s := out[key]
			if s == nil {
				s = &evalScore{}
				out[key] = s
			}
			s.n++
			s.mrr += 1 / float64(rank)
			if rank == 1 {
				s.hit1++
			}
			if rank <= 3 {
				s.hit3++
			}
		}
	}
	return out
}

// evalModelDir finds the USE model as embedding/use's tests do: scripts/fetch-model prints
// it, fetching it first when missing.
func evalModelDir(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "scripts", "fetch-model"))
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Universal Sentence Encoder model is missing and scripts/fetch-model failed "+
			"(run it by hand, or set ENGRAM_MODEL_DIR to a fetched model): %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestCompositeBilingualRetrieval measures recall on the bilingual set for the
// candidate combinations (run with -v to see the table) and checks that the one
// NewCompositeEmbedder uses is clearly better than either embedder alone overall and
// close to the better of them on every slice.
func TestCompositeBilingualRetrieval(t *testing.T) {
	model, err := use.Load(evalModelDir(t))
	require.NoError(t, err)
	ctx := context.Background()
	corpus, cases := evalSet()
	queries := make([]string, len(cases))
	for i, c := range cases {
		queries[i] = c.query
	}
	all := append(append([]string{}, queries...), corpus...)
	nv, err := model.Embed(ctx, all)
	require.NoError(t, err)
	gv, err := NewNGramEmbedder(0).Embed(ctx, all)
	require.NoError(t, err)

	results := map[string]map[string]*evalScore{}
	for _, c := range combinations() {
		vecs := make([][]float32, len(all))
		for i, text := range all {
			vecs[i] = c.vec(text, nv[i], gv[i])
		}
		results[c.name] = score(cases, vecs[:len(queries)], vecs[len(queries):])
		r := results[c.name]
		t.Logf("%-34s | all %s | en %s | ids %s | zh %s | mixed %s", c.name, r["all"], r["en"], r["ids"], r["zh"], r["mixed"])
	}

	// The shipped combination, through the real embedder.
	comp, err := NewCompositeEmbedder(model, NewNGramEmbedder(0))
	require.NoError(t, err)
	cv, err := comp.Embed(ctx, all)
	require.NoError(t, err)
	got := score(cases, cv[:len(queries)], cv[len(queries):])
	t.Logf("%-34s | all %s | en %s | ids %s | zh %s | mixed %s", comp.Name(), got["all"], got["en"], got["ids"], got["zh"], got["mixed"])

	mrr := func(s *evalScore) float64 { return s.mrr / s.n }
	for _, base := range []string{"ngram only", "use only"} {
		assert.GreaterOrEqual(t, mrr(got["all"]), mrr(results[base]["all"])+0.1, "composite vs %s overall", base)
	}
	for _, slice := range []string{"en", "ids", "zh", "mixed"} {
		best := max(mrr(results["ngram only"][slice]), mrr(results["use only"][slice]))
		assert.GreaterOrEqual(t, mrr(got[slice]), best-0.05, "composite vs the better single embedder on %s", slice)
	}
}
