// Package eval measures Engram end to end: it runs scenarios (a timeline of turns
// and the questions to ask afterwards) through the real write path (Temporal
// workflows, Postgres, the configured extractor and embedder), asks every probe
// through recall, and reports recall accuracy and what memory wrongly "remembers":
// stale facts, scope and tenant leaks, unsupported facts. It also reads the public
// LoCoMo format. The scenario format is documented in eval/README.md.
//
// It may import every engine package but app, server and cmd: the commands hand
// it the embedder and extractor app builds.
package eval

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/engramhq/engram/memory"
)

// Suite is one YAML file: scenarios that share a purpose and thresholds.
type Suite struct {
	Name        string     `yaml:"name" json:"name"`
	Description string     `yaml:"description" json:"description,omitempty"`
	Thresholds  Thresholds `yaml:"thresholds" json:"thresholds,omitempty"`
	Scenarios   []Scenario `yaml:"scenarios" json:"scenarios"`
	// File is where the suite was read from.
	File string `yaml:"-" json:"file,omitempty"`
	// BaselineMargin: how far above the baseline's the engine's figures must be
	// (evidence_recall@1, evidence_recall@10); unset: at least equal.
	BaselineMargin map[string]float64 `yaml:"baseline_margin" json:"baseline_margin,omitempty"`
	// LoCoMo: the loader's counts, for a suite read from the LoCoMo layout.
	LoCoMo *LoCoMoStats `yaml:"-" json:"-"`
}

// Thresholds are the figures a run must reach, per mode ("all" applies to every
// mode; a mode's own entry overrides it metric by metric). Min: the figure must be at
// least this; Max: at most this.
type Thresholds map[string]Bounds

// Bounds holds the lower and upper bounds of metrics, by metric name (see Metrics).
type Bounds struct {
	Min map[string]float64 `yaml:"min" json:"min,omitempty"`
	Max map[string]float64 `yaml:"max" json:"max,omitempty"`
}

// For returns the bounds that apply to mode.
func (t Thresholds) For(mode string) Bounds {
	out := Bounds{Min: map[string]float64{}, Max: map[string]float64{}}
	for _, k := range []string{"all", mode} {
		b, ok := t[k]
		if !ok {
			continue
		}
		for m, v := range b.Min {
			out.Min[m] = v
		}
		for m, v := range b.Max {
			out.Max[m] = v
		}
	}
	return out
}

// Scenario is one story: who exists, what was said when, and what to ask.
type Scenario struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Schema is the default domain schema of turns and probes (default general).
	Schema  string   `yaml:"schema" json:"schema,omitempty"`
	Tenants []string `yaml:"tenants" json:"tenants,omitempty"`
	Users   []User   `yaml:"users" json:"users"`
	// Departments, sessions and tasks are listed for documentation and validation:
	// a turn or probe naming one that is not listed is an error.
	Departments []string `yaml:"departments" json:"departments,omitempty"`
	Sessions    []string `yaml:"sessions" json:"sessions,omitempty"`
	Tasks       []string `yaml:"tasks" json:"tasks,omitempty"`
	// Start is the time of the first turn when a turn gives an offset (e.g. "+2h")
	// rather than a time.
	Start  string  `yaml:"start" json:"start,omitempty"`
	Turns  []Turn  `yaml:"turns" json:"turns"`
	Probes []Probe `yaml:"probes" json:"probes"`
	// Vars expands the scenario into one copy per entry: every ${name} in the turns
	// and probes is replaced by the entry's value. Each copy runs in its own tenants.
	Vars []map[string]string `yaml:"vars" json:"vars,omitempty"`
	// Modes lists the extractor modes the scenario runs in (default: every mode).
	// A scenario whose facts only a perfect extractor can propose (a validity window
	// the rule extractor cannot read) runs in gold and llm only.
	Modes []string `yaml:"modes" json:"modes,omitempty"`
	// Instance is the index of the Vars entry this copy was made from.
	Instance int `yaml:"-" json:"instance,omitempty"`
}

// User is a person in the scenario, with their tenant and department.
type User struct {
	ID         string `yaml:"id" json:"id"`
	Tenant     string `yaml:"tenant" json:"tenant,omitempty"`
	Department string `yaml:"department" json:"department,omitempty"`
}

