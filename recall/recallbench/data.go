// Package recallbench loads a synthetic, realistic memory data set (English and
// Chinese facts and conversation turns of many users, departments, agents, tasks
// and sessions in several tenants) and measures recall against the bare pgvector
// and full-text queries on the same data. `engram bench recall` and the recall
// package's Go benchmarks use it.
package recallbench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/engramhq/engram/embedding"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Config sizes the data set.
type Config struct {
	Tenants  int // default 2
	Facts    int // per tenant
	Evidence int // per tenant
	// UsersPerTenant defaults to Facts/50 (at least 20).
	UsersPerTenant int
	Departments    int // default 40
	Agents         int // default 12
	Seed           uint64
	BatchSize      int // rows per INSERT, default 1000
	Workers        int // concurrent inserters, default 3
}

func (c *Config) defaults() {
	if c.Tenants <= 0 {
		c.Tenants = 2
	}
	if c.UsersPerTenant <= 0 {
		c.UsersPerTenant = max(20, c.Facts/50)
	}
	if c.Departments <= 0 {
		c.Departments = 40
	}
	if c.Agents <= 0 {
		c.Agents = 12
	}
	if c.Seed == 0 {
		c.Seed = 42
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.Workers <= 0 {
		c.Workers = 3
	}
}

// Key identifies a loaded data set, so a second run can reuse it.
func (c Config) Key() string {
	c.defaults()
	return fmt.Sprintf("recallbench-v1 tenants=%d facts=%d evidence=%d users=%d depts=%d agents=%d seed=%d",
		c.Tenants, c.Facts, c.Evidence, c.UsersPerTenant, c.Departments, c.Agents, c.Seed)
}

// TenantID names tenant i.
func TenantID(i int) string { return fmt.Sprintf("bench-t%d", i+1) }

// User is a synthetic principal with what it owns.
type User struct {
	Tenant, ID, Department, Agent string
	Tasks, Sessions, Orders       []string
}

// World is the synthetic population; it is derived from the Config alone, so the
// queries of a later run match the data of an earlier load.
type World struct {
	Cfg   Config
	Users [][]User // per tenant
}

// NewWorld derives the population from cfg.
func NewWorld(cfg Config) *World {
	cfg.defaults()
	w := &World{Cfg: cfg}
	for t := 0; t < cfg.Tenants; t++ {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(t)+1))
		var us []User
		for u := 0; u < cfg.UsersPerTenant; u++ {
			usr := User{Tenant: TenantID(t), ID: fmt.Sprintf("u%05d", u),
				Department: fmt.Sprintf("dept-%02d", r.IntN(cfg.Departments)), Agent: fmt.Sprintf("agent-%02d", r.IntN(cfg.Agents))}
			for i := 0; i < 1+r.IntN(3); i++ {
				usr.Tasks = append(usr.Tasks, fmt.Sprintf("task-%05d-%d", u, i))
			}
			for i := 0; i < 2+r.IntN(3); i++ {
				usr.Sessions = append(usr.Sessions, fmt.Sprintf("sess-%05d-%d", u, i))
			}
			for i := 0; i < 1+r.IntN(4); i++ {
				usr.Orders = append(usr.Orders, fmt.Sprintf("%d%04d", 1+t, u*5+i))
			}
			us = append(us, usr)
		}
		w.Users = append(w.Users, us)
	}
	return w
}

