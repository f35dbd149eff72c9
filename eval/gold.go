package eval

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/engramhq/engram/internal/fakeopenai"
	"github.com/engramhq/engram/llm"
	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/schema"
)

// GoldVersion is recorded as the extractor version of gold candidates.
const GoldVersion = "gold-1"

// CompleteGold fills what a gold entry may leave out (memory type, subject, content,
// confidence, origin, scope, relations of events) from the schema, the way a
// perfect extractor following the prompt would write them.
func CompleteGold(s *schema.Schema, t Turn, userID string, c memory.Candidate) (memory.Candidate, error) {
	p, ok := s.Predicate(c.Predicate)
	if !ok {
		return c, fmt.Errorf("gold of turn %s: schema %s has no predicate %q", t.ID, s.Name, c.Predicate)
	}
	if c.MemoryType == "" {
		c.MemoryType = p.MemoryType
	}
	if c.Scope == "" {
		c.Scope = p.DefaultScope
		if p.Event != nil && p.Event.DefaultScope != "" {
			c.Scope = p.Event.DefaultScope
		}
		if c.Scope == "" {
			c.Scope = memory.ScopeUser
		}
	}
	if p.Event != nil {
		if c.EntityType == "" {
			c.EntityType = p.Event.Entity
		}
		if c.Subject == "" && c.EntityID != "" {
			c.Subject = c.EntityType + ":" + c.EntityID
		}
		if c.Object == "" {
			c.Object = p.Event.State
			if c.Object == "" {
				c.Object = c.Subject
			}
		}
		if len(c.Relations) == 0 && c.EntityID != "" {
			speaker, _ := s.SpeakerEntity()
			for _, rel := range p.Event.Relations {
				if speaker == nil {
					break
				}
				if _, ok := s.Relationship(rel, speakerName(speaker), c.EntityType); ok {
					c.Relations = append(c.Relations, memory.Relation{Type: rel, FromType: speaker.Name, FromID: userID, ToType: c.EntityType, ToID: c.EntityID})
				}
			}
		}
		if p.Event.State != "" && c.Attributes == nil {
			c.Attributes = map[string]any{"state": p.Event.State}
		}
	}
	if c.Subject == "" {
		c.Subject = "user"
		if c.Scope == memory.ScopeDepartment {
			c.Subject = "department"
		}
	}
	if c.Confidence == 0 {
		c.Confidence = 0.9
	}
	if c.Origin == "" {
		c.Origin = memory.OriginStated
	}
	if c.Content == "" {
		if c.Retraction {
			c.Content = fmt.Sprintf("%s withdrew %s (%s scope): %q", c.Subject, c.Predicate, c.Scope, t.Text)
		} else {
			c.Content = fmt.Sprintf("%s %s: %s (%s scope): %q", c.Subject, c.Predicate, c.Object, c.Scope, t.Text)
		}
	}
	c.Extractor, c.Version = "gold", GoldVersion
	return c, nil
}

// goldDocument is the extraction document of a turn's gold, checked against the schema.
func goldDocument(t Turn, userID string) (string, error) {
	s, err := schema.Builtin(t.Schema)
	if err != nil {
		return "", err
	}
	doc := struct {
		Candidates []memory.Candidate `json:"candidates"`
	}{Candidates: []memory.Candidate{}}
	for _, g := range *t.Gold {
		c, err := CompleteGold(s, t, userID, g)
		if err != nil {
			return "", err
		}
		doc.Candidates = append(doc.Candidates, c)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	if _, errs := s.ParseCandidates(b); len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return "", fmt.Errorf("gold of turn %s does not validate against schema %s: %s", t.ID, s.Name, strings.Join(msgs, "; "))
	}
	return string(b), nil
}