// Turn is one event: what a user (or agent, tool, system) said or did, when.
type Turn struct {
	ID      string `yaml:"id" json:"id"`
	Speaker string `yaml:"speaker" json:"speaker"` // a user id; the event belongs to that user
	// Tenant picks the speaker when one user id exists in several tenants.
	Tenant string `yaml:"tenant" json:"tenant,omitempty"`
	// Actor is USER (default), AGENT, SYSTEM or TOOL.
	Actor string `yaml:"actor" json:"actor,omitempty"`
	// Person names who said it when several people talk under one user (a LoCoMo
	// conversation): sent as the event's actor id, so facts are about that person.
	Person  string `yaml:"person" json:"person,omitempty"`
	Text    string `yaml:"text" json:"text"`
	Time    string `yaml:"time" json:"time"` // RFC 3339, a date, or an offset from Start (+2h, +3d)
	Session string `yaml:"session" json:"session,omitempty"`
	Task    string `yaml:"task" json:"task,omitempty"`
	Schema  string `yaml:"schema" json:"schema,omitempty"`
	// Gold is what a perfect extractor proposes for this turn (nil: no gold; an
	// empty list: the turn holds nothing worth remembering).
	Gold *[]memory.Candidate `yaml:"gold" json:"gold,omitempty"`
	// Locator is the evidence locator (default the turn id).
	Locator string `yaml:"locator" json:"locator,omitempty"`
	// Part names the turn this one is a later message of (a turn re-told as a
	// burst of messages, LoCoMoOptions.Bursts): a probe's evidence turn is found
	// when any of its messages is.
	Part string `yaml:"part" json:"part,omitempty"`

	at time.Time
}

// At is the turn's resolved time.
func (t Turn) At() time.Time { return t.at }

// Probe is one question asked after the timeline, with what must and must not come back.
type Probe struct {
	ID string `yaml:"id" json:"id"`
	// Question is the recall query; Questions lists paraphrases, each becoming its
	// own probe with the same expectations.
	Question  string   `yaml:"question" json:"question"`
	Questions []string `yaml:"questions" json:"questions,omitempty"`
	User      string   `yaml:"user" json:"user"` // the principal; tenant and department come from the user
	// Tenant overrides the user's tenant (to ask as the same user id in another tenant).
	Tenant     string `yaml:"tenant" json:"tenant,omitempty"`
	Department string `yaml:"department" json:"department,omitempty"` // overrides the user's department
	Task       string `yaml:"task" json:"task,omitempty"`
	Session    string `yaml:"session" json:"session,omitempty"`
	AsOf       string `yaml:"as_of" json:"as_of,omitempty"`
	Schema     string `yaml:"schema" json:"schema,omitempty"`
	Category   string `yaml:"category" json:"category"`
	// MustRecall: each expectation must be matched by an item in the top k.
	MustRecall []Expect `yaml:"must_recall" json:"must_recall,omitempty"`
	// MustNotRecall: no item in the top k may match any of these.
	MustNotRecall []Expect `yaml:"must_not_recall" json:"must_not_recall,omitempty"`
	// Evidence lists the turn ids whose evidence supports the answer.
	Evidence []string `yaml:"evidence" json:"evidence,omitempty"`
	// Answer is the reference answer, for the optional LLM judge.
	Answer string `yaml:"answer" json:"answer,omitempty"`

	asOf time.Time
}

// When is the probe's as_of: its own, else an hour after the scenario's last turn.
func (p Probe) When() time.Time { return p.asOf }

// Expect describes a memory by any of its fields; every field given must match.
type Expect struct {
	Key       string `yaml:"key" json:"key,omitempty"`             // memory key, exactly
	Content   string `yaml:"content" json:"content,omitempty"`     // substring of the content, case-insensitive
	Object    string `yaml:"object" json:"object,omitempty"`       // the fact's object, normalised
	Predicate string `yaml:"predicate" json:"predicate,omitempty"` // the fact's predicate
	Scope     string `yaml:"scope" json:"scope,omitempty"`         // the fact's scope
	// Kind is fact, evidence or any. Default: any for must_recall, fact for
	// must_not_recall (the raw turn that said an old value is history, not a stale fact).
	Kind string `yaml:"kind" json:"kind,omitempty"`
	// Turn: the item is that turn's evidence, or a fact supported by it.
	Turn string `yaml:"turn" json:"turn,omitempty"`
	// Reason says why a memory must not come back: superseded, expired, retracted,
	// inferred, other_user, other_task, other_session, other_department, other_tenant.
	Reason string `yaml:"reason" json:"reason,omitempty"`
}

