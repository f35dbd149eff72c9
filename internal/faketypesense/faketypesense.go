// Package faketypesense is a local stand-in for a Typesense server. No Typesense
// server can be installed or run on the development machines, so the adapter in
// search/typesense is tested against this in-memory HTTP server instead; the
// adapter has NOT been run against a real Typesense here.
//
// It speaks only the part of the Typesense HTTP API the adapter uses:
//
//	POST   /collections                              create (409 when it exists)
//	GET    /collections/{name}                       retrieve (404 when missing)
//	POST   /collections/{name}/documents/import      JSONL, action=create|upsert
//	GET    /collections/{name}/documents/search      q, query_by, filter_by, sort_by, per_page, page, include_fields
//	DELETE /collections/{name}/documents/{id}        delete one (404 when missing)
//	DELETE /collections/{name}/documents?filter_by=  delete by filter
//
// filter_by understands field:=value, field:value, field:!=value, field:[a,b],
// field:=[a,b], numeric <, <=, >, >=, backtick-quoted values, &&, || and
// parentheses. Text matching is naive on purpose: lowercase words, and for CJK
// every character and every bigram, so "订单" finds "我的订单没到" as it would under
// Typesense's zh locale. A document matches when at least one query token is in
// one of the query_by fields; its text_match is the number of distinct query
// tokens found. Real Typesense ranks, segments, stems and tolerates typos
// differently; tests must not depend on more than "found / not found / tenant
// and filter respected / better match first".
package faketypesense

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// Server is the fake; Close it when done.
type Server struct {
	URL    string
	APIKey string

	srv *httptest.Server

	mu          sync.Mutex
	collections map[string]*collection
	failNext    int // requests left to fail
	failStatus  int
	failAlways  bool
	requests    map[string]int // "METHOD /path-kind" → count
}

type field struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Facet    *bool   `json:"facet,omitempty"`
	Optional *bool   `json:"optional,omitempty"`
	Index    *bool   `json:"index,omitempty"`
	Sort     *bool   `json:"sort,omitempty"`
	Locale   *string `json:"locale,omitempty"`
}

type schema struct {
	Name   string  `json:"name"`
	Fields []field `json:"fields"`
}

type collection struct {
	schema schema
	fields map[string]field
	docs   map[string]map[string]any
}