var (
	cities   = []string{"Tokyo", "Paris", "Chengdu", "Hangzhou", "Lisbon", "Bangkok", "Seoul", "Sydney", "Berlin", "Xi'an", "Kyoto", "Istanbul"}
	citiesZh = []string{"东京", "巴黎", "成都", "杭州", "里斯本", "曼谷", "首尔", "悉尼", "柏林", "西安", "京都", "伊斯坦布尔"}
	likesEn  = []string{"Italian food", "dark mode", "morning meetings", "hiking on weekends", "jazz music", "boutique hotels", "green tea", "window seats", "spicy Sichuan dishes", "quiet rooms", "electric cars", "vegetarian meals", "early flights", "train travel"}
	likesZh  = []string{"意大利菜", "深色模式", "早上开会", "周末爬山", "爵士乐", "精品酒店", "绿茶", "靠窗的座位", "川菜", "安静的房间", "电动车", "素食", "早班飞机", "坐高铁"}
	toolsEn  = []string{"Flink", "Kafka", "Postgres", "Spark", "Kubernetes", "Terraform", "Grafana", "Airflow", "ClickHouse", "Redis"}
	policyEn = []string{"Expense reports must be filed within 30 days", "Business class is allowed only for flights over 8 hours", "Customer data must not leave the EU region",
		"Refunds above 500 USD need a manager's approval", "All production changes need a reviewed change ticket", "Hotel bookings must use the corporate travel portal"}
	policyZh = []string{"报销必须在30天内提交", "超过8小时的航班才可以坐商务舱", "客户数据不能离开本地区", "超过500元的退款需要经理审批", "生产环境变更必须有审核过的变更单", "酒店预订必须通过公司差旅平台"}
	filler   = []string{"thanks", "by the way", "as I mentioned", "if possible", "for the team", "next quarter", "before Friday", "for my parents", "with my kids", "this spring"}
	fillerZh = []string{"谢谢", "顺便说一下", "之前说过", "如果可以的话", "给团队", "下个季度", "周五之前", "给我爸妈", "带孩子", "今年春天"}
)

func Pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

type factSpec struct {
	memType   memory.MemoryType
	predicate string
	object    string
	content   string
	entType   string
	entID     string
}

func genFact(r *rand.Rand, u User, zh bool) factSpec {
	switch k := r.IntN(12); k {
	case 0, 1:
		n := 1000 * (3 + r.IntN(20))
		if zh {
			return factSpec{memory.TypeConstraint, "budget", fmt.Sprintf("%d CNY", n), fmt.Sprintf("预算不超过%d元，%s", n, Pick(r, fillerZh)), "", ""}
		}
		return factSpec{memory.TypeConstraint, "budget", fmt.Sprintf("%d CNY", n), fmt.Sprintf("The travel budget is at most %d CNY %s", n, Pick(r, filler)), "", ""}
	case 2:
		v := Pick(r, []string{"direct", "connecting", "any"})
		if zh {
			return factSpec{memory.TypePreference, "flight_type", v, map[string]string{"direct": "以后尽量都坐直飞", "connecting": "转机也可以，便宜就行", "any": "直飞转机都行"}[v], "", ""}
		}
		return factSpec{memory.TypePreference, "flight_type", v, map[string]string{"direct": "Prefers direct flights, no layovers", "connecting": "Connecting flights are fine if cheaper", "any": "Direct or connecting flights are both fine"}[v], "", ""}
	case 3, 4:
		i := r.IntN(len(likesEn))
		if zh {
			return factSpec{memory.TypePreference, "prefers", likesZh[i], "喜欢" + likesZh[i] + "，" + Pick(r, fillerZh), "", ""}
		}
		return factSpec{memory.TypePreference, "prefers", likesEn[i], "Likes " + likesEn[i] + " " + Pick(r, filler), "", ""}
	case 5:
		i := r.IntN(len(likesEn))
		if zh {
			return factSpec{memory.TypePreference, "dislikes", likesZh[i], "不喜欢" + likesZh[i], "", ""}
		}
		return factSpec{memory.TypePreference, "dislikes", likesEn[i], "Dislikes " + likesEn[i], "", ""}
	case 6:
		i := r.IntN(len(cities))
		if zh {
			return factSpec{memory.TypeFact, "destination", citiesZh[i], "这次去" + citiesZh[i] + "旅行", "Trip", ""}
		}
		return factSpec{memory.TypeFact, "destination", cities[i], "The trip goes to " + cities[i], "Trip", ""}
	case 7:
		t := Pick(r, toolsEn)
		v := fmt.Sprintf("%d.%d", 1+r.IntN(3), r.IntN(20))
		if zh {
			return factSpec{memory.TypeFact, "uses", t + " " + v, "我们团队生产环境用的是" + t + " " + v, "", ""}
		}
		return factSpec{memory.TypeFact, "uses", t + " " + v, "The team runs " + t + " " + v + " in production", "", ""}
	case 8:
		o := Pick(r, u.Orders)
		if zh {
			return factSpec{memory.TypeEvent, "order_not_received", "NOT_RECEIVED", "订单" + o + "没收到", "Order", o}
		}
		return factSpec{memory.TypeEvent, "order_not_received", "NOT_RECEIVED", "Order " + o + " never arrived", "Order", o}
	case 9:
		i := r.IntN(len(policyEn))
		if zh {
			return factSpec{memory.TypeConstraint, "constraint", policyZh[i], policyZh[i], "", ""}
		}
		return factSpec{memory.TypeConstraint, "constraint", policyEn[i], policyEn[i], "", ""}
	case 10:
		d := Pick(r, []string{"use Kafka for the event bus", "move the offsite to Hangzhou", "freeze deployments in December", "switch the CRM to the new vendor"})
		if zh {
			d = Pick(r, []string{"用Kafka做消息队列", "团建改到杭州", "十二月停止发布", "CRM换成新供应商"})
			return factSpec{memory.TypeDecision, "decided", d, "决定" + d, "", ""}
		}
		return factSpec{memory.TypeDecision, "decided", d, "Decided to " + d, "", ""}
	default:
		seat := Pick(r, []string{"window", "aisle"})
		if zh {
			return factSpec{memory.TypePreference, "seat", seat, map[string]string{"window": "喜欢靠窗的座位", "aisle": "喜欢靠过道的座位"}[seat], "", ""}
		}
		return factSpec{memory.TypePreference, "seat", seat, "Prefers an " + seat + " seat", "", ""}
	}
}

