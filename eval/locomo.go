package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/engramhq/engram/memory"
)

// LoCoMo categories.
var LoCoMoCategories = map[int]string{1: "1-multi-hop", 2: "2-temporal", 3: "3-open-domain", 4: "4-single-hop", 5: "5-adversarial"}

// LoCoMoSample is one sample of the public LoCoMo file.
type LoCoMoSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []LoCoMoQA                 `json:"qa"`
}

// LoCoMoTurn is one turn of a session.
type LoCoMoTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
	// Gold (an Engram extension of the layout, in the development suites): the facts
	// about the speaker worth keeping from this turn. When any turn of a file has
	// gold, every turn is judged: a turn without gold holds nothing worth keeping.
	Gold []LoCoMoFact `json:"gold,omitempty"`
}

// LoCoMoFact is one gold fact of a turn.
type LoCoMoFact struct {
	Subject   string `json:"subject"`
	Predicate string `json:"predicate"`
	Object    string `json:"object"`
}

// LoCoMoQA is one question.
type LoCoMoQA struct {
	Question          string          `json:"question"`
	Answer            json.RawMessage `json:"answer"`
	AdversarialAnswer json.RawMessage `json:"adversarial_answer"`
	Evidence          []string        `json:"evidence"`
	Category          int             `json:"category"`
}

// LoCoMoStats counts what loading had to repair or drop.
type LoCoMoStats struct {
	Samples           int `json:"samples"`
	Sessions          int `json:"sessions"`
	Turns             int `json:"turns"`
	Questions         int `json:"questions"`
	EvidenceIDs       int `json:"evidence_ids"`
	Normalised        int `json:"normalised_evidence_ids"`    // malformed but repaired ("D:11:26" → "D11:26")
	Unresolved        int `json:"unresolved_evidence_ids"`    // no such turn after repair
	Unreadable        int `json:"unreadable_evidence_ids"`    // not an evidence id at all
	NoEvidence        int `json:"questions_without_evidence"` // dropped: nothing to measure
	UnreadableDates   int `json:"unreadable_session_dates"`
	SkippedCategories int `json:"questions_of_unknown_category"`
	GoldFacts         int `json:"gold_facts"`
}

var (
	locomoSession = regexp.MustCompile(`^session_(\d+)$`)
	evidenceID    = regexp.MustCompile(`^D:?(\d+):0*(\d+)$`)
)

// NormaliseEvidence splits and repairs the evidence ids of a LoCoMo question:
// "D8:6; D9:17" → D8:6, D9:17; "D:11:26" → D11:26; "D30:05" → D30:5. It returns the
// ids it could read, how many needed repair, and the parts it could not read.
func NormaliseEvidence(raw []string) (ids []string, repaired int, bad []string) {
	for _, r := range raw {
		parts := strings.FieldsFunc(r, func(c rune) bool { return c == ';' || c == ',' || c == ' ' || c == '\t' })
		readable := 0
		for _, p := range parts {
			p = strings.TrimSpace(p)
			m := evidenceID.FindStringSubmatch(p)
			if m == nil {
				bad = append(bad, p)
				continue
			}
			sess, _ := strconv.Atoi(m[1])
			turn, _ := strconv.Atoi(m[2])
			id := fmt.Sprintf("D%d:%d", sess, turn)
			if id != p {
				repaired++
			}
			ids = append(ids, id)
			readable++
		}
		if readable > 1 { // a list in one string ("D8:6; D9:17")
			repaired += readable - 1
		}
	}
	return ids, repaired, bad
}

