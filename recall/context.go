package recall

import (
	"fmt"
	"strings"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage"
)

// Section titles, in the order the context shows them.
const (
	SectionTask        = "task"
	SectionTaskState   = "task state"
	SectionConstraints = "constraints"
	SectionPreferences = "preferences"
	SectionFacts       = "facts"
	SectionRecent      = "recent turns"
	SectionSummary     = "summary"
	SectionEvidence    = "evidence"
)

var sectionOrder = []string{SectionTask, SectionTaskState, SectionConstraints, SectionPreferences, SectionFacts, SectionRecent, SectionSummary, SectionEvidence}

// CountTokens estimates tokens the way most tokenizers come out on mixed text: a
// CJK character is one token, other text about four characters per token.
func CountTokens(s string) int {
	n, other := 0, 0
	for _, r := range s {
		if isCJK(r) {
			n++
			continue
		}
		other++
	}
	return n + (other+3)/4
}

// tag is the trace a context line carries: [fact:1a2b3c4d] or [evidence:…].
func tag(kind Kind, id string) string { return "[" + string(kind) + ":" + short(id) + "]" }

func oneLine(s string, maxRunes int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxRunes {
		s = string(r[:maxRunes]) + "…"
	}
	return s
}

func factLine(it Item) string {
	var b strings.Builder
	b.WriteString("- ")
	b.WriteString(oneLine(it.Content, 300))
	if it.Predicate != "" && it.Object != "" && !strings.Contains(it.Content, it.Object) {
		fmt.Fprintf(&b, " (%s: %s)", it.Predicate, oneLine(it.Object, 80))
	}
	fmt.Fprintf(&b, " {%s", it.Scope.Key())
	if it.Status != "" && it.Status != memory.FactActive {
		fmt.Fprintf(&b, ", %s", strings.ToLower(string(it.Status)))
	}
	fmt.Fprintf(&b, ", since %s}", it.ValidFrom.UTC().Format("2006-01-02"))
	b.WriteString(" " + tag(KindFact, it.ID))
	return b.String()
}

// evidenceLine is a turn with its date (so "when" is answerable from the context
// alone), its speaker when a named person said it, and its trace tag.
func evidenceLine(it Item) string {
	who := ""
	if it.Speaker != "" {
		who = it.Speaker + ": "
	}
	return fmt.Sprintf("- %s %s%s %s", it.OccurredAt.UTC().Format("Mon 2006-01-02 15:04"), who, oneLine(it.Content, 400), tag(KindEvidence, it.ID))
}

// buildContext packs the sections within budget tokens: the task and its state
// first, then the ranked facts (constraints, preferences, facts) and evidence in
// rank order, with room kept for the session's recent turns and summary. Each line
// is whole or left out, never cut.
func buildContext(task *TaskState, ranked []Item, k int, recent []storage.Turn, summary string, budget int) ([]Section, string, int) {
	cb := &contextBuilder{lines: map[string][]string{}}
	if task != nil {
		cb.task(task, budget)
	}
	// Room for working memory: up to a third of the budget.
	recentLines := make([]string, 0, len(recent))
	recentIDs := map[string]bool{}
	for _, tr := range recent {
		recentLines = append(recentLines, fmt.Sprintf("- %s %s%s %s", tr.At.UTC().Format("2006-01-02 15:04"), speakerPrefix(tr.Speaker), oneLine(tr.Text, 300), tag(KindEvidence, tr.EvidenceID)))
		recentIDs[tr.EvidenceID] = true
	}
	summaryLine := ""
	if strings.TrimSpace(summary) != "" {
		summaryLine = "- " + oneLine(summary, 800)
	}
	cb.items(ranked, k, recentIDs, budget-workingMemoryReserve(recentLines, summaryLine, budget))
	cb.workingMemory(recentLines, summaryLine, budget)
	return cb.render()
}

// sectionHeader is what a section's header costs in tokens.
const sectionHeader = 4

// contextBuilder fills the context's sections line by line within a budget of
// tokens (used counts them).
type contextBuilder struct {
	lines map[string][]string
	used  int
}

// fits counts l against limit, if it fits.
func (cb *contextBuilder) fits(l string, limit int) bool {
	n := CountTokens(l) + 1
	if cb.used+n > limit {
		return false
	}
	cb.used += n
	return true
}

// add puts l in section sec, if it fits within limit.
func (cb *contextBuilder) add(sec, l string, limit int) bool {
	if cb.fits(l, limit) {
		cb.lines[sec] = append(cb.lines[sec], l)
		return true
	}
	return false
}