func genTurn(r *rand.Rand, u User, zh bool) string {
	o := Pick(r, u.Orders)
	i := r.IntN(len(cities))
	if zh {
		return Pick(r, []string{
			fmt.Sprintf("帮我查一下订单%s的物流，%s", o, Pick(r, fillerZh)),
			fmt.Sprintf("我想订%d号去%s的机票", 1+r.IntN(28), citiesZh[i]),
			fmt.Sprintf("%s的酒店最好带早餐，离地铁近一点", citiesZh[i]),
			fmt.Sprintf("订单%s一直没到，能不能退款", o),
			"我" + Pick(r, []string{"平时", "一般", "总是"}) + "喜欢" + Pick(r, likesZh),
			fmt.Sprintf("下周%s的会议改到下午三点", Pick(r, []string{"一", "二", "三", "四", "五"})),
			"我对" + Pick(r, []string{"花生", "海鲜", "芒果", "猫毛"}) + "过敏",
			fmt.Sprintf("预算大概%d元左右，%s", 1000*(3+r.IntN(20)), Pick(r, fillerZh)),
		})
	}
	return Pick(r, []string{
		fmt.Sprintf("Can you check the shipping status of order %s %s?", o, Pick(r, filler)),
		fmt.Sprintf("I want to book a flight to %s on the %dth", cities[i], 1+r.IntN(28)),
		fmt.Sprintf("The hotel in %s should include breakfast and be close to the metro", cities[i]),
		fmt.Sprintf("Order %s still hasn't arrived, can I get a refund?", o),
		"I " + Pick(r, []string{"usually", "always", "really"}) + " like " + Pick(r, likesEn),
		fmt.Sprintf("Move next %s's meeting to 3pm", Pick(r, []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"})),
		"I'm allergic to " + Pick(r, []string{"peanuts", "shellfish", "mango", "cats"}),
		fmt.Sprintf("My budget is around %d CNY %s", 1000*(3+r.IntN(20)), Pick(r, filler)),
		"My " + Pick(r, []string{"cat", "dog", "parrot"}) + " is called " + Pick(r, []string{"Mochi", "Biscuit", "Luna", "Pepper", "Tofu"}),
	})
}

// Progress receives the number of rows written so far.
type Progress func(n int)

// Load writes the data set into an empty, migrated database: per tenant, the
// facts (a tenth with an older SUPERSEDED revision, some EXPIRED and INVALIDATED),
// the events and evidence turns, the users' orders and tickets with their edges,
// tasks and sessions. Rows go in multi-row INSERTs of BatchSize from Workers
// connections. Returns the number of rows written.
func Load(ctx context.Context, st *storage.Store, w *World, emb embedding.Embedder, progress Progress) (int, error) {
	cfg := w.Cfg
	cfg.defaults()
	type job struct {
		sql  string
		args []any
		rows int
	}
	jobs := make(chan job, cfg.Workers*2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	total := 0
	for i := 0; i < cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					continue
				}
				_, err := st.DB().ExecContext(ctx, j.sql, j.args...)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				total += j.rows
				if progress != nil {
					progress(total)
				}
				mu.Unlock()
			}
		}()
	}
	send := func(j job) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	span := 300 * 24 * time.Hour
	vec := func(text string) string {
		return pgvector.NewVector(emb.(interface{ Vector(string) []float32 }).Vector(text)).String()
	}

	err := func() error {
		defer close(jobs)
		for t := 0; t < cfg.Tenants; t++ {
			tenant := TenantID(t)
			users := w.Users[t]
			r := rand.New(rand.NewPCG(cfg.Seed+1000, uint64(t)+1))
			// Entities, edges, tasks, sessions: small, written here in order (edges
			// reference entities).
			var ent, edge, task, sess []string
			var entArgs, edgeArgs, taskArgs, sessArgs []any
			for _, u := range users {
				ent = append(ent, "(?, 'User', ?, ?, ?)")
				entArgs = append(entArgs, tenant, u.ID, u.ID, "")
				for oi, o := range u.Orders {
					state := Pick(r, []string{"PAID", "SHIPPED", "DELIVERED", "NOT_RECEIVED"})
					ent = append(ent, "(?, 'Order', ?, ?, ?)")
					entArgs = append(entArgs, tenant, o, u.ID, state)
					edge = append(edge, "(?, 'PLACED', 'User', ?, 'Order', ?, ?)")
					edgeArgs = append(edgeArgs, tenant, u.ID, o, u.ID)
					if oi == 0 {
						tk := "T" + o
						ent = append(ent, "(?, 'ServiceTicket', ?, ?, ?)")
						entArgs = append(entArgs, tenant, tk, u.ID, "OPEN")
						edge = append(edge, "(?, 'OPENED', 'User', ?, 'ServiceTicket', ?, ?)", "(?, 'ABOUT', 'ServiceTicket', ?, 'Order', ?, ?)")
						edgeArgs = append(edgeArgs, tenant, u.ID, tk, u.ID, tenant, tk, o, u.ID)
					}
				}
				for ti, tk := range u.Tasks {
					done, _ := json.Marshal([]string{"collect requirements"})
					todo, _ := json.Marshal([]string{"book flights", "book hotel"})
					task = append(task, "(?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?)")
					taskArgs = append(taskArgs, tenant, tk, u.ID, u.Sessions[0], fmt.Sprintf("Plan trip %d to %s", ti+1, Pick(r, cities)), "PLANNING", string(done), string(todo), "book flights")
				}
				for _, s := range u.Sessions {
					turns := []storage.Turn{}
					for i := 0; i < 6; i++ {
						turns = append(turns, storage.Turn{EvidenceID: uuid.NewString(), Speaker: "USER:" + u.ID, Text: genTurn(r, u, r.IntN(2) == 0), At: base.Add(time.Duration(r.Int64N(int64(span))))})
					}
					raw, _ := json.Marshal(turns)
					sess = append(sess, "(?, ?, ?, ?::jsonb, ?, 6, 6)")
					sessArgs = append(sessArgs, tenant, s, u.ID, string(raw), "The user talked about trips, orders and preferences.")
				}
			}
			for _, b := range []struct {
				head  string
				rows  []string
				args  []any
				width int
			}{
				{"INSERT INTO entities (tenant_id, type, id, user_id, state) VALUES ", ent, entArgs, 4},
				{"INSERT INTO edges (tenant_id, type, from_type, from_id, to_type, to_id, user_id) VALUES ", edge, edgeArgs, 4},
				{"INSERT INTO tasks (tenant_id, id, user_id, session_id, goal, state, done, todo, next_step) VALUES ", task, taskArgs, 9},
				{"INSERT INTO sessions (tenant_id, id, user_id, recent, summary, turn_count, summarized_at_turn) VALUES ", sess, sessArgs, 5},
			} {
				for len(b.rows) > 0 {
					n := min(len(b.rows), 1000)
					if _, err := st.DB().ExecContext(ctx, b.head+strings.Join(b.rows[:n], ", ")+" ON CONFLICT DO NOTHING", b.args[:n*b.width]...); err != nil {
						return err
					}
					b.rows, b.args = b.rows[n:], b.args[n*b.width:]
					mu.Lock()
					total += n
					mu.Unlock()
				}
			}

			// Facts.
			var rows []string
			var args []any
			for i := 0; i < cfg.Facts; i++ {
				u := users[r.IntN(len(users))]
				zh := r.IntN(2) == 0
				fs := genFact(r, u, zh)
				scope := memory.ScopeUser
				switch x := r.IntN(100); {
				case x < 1:
					scope = memory.ScopeTenant
				case x < 5:
					scope = memory.ScopeDepartment
				case x < 7:
					scope = memory.ScopeAgent
				case x < 11:
					scope = memory.ScopeSession
				case x < 19:
					scope = memory.ScopeTask
				}
				ref := memory.ScopeRef{Scope: scope, UserID: u.ID}
				switch scope {
				case memory.ScopeTenant:
					ref.UserID = ""
					if zh {
						fs = factSpec{memory.TypeConstraint, "constraint", "", Pick(r, policyZh), "", ""}
					} else {
						fs = factSpec{memory.TypeConstraint, "constraint", "", Pick(r, policyEn), "", ""}
					}
					fs.object = fs.content
				case memory.ScopeDepartment:
					ref.UserID, ref.DepartmentID = "", u.Department
				case memory.ScopeAgent:
					ref.AgentID = u.Agent
				case memory.ScopeSession:
					ref.SessionID = Pick(r, u.Sessions)
				case memory.ScopeTask:
					ref.TaskID = Pick(r, u.Tasks)
				}
				key := fmt.Sprintf("%s|bench|%s|%d", ref.Key(), fs.predicate, i)
				from := base.Add(time.Duration(r.Int64N(int64(span))))
				status := memory.FactActive
				var until, closed any
				x := r.IntN(100)
				if x < 10 { // an older revision, superseded by the current one below
					vu := from.Add(time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))
					rows = append(rows, factRow)
					args = append(args, factArgs(tenant, key, 1, ref, fs, memory.FactSuperseded, from, vu, vu, vec(fs.content), r.Float64())...)
					from, i = vu, i+1
				}
				rev := 1
				if x < 10 {
					rev = 2
				}
				if x >= 10 && x < 12 {
					status = memory.FactExpired
					vu := from.Add(24 * time.Hour)
					until, closed = vu, vu
				} else if x >= 12 && x < 14 {
					status = memory.FactInvalidated
					vu := from.Add(48 * time.Hour)
					until, closed = vu, vu
				}
				rows = append(rows, factRow)
				args = append(args, factArgs(tenant, key, rev, ref, fs, status, from, until, closed, vec(fs.content), r.Float64())...)
				if len(rows) >= cfg.BatchSize {
					if !send(job{sql: factInsert + strings.Join(rows, ", "), args: args, rows: len(rows)}) {
						return ctx.Err()
					}
					rows, args = nil, nil
				}
			}
			if len(rows) > 0 {
				if !send(job{sql: factInsert + strings.Join(rows, ", "), args: args, rows: len(rows)}) {
					return ctx.Err()
				}
				rows, args = nil, nil
			}

			// Events and evidence, one event per turn, in the same statement.
			for i := 0; i < cfg.Evidence; i += cfg.BatchSize {
				n := min(cfg.BatchSize, cfg.Evidence-i)
				var evRows, edRows []string
				var evArgs, edArgs []any
				for j := 0; j < n; j++ {
					u := users[r.IntN(len(users))]
					text := genTurn(r, u, r.IntN(2) == 0)
					id := uuid.NewString()
					eid := uuid.NewString()
					at := base.Add(time.Duration(r.Int64N(int64(span))))
					sess := Pick(r, u.Sessions)
					task := ""
					if r.IntN(4) == 0 {
						task = Pick(r, u.Tasks)
					}
					evRows = append(evRows, "(?, ?, ?, 'x', 'USER', ?, ?, ?, ?, ?, ?, 'MESSAGE', ?, 'COMMITTED', ?)")
					evArgs = append(evArgs, tenant, eid, fmt.Sprintf("bench-%d-%d", t, i+j), u.ID, u.ID, u.Department, u.Agent, sess, task, text, at)
					edRows = append(edRows, "(?, ?, ?, 'TURN', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, to_tsvector('english', ?), ?::vector)")
					edArgs = append(edArgs, tenant, id, eid, text, "turn:"+eid, "USER:"+u.ID, u.ID, u.Department, u.Agent, sess, task, at, 0.2+0.6*r.Float64(), storage.SearchText(text), vec(text))
				}
				// Two statements in one simple-protocol round trip and implicit transaction.
				sql := "INSERT INTO events (tenant_id, id, idempotency_key, content_hash, actor_type, actor_id, user_id, department_id, agent_id, session_id, task_id, event_type, content, status, occurred_at) VALUES " +
					strings.Join(evRows, ", ") + "; INSERT INTO evidence (tenant_id, id, event_id, kind, content, locator, speaker, user_id, department_id, agent_id, session_id, task_id, occurred_at, importance, search, embedding) VALUES " +
					strings.Join(edRows, ", ")
				if !send(job{sql: sql, args: append(evArgs, edArgs...), rows: n}) {
					return ctx.Err()
				}
			}
		}
		return nil
	}()
	wg.Wait()
	if err != nil {
		return total, err
	}
	return total, firstErr
}

