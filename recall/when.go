package recall

import (
	"regexp"
	"strconv"
	"strings"
	"time"
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
