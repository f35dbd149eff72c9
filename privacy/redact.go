// Package privacy holds Engram's data-protection pieces: a PII redactor applied to
// evidence before it is stored and indexed, and an AES-GCM keyring that seals
// content at rest with a key id per row so keys can rotate. It imports only the
// standard library.
package privacy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is a kind of personal data the redactor recognises.
type Kind string

const (
	Email    Kind = "EMAIL"
	Phone    Kind = "PHONE"     // international (+…), North American and Chinese landline formats
	CNMobile Kind = "CN_MOBILE" // 1[3-9]xxxxxxxxx, optionally +86
	CNID     Kind = "CN_ID"     // 18-digit resident identity number with a valid checksum and birth date
	Card     Kind = "CARD"      // 13–19 digit payment card number passing Luhn
	Passport Kind = "PASSPORT"  // a passport number next to the word passport / 护照
	IBAN     Kind = "IBAN"      // an IBAN passing the mod-97 check
)

// AllKinds is every kind, in the order overlapping matches are preferred.
var AllKinds = []Kind{Email, IBAN, CNID, Card, Passport, CNMobile, Phone}

// Match is one piece of personal data found in a text (byte offsets).
type Match struct {
	Kind  Kind   `json:"kind"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	Text  string `json:"-"` // never serialised: it is the personal data
}

// Redactor replaces personal data with a placeholder such as [EMAIL]. It is safe
// for concurrent use.
type Redactor struct {
	kinds map[Kind]bool
}

// NewRedactor redacts the given kinds (all kinds when none is given).
func NewRedactor(kinds ...Kind) *Redactor {
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	r := &Redactor{kinds: map[Kind]bool{}}
	for _, k := range kinds {
		r.kinds[k] = true
	}
	return r
}

// ParseKinds reads a comma-separated list such as "email,phone,cn_id" ("all" for
// every kind).
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		if f == "ALL" {
			return AllKinds, nil
		}
		ok := false
		for _, k := range AllKinds {
			if string(k) == f {
				out, ok = append(out, k), true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown PII kind %q (allowed: all, %s)", f, kindList())
		}
	}
	return out, nil
}

func kindList() string {
	var s []string
	for _, k := range AllKinds {
		s = append(s, strings.ToLower(string(k)))
	}
	return strings.Join(s, ", ")
}

// Placeholder is what replaces a match of kind k.
func Placeholder(k Kind) string { return "[" + string(k) + "]" }

var (
	emailRe = regexp.MustCompile(`[A-Za-z0-9][A-Za-z0-9._%+\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}`)
	// Chinese mobile: optional +86 / 86 prefix, then 1[3-9] and nine digits, possibly
	// grouped 3-4-4.
	cnMobileRe = regexp.MustCompile(`(?:(?:\+|00)?86[\s\-]?)?1[3-9]\d(?:[\s\-]?\d{4}){2}`)
	cnIDRe     = regexp.MustCompile(`\d{17}[\dXx]`)
	cardRe     = regexp.MustCompile(`\d(?:[ \-]?\d){12,18}`)
	// International numbers start with + (or 00) and a country code.
	intlPhoneRe = regexp.MustCompile(`(?:\+|00)[1-9]\d{0,2}(?:[\s\-.]?\(?\d{1,4}\)?){2,5}`)
	// North American (555) 123-4567, 555-123-4567, 555.123.4567 and Chinese landlines
	// 010-12345678, 0755-1234567.
	localPhoneRe = regexp.MustCompile(`\(\d{3}\)\s?\d{3}[\-.\s]\d{4}|\b\d{3}[\-.]\d{3}[\-.]\d{4}\b|0\d{2,3}-\d{7,8}`)
	passportRe   = regexp.MustCompile(`(?i)(?:passport|护照)(?:\s*(?:no\.?|number|#|号码|号))?\s*(?:is|为|是|:|：)?\s*([A-Z]{1,2}\d{6,9}|\d{9})\b`)
	ibanRe       = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,3})?\b`)
)

// Find returns the personal data in s, non-overlapping, in order.
func (r *Redactor) Find(s string) []Match {
	var all []Match
	add := func(k Kind, start, end int) {
		if r.kinds[k] {
			all = append(all, Match{Kind: k, Start: start, End: end, Text: s[start:end]})
		}
	}
	for _, m := range emailRe.FindAllStringIndex(s, -1) {
		add(Email, m[0], m[1])
	}
	for _, m := range ibanRe.FindAllStringIndex(s, -1) {
		if validIBAN(s[m[0]:m[1]]) {
			add(IBAN, m[0], m[1])
		}
	}
	for _, m := range cnIDRe.FindAllStringIndex(s, -1) {
		if digitBounded(s, m[0], m[1]) && validCNID(s[m[0]:m[1]]) {
			add(CNID, m[0], m[1])
		}
	}
	for _, m := range cardRe.FindAllStringIndex(s, -1) {
		if digitBounded(s, m[0], m[1]) && luhn(s[m[0]:m[1]]) && !sameSeparatorDate(s[m[0]:m[1]]) {
			add(Card, m[0], m[1])
		}
	}
	for _, m := range passportRe.FindAllStringSubmatchIndex(s, -1) {
		add(Passport, m[2], m[3])
	}
	for _, m := range cnMobileRe.FindAllStringIndex(s, -1) {
		if digitBounded(s, m[0], m[1]) {
			add(CNMobile, m[0], m[1])
		}
	}
	for _, m := range intlPhoneRe.FindAllStringIndex(s, -1) {
		start, end := m[0], trimPhoneEnd(s, m[0], m[1])
		if n := countDigits(s[start:end]); n >= 8 && n <= 15 && digitBounded(s, start, end) {
			add(Phone, start, end)
		}
	}
	for _, m := range localPhoneRe.FindAllStringIndex(s, -1) {
		if digitBounded(s, m[0], m[1]) {
			add(Phone, m[0], m[1])
		}
	}
	// Prefer the earliest, then the longest, then the kind listed first.
	rank := map[Kind]int{}
	for i, k := range AllKinds {
		rank[k] = i
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Start != all[j].Start {
			return all[i].Start < all[j].Start
		}
		if li, lj := all[i].End-all[i].Start, all[j].End-all[j].Start; li != lj {
			return li > lj
		}
		return rank[all[i].Kind] < rank[all[j].Kind]
	})
	var out []Match
	end := 0
	for _, m := range all {
		if m.Start < end {
			continue
		}
		out = append(out, m)
		end = m.End
	}
	return out
}

// Redact returns s with every match replaced by its placeholder, and the matches.
func (r *Redactor) Redact(s string) (string, []Match) {
	ms := r.Find(s)
	if len(ms) == 0 {
		return s, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m.Start])
		b.WriteString(Placeholder(m.Kind))
		last = m.End
	}
	b.WriteString(s[last:])
	return b.String(), ms
}

// digitBounded reports whether s[start:end] is not part of a longer run of digits
// or letters-and-digits (an order number, a hash).
func digitBounded(s string, start, end int) bool {
	if start > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:start])
		if unicode.IsDigit(r) || r == '+' || (r < 128 && unicode.IsLetter(r)) {
			return false
		}
	}
	if end < len(s) {
		r, _ := utf8.DecodeRuneInString(s[end:])
		if unicode.IsDigit(r) || (r < 128 && unicode.IsLetter(r)) {
			return false
		}
	}
	return true
}

func trimPhoneEnd(s string, start, end int) int {
	for end > start {
		r, size := utf8.DecodeLastRuneInString(s[:end])
		if unicode.IsDigit(r) {
			break
		}
		end -= size
	}
	return end
}

func countDigits(s string) int {
	n := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			n++
		}
	}
	return n
}

func digitsOf(s string) []int {
	var d []int
	for _, r := range s {
		if r >= '0' && r <= '9' {
			d = append(d, int(r-'0'))
		}
	}
	return d
}

func luhn(s string) bool {
	d := digitsOf(s)
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	allSame := true
	for _, x := range d {
		if x != d[0] {
			allSame = false
		}
	}
	if allSame {
		return false // 0000000000000 is a placeholder, not a card
	}
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		x := d[i]
		if (len(d)-1-i)%2 == 1 {
			x *= 2
			if x > 9 {
				x -= 9
			}
		}
		sum += x
	}
	return sum%10 == 0
}

// sameSeparatorDate rejects runs such as "2024-05-01 2024-06-01" that happen to pass
// Luhn: a card is never written with a date's separators in date positions.
func sameSeparatorDate(s string) bool { return datePrefixRe.MatchString(s) }

var datePrefixRe = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)

var cnIDWeights = []int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}

const cnIDCheck = "10X98765432"

func validCNID(s string) bool {
	if len(s) != 18 {
		return false
	}
	sum := 0
	for i := 0; i < 17; i++ {
		sum += int(s[i]-'0') * cnIDWeights[i]
	}
	if strings.ToUpper(string(s[17])) != string(cnIDCheck[sum%11]) {
		return false
	}
	// Region code starts 1–8; birth date yyyymmdd from 1900.
	if s[0] < '1' || s[0] > '8' {
		return false
	}
	y := atoi(s[6:10])
	m := atoi(s[10:12])
	d := atoi(s[12:14])
	return y >= 1900 && y <= 2100 && m >= 1 && m <= 12 && d >= 1 && d <= 31
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

var ibanLengths = map[string]int{"AD": 24, "AT": 20, "BE": 16, "CH": 21, "CZ": 24, "DE": 22, "DK": 18, "ES": 24, "FI": 18, "FR": 27,
	"GB": 22, "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IT": 27, "LU": 20, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "SE": 24, "SK": 24}

func validIBAN(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if want, ok := ibanLengths[s[:2]]; ok && len(s) != want {
		return false
	}
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	r := s[4:] + s[:4]
	mod := 0
	for _, c := range r {
		var v int
		switch {
		case c >= '0' && c <= '9':
			v = int(c - '0')
			mod = (mod*10 + v) % 97
			continue
		case c >= 'A' && c <= 'Z':
			v = int(c-'A') + 10
		default:
			return false
		}
		mod = (mod*100 + v) % 97
	}
	return mod == 1
}