const factInsert = "INSERT INTO facts (tenant_id, memory_key, revision, owner_type, owner_id, scope, department_id, user_id, agent_id, session_id, task_id, " +
	"memory_type, subject, predicate, object, content, entity_type, entity_id, status, confidence, importance, valid_from, valid_until, observed_at, closed_at, search, embedding) VALUES "

const factRow = "(?, ?, ?, 'USER', ?, ?, ?, ?, ?, ?, ?, ?, 'user', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, to_tsvector('english', ?), ?::vector)"

func factArgs(tenant, key string, rev int, ref memory.ScopeRef, fs factSpec, status memory.FactStatus, from time.Time, until, closed any, vec string, rnd float64) []any {
	obj := fs.object
	if obj == "" {
		obj = fs.content
	}
	return []any{tenant, key, rev, ref.UserID, string(ref.Scope), ref.DepartmentID, ref.UserID, ref.AgentID, ref.SessionID, ref.TaskID,
		string(fs.memType), fs.predicate, obj, fs.content, fs.entType, fs.entID, string(status), 0.6 + 0.4*rnd, 0.2 + 0.7*rnd,
		from, until, from, closed, storage.SearchText(fs.content + " " + obj), vec}
}

// Rows is how many rows Load writes for cfg (for a progress bar).
func (w *World) Rows() int {
	n := w.Cfg.Tenants * (w.Cfg.Facts + w.Cfg.Evidence)
	for _, us := range w.Users {
		for _, u := range us {
			n += 1 + len(u.Orders)*2 + 3 + len(u.Tasks) + len(u.Sessions)
		}
	}
	return n
}

