// Package testenv gives tests the real parts: a freshly migrated Postgres database
// (cloned from a migrated template, so each test starts empty) and a client of the
// running Temporal dev server. Both come from the stack that scripts/test brings
// up; a test fails, never skips, when they are missing.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/storage/migrations"
)

const hint = "run the tests through `make test` (scripts/test brings the stack up), or `eval \"$(scripts/stack env)\"` first"

// DatabaseURL returns ENGRAM_DATABASE_URL or fails the test.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("ENGRAM_DATABASE_URL")
	if u == "" {
		t.Fatalf("ENGRAM_DATABASE_URL is not set: %s", hint)
	}
	return u
}

func withDB(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

func templateName() string {
	// The fingerprint covers the migrations' content, so editing a migration
	// rebuilds the template instead of reusing a stale one.
	h := sha256.New()
	for _, m := range migrations.Migrations.Sorted() {
		h.Write([]byte(m.Name))
		entries, _ := fs.Glob(migrations.Files, m.Name+"*.sql")
		for _, e := range entries {
			b, _ := fs.ReadFile(migrations.Files, e)
			h.Write(b)
		}
	}
	return "engram_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
}

var (
	tmplOnce sync.Once
	tmplErr  error
)

func exec(ctx context.Context, dsn string, stmts ...string) error {
	db := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// ensureTemplate creates and migrates the template database once per machine and
// set of migrations. Packages run in parallel, so creation is guarded by an
// advisory lock held on the admin connection.
func ensureTemplate(ctx context.Context, base string) error {
	tmplOnce.Do(func() {
		name := templateName()
		admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(base)))
		defer admin.Close()
		conn, err := admin.Conn(ctx)
		if err != nil {
			tmplErr = err
			return
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
			tmplErr = err
			return
		}
		defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(4242)") //nolint:errcheck
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			tmplErr = err
			return
		}
		if n == 1 {
			return
		}
		building := name + "_build"
		if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
			tmplErr = err
			return
		}
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+building); err != nil {
			tmplErr = err
			return
		}
		st, err := storage.Open(ctx, withDB(base, building))
		if err != nil {
			tmplErr = err
			return
		}
		if _, err := st.Migrate(ctx); err != nil {
			st.Close()
			tmplErr = err
			return
		}
		st.Close()
		_, tmplErr = conn.ExecContext(ctx, "ALTER DATABASE "+building+" RENAME TO "+name)
	})
	return tmplErr
}

// Store returns a Store on a new, migrated, empty database that is dropped when the
// test ends.
func Store(t testing.TB) *storage.Store {
	t.Helper()
	s, _ := StoreURL(t)
	return s
}

// StoreURL is Store and also returns the database URL (for child processes).
func StoreURL(t testing.TB) (*storage.Store, string) {
	t.Helper()
	base := DatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ensureTemplate(ctx, base); err != nil {
		t.Fatalf("prepare template database: %v", err)
	}
	name := "engram_t_" + RandomID(10)
	var err error
	for i := 0; i < 20; i++ { // CREATE DATABASE fails while another clone copies the template
		if err = exec(ctx, base, "CREATE DATABASE "+name+" TEMPLATE "+templateName()); err == nil {
			break
		}
		if !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(time.Duration(100+i*50) * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	dsn := withDB(base, name)
	st, err := storage.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() {
		st.Close()
		dropDatabase(t, base, name)
	})
	return st, dsn
}

// EmptyDatabaseURL creates a database with no tables, as a new deployment's is
// before `engram migrate`, and returns its URL; it is dropped when the test ends.
func EmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	base := DatabaseURL(t)
	name := "engram_e_" + RandomID(10)
	if err := exec(context.Background(), base, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create empty database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, base, name) })
	return withDB(base, name)
}

// dropDatabase drops a test's database, unless ENGRAM_KEEP_TEST_DB is set.
func dropDatabase(t testing.TB, base, name string) {
	if os.Getenv("ENGRAM_KEEP_TEST_DB") != "" {
		t.Logf("kept test database %s", name)
		return
	}
	_ = exec(context.Background(), base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// RandomID returns n random lowercase hex characters.
func RandomID(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// TemporalAddress returns TEMPORAL_ADDRESS or fails the test.
func TemporalAddress(t testing.TB) string {
	t.Helper()
	a := os.Getenv("TEMPORAL_ADDRESS")
	if a == "" {
		t.Fatalf("TEMPORAL_ADDRESS is not set: %s", hint)
	}
	return a
}

// Namespace is the Temporal namespace tests use.
func Namespace() string {
	if ns := os.Getenv("TEMPORAL_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// Temporal dials the dev server; the client is closed when the test ends.
func Temporal(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  TemporalAddress(t),
		Namespace: Namespace(),
		Logger:    tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		t.Fatalf("dial temporal at %s: %v", TemporalAddress(t), err)
	}
	t.Cleanup(c.Close)
	return c
}

var unsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// TaskQueue returns a task queue name unique to this test run.
func TaskQueue(t testing.TB) string {
	name := unsafe.ReplaceAllString(t.Name(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return "test-" + name + "-" + RandomID(8)
}

// Eventually fails the test unless cond holds within d (polled every 50 ms).
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Within polls cond every 50 ms until it holds (true) or d has passed (false).
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
