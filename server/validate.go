package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/engramhq/engram/memory"
)

// Limits every request string is held to before a handler runs, so nothing that
// can never be stored (a NUL byte Postgres refuses, an id longer than a btree row
// or a Temporal search attribute allows) is accepted and then fails later.
const (
	// MaxIDBytes bounds identifiers and labels: user, session, task, agent and
	// department ids, idempotency keys, schema names, predicates, step names.
	MaxIDBytes = 256
	// MaxLocatorBytes bounds an event's locator (a message id, URL or path).
	MaxLocatorBytes = 1024
	// MaxTextBytes bounds free text other than an event's content and a schema's
	// source, which have their own limits (64 KiB; the request size).
	MaxTextBytes = 16 << 10
)

// textFields are free text: tabs and line breaks are allowed, other control
// characters are not. Every other string is an identifier or label, which may
// hold no control character at all.
var textFields = map[protoreflect.Name]bool{
	"content": true, "query": true, "reason": true, "note": true, "goal": true, "edited_value": true,
	"description": true, "object": true,
}

// NewValidateInterceptor checks every string, enum and Struct of a request
// before the handler sees it: valid UTF-8, no NUL or other control characters
// (tabs and line breaks allowed in free text), lengths within the limits above,
// and enum values the API defines (an unknown name or number is an error, never
// silently dropped). The error is INVALID_ARGUMENT naming the field's path, e.g.
// "events[2].user_id".
func NewValidateInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().IsClient {
				return next(ctx, req)
			}
			if m, ok := req.Any().(proto.Message); ok {
				if err := checkMessage(m.ProtoReflect(), ""); err != nil {
					return nil, fieldErr(err.Field, err.Problem)
				}
			}
			return next(ctx, req)
		}
	}
}

func join(path string, name protoreflect.Name) string {
	if path == "" {
		return string(name)
	}
	return path + "." + string(name)
}

func checkMessage(m protoreflect.Message, path string) *memory.FieldError {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return checkJSONValue(m, path)
	}
	var bad *memory.FieldError
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := join(path, fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && bad == nil; i++ {
				bad = checkValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				kp := fmt.Sprintf("%s[%q]", p, k.String())
				if bad = checkString(fd.MapKey(), k.String(), kp); bad == nil {
					bad = checkValue(fd.MapValue(), mv, kp)
				}
				return bad == nil
			})
		default:
			bad = checkValue(fd, v, p)
		}
		return bad == nil
	})
	return bad
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) *memory.FieldError {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return checkString(fd, v.String(), path)
	case protoreflect.EnumKind:
		if fd.Enum().Values().ByNumber(v.Enum()) == nil {
			return &memory.FieldError{Field: path, Problem: fmt.Sprintf("%d is not a value of %s", v.Enum(), fd.Enum().Name())}
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v.Message(), path)
	}
	return nil
}

func checkString(fd protoreflect.FieldDescriptor, s, path string) *memory.FieldError {
	limit, text := MaxIDBytes, false
	switch name := fd.Name(); {
	case name == "content" || (name == "source" && fd.ContainingMessage().Name() == "PutSchemaRequest"):
		limit, text = 0, true // bounded by their own limits and the request size
	case name == "locator":
		limit = MaxLocatorBytes
	case textFields[name]:
		limit, text = MaxTextBytes, true
	}
	return checkText(s, path, limit, text)
}

// checkText is the rule for one string: valid UTF-8, no NUL, no control
// characters (text allows tab, line feed and carriage return), at most limit
// bytes (0: no limit here).
func checkText(s, path string, limit int, text bool) *memory.FieldError {
	if !utf8.ValidString(s) {
		return &memory.FieldError{Field: path, Problem: "is not valid UTF-8"}
	}
	if limit > 0 && len(s) > limit {
		return &memory.FieldError{Field: path, Problem: fmt.Sprintf("is %d bytes, the limit is %d", len(s), limit)}
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return r == 0 || (r < 0x20 || r == 0x7f) && !(text && (r == '\t' || r == '\n' || r == '\r'))
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		if r == 0 {
			return &memory.FieldError{Field: path, Problem: fmt.Sprintf("contains a NUL byte (at byte %d)", i)}
		}
		return &memory.FieldError{Field: path, Problem: fmt.Sprintf("contains the control character U+%04X (at byte %d)", r, i)}
	}
	return nil
}

// checkJSONValue walks a google.protobuf.Struct, Value or ListValue (an event's
// payload, a candidate's attributes) with JSON paths: keys and strings may not
// hold NUL (Postgres jsonb cannot store it) and must be valid UTF-8.
func checkJSONValue(m protoreflect.Message, path string) *memory.FieldError {
	d := m.Descriptor()
	switch d.FullName() {
	case "google.protobuf.Struct":
		var bad *memory.FieldError
		m.Get(d.Fields().ByName("fields")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			p := join(path, protoreflect.Name(k.String()))
			if bad = checkText(k.String(), p, MaxIDBytes, false); bad == nil {
				bad = checkJSONValue(v.Message(), p)
			}
			return bad == nil
		})
		return bad
	case "google.protobuf.ListValue":
		l := m.Get(d.Fields().ByName("values")).List()
		for i := 0; i < l.Len(); i++ {
			if bad := checkJSONValue(l.Get(i).Message(), fmt.Sprintf("%s[%d]", path, i)); bad != nil {
				return bad
			}
		}
		return nil
	}
	od := d.Oneofs().ByName("kind")
	fd := m.WhichOneof(od)
	if fd == nil {
		return nil
	}
	v := m.Get(fd)
	switch fd.Name() {
	case "string_value":
		return checkText(v.String(), path, 0, true)
	case "struct_value", "list_value":
		return checkJSONValue(v.Message(), path)
	}
	return nil
}

// CheckRequest applies the interceptor's rules to a request built in process
// (the MCP tools call the handlers directly, not through the interceptors): nil,
// or INVALID_ARGUMENT naming the field.
func CheckRequest(m proto.Message) error {
	if err := checkMessage(m.ProtoReflect(), ""); err != nil {
		return fieldErr(err.Field, err.Problem)
	}
	return nil
}
