package main

// --json output: one casing for every command, the API's (protojson's lowerCamelCase
// field names). API messages go through protojson; the operators' own records
// (keys, tombstones, the access log, schema suggestions, benchmark and eval
// figures) are Go structs, whose field names are written the same way.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// printJSON writes an API message in the API's JSON encoding.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printValue writes any other value as indented JSON whose struct field names are
// lowerCamelCase, as protojson writes a message's (map keys are data and stay).
func printValue(w io.Writer, v any) error {
	b, err := json.MarshalIndent(camelJSON(reflect.ValueOf(v)), "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// field is one member of an object, kept in the struct's order.
type field struct {
	name  string
	value any
}

type object []field

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.name)
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// camelJSON is v with every struct turned into an object of lowerCamelCase names
// (a field's json tag name when it has one, its Go name otherwise).
func camelJSON(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.CanInterface() {
		if m, ok := v.Interface().(proto.Message); ok && !(v.Kind() == reflect.Pointer && v.IsNil()) {
			b, err := protojson.Marshal(m)
			if err == nil {
				return json.RawMessage(b)
			}
		}
		if v.Type().Implements(marshaler) && v.Kind() != reflect.Pointer {
			return v.Interface() // time.Time and the like write themselves
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return camelJSON(v.Elem())
	case reflect.Struct:
		o := object{}
		addFields(&o, v)
		return o
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = camelJSON(it.Value())
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface()
		}
		l := make([]any, v.Len())
		for i := range l {
			l[i] = camelJSON(v.Index(i))
		}
		return l
	}
	if v.CanInterface() {
		return v.Interface()
	}
	return nil
}

// addFields appends v's exported fields to o, those of embedded structs inline.
func addFields(o *object, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		fv := v.Field(i)
		if sf.Anonymous && tag == "" {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				addFields(o, fv)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		name := sf.Name
		if tag != "" {
			name = tag
		}
		*o = append(*o, field{lowerCamel(name), camelJSON(fv)})
	}
}

// lowerCamel writes a snake_case or Go field name as protojson writes a field's
// name: tenant_id and TenantID → tenantId, FactIDs → factIds, P95Ms → p95Ms.
func lowerCamel(name string) string {
	var words []string
	if strings.Contains(name, "_") {
		words = strings.FieldsFunc(name, func(r rune) bool { return r == '_' })
	} else {
		words = goWords(name)
	}
	var b strings.Builder
	for i, w := range words {
		w = strings.ToLower(w)
		if i > 0 {
			r := []rune(w)
			r[0] = unicode.ToUpper(r[0])
			w = string(r)
		}
		b.WriteString(w)
	}
	return b.String()
}

// goWords splits a Go identifier at its words: an initialism is one word, and a
// plural one keeps its s (IDs).
func goWords(s string) []string {
	r := []rune(s)
	var words []string
	start := 0
	for i := 1; i < len(r); i++ {
		prev, cur := r[i-1], r[i]
		switch {
		case (unicode.IsLower(prev) || unicode.IsDigit(prev)) && unicode.IsUpper(cur):
			words, start = append(words, string(r[start:i])), i
		case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(r) && unicode.IsLower(r[i+1]):
			// "HTTPServer" → HTTP, Server; but "IDs" (a plural initialism) stays whole.
			if r[i+1] == 's' && (i+2 == len(r) || unicode.IsUpper(r[i+2])) {
				continue
			}
			words, start = append(words, string(r[start:i])), i
		}
	}
	return append(words, string(r[start:]))
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
