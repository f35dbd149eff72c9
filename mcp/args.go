package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engramhq/engram/internal/suggest"
)

// strictArgs refuses a tool call whose arguments hold a key the tool does not
// take, naming the key and the closest one it does ("taskID: unknown field; did
// you mean `task_id`?"), as the API refuses an unknown JSON field. The SDK's
// schema check refuses them too, but without saying what was meant.
func (e *engine) strictArgs(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		call, ok := req.(*sdk.CallToolRequest)
		if !ok || call.Params == nil || len(call.Params.Arguments) == 0 {
			return next(ctx, method, req)
		}
		in, ok := e.args[call.Params.Name]
		if !ok {
			return next(ctx, method, req)
		}
		problems := unknownArgs(call.Params.Arguments, in, "")
		if len(problems) == 0 {
			return next(ctx, method, req)
		}
		err := fmt.Errorf("invalid_argument: %s", strings.Join(problems, "; "))
		if e.observe != nil {
			e.observe(call.Params.Name, err, 0)
		}
		res := &sdk.CallToolResult{}
		res.SetError(err)
		return res, nil
	}
}

// unknownArgs describes each key of the JSON object raw (at path) that the
// struct t has no json field for, down through nested structs and lists of
// them; keys in sorted order. A free-form map (a step's input) is not looked into.
func unknownArgs(raw json.RawMessage, t reflect.Type, path string) []string {
	var obj map[string]json.RawMessage
	if t.Kind() != reflect.Struct || json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = t.Field(i).Type
			names = append(names, name)
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		ft, ok := fields[k]
		switch {
		case !ok:
			if s := suggest.Closest(k, names); s != "" {
				out = append(out, fmt.Sprintf("%s: unknown field; did you mean `%s`? (field: %s)", p, s, p))
			} else {
				out = append(out, fmt.Sprintf("%s: unknown field; this tool takes %s (field: %s)", p, strings.Join(names, ", "), p))
			}
		case ft.Kind() == reflect.Slice:
			var items []json.RawMessage
			if json.Unmarshal(obj[k], &items) == nil {
				for i, it := range items {
					out = append(out, unknownArgs(it, ft.Elem(), fmt.Sprintf("%s[%d]", p, i))...)
				}
			}
		default:
			out = append(out, unknownArgs(obj[k], ft, p)...)
		}
	}
	return out
}