// ParseLoCoMoTime reads "1:56 pm on 8 May, 2023".
func ParseLoCoMoTime(s string) (time.Time, error) {
	s = strings.Join(strings.Fields(s), " ")
	for _, layout := range []string{"3:04 pm on 2 January, 2006", "3:04 pm on 2 Jan, 2006", "3:04 pm on January 2, 2006", "3:04 PM on 2 January, 2006"} {
		if t, err := time.Parse(layout, strings.ToLower(s)); err == nil {
			return t.UTC(), nil
		}
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot read LoCoMo date %q", s)
}

// LoadLoCoMo reads a LoCoMo file into a suite: each conversation is its own user
// in its own tenant; each turn an event at its session's time (plus a second per
// turn, to keep the order) with its dia_id as the evidence locator; each question a
// probe whose expectation is its evidence turns.
//
// path may also be a folder: every *.json file in it is read, in name order, as one
// suite named after the folder.
func LoadLoCoMo(path string) (*Suite, LoCoMoStats, error) {
	return LoadLoCoMoAs(path, LoCoMoOptions{})
}

// LoCoMoOptions change how a LoCoMo file is told to the engine.
type LoCoMoOptions struct {
	// Bursts re-tells each turn as a burst of short, hurried messages (bursts.go).
	Bursts bool
}

// LoadLoCoMoAs reads a LoCoMo file, or every .json file of a folder, told as o says.
func LoadLoCoMoAs(path string, o LoCoMoOptions) (*Suite, LoCoMoStats, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, LoCoMoStats{}, err
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, LoCoMoStats{}, err
		}
		return loadLoCoMoFiles("locomo", path, map[string][]byte{path: b}, o)
	}
	files := map[string][]byte{}
	matches, _ := filepath.Glob(filepath.Join(path, "*.json"))
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, LoCoMoStats{}, err
		}
		files[m] = b
	}
	if len(files) == 0 {
		return nil, LoCoMoStats{}, fmt.Errorf("%s: no .json files", path)
	}
	return loadLoCoMoFiles(filepath.Base(filepath.Clean(path)), path, files, o)
}

// LoadLoCoMoFiles reads LoCoMo files (name → content) into one suite.
func LoadLoCoMoFiles(name, path string, files map[string][]byte) (*Suite, LoCoMoStats, error) {
	return loadLoCoMoFiles(name, path, files, LoCoMoOptions{})
}

func loadLoCoMoFiles(name, path string, files map[string][]byte, o LoCoMoOptions) (*Suite, LoCoMoStats, error) {
	var st LoCoMoStats
	var samples []LoCoMoSample
	for _, f := range sortedKeys(files) {
		var ss []LoCoMoSample
		if err := json.Unmarshal(files[f], &ss); err != nil {
			return nil, st, fmt.Errorf("%s: not a LoCoMo file (a JSON list of samples): %w", f, err)
		}
		samples = append(samples, ss...)
	}
	suite := &Suite{Name: name, File: path, Description: "LoCoMo conversations: evidence recall per category"}
	for si, smp := range samples {
		st.Samples++
		id := smp.SampleID
		if id == "" {
			id = fmt.Sprintf("conv-%d", si+1)
		}
		user := "locomo-" + unsafeTenant.ReplaceAllString(id, "_")
		sc := Scenario{Name: id, Schema: memory.DefaultSchema, Tenants: []string{"locomo"}, Users: []User{{ID: user, Tenant: "locomo"}}}
		var sessions []int
		for k := range smp.Conversation {
			if m := locomoSession.FindStringSubmatch(k); m != nil {
				n, _ := strconv.Atoi(m[1])
				sessions = append(sessions, n)
			}
		}
		sort.Ints(sessions)
		judged := false
		for _, n := range sessions {
			var turns []LoCoMoTurn
			_ = json.Unmarshal(smp.Conversation[fmt.Sprintf("session_%d", n)], &turns)
			for _, t := range turns {
				judged = judged || t.Gold != nil
			}
		}
		if judged && o.Bursts {
			return nil, st, fmt.Errorf("%s: sample %s: bursts re-tell LoCoMo's own conversations; gold facts would not follow a turn split into messages", path, id)
		}
		if o.Bursts {
			suite.Description = "LoCoMo conversations told as bursts of short, hurried messages: evidence recall per category"
		}
		known := map[string]bool{}
		for _, n := range sessions {
			var turns []LoCoMoTurn
			if err := json.Unmarshal(smp.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
				return nil, st, fmt.Errorf("%s: sample %s session_%d: %w", path, id, n, err)
			}
			var date string
			_ = json.Unmarshal(smp.Conversation[fmt.Sprintf("session_%d_date_time", n)], &date)
			at, err := ParseLoCoMoTime(date)
			if err != nil {
				st.UnreadableDates++
				at = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * 24 * time.Hour)
			}
			st.Sessions++
			sc.Sessions = append(sc.Sessions, fmt.Sprintf("session_%d", n))
			extra := 0 // messages after the first of the session's turns so far: a second apart
			for i, t := range turns {
				text := strings.TrimSpace(t.Text)
				if t.BlipCaption != "" {
					text += " [shares a photo: " + strings.TrimSpace(t.BlipCaption) + "]"
				}
				if text == "" {
					continue
				}
				dia := t.DiaID
				if ids, _, _ := NormaliseEvidence([]string{dia}); len(ids) == 1 {
					dia = ids[0]
				}
				if dia == "" || known[dia] {
					dia = fmt.Sprintf("D%d:x%d", n, i+1)
				}
				known[dia] = true
				st.Turns++
				msgs := []string{text}
				if o.Bursts {
					msgs = burst(dia, strings.TrimSpace(t.Text), strings.TrimSpace(t.BlipCaption))
				}
				for k, msg := range msgs {
					// The conversation is one user; each turn is said by one of its two
					// people (the event's actor), so facts are about whoever said them.
					tt := Turn{ID: dia, Speaker: user, Person: strings.TrimSpace(t.Speaker), Text: msg, Session: fmt.Sprintf("session_%d", n),
						Locator: t.DiaID, Schema: memory.DefaultSchema}
					if k > 0 {
						tt.ID, tt.Part = fmt.Sprintf("%s~%d", dia, k+1), dia
					}
					if judged {
						g := []memory.Candidate{}
						for _, f := range t.Gold {
							g = append(g, memory.Candidate{Subject: f.Subject, Predicate: f.Predicate, Object: f.Object, Scope: memory.ScopeUser})
							st.GoldFacts++
						}
						tt.Gold = &g
					}
					if k > 0 {
						extra++
					}
					tt.Time = at.Add(time.Duration(i+extra) * time.Second).Format(time.RFC3339)
					sc.Turns = append(sc.Turns, tt)
				}
			}
		}
		for qi, qa := range smp.QA {
			st.Questions++
			cat, ok := LoCoMoCategories[qa.Category]
			if !ok {
				st.SkippedCategories++
				continue
			}
			ids, repaired, bad := NormaliseEvidence(qa.Evidence)
			st.EvidenceIDs += len(qa.Evidence)
			st.Normalised += repaired
			st.Unreadable += len(bad)
			var ev []string
			for _, x := range ids {
				if known[x] {
					if !slices.Contains(ev, x) {
						ev = append(ev, x)
					}
				} else {
					st.Unresolved++
				}
			}
			if len(ev) == 0 {
				st.NoEvidence++
				continue
			}
			sc.Probes = append(sc.Probes, Probe{ID: fmt.Sprintf("q%d", qi+1), Question: qa.Question, User: user,
				Category: cat, Evidence: ev, Answer: answerText(qa)})
		}
		suite.Scenarios = append(suite.Scenarios, sc)
	}
	for i := range suite.Scenarios {
		if err := suite.Scenarios[i].prepare(); err != nil {
			return nil, st, fmt.Errorf("%s: sample %s: %w", path, suite.Scenarios[i].Name, err)
		}
	}
	return suite, st, nil
}