// New starts a fake that requires apiKey in X-TYPESENSE-API-KEY.
func New(apiKey string) *Server {
	s := &Server{APIKey: apiKey, collections: map[string]*collection{}, requests: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// FailNext makes the next n requests answer status (e.g. 500, 503).
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failStatus = n, status
}

// SetFailing makes every request answer 500 until called with false.
func (s *Server) SetFailing(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAlways, s.failStatus = on, http.StatusInternalServerError
}

// Requests returns how many requests of a kind were served, kind being one of
// "create", "retrieve", "import", "search", "delete", "delete_by_filter".
func (s *Server) Requests(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[kind]
}

// Docs returns a copy of the documents of a collection, by id.
func (s *Server) Docs(coll string) map[string]map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]any{}
	if c, ok := s.collections[coll]; ok {
		for id, d := range c.docs {
			cp := map[string]any{}
			for k, v := range d {
				cp[k] = v
			}
			out[id] = cp
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-TYPESENSE-API-KEY") != s.APIKey {
		fail(w, http.StatusUnauthorized, "Forbidden - a valid `x-typesense-api-key` header must be sent.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAlways || s.failNext > 0 {
		if s.failNext > 0 {
			s.failNext--
		}
		fail(w, s.failStatus, "injected failure")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	switch {
	case len(parts) == 1 && parts[0] == "collections" && r.Method == http.MethodPost:
		s.requests["create"]++
		s.createCollection(w, r)
	case len(parts) == 2 && parts[0] == "collections" && r.Method == http.MethodGet:
		s.requests["retrieve"]++
		c, ok := s.collections[parts[1]]
		if !ok {
			fail(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, s.describe(c))
	case len(parts) == 4 && parts[0] == "collections" && parts[2] == "documents" && parts[3] == "import" && r.Method == http.MethodPost:
		s.requests["import"]++
		s.withCollection(w, parts[1], func(c *collection) { s.importDocs(w, r, c) })
	case len(parts) == 4 && parts[0] == "collections" && parts[2] == "documents" && parts[3] == "search" && r.Method == http.MethodGet:
		s.requests["search"]++
		s.withCollection(w, parts[1], func(c *collection) { s.search(w, r, c) })
	case len(parts) == 3 && parts[0] == "collections" && parts[2] == "documents" && r.Method == http.MethodDelete:
		s.requests["delete_by_filter"]++
		s.withCollection(w, parts[1], func(c *collection) { s.deleteByFilter(w, r, c) })
	case len(parts) == 4 && parts[0] == "collections" && parts[2] == "documents" && r.Method == http.MethodDelete:
		s.requests["delete"]++
		s.withCollection(w, parts[1], func(c *collection) {
			d, ok := c.docs[parts[3]]
			if !ok {
				fail(w, http.StatusNotFound, "Could not find a document with id: "+parts[3])
				return
			}
			delete(c.docs, parts[3])
			writeJSON(w, http.StatusOK, d)
		})
	default:
		fail(w, http.StatusNotFound, fmt.Sprintf("the fake does not implement %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) withCollection(w http.ResponseWriter, name string, fn func(*collection)) {
	c, ok := s.collections[name]
	if !ok {
		fail(w, http.StatusNotFound, "Could not find a collection named `"+name+"`.")
		return
	}
	fn(c)
}

func (s *Server) describe(c *collection) map[string]any {
	return map[string]any{"name": c.schema.Name, "fields": c.schema.Fields, "num_documents": len(c.docs), "created_at": 1}
}

var fieldTypes = map[string]bool{"string": true, "int32": true, "int64": true, "float": true, "bool": true, "string[]": true}

func (s *Server) createCollection(w http.ResponseWriter, r *http.Request) {
	var sc schema
	if err := json.NewDecoder(r.Body).Decode(&sc); err != nil || sc.Name == "" {
		fail(w, http.StatusBadRequest, "bad collection schema")
		return
	}
	if _, ok := s.collections[sc.Name]; ok {
		fail(w, http.StatusConflict, "A collection with name `"+sc.Name+"` already exists.")
		return
	}
	c := &collection{schema: sc, fields: map[string]field{}, docs: map[string]map[string]any{}}
	for _, f := range sc.Fields {
		if !fieldTypes[f.Type] {
			fail(w, http.StatusBadRequest, "Field `"+f.Name+"` has an invalid data type `"+f.Type+"`")
			return
		}
		c.fields[f.Name] = f
	}
	s.collections[sc.Name] = c
	writeJSON(w, http.StatusCreated, s.describe(c))
}

// checkDoc applies the schema the way Typesense does: required fields present and
// of their declared type.
func (c *collection) checkDoc(d map[string]any) error {
	id, ok := d["id"].(string)
	if !ok || id == "" {
		return fmt.Errorf("Document's `id` field should be a string.")
	}
	for _, f := range c.schema.Fields {
		v, present := d[f.Name]
		if !present || v == nil {
			if f.Optional != nil && *f.Optional {
				continue
			}
			return fmt.Errorf("Field `%s` has been declared in the schema, but is not found in the document.", f.Name)
		}
		switch f.Type {
		case "string":
			if _, ok := v.(string); !ok {
				return fmt.Errorf("Field `%s` must be a string.", f.Name)
			}
		case "int32", "int64":
			n, ok := v.(float64)
			if !ok || n != math.Trunc(n) {
				return fmt.Errorf("Field `%s` must be an %s.", f.Name, f.Type)
			}
		case "float":
			if _, ok := v.(float64); !ok {
				return fmt.Errorf("Field `%s` must be a float.", f.Name)
			}
		case "bool":
			if _, ok := v.(bool); !ok {
				return fmt.Errorf("Field `%s` must be a bool.", f.Name)
			}
		}
	}
	return nil
}

func (s *Server) importDocs(w http.ResponseWriter, r *http.Request, c *collection) {
	action := r.URL.Query().Get("action")
	if action == "" {
		action = "create"
	}
	if action != "create" && action != "upsert" {
		fail(w, http.StatusBadRequest, "the fake supports action=create|upsert, not "+action)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		res := map[string]any{"success": true}
		var d map[string]any
		if err := json.Unmarshal(line, &d); err != nil {
			res = map[string]any{"success": false, "error": "Bad JSON.", "document": string(line)}
		} else if err := c.checkDoc(d); err != nil {
			res = map[string]any{"success": false, "error": err.Error(), "document": string(line)}
		} else if _, exists := c.docs[d["id"].(string)]; exists && action == "create" {
			res = map[string]any{"success": false, "error": "A document with id " + d["id"].(string) + " already exists.", "document": string(line)}
		} else {
			c.docs[d["id"].(string)] = d
		}
		b, _ := json.Marshal(res)
		out.Write(b)
		out.WriteByte('\n')
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(bytes.TrimRight(out.Bytes(), "\n"))
}

// Tokens splits text the naive way described in the package comment.
func Tokens(s string) []string {
	var out []string
	var word []rune
	var cjk []rune
	flushWord := func() {
		if len(word) > 0 {
			out = append(out, strings.ToLower(string(word)))
			word = word[:0]
		}
	}
	flushCJK := func() {
		for i, r := range cjk {
			out = append(out, string(r))
			if i+1 < len(cjk) {
				out = append(out, string(cjk[i:i+2]))
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range s {
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushCJK()
			word = append(word, r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

type hit struct {
	doc   map[string]any
	score int64
}

func (s *Server) search(w http.ResponseWriter, r *http.Request, c *collection) {
	qv := r.URL.Query()
	q := qv.Get("q")
	queryBy := splitList(qv.Get("query_by"))
	if len(queryBy) == 0 {
		fail(w, http.StatusBadRequest, "Parameter `query_by` is required.")
		return
	}
	for _, f := range queryBy {
		fd, ok := c.fields[f]
		if !ok || fd.Type != "string" {
			fail(w, http.StatusBadRequest, "Could not find a field named `"+f+"` in the schema.")
			return
		}
	}
	var filter node
	if fb := qv.Get("filter_by"); fb != "" {
		var err error
		if filter, err = parseFilter(fb, c); err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	perPage, page := 10, 1
	if v := qv.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 250 {
			fail(w, http.StatusUnprocessableEntity, "Only upto 250 hits can be fetched per page.")
			return
		}
		perPage = n
	}
	if v := qv.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, "bad page")
			return
		}
		page = n
	}
	var sorts []sortKey
	if v := qv.Get("sort_by"); v != "" {
		var err error
		if sorts, err = parseSort(v, c); err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	qTokens := uniq(Tokens(q))
	wildcard := strings.TrimSpace(q) == "*"
	var hits []hit
	for _, d := range c.docs {
		if filter != nil && !filter.eval(d) {
			continue
		}
		var score int64
		if !wildcard {
			have := map[string]bool{}
			for _, f := range queryBy {
				if sv, ok := d[f].(string); ok {
					for _, t := range Tokens(sv) {
						have[t] = true
					}
				}
			}
			for _, t := range qTokens {
				if have[t] {
					score++
				}
			}
			if score == 0 {
				continue
			}
		}
		hits = append(hits, hit{doc: d, score: score})
	}
	if len(sorts) == 0 {
		sorts = []sortKey{{field: "_text_match", desc: true}}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		for _, k := range sorts {
			var a, b float64
			if k.field == "_text_match" {
				a, b = float64(hits[i].score), float64(hits[j].score)
			} else {
				a, _ = hits[i].doc[k.field].(float64)
				b, _ = hits[j].doc[k.field].(float64)
			}
			if a != b {
				return (a > b) == k.desc
			}
		}
		return hits[i].doc["id"].(string) < hits[j].doc["id"].(string)
	})
	include := splitList(qv.Get("include_fields"))
	start := (page - 1) * perPage
	outHits := []map[string]any{}
	for i := start; i < len(hits) && i < start+perPage; i++ {
		doc := hits[i].doc
		if len(include) > 0 {
			doc = map[string]any{}
			for _, f := range include {
				if v, ok := hits[i].doc[f]; ok {
					doc[f] = v
				}
			}
		}
		outHits = append(outHits, map[string]any{"document": doc, "text_match": hits[i].score, "highlights": []any{}})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"found": len(hits), "out_of": len(c.docs), "page": page, "search_time_ms": 0, "hits": outHits,
		"request_params": map[string]any{"collection_name": c.schema.Name, "per_page": perPage, "q": q},
	})
}

func (s *Server) deleteByFilter(w http.ResponseWriter, r *http.Request, c *collection) {
	fb := r.URL.Query().Get("filter_by")
	if fb == "" {
		fail(w, http.StatusBadRequest, "Parameter `filter_by` must be provided.")
		return
	}
	filter, err := parseFilter(fb, c)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	n := 0
	for id, d := range c.docs {
		if filter.eval(d) {
			delete(c.docs, id)
			n++
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"num_deleted": n})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range in {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

type sortKey struct {
	field string
	desc  bool
}

func parseSort(s string, c *collection) ([]sortKey, error) {
	var out []sortKey
	for _, p := range splitList(s) {
		name, dir, ok := strings.Cut(p, ":")
		if !ok || (dir != "asc" && dir != "desc") {
			return nil, fmt.Errorf("Bad syntax for sorting field `%s`", p)
		}
		if name != "_text_match" {
			f, ok := c.fields[name]
			if !ok || (f.Type != "int32" && f.Type != "int64" && f.Type != "float") {
				return nil, fmt.Errorf("Could not find a field named `%s` in the schema for sorting.", name)
			}
		}
		out = append(out, sortKey{field: name, desc: dir == "desc"})
	}
	return out, nil
}

// ---- filter_by ----

type node interface{ eval(d map[string]any) bool }

type andNode struct{ l, r node }
type orNode struct{ l, r node }

func (n andNode) eval(d map[string]any) bool { return n.l.eval(d) && n.r.eval(d) }
func (n orNode) eval(d map[string]any) bool  { return n.l.eval(d) || n.r.eval(d) }

type cond struct {
	field   string
	op      string // "=", "!=", ":", "<", "<=", ">", ">="
	values  []string
	numeric bool
}

func (c cond) eval(d map[string]any) bool {
	v, ok := d[c.field]
	if !ok || v == nil {
		return c.op == "!="
	}
	if c.numeric {
		n, ok := v.(float64)
		if !ok {
			return false
		}
		if c.op == "!=" {
			for _, s := range c.values {
				if x, _ := strconv.ParseFloat(s, 64); n == x {
					return false
				}
			}
			return true
		}
		for _, s := range c.values {
			x, _ := strconv.ParseFloat(s, 64)
			switch {
			case (c.op == "=" || c.op == ":") && n == x,
				c.op == "<" && n < x, c.op == "<=" && n <= x,
				c.op == ">" && n > x, c.op == ">=" && n >= x:
				return true
			}
		}
		return false
	}
	sv, ok := v.(string)
	if !ok {
		return false
	}
	switch c.op {
	case "=":
		for _, x := range c.values {
			if sv == x {
				return true
			}
		}
		return false
	case "!=":
		for _, x := range c.values {
			if sv == x {
				return false
			}
		}
		return true
	default: // ":" token match
		toks := map[string]bool{}
		for _, t := range Tokens(sv) {
			toks[t] = true
		}
		for _, x := range c.values {
			all := true
			for _, t := range Tokens(x) {
				if !toks[t] {
					all = false
				}
			}
			if all && len(Tokens(x)) > 0 {
				return true
			}
		}
		return false
	}
}

type parser struct {
	s   string
	pos int
	c   *collection
}

func parseFilter(s string, c *collection) (node, error) {
	p := &parser{s: s, c: c}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("Could not parse the filter query: unexpected %q at %d.", p.s[p.pos:], p.pos)
	}
	return n, nil
}

func (p *parser) space() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *parser) eat(tok string) bool {
	p.space()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.eat("||") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = orNode{l, r}
	}
	return l, nil
}

func (p *parser) and() (node, error) {
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.eat("&&") {
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		l = andNode{l, r}
	}
	return l, nil
}

func (p *parser) term() (node, error) {
	if p.eat("(") {
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("Could not parse the filter query: missing `)`.")
		}
		return n, nil
	}
	p.space()
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] != ':' {
		p.pos++
	}
	if p.pos >= len(p.s) {
		return nil, fmt.Errorf("Could not parse the filter query.")
	}
	name := strings.TrimSpace(p.s[start:p.pos])
	p.pos++ // ':'
	f, ok := p.c.fields[name]
	if !ok {
		return nil, fmt.Errorf("Could not find a filter field named `%s` in the schema.", name)
	}
	cd := cond{field: name, op: ":", numeric: f.Type == "int32" || f.Type == "int64" || f.Type == "float"}
	for _, op := range []string{"!=", "<=", ">=", "=", "<", ">"} {
		if strings.HasPrefix(p.s[p.pos:], op) {
			cd.op = op
			p.pos += len(op)
			break
		}
	}
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] == '[' {
		p.pos++
		for {
			v, err := p.value(true)
			if err != nil {
				return nil, err
			}
			cd.values = append(cd.values, v)
			p.space()
			if p.pos < len(p.s) && p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.s) && p.s[p.pos] == ']' {
				p.pos++
				break
			}
			return nil, fmt.Errorf("Could not parse the filter query: unterminated list.")
		}
	} else {
		v, err := p.value(false)
		if err != nil {
			return nil, err
		}
		cd.values = []string{v}
	}
	if cd.numeric {
		for _, v := range cd.values {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("Error with filter field `%s`: Not an int64.", name)
			}
		}
	} else if cd.op != ":" && cd.op != "=" && cd.op != "!=" {
		return nil, fmt.Errorf("Error with filter field `%s`: range operators need a numerical field.", name)
	}
	return cd, nil
}

func (p *parser) value(inList bool) (string, error) {
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] == '`' {
		end := strings.IndexByte(p.s[p.pos+1:], '`')
		if end < 0 {
			return "", fmt.Errorf("Could not parse the filter query: unbalanced backtick.")
		}
		v := p.s[p.pos+1 : p.pos+1+end]
		p.pos += end + 2
		return v, nil
	}
	start := p.pos
	for p.pos < len(p.s) {
		ch := p.s[p.pos]
		if ch == ' ' || ch == ')' || (inList && (ch == ',' || ch == ']')) || strings.HasPrefix(p.s[p.pos:], "&&") || strings.HasPrefix(p.s[p.pos:], "||") {
			break
		}
		p.pos++
	}
	if p.pos == start {
		return "", fmt.Errorf("Could not parse the filter query: empty value.")
	}
	return p.s[start:p.pos], nil
}
