package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/engramhq/engram/internal/suggest"
)

// jsonCodec is Connect's JSON codec with three differences a client can see:
//   - a field the message does not define is an error naming it by its path as
//     the client spelled it, with the closest known field ("event.taskID: unknown
//     field; did you mean `taskId`?"), never silently dropped (which stored a
//     task's budget as the user's, dated now); binary protobuf keeps ignoring
//     unknown fields, so older servers still accept newer clients;
//   - an enum name the API does not define ("scope": "NOT_A_VALUE") is an error
//     naming the field, not silently dropped (which made a filter match
//     everything);
//   - every decode error names where in the body it is: the field's path as the
//     client spelled it ("event.occurredAt"), with line and column.
type jsonCodec struct{ name string }

// JSONCodecs replace Connect's default JSON codecs (both content-type names).
func JSONCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithCodec(jsonCodec{"json"}), connect.WithCodec(jsonCodec{"json; charset=utf-8"})}
}

func (c jsonCodec) Name() string   { return c.name }
func (c jsonCodec) IsBinary() bool { return false }

func (c jsonCodec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (c jsonCodec) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", message)
	}
	return UnmarshalJSON(data, m)
}

// UnmarshalJSON decodes the Connect JSON of m as the API does: strictly, every
// error naming the field's path in data (see jsonCodec). The CLI reads its
// --file lines with it.
func UnmarshalJSON(data []byte, m proto.Message) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("body: is empty; send a JSON object")
	}
	err := protojson.Unmarshal(data, m)
	if err != nil && strings.Contains(err.Error(), "unknown field") {
		if unknown := unknownFields(data, m.ProtoReflect().Descriptor(), ""); len(unknown) > 0 {
			return unknown
		}
	}
	return describeJSONError(data, err)
}

// UnknownField is a key of a JSON object that its message has no field for.
type UnknownField struct {
	Path    string // as the client spelled it: "event.taskID", "events[2].colour"
	Suggest string // the closest known field, in the client's style; "" if none is close
	Known   []string
}

func (u UnknownField) Error() string {
	if u.Suggest != "" {
		return fmt.Sprintf("%s: unknown field; did you mean `%s`?", u.Path, u.Suggest)
	}
	return fmt.Sprintf("%s: unknown field; the known fields here are %s", u.Path, strings.Join(u.Known, ", "))
}

// UnknownFields are all unknown fields of a decode, in the body's order.
type UnknownFields []UnknownField

func (us UnknownFields) Error() string {
	msgs := make([]string, len(us))
	for i, u := range us {
		msgs[i] = u.Error()
	}
	return strings.Join(msgs, "; ")
}

// unknownFields lists the keys of the JSON object data (under path) that md has no
// field for, by JSON or proto name, down through nested messages and lists, in
// the order they appear; well-known types (Timestamp, Struct, …) are not looked
// into. Data that is not a JSON object gives none.
func unknownFields(data []byte, md protoreflect.MessageDescriptor, path string) UnknownFields {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return nil
	}
	var out UnknownFields
	eachMember(data, func(key string, raw json.RawMessage) {
		p := key
		if path != "" {
			p = path + "." + key
		}
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		switch {
		case fd == nil:
			out = append(out, UnknownField{Path: p, Suggest: suggest.Closest(key, knownNames(md)), Known: jsonNames(md)})
		case fd.Message() != nil && fd.IsList():
			var items []json.RawMessage
			if json.Unmarshal(raw, &items) == nil {
				for i, it := range items {
					out = append(out, unknownFields(it, fd.Message(), fmt.Sprintf("%s[%d]", p, i))...)
				}
			}
		case fd.Message() != nil && !fd.IsMap():
			out = append(out, unknownFields(raw, fd.Message(), p)...)
		}
	})
	return out
}

// eachMember calls f with each key and value of the JSON object data, in order.
func eachMember(data []byte, f func(key string, raw json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var raw json.RawMessage
		if err != nil || !ok || dec.Decode(&raw) != nil {
			return
		}
		f(key, raw)
	}
}

// knownNames are md's fields by JSON name, then by proto name where it differs.
func knownNames(md protoreflect.MessageDescriptor) []string {
	names := jsonNames(md)
	for i := 0; i < md.Fields().Len(); i++ {
		if fd := md.Fields().Get(i); string(fd.Name()) != fd.JSONName() {
			names = append(names, string(fd.Name()))
		}
	}
	return names
}

func jsonNames(md protoreflect.MessageDescriptor) []string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = md.Fields().Get(i).JSONName()
	}
	return names
}

var linePos = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// describeJSONError rewrites protojson's error ("proto: (line 1:25): invalid
// value for …") to name the field at that position, keeping the line and column.
func describeJSONError(data []byte, err error) error {
	if err == nil {
		return nil
	}
	// protojson's messages start "proto:" and a non-breaking space.
	msg := strings.TrimLeft(strings.TrimPrefix(err.Error(), "proto:"), " \u00a0")
	loc := linePos.FindStringSubmatchIndex(msg)
	if loc == nil {
		if strings.Contains(msg, "unexpected EOF") {
			if path := jsonPathAt(data, len(data)); path != "" {
				return fmt.Errorf("%s: the body ends inside this field (unexpected EOF)", path)
			}
		}
		return fmt.Errorf("body: %s", msg)
	}
	line, _ := strconv.Atoi(msg[loc[2]:loc[3]])
	col, _ := strconv.Atoi(msg[loc[4]:loc[5]])
	what := strings.Join(strings.Fields(strings.ReplaceAll(msg[:loc[0]]+msg[loc[1]:], " : ", " ")), " ")
	what = strings.TrimSpace(strings.TrimPrefix(what, ":"))
	path := jsonPathAt(data, offsetOf(data, line, col))
	if path == "" {
		path = "body"
	}
	return fmt.Errorf("%s: %s (line %d, column %d)", path, what, line, col)
}

// offsetOf turns protojson's line and column (1-based, columns in characters)
// into a byte offset.
func offsetOf(data []byte, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return len(data)
		}
		off += i + 1
	}
	for c := 1; c < col && off < len(data); c++ {
		_, n := utf8.DecodeRune(data[off:])
		off += n
	}
	return off
}

// jsonPathAt is the path of the field whose value is at byte offset off
// ("events[2].occurredAt"), as far as the JSON before it can be read.
func jsonPathAt(data []byte, off int) string {
	type frame struct {
		obj       bool
		key       string
		idx       int
		expectKey bool
	}
	var st []*frame
	render := func() string {
		var b strings.Builder
		for _, f := range st {
			switch {
			case f.obj && f.key != "":
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			case !f.obj && f.idx >= 0:
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	// startValue notes that a value begins in the innermost container.
	startValue := func() {
		if n := len(st); n > 0 && !st[n-1].obj {
			st[n-1].idx++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path := ""
	for int(dec.InputOffset()) < off {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		top := (*frame)(nil)
		if n := len(st); n > 0 {
			top = st[n-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				startValue()
				st = append(st, &frame{obj: d == '{', idx: -1, expectKey: d == '{'})
			case '}', ']':
				st = st[:len(st)-1]
				if n := len(st); n > 0 && st[n-1].obj {
					st[n-1].expectKey = true
				}
			}
			path = render()
			continue
		}
		if top != nil && top.obj && top.expectKey {
			top.key, _ = tok.(string)
			top.expectKey = false
			path = render()
			continue
		}
		startValue()
		if top != nil && top.obj {
			top.expectKey = true
		}
		path = render()
	}
	return path
}