// BareIndex is the benchmark's own HNSW index over every fact, which the bare
// pgvector top-k query (bareVecSQL) walks: the engine has no such index (it never
// orders a whole table by distance), and the bare row is the index's speed.
const BareIndex = "bench_bare_facts_hnsw"

const bareIndexSQL = "CREATE INDEX IF NOT EXISTS " + BareIndex + " ON facts USING hnsw (embedding vector_cosine_ops)"

// EnsureBareIndex builds BareIndex in the database dsn names if it lacks it (for
// a data set of 200,000 facts, a minute or two).
func EnsureBareIndex(ctx context.Context, dsn string) error {
	conn, done, err := maintConn(ctx, dsn)
	if err != nil {
		return err
	}
	defer done()
	if _, err := conn.ExecContext(ctx, bareIndexSQL); err != nil {
		return fmt.Errorf("build %s: %w", BareIndex, err)
	}
	return nil
}

// maintConn is a connection to dsn for index builds: no read timeout, room in
// maintenance_work_mem, parallel workers.
func maintConn(ctx context.Context, dsn string) (*sql.Conn, func(), error) {
	maint := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn), pgdriver.WithReadTimeout(6*time.Hour), pgdriver.WithWriteTimeout(time.Minute)))
	conn, err := maint.Conn(ctx)
	if err != nil {
		maint.Close()
		return nil, nil, err
	}
	done := func() { conn.Close(); maint.Close() }
	for _, s := range []string{"SET maintenance_work_mem = '2GB'", "SET max_parallel_maintenance_workers = 2"} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			done()
			return nil, nil, err
		}
	}
	return conn, done, nil
}