// task writes the task's goal and state.
func (cb *contextBuilder) task(task *TaskState, budget int) {
	cb.used += 2 * sectionHeader
	if task.Goal != "" {
		cb.add(SectionTask, "- goal: "+oneLine(task.Goal, 300)+" [task:"+task.TaskID+"]", budget)
	} else {
		cb.add(SectionTask, "- task "+task.TaskID, budget)
	}
	cb.add(SectionTaskState, "- state: "+string(task.State), budget)
	if len(task.Done) > 0 {
		cb.add(SectionTaskState, "- done: "+oneLine(strings.Join(task.Done, "; "), 300), budget)
	}
	if len(task.Todo) > 0 {
		cb.add(SectionTaskState, "- todo: "+oneLine(strings.Join(task.Todo, "; "), 300), budget)
	}
	if task.NextStep != "" {
		cb.add(SectionTaskState, "- next step: "+oneLine(task.NextStep, 200), budget)
	}
	if task.LastError != "" {
		cb.add(SectionTaskState, "- last error: "+oneLine(task.LastError, 200), budget)
	}
}

// workingMemoryReserve is the room kept for the recent turns and the summary:
// what they cost, up to a third of the budget.
func workingMemoryReserve(recentLines []string, summaryLine string, budget int) int {
	reserve := 0
	for _, l := range recentLines {
		reserve += CountTokens(l) + 1
	}
	if summaryLine != "" {
		reserve += CountTokens(summaryLine) + 1 + sectionHeader
	}
	if len(recentLines) > 0 {
		reserve += sectionHeader
	}
	return min(reserve, budget/3)
}

// items writes the best k items (not the recent turns, shown with those) into
// their sections within memLimit.
func (cb *contextBuilder) items(ranked []Item, k int, recentIDs map[string]bool, memLimit int) {
	shown := 0
	for _, it := range ranked {
		if shown >= k {
			break
		}
		if it.Kind == KindEvidence && recentIDs[it.ID] {
			continue // shown with the recent turns
		}
		var sec, l string
		switch {
		case it.Kind == KindEvidence:
			sec, l = SectionEvidence, evidenceLine(it)
		case it.MemoryType == memory.TypeConstraint:
			sec, l = SectionConstraints, factLine(it)
		case it.MemoryType == memory.TypePreference:
			sec, l = SectionPreferences, factLine(it)
		default:
			sec, l = SectionFacts, factLine(it)
		}
		if len(cb.lines[sec]) == 0 {
			if cb.used+sectionHeader > memLimit {
				continue
			}
			cb.used += sectionHeader
		}
		if cb.add(sec, l, memLimit) {
			shown++
		} else if len(cb.lines[sec]) == 0 {
			cb.used -= sectionHeader
		}
	}
}

// workingMemory writes the summary, then the recent turns newest first until
// the rest of the budget is used, shown oldest first.
func (cb *contextBuilder) workingMemory(recentLines []string, summaryLine string, budget int) {
	if summaryLine != "" {
		cb.used += sectionHeader
		if !cb.add(SectionSummary, summaryLine, budget) {
			cb.used -= sectionHeader
		}
	}
	if len(recentLines) == 0 {
		return
	}
	cb.used += sectionHeader
	var keep []string
	for i := len(recentLines) - 1; i >= 0; i-- {
		if !cb.fits(recentLines[i], budget) {
			break
		}
		keep = append(keep, recentLines[i])
	}
	for i := len(keep) - 1; i >= 0; i-- {
		cb.lines[SectionRecent] = append(cb.lines[SectionRecent], keep[i])
	}
	if len(keep) == 0 {
		cb.used -= sectionHeader
	}
}

// render is the sections in their order, their text and its tokens.
func (cb *contextBuilder) render() ([]Section, string, int) {
	var secs []Section
	var b strings.Builder
	for _, title := range sectionOrder {
		ls := cb.lines[title]
		if len(ls) == 0 {
			continue
		}
		secs = append(secs, Section{Title: title, Lines: ls})
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## " + title + "\n")
		for _, l := range ls {
			b.WriteString(l + "\n")
		}
	}
	text := b.String()
	return secs, text, CountTokens(text)
}

func speakerPrefix(s string) string {
	if s == "" {
		return ""
	}
	role, _, _ := strings.Cut(s, ":")
	return strings.ToLower(role) + ": "
}
