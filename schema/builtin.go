package schema

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// BuiltinNames lists the embedded schemas, sorted.
func BuiltinNames() []string {
	entries, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Builtin loads an embedded schema: general, customer_service or travel. Each call
// returns a fresh Schema, so callers may not share mutations by accident.
func Builtin(name string) (*Schema, error) {
	src, ok := builtinSource(name)
	if !ok {
		return nil, fmt.Errorf("unknown built-in schema %q (allowed: %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	s, err := Load(src)
	if err != nil {
		return nil, fmt.Errorf("built-in schema %s: %w", name, err)
	}
	return s, nil
}

// BuiltinSource returns the YAML text of an embedded schema, e.g. to show or copy it.
func BuiltinSource(name string) ([]byte, bool) { return builtinSource(name) }

func builtinSource(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, "/\\.") {
		return nil, false
	}
	b, err := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
	return b, err == nil
}