func hasIndex(ctx context.Context, st *storage.Store, name string) (bool, error) {
	var n int
	if err := st.DB().NewRaw("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?", name).Scan(ctx, &n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// Prepare makes st hold the data set of w: it returns at once when the database
// already holds it (recorded in settings), otherwise it empties the memory tables,
// drops the vector and full-text indexes, loads, rebuilds the indexes (in parallel,
// with room in maintenance_work_mem) and analyzes. Use a dedicated database.
//
// dsn names the same database; index builds run on their own connection without the
// store's read timeout.
func Prepare(ctx context.Context, st *storage.Store, dsn string, w *World, emb embedding.Embedder, reload bool, progress Progress, say func(string)) (bool, error) {
	if say == nil {
		say = func(string) {}
	}
	var have string
	_ = st.DB().NewRaw("SELECT value FROM settings WHERE key = 'bench_dataset'").Scan(ctx, &have)
	if have == w.Cfg.Key() && !reload {
		// A data set loaded before the engine dropped the vector index it does not
		// read (migration unused_vector_indexes) still needs the bare row's.
		if ok, err := hasIndex(ctx, st, BareIndex); err != nil || ok {
			return false, err
		}
		say("building " + BareIndex + " for the bare pgvector row (once)")
		t := time.Now()
		if err := EnsureBareIndex(ctx, dsn); err != nil {
			return false, err
		}
		say(fmt.Sprintf("  done in %s", time.Since(t).Round(time.Second)))
		return false, nil
	}
	db := st.DB()
	if _, err := db.ExecContext(ctx, "DELETE FROM settings WHERE key = 'bench_dataset'"); err != nil {
		return false, err
	}
	if _, err := db.ExecContext(ctx, "TRUNCATE events, evidence, candidates, candidate_evidence, facts, fact_evidence, entities, edges, tasks, task_transitions, sessions, outbox, access_log CASCADE"); err != nil {
		return false, fmt.Errorf("empty tables: %w", err)
	}
	indexes := []string{
		bareIndexSQL,
		"CREATE INDEX facts_search_gin ON facts USING gin (search)",
		"CREATE INDEX evidence_search_gin ON evidence USING gin (search)",
	}
	if _, err := db.ExecContext(ctx, "DROP INDEX IF EXISTS "+BareIndex+", facts_search_gin, evidence_search_gin"); err != nil {
		return false, err
	}
	say("loading")
	if _, err := Load(ctx, st, w, emb, progress); err != nil {
		return false, fmt.Errorf("load: %w", err)
	}
	conn, done, err := maintConn(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer done()
	for _, s := range indexes {
		say(s)
		t := time.Now()
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return false, fmt.Errorf("%s: %w", s, err)
		}
		say(fmt.Sprintf("  done in %s", time.Since(t).Round(time.Second)))
	}
	say("ANALYZE")
	if _, err := conn.ExecContext(ctx, "VACUUM ANALYZE"); err != nil {
		return false, err
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO settings (key, value) VALUES ('bench_dataset', ?) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", w.Cfg.Key()); err != nil {
		return false, err
	}
	return true, nil
}
