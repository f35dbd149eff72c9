package app_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/engramhq/engram/"

// upper are the packages that compose the system or drive it from outside: the
// composition root, the API, the CLI, the harnesses that run the whole stack
// (bench/, eval, tests/). No other package may import them, not even in its
// tests, so that `go test ./recall` (or any feature package) compiles nothing
// above it and the benchmarks measure the system app.Build wires.
var upper = []string{"app", "server", "mcp", "cmd", "bench", "eval", "tests", "examples"}

func isUpper(rel string) bool {
	for _, u := range upper {
		if rel == u || strings.HasPrefix(rel, u+"/") {
			return true
		}
	}
	return false
}

// TestLayers reads every Go file's imports (tests included) and fails on a
// package below the composition layer that imports one of the upper packages.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "gen") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if isUpper(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) && isUpper(strings.TrimPrefix(p, module)) {
				frel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: a package below the composition layer must not import %v (move the harness under bench/, or pass what it needs in)", frel, p, upper)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("read only %d Go files below the composition layer; the walk from %s is wrong", checked, root)
	}
}
