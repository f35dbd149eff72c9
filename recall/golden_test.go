package recall

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
				name := sname + "_" + tm.name + "_" + pname + ".sql"
				sql, n := e.recallSQL(tm.p, part)
				if want := map[bool]int{true: 24, false: 23}[tm.name == "known"]; n != want {
					t.Errorf("%s %s: binds %d parameters, want %d", sname, tm.name, n, want)
				}
				for i := 1; i <= n; i++ { // Postgres types a parameter by its use
					if !regexp.MustCompile(`\$` + strconv.Itoa(i) + `\b`).MatchString(sql) {
						t.Errorf("%s %s %s: $%d is never used", sname, tm.name, pname, i)
					}
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
	got, n := bindNames("SELECT 1 WHERE f.tenant_id = @tenant AND f.search @@ q AND f.valid_from <= @as_of AND @tenant <> ''")
	if want := "SELECT 1 WHERE f.tenant_id = $1 AND f.search @@ q AND f.valid_from <= $9 AND $1 <> ''"; got != want || n != 9 {
		t.Errorf("got %q, %d; want %q, 9", got, n, want)
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
	args := sp.args(24)
	if args[0] != "t1" || args[1] != "u1" || args[23] != time.Unix(5, 0) || args[9] != nil {
		t.Errorf("args: %v", args)
	}
	if len(sp.args(23)) != 23 {
		t.Error("args(23)")
	}
}
