package eval

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed suites/*.yaml
var shipped embed.FS

// Shipped returns the suites shipped in eval/suites.
func Shipped() ([]*Suite, error) {
	sub, err := fs.Sub(shipped, "suites")
	if err != nil {
		return nil, err
	}
	return LoadSuites(sub)
}

// Select keeps the suites named (by name or file name); none named keeps all. A
// name that is neither a shipped suite nor a readable file is an error.
func Select(all []*Suite, names []string) ([]*Suite, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []*Suite
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n || strings.TrimSuffix(s.File, ".yaml") == n {
				out = append(out, s)
				found = true
			}
		}
		if found {
			continue
		}
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			s, err := LoadSuiteFile(n)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			continue
		}
		var names []string
		for _, s := range all {
			names = append(names, s.Name)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown suite %q (shipped: %s; or give a path to a .yaml file)", n, strings.Join(names, ", "))
	}
	return out, nil
}