func (e Expect) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("key", e.Key)
	add("content", e.Content)
	add("object", e.Object)
	add("predicate", e.Predicate)
	add("scope", e.Scope)
	add("kind", e.Kind)
	add("turn", e.Turn)
	return strings.Join(parts, " ")
}

// StaleReasons are the must-not reasons that count toward the stale-fact rate.
var StaleReasons = map[string]bool{"superseded": true, "expired": true, "retracted": true}

// LeakReasons are the must-not reasons of scope leaks.
var LeakReasons = map[string]bool{"other_user": true, "other_task": true, "other_session": true, "other_department": true, "other_tenant": true}

// LoadSuiteFile reads one suite.
func LoadSuiteFile(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSuite(b, path)
}

// ParseSuite decodes and validates a suite, expanding Vars and paraphrases.
func ParseSuite(b []byte, file string) (*Suite, error) {
	var s Suite
	if err := yaml.NewDecoder(bytes.NewReader(b), yaml.Strict()).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s.File = file
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	var out []Scenario
	for _, sc := range s.Scenarios {
		exp, err := expand(sc)
		if err != nil {
			return nil, fmt.Errorf("%s: scenario %q: %w", file, sc.Name, err)
		}
		out = append(out, exp...)
	}
	s.Scenarios = out
	for i := range s.Scenarios {
		if err := s.Scenarios[i].prepare(); err != nil {
			return nil, fmt.Errorf("%s: scenario %q: %w", file, s.Scenarios[i].Name, err)
		}
	}
	return &s, nil
}