func answerText(qa LoCoMoQA) string {
	raw := qa.Answer
	if len(raw) == 0 || string(raw) == "null" {
		raw = qa.AdversarialAnswer
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return strings.Trim(string(raw), `"`)
}

// LoCoMoExtra adds evidence recall@k for categories 1–4 together and the loader's
// counts to the suite's report.
func LoCoMoExtra(sr *SuiteReport, st LoCoMoStats) {
	var ps []ProbeResult
	for _, p := range sr.Probes {
		if !strings.HasPrefix(p.Category, "5") {
			ps = append(ps, p)
		}
	}
	m := aggregate(ps, 10)
	if sr.Extra == nil {
		sr.Extra = map[string]float64{}
	}
	for k, v := range m.EvidenceAt {
		sr.Extra["evidence_recall@"+k+" (categories 1-4)"] = v
	}
	sr.Extra["probes (categories 1-4)"] = float64(len(ps))
	if sr.baselineProbes != nil {
		sr.Folds = Folds(sr.Probes, sr.baselineProbes, 10)
	}
	sr.Notes = append(sr.Notes, fmt.Sprintf("LoCoMo file: %d samples, %d sessions, %d turns, %d questions; %d evidence ids, %d repaired (split lists, \"D:11:26\", \"D30:05\"), %d unreadable, %d naming no turn; %d questions without usable evidence dropped; %d unreadable session dates; %d questions of unknown category",
		st.Samples, st.Sessions, st.Turns, st.Questions, st.EvidenceIDs, st.Normalised, st.Unreadable, st.Unresolved, st.NoEvidence, st.UnreadableDates, st.SkippedCategories))
}
