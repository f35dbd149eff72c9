package recall

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "write the recall statement's golden files anew")

// The recall statement's assembled text, pinned: a change to it shows as a diff
// of testdata/recall_stmt in review. go test ./recall -run TestRecallSQLGolden
// -update writes them anew.
func TestRecallSQLGolden(t *testing.T) {
	parts := map[string]int{"all": partAll, "semantic": partSemantic, "lexical": partLexical, "expand": partExpand}
	shapes := map[string]sqlShape{
		// The default fusion's shape: sessions scored, no context retriever.
		"default": {n: 40, sess: true, lengthNorm: DefaultFusion().KeywordLengthNorm, asked: DefaultFusion().Asked},
		"context": {n: 40, ctx: true, sess: true, lengthNorm: 0.75, asked: 1},
	}
	for sname, sh := range shapes {
		e := &Engine{opts: Options{CandidateLimit: sh.n, Fusion: Fusion{Context: b2f(sh.ctx), Session: b2f(sh.sess), KeywordLengthNorm: sh.lengthNorm, Asked: sh.asked}}}
		for pname, part := range parts {
			if sname != "default" && part != partAll {
				continue // the context shape differs from the default in every part alike
			}
			for _, tm := range []struct {
				name string
				p    plan
			}{{"current", plan{current: true}}, {"past", plan{}}, {"known", plan{knownAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}} {
				name := sname + "_" + tm.name + "_" + pname + ".golden"
				sql, names := e.recallSQL(tm.p, part)
				if known := slices.Contains(names, "known_at"); known != (tm.name == "known") {
					t.Errorf("%s %s %s: binds known_at: %v", sname, tm.name, pname, known)
				}
				got := sql + "\n"
				path := filepath.Join("testdata", "recall_stmt", name)
				if *updateGolden {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (go test ./recall -run TestRecallSQLGolden -update writes it)", err)
				}
				if string(want) != got {
					t.Errorf("%s: the recall statement changed (go test ./recall -run TestRecallSQLGolden -update, then review the diff)", name)
				}
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestBindNames(t *testing.T) {
	got, names := bindNames("SELECT 1 WHERE f.tenant_id = @tenant AND f.search @@ q AND f.valid_from <= @as_of AND @tenant <> ''")
	if want := "SELECT 1 WHERE f.tenant_id = $1 AND f.search @@ q AND f.valid_from <= $2 AND $1 <> ''"; got != want || !slices.Equal(names, []string{"tenant", "as_of"}) {
		t.Errorf("got %q, %v; want %q, [tenant as_of]", got, names, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown name must panic")
		}
	}()
	bindNames("SELECT @tenantt")
}

// The values come in the order of the names.
func TestStmtParamsArgs(t *testing.T) {
	sp := stmtParams{Tenant: "t1", User: "u1", KnownAt: time.Unix(5, 0)}
	args := sp.args([]string{"known_at", "tenant", "query_vector", "user"})
	if len(args) != 4 || args[0] != time.Unix(5, 0) || args[1] != "t1" || args[2] != nil || args[3] != "u1" {
		t.Errorf("args: %v", args)
	}
}
