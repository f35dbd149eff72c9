package recall

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Dates a question names ("What did Gina find on 1 February, 2023?", "in December
// 2023", "2023年5月", "on 2024-03-05") resolve to a window of when the turns that
// answer were said: the day (a day either side, for the time zone the user
// speaks in), the month (and the week after it, when what happened in it is
// still told) or the year. A day or month without a year is the latest one not
// after the time the question is asked at. The window favours what was said in
// it (the boost "in the time asked about"), as the relative times do ("last
// week", timeWords); it filters nothing out.

// monthNames are the English months' names the patterns below match, full names
// only; "may" counts only next to a number or after a preposition ("in May"),
// as each pattern requires one.
const monthNames = `january|february|march|april|may|june|july|august|september|october|november|december`

var (
	dayMonthYearRe = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(` + monthNames + `),?\s+(\d{4})\b`)
	monthDayYearRe = regexp.MustCompile(`(?i)\b(` + monthNames + `)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
	monthYearRe    = regexp.MustCompile(`(?i)\b(` + monthNames + `),?\s+(?:of\s+)?(\d{4})\b`)
	isoDayRe       = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	cjkDateRe      = regexp.MustCompile(`(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月(?:\s*(\d{1,2})\s*[日号])?`)
	dayMonthRe     = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(` + monthNames + `)\b`)
	monthDayRe     = regexp.MustCompile(`(?i)\b(` + monthNames + `)\s+(\d{1,2})(?:st|nd|rd|th)?\b`)
	inMonthRe      = regexp.MustCompile(`(?i)\b(?:in|during|since|of|early|late|mid)\s+(?:-\s*)?(` + monthNames + `)\b`)
	inYearRe       = regexp.MustCompile(`(?i)\b(?:in|during|of)\s+((?:19|20)\d{2})\b|((?:19|20)\d{2})\s*年`)
)

// dateWindow is the window of the first date q names, resolved against now; ok
// is false when q names none.
func dateWindow(q string, now time.Time) (from, to time.Time, ok bool) {
	loc := now.Location()
	dayWin := func(y, m, d int) (time.Time, time.Time, bool) {
		t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, loc)
		if m < 1 || m > 12 || d < 1 || d > 31 || t.Day() != d {
			return time.Time{}, time.Time{}, false
		}
		return t.AddDate(0, 0, -1), t.AddDate(0, 0, 2), true
	}
	monthWin := func(y, m int) (time.Time, time.Time, bool) {
		if m < 1 || m > 12 {
			return time.Time{}, time.Time{}, false
		}
		t := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, loc)
		return t, t.AddDate(0, 1, 7), true
	}
	// latest is the latest year in which month m (day d, 1 for a month) is not
	// after now.
	latest := func(m, d int) int {
		y := now.Year()
		if time.Date(y, time.Month(m), d, 0, 0, 0, 0, loc).After(now) {
			y--
		}
		return y
	}
	if m := dayMonthYearRe.FindStringSubmatch(q); m != nil {
		return dayWin(atoi(m[3]), month(m[2]), atoi(m[1]))
	}
	if m := monthDayYearRe.FindStringSubmatch(q); m != nil {
		return dayWin(atoi(m[3]), month(m[1]), atoi(m[2]))
	}
	if m := isoDayRe.FindStringSubmatch(q); m != nil {
		return dayWin(atoi(m[1]), atoi(m[2]), atoi(m[3]))
	}
	if m := monthYearRe.FindStringSubmatch(q); m != nil {
		return monthWin(atoi(m[2]), month(m[1]))
	}
	if m := cjkDateRe.FindStringSubmatch(q); m != nil {
		mo, y := atoi(m[2]), atoi(m[1])
		if m[3] != "" {
			d := atoi(m[3])
			if y == 0 {
				y = latest(mo, d)
			}
			return dayWin(y, mo, d)
		}
		if y == 0 {
			y = latest(mo, 1)
		}
		return monthWin(y, mo)
	}
	if m := dayMonthRe.FindStringSubmatch(q); m != nil {
		mo, d := month(m[2]), atoi(m[1])
		return dayWin(latest(mo, d), mo, d)
	}
	if m := monthDayRe.FindStringSubmatch(q); m != nil {
		mo, d := month(m[1]), atoi(m[2])
		return dayWin(latest(mo, d), mo, d)
	}
	if m := inMonthRe.FindStringSubmatch(q); m != nil {
		mo := month(m[1])
		return monthWin(latest(mo, 1), mo)
	}
	if m := inYearRe.FindStringSubmatch(q); m != nil {
		y := atoi(m[1] + m[2])
		t := time.Date(y, 1, 1, 0, 0, 0, 0, loc)
		return t, t.AddDate(1, 0, 7), true
	}
	return time.Time{}, time.Time{}, false
}

// month is the number of an English month's name (0: none).
func month(name string) int {
	for i, n := range strings.Split(monthNames, "|") {
		if strings.EqualFold(n, name) {
			return i + 1
		}
	}
	return 0
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// A question that asks when ("When did Maya move?", "How long has he played?",
// "什么时候", "哪年") is answered by a turn that names a time: "yesterday", "two
// weeks ago", "for a month now", "in 2021", "last summer", "上周". Such a turn
// is lifted among the leaders (Fusion.TimeAnswer), as the speaker the question
// names is: the turn that only mentions what happened is often said before or
// after the one that says when.
var (
	asksWhenRe = regexp.MustCompile(`(?i)^\W*(?:and\s+|so\s+)?when\b|\bwhen (?:did|does|do|is|was|were|will|would|has|have|had|can|could)\b|\bsince when\b|\bhow long\b|\b(?:what|which) (?:year|month|day|date|week|weekend|season|time of year)\b|\bhow many (?:years|months|weeks|days)\b|什么时候|啥时候|何时|哪一?年|哪个月|几月|几号|哪一?天|多久|多长时间|几年`)
	// cjkTimeRe is namesTime's Chinese part, run only on text with CJK in it.
	cjkTimeRe = regexp.MustCompile(`昨天|今天|明天|前天|后天|上周|下周|这周|本周|上个?星期|下个?星期|上个月|下个月|这个月|去年|今年|明年|前年|最近|周末|\d+\s*[年月日号]|[一二两三四五六七八九十几]+\s*(?:天|周|个星期|个月|年)(?:前|后|以前|之前|了)|星期[一二三四五六日天]`)
)

// English words that name a time on their own, that do after "last", "this",
// "next" or "past", that count, and the units they count. "may" and "march"
// are verbs more often than months: they count next to a number or after a
// preposition.
var (
	timeWordSet  = wordSet("yesterday today tonight tomorrow recently lately ago weekend weekends monday tuesday wednesday thursday friday saturday sunday " + strings.NewReplacer("may|", "", "march|", "", "|", " ").Replace(monthNames))
	timeAfterSet = wordSet("night morning afternoon evening week month year weekend summer winter spring fall autumn season time")
	deicticSet   = wordSet("last this next past")
	countSet     = wordSet("a an one two three four five six seven eight nine ten eleven twelve few couple several")
	unitSet      = wordSet("hour hours day days week weeks month months year years decade decades")
	beforeMonth  = wordSet("in since early late mid of")
)

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// asksWhen reports whether q asks when something happened or for how long.
func asksWhen(q string) bool { return asksWhenRe.MatchString(q) }

// namesTime reports whether s names a time: a day, a date, a month, a year, a
// season of the past or next, or a span ("three weeks").
// It reads the words in one pass (a regular expression over them all cost
// 0.15 ms a turn, more than the rest of the fusion).
func namesTime(s string) bool {
	var prev, prev2 string
	cjk := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += size
			continue
		}
		if isCJK(r) {
			cjk = true
			i += size
			continue
		}
		j := i
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if !(unicode.IsLetter(r) || unicode.IsDigit(r)) || isCJK(r) {
				break
			}
			j += size
		}
		w := strings.ToLower(s[i:j])
		i = j
		isNum := w[0] >= '0' && w[0] <= '9'
		switch {
		case timeWordSet[w],
			len(w) == 4 && (strings.HasPrefix(w, "19") || strings.HasPrefix(w, "20")) && isDigits(w),
			deicticSet[prev] && timeAfterSet[w],
			w == "day" && prev == "other" && prev2 == "the",
			(w == "may" || w == "march") && beforeMonth[prev],
			isNum && (prev == "may" || prev == "march"),
			unitSet[w] && (countSet[prev] || isDigits(prev) || prev == "of" && prev2 == "couple"):
			return true
		}
		prev2, prev = prev, w
	}
	return cjk && cjkTimeRe.MatchString(s)
}

func isDigits(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}