// LoadSuites reads every *.yaml of a file system (the shipped suites, or a folder).
func LoadSuites(fsys fs.FS) ([]*Suite, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Suite
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		s, err := ParseSuite(b, n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// expand makes one copy of sc per Vars entry (or sc itself), with ${var} replaced.
func expand(sc Scenario) ([]Scenario, error) {
	if len(sc.Vars) == 0 {
		return []Scenario{sc}, nil
	}
	var out []Scenario
	for i, vars := range sc.Vars {
		var pairs []string
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			pairs = append(pairs, "${"+k+"}", vars[k])
		}
		r := strings.NewReplacer(pairs...)
		c := sc
		c.Vars = nil
		c.Instance = i
		c.Turns = make([]Turn, len(sc.Turns))
		for j, t := range sc.Turns {
			t.Text, t.Time, t.Speaker = r.Replace(t.Text), r.Replace(t.Time), r.Replace(t.Speaker)
			t.Task, t.Session = r.Replace(t.Task), r.Replace(t.Session)
			if t.Gold != nil {
				g := make([]memory.Candidate, len(*t.Gold))
				for k, c := range *t.Gold {
					c.Object, c.Content, c.Subject, c.EntityID = r.Replace(c.Object), r.Replace(c.Content), r.Replace(c.Subject), r.Replace(c.EntityID)
					g[k] = c
				}
				t.Gold = &g
			}
			c.Turns[j] = t
		}
		c.Probes = make([]Probe, len(sc.Probes))
		for j, p := range sc.Probes {
			p.Question = r.Replace(p.Question)
			qs := make([]string, len(p.Questions))
			for k, q := range p.Questions {
				qs[k] = r.Replace(q)
			}
			p.Questions = qs
			p.AsOf, p.Task, p.Session, p.User = r.Replace(p.AsOf), r.Replace(p.Task), r.Replace(p.Session), r.Replace(p.User)
			rep := func(es []Expect) []Expect {
				out := make([]Expect, len(es))
				for k, e := range es {
					e.Key, e.Content, e.Object = r.Replace(e.Key), r.Replace(e.Content), r.Replace(e.Object)
					out[k] = e
				}
				return out
			}
			p.MustRecall, p.MustNotRecall = rep(p.MustRecall), rep(p.MustNotRecall)
			c.Probes[j] = p
		}
		for _, t := range c.Turns {
			if strings.Contains(t.Text, "${") {
				return nil, fmt.Errorf("vars[%d]: turn %s has an unreplaced variable: %s", i, t.ID, t.Text)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseTime reads RFC 3339, "2006-01-02 15:04", or a date.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot read time %q (use RFC 3339, \"2006-01-02 15:04\", a date, or +<duration> from start)", s)
}

// resolveTime reads a time or an offset from base: +90m, +2h, +3d, -1d.
func resolveTime(s string, base time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("time is empty")
	}
	if s[0] == '+' || s[0] == '-' {
		if base.IsZero() {
			return time.Time{}, fmt.Errorf("offset %q needs the scenario's start", s)
		}
		sign := time.Duration(1)
		if s[0] == '-' {
			sign = -1
		}
		body := s[1:]
		if strings.HasSuffix(body, "d") {
			var n int
			if _, err := fmt.Sscanf(body, "%dd", &n); err != nil {
				return time.Time{}, fmt.Errorf("cannot read offset %q", s)
			}
			return base.Add(sign * time.Duration(n) * 24 * time.Hour), nil
		}
		d, err := time.ParseDuration(body)
		if err != nil {
			return time.Time{}, fmt.Errorf("cannot read offset %q: %v", s, err)
		}
		return base.Add(sign * d), nil
	}
	return ParseTime(s)
}

// prepare resolves times, fills defaults and checks references.
func (sc *Scenario) prepare() error {
	if sc.Schema == "" {
		sc.Schema = memory.DefaultSchema
	}
	var base time.Time
	if sc.Start != "" {
		t, err := ParseTime(sc.Start)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		base = t
	}
	if len(sc.Tenants) == 0 {
		sc.Tenants = []string{"default"}
	}
	users := map[string]bool{}
	for i, u := range sc.Users {
		if u.ID == "" {
			return fmt.Errorf("users[%d]: id is empty", i)
		}
		if u.Tenant == "" {
			sc.Users[i].Tenant = sc.Tenants[0]
		}
		if !slices.Contains(sc.Tenants, sc.Users[i].Tenant) {
			return fmt.Errorf("user %s: tenant %q is not listed in tenants", u.ID, u.Tenant)
		}
		if u.Department != "" && !slices.Contains(sc.Departments, u.Department) {
			return fmt.Errorf("user %s: department %q is not listed in departments", u.ID, u.Department)
		}
		users[u.ID+"@"+sc.Users[i].Tenant] = true
	}
	seen := map[string]bool{}
	for i := range sc.Turns {
		t := &sc.Turns[i]
		if t.ID == "" {
			t.ID = fmt.Sprintf("t%d", i+1)
		}
		if seen[t.ID] {
			return fmt.Errorf("turn id %s is used twice", t.ID)
		}
		if t.Part != "" && !seen[t.Part] {
			return fmt.Errorf("turn %s: part %q is not an earlier turn of the scenario", t.ID, t.Part)
		}
		seen[t.ID] = true
		if strings.TrimSpace(t.Text) == "" {
			return fmt.Errorf("turn %s: text is empty", t.ID)
		}
		u, ok := sc.user(t.Speaker, t.Tenant)
		if !ok {
			return fmt.Errorf("turn %s: speaker %q (tenant %q) is not a user of the scenario", t.ID, t.Speaker, t.Tenant)
		}
		t.Tenant = u.Tenant
		at, err := resolveTime(t.Time, base)
		if err != nil {
			return fmt.Errorf("turn %s: %w", t.ID, err)
		}
		t.at = at
		if t.Session != "" && !slices.Contains(sc.Sessions, t.Session) {
			return fmt.Errorf("turn %s: session %q is not listed in sessions", t.ID, t.Session)
		}
		if t.Task != "" && !slices.Contains(sc.Tasks, t.Task) {
			return fmt.Errorf("turn %s: task %q is not listed in tasks", t.ID, t.Task)
		}
		if t.Schema == "" {
			t.Schema = sc.Schema
		}
		if t.Actor == "" {
			t.Actor = "USER"
		}
		if t.Locator == "" {
			t.Locator = t.ID
		}
	}
	// Paraphrases become probes of their own.
	var probes []Probe
	for i, p := range sc.Probes {
		if p.ID == "" {
			p.ID = fmt.Sprintf("p%d", i+1)
		}
		qs := p.Questions
		if p.Question != "" {
			qs = append([]string{p.Question}, qs...)
		}
		if len(qs) == 0 {
			return fmt.Errorf("probe %s: no question", p.ID)
		}
		for j, q := range qs {
			c := p
			c.Question, c.Questions = q, nil
			if len(qs) > 1 {
				c.ID = fmt.Sprintf("%s.%d", p.ID, j+1)
			}
			probes = append(probes, c)
		}
	}
	sc.Probes = probes
	var last time.Time
	for _, t := range sc.Turns {
		if t.at.After(last) {
			last = t.at
		}
	}
	for i := range sc.Probes {
		p := &sc.Probes[i]
		u, ok := sc.user(p.User, p.Tenant)
		if !ok {
			return fmt.Errorf("probe %s: user %q (tenant %q) is not a user of the scenario", p.ID, p.User, p.Tenant)
		}
		if p.Tenant == "" {
			p.Tenant = u.Tenant
		}
		if p.Department == "" {
			p.Department = u.Department
		}
		if p.Schema == "" {
			p.Schema = sc.Schema
		}
		if p.Category == "" {
			p.Category = "uncategorised"
		}
		if p.AsOf != "" {
			t, err := resolveTime(p.AsOf, base)
			if err != nil {
				return fmt.Errorf("probe %s: as_of: %w", p.ID, err)
			}
			p.asOf = t
		} else {
			p.asOf = last.Add(time.Hour)
		}
		if p.Task != "" && !slices.Contains(sc.Tasks, p.Task) {
			return fmt.Errorf("probe %s: task %q is not listed in tasks", p.ID, p.Task)
		}
		if p.Session != "" && !slices.Contains(sc.Sessions, p.Session) {
			return fmt.Errorf("probe %s: session %q is not listed in sessions", p.ID, p.Session)
		}
		if len(p.MustRecall) == 0 && len(p.MustNotRecall) == 0 && len(p.Evidence) == 0 {
			return fmt.Errorf("probe %s: no expectation (must_recall, must_not_recall or evidence)", p.ID)
		}
		for _, ev := range p.Evidence {
			if !seen[ev] {
				return fmt.Errorf("probe %s: evidence turn %q does not exist", p.ID, ev)
			}
		}
		for _, e := range append(append([]Expect{}, p.MustRecall...), p.MustNotRecall...) {
			if e.Turn != "" && !seen[e.Turn] {
				return fmt.Errorf("probe %s: expectation names turn %q that does not exist", p.ID, e.Turn)
			}
			if e.Key == "" && e.Content == "" && e.Object == "" && e.Predicate == "" && e.Turn == "" {
				return fmt.Errorf("probe %s: an expectation names nothing to match (%s)", p.ID, e)
			}
			switch e.Kind {
			case "", "fact", "evidence", "any":
			default:
				return fmt.Errorf("probe %s: kind %q (allowed: fact, evidence, any)", p.ID, e.Kind)
			}
		}
		for _, e := range p.MustNotRecall {
			if e.Reason != "" && !StaleReasons[e.Reason] && !LeakReasons[e.Reason] && e.Reason != "inferred" && e.Reason != "lookalike" {
				return fmt.Errorf("probe %s: unknown must_not_recall reason %q", p.ID, e.Reason)
			}
		}
	}
	return nil
}

// user finds a user by id, in tenant when given (ids may repeat across tenants).
func (sc *Scenario) user(id, tenant string) (User, bool) {
	for _, u := range sc.Users {
		if u.ID == id && (tenant == "" || u.Tenant == tenant) {
			return u, true
		}
	}
	return User{}, false
}

// ProbeCount counts the probes of suites.
func ProbeCount(suites []*Suite) int {
	n := 0
	for _, s := range suites {
		for _, sc := range s.Scenarios {
			n += len(sc.Probes)
		}
	}
	return n
}