// GoldScript is the fake OpenAI server's script that answers each turn's extraction
// with its gold: a rule per turn text, matched on the event-text block of the
// prompt (so a turn quoted among the recent turns of another does not match). When
// one text has different gold in different places (the same "that order" in two
// copies of a scenario), its rules also match the previous turn of the speaker,
// which the prompt lists just before the event text. Turns without gold get an
// empty extraction.
func GoldScript(jobs []job) (fakeopenai.Script, int, error) {
	type entry struct {
		where, doc, prev string
	}
	byText := map[string][]entry{}
	var order []string
	for _, j := range jobs {
		for i, t := range j.sc.Turns {
			if t.Gold == nil {
				continue
			}
			u, _ := j.sc.user(t.Speaker, t.Tenant)
			doc, err := goldDocument(t, u.ID)
			if err != nil {
				return fakeopenai.Script{}, 0, fmt.Errorf("%s/%s: %w", j.suite.Name, j.sc.Name, err)
			}
			if _, ok := byText[t.Text]; !ok {
				order = append(order, t.Text)
			}
			byText[t.Text] = append(byText[t.Text], entry{where: j.suite.Name + "/" + scenarioLabel(*j.sc) + " turn " + t.ID, doc: doc, prev: previousTurn(j.sc.Turns, i)})
		}
	}
	var sc fakeopenai.Script
	var plain []fakeopenai.Rule
	for _, text := range order {
		es := byText[text]
		block := "\nEvent text:\n<<<\n" + text + "\n>>>"
		same := true
		for _, e := range es {
			same = same && e.doc == es[0].doc
		}
		if same {
			plain = append(plain, fakeopenai.Rule{Contains: "<<<\n" + text + "\n>>>", Responses: []fakeopenai.Response{fakeopenai.Raw(es[0].doc)}})
			continue
		}
		seen := map[string]entry{}
		for _, e := range es {
			if e.prev == "" {
				return sc, 0, fmt.Errorf("%s: the text %q has different gold elsewhere and no previous turn tells them apart; make the texts differ", e.where, text)
			}
			key := "- " + flattenLine(e.prev) + "\n" + block
			if o, ok := seen[key]; ok && o.doc != e.doc {
				return sc, 0, fmt.Errorf("%s and %s: the same text after the same turn has different gold; make the texts differ", o.where, e.where)
			}
			seen[key] = e
			sc.Rules = append(sc.Rules, fakeopenai.Rule{Contains: key, Responses: []fakeopenai.Response{fakeopenai.Raw(e.doc)}})
		}
	}
	sc.Rules = append(sc.Rules, plain...)
	return sc, len(sc.Rules), nil
}

// previousTurn is the text of the speaker's turn the write path shows as the most
// recent one before turns[i]: recorded earlier (file order is arrival order) and
// not later in time.
func previousTurn(turns []Turn, i int) string {
	t := turns[i]
	best := -1
	for j := 0; j < i; j++ {
		o := turns[j]
		if o.Speaker != t.Speaker || o.Tenant != t.Tenant || o.At().After(t.At()) {
			continue
		}
		if best < 0 || !o.At().Before(turns[best].At()) {
			best = j
		}
	}
	if best < 0 {
		return ""
	}
	return turns[best].Text
}

func flattenLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// extractorFor builds the extractor of the mode.
func extractorFor(opt Options, jobs []job) (llm.Extractor, func(), error) {
	switch opt.Mode {
	case ModeRules:
		return llm.NewRuleExtractor(), func() {}, nil
	case ModeGold:
		script, _, err := GoldScript(jobs)
		if err != nil {
			return nil, nil, err
		}
		srv := fakeopenai.New(script)
		ex, err := llm.NewOpenAIExtractor(llm.OpenAIConfig{BaseURL: srv.BaseURL(), APIKey: "gold", Model: "gold"})
		if err != nil {
			srv.Close()
			return nil, nil, err
		}
		return ex, srv.Close, nil
	case ModeLLM:
		if opt.LLM.BaseURL == "" {
			return nil, nil, ErrNoLLM
		}
		ex, err := llm.NewOpenAIExtractor(llm.OpenAIConfig{BaseURL: opt.LLM.BaseURL, APIKey: opt.LLM.APIKey, Model: opt.LLM.Model, Timeout: opt.LLM.Timeout})
		return ex, func() {}, err
	}
	return nil, nil, fmt.Errorf("unknown mode %q (allowed: rules, gold, llm)", opt.Mode)
}

// ErrNoLLM is returned by llm mode without an endpoint.
var ErrNoLLM = fmt.Errorf("llm mode needs an LLM endpoint: set ENGRAM_LLM_BASE_URL (and ENGRAM_LLM_API_KEY, ENGRAM_LLM_MODEL)")

func speakerName(e *schema.Entity) string {
	if e == nil {
		return ""
	}
	return e.Name
}
