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
)

// jsonCodec is Connect's JSON codec with two differences a client can see:
//   - an enum name the API does not define ("scope": "NOT_A_VALUE") is an error
//     naming the field, not silently dropped (which made a filter match
//     everything); unknown fields are still ignored, so older servers accept
//     newer clients;
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
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("body: is empty; send a JSON object")
	}
	err := protojson.Unmarshal(data, m)
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		return describeJSONError(data, err, true)
	}
	// Forward compatibility: fields this server does not know are ignored, and
	// everything else is still decoded strictly (an unknown enum name stays an
	// error).
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // int64 values survive the round trip exactly
	if dec.Decode(&v) != nil {
		return describeJSONError(data, err, true)
	}
	pruned, perr := json.Marshal(pruneUnknown(v, m.ProtoReflect().Descriptor()))
	if perr != nil {
		return describeJSONError(data, err, true)
	}
	proto.Reset(m)
	return describeJSONError(pruned, protojson.Unmarshal(pruned, m), false) // positions in the pruned body would mislead
}

// pruneUnknown drops the object keys md has no field for (by JSON or proto name),
// down through nested messages; well-known types are left as they are.
func pruneUnknown(v any, md protoreflect.MessageDescriptor) any {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return v
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for k, fv := range obj {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByTextName(k)
		}
		if fd == nil {
			delete(obj, k)
			continue
		}
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			if mv, ok := fv.(map[string]any); ok {
				for mk, x := range mv {
					mv[mk] = pruneUnknown(x, fd.MapValue().Message())
				}
			}
		case fd.Message() != nil && fd.IsList():
			if l, ok := fv.([]any); ok {
				for i, x := range l {
					l[i] = pruneUnknown(x, fd.Message())
				}
			}
		case fd.Message() != nil:
			obj[k] = pruneUnknown(fv, fd.Message())
		}
	}
	return obj
}

var linePos = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// describeJSONError rewrites protojson's error ("proto: (line 1:25): invalid
// value for …") to name the field at that position (and, with positions, keep
// the line and column).
func describeJSONError(data []byte, err error, positions bool) error {
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
	if !positions {
		return fmt.Errorf("%s: %s", path, what)
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
