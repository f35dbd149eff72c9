// Package storage is Engram's source of truth: bun models, migrations and
// repositories over Postgres with pgvector. It is the only package that writes SQL
// (recall keeps its prepared read statement); other packages call its methods and,
// for a unit of work, InTx with the package-level functions that take a bun.IDB.
// Every method takes the tenant and filters by it (audit.go's *AnyTenant reads for
// the evaluation harness say so in their name); nothing here trusts a tenant id
// found inside a request body. Of Engram's packages it imports memory and privacy.
package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/migrate"

	"github.com/engramhq/engram/memory"
	"github.com/engramhq/engram/storage/migrations"
)

// EmbeddingDim is the dimension of every embedding column. The database records it
// in settings; Open refuses a database whose dimension differs.
const EmbeddingDim = 512

// ErrNotFound is returned when a row does not exist for the caller's tenant.
var ErrNotFound = errors.New("not found")

// ErrIdempotencyConflict is returned when an idempotency key is reused with
// different content.
var ErrIdempotencyConflict = errors.New("idempotency key already used with different content")

// Store wraps the bun database handle.
type Store struct {
	db  *bun.DB
	url string
	// base is the store a Reader was made from (its protection is the reader's);
	// nil for a store opened with Open.
	base *Store
	// timeout is a Reader's statement_timeout (0: none).
	timeout time.Duration
}

// Open connects to Postgres. It does not migrate; call Migrate for that.
func Open(ctx context.Context, url string) (*Store, error) {
	if strings.TrimSpace(url) == "" {
		return nil, memory.FieldError{Field: "ENGRAM_DATABASE_URL", Problem: "is empty"}
	}
	db := pool(url, 32, map[string]any{"plan_cache_mode": "force_generic_plan"})
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return &Store{db: db, url: url}, nil
}

// OpenReadPool opens a pool of its own on the store's database for a reader whose
// statements Postgres must end by itself: every session starts with
// statement_timeout set to timeout, so a statement still running past it is
// cancelled by the server whatever became of its client (a client that gives up
// only closes its socket, which a backend busy with a statement does not notice
// until it has a row to send). The main pool has no such bound: the write path's
// and maintenance's statements are bounded by their activities. It opens no
// connection until one is used; close it with the returned bun.DB's Close.
func (s *Store) OpenReadPool(timeout time.Duration, maxOpen int) *bun.DB {
	return pool(s.url, maxOpen, readParams(timeout))
}

func readParams(timeout time.Duration) map[string]any {
	ms := strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
	return map[string]any{"plan_cache_mode": "force_generic_plan", "statement_timeout": ms}
}

// Reader returns a view of the store for reads that must end on time (the API's
// reads of facts, candidates, tasks and schemas): its methods run on a pool of
// its own of up to maxOpen connections (opened as used) whose sessions start
// with statement_timeout set to timeout, as OpenReadPool's, and are read-only
// (default_transaction_read_only: Postgres refuses a write sent through it;
// writes stay on s). It shares s's database and protection (SetProtection on s
// applies to it). Close closes only the reader's pool and its prepared
// statements, never s's.
func (s *Store) Reader(timeout time.Duration, maxOpen int) *Store {
	params := readParams(timeout)
	params["default_transaction_read_only"] = "on"
	base := s
	if s.base != nil {
		base = s.base
	}
	return &Store{db: pool(s.url, maxOpen, params), url: s.url, base: base, timeout: timeout}
}

// StatementTimeout is the statement_timeout a Reader's sessions start with (0
// for a store opened with Open, whose statements have none).
func (s *Store) StatementTimeout() time.Duration { return s.timeout }

// pool is a pool of up to maxOpen connections to url whose sessions start with
// params (a parameter the URL sets keeps the URL's value).
//
// Its connections are *Conn (conn.go), which prepare every statement sent with
// parameters.
//
// plan_cache_mode force_generic_plan: the prepared statements (prepared.go, and
// recall's) have a fixed shape, with the constants that select partial indexes
// written into their text, so one plan serves every call; left to choose,
// Postgres kept planning some of them per call (a select of events by key, whose
// array parameter it costs as ten keys, 0.07 ms a call). Statements bun sends
// with their values in the text are planned per call as before.
//
// As many idle connections as open: at full concurrency a connection returned
// beyond the idle limit is closed and the next call opens (forks) a new backend,
// which cost the write path about a tenth of its throughput at 32 callers.
func pool(url string, maxOpen int, params map[string]any) *bun.DB {
	conn := connector{pgdriver.NewConnector(pgdriver.WithDSN(url), pgdriver.WithTimeout(10*time.Second), func(c *pgdriver.Config) {
		merged := map[string]any{}
		for k, v := range params {
			merged[k] = v
		}
		for k, v := range c.ConnParams {
			merged[k] = v
		}
		c.ConnParams = merged
	})}
	sqldb := sql.OpenDB(conn)
	sqldb.SetMaxOpenConns(maxOpen)
	sqldb.SetMaxIdleConns(maxOpen)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New())
}

// DB exposes the handle for packages that build their own queries (recall).
func (s *Store) DB() *bun.DB { return s.db }

// Close closes the pool (and with its connections the statements prepared on them).
func (s *Store) Close() error {
	return s.db.Close()
}

// Migrate applies pending migrations under bun's migration lock and checks the
// embedding dimension. It returns the names of the migrations applied.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	m := migrate.NewMigrator(s.db, migrations.Migrations)
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("init migrations: %w", err)
	}
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	defer m.Unlock(ctx) //nolint:errcheck
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var names []string
	for _, mg := range group.Migrations {
		names = append(names, mg.Name)
	}
	if err := s.CheckEmbeddingDim(ctx, EmbeddingDim); err != nil {
		return names, err
	}
	// A migration may create or rewrite tables and indexes: their statistics are
	// made now rather than whenever autovacuum comes, so the first plans are not
	// made blind.
	if len(names) > 0 {
		if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
			return names, fmt.Errorf("analyze after migrating: %w", err)
		}
	}
	return names, nil
}

// CheckEmbeddingDim verifies that the database was created for vectors of dim.
func (s *Store) CheckEmbeddingDim(ctx context.Context, dim int) error {
	var v string
	err := s.db.NewSelect().Table("settings").Column("value").Where("key = 'embedding_dim'").Scan(ctx, &v)
	if err != nil {
		return fmt.Errorf("read embedding_dim: %w", err)
	}
	if got, _ := strconv.Atoi(v); got != dim {
		return fmt.Errorf("database embedding dimension is %s, the engine uses %d: re-create the database or configure an embedder of that dimension", v, dim)
	}
	return nil
}

// ErrNotMigrated is what CheckMigrated's error is (errors.Is): the database lacks
// migrations this binary needs.
var ErrNotMigrated = errors.New("the database is not migrated")

// NotMigratedError says which of this binary's migrations the database lacks and
// names the command that applies them.
type NotMigratedError struct {
	Applied, Pending []string
}

func (e *NotMigratedError) Error() string {
	if len(e.Applied) == 0 {
		return "the database is not migrated (it has none of engram's tables): run `engram migrate` (with the same ENGRAM_DATABASE_URL) first"
	}
	return fmt.Sprintf("the database is not migrated: %d of %d migrations pending (%s …): run `engram migrate` (with the same ENGRAM_DATABASE_URL) first",
		len(e.Pending), len(e.Applied)+len(e.Pending), e.Pending[0])
}

func (e *NotMigratedError) Is(target error) bool { return target == ErrNotMigrated }

// CheckMigrated returns a *NotMigratedError when a migration of this binary is
// not applied, so a command run against a fresh database says so instead of
// failing on the first table it reads. It only reads: unlike MigrationStatus it
// creates no migration tables.
func (s *Store) CheckMigrated(ctx context.Context) error {
	var exists bool
	if err := s.db.NewRaw("SELECT to_regclass('bun_migrations') IS NOT NULL").Scan(ctx, &exists); err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	var applied []string
	if exists {
		if err := s.db.NewRaw("SELECT name FROM bun_migrations").Scan(ctx, &applied); err != nil {
			return fmt.Errorf("check migrations: %w", err)
		}
	}
	e := &NotMigratedError{}
	for _, m := range migrations.Migrations.Sorted() {
		if slices.Contains(applied, m.Name) {
			e.Applied = append(e.Applied, m.Name)
		} else {
			e.Pending = append(e.Pending, m.Name)
		}
	}
	if len(e.Pending) > 0 {
		return e
	}
	return nil
}

// MigrationStatus lists applied and pending migrations.
func (s *Store) MigrationStatus(ctx context.Context) (applied, pending []string, err error) {
	m := migrate.NewMigrator(s.db, migrations.Migrations)
	if err := m.Init(ctx); err != nil {
		return nil, nil, err
	}
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, mg := range ms {
		if mg.IsApplied() {
			applied = append(applied, mg.Name)
		} else {
			pending = append(pending, mg.Name)
		}
	}
	return applied, pending, nil
}

func checkTenant(tenantID string) error {
	if strings.TrimSpace(tenantID) == "" {
		return memory.FieldError{Field: "tenant_id", Problem: "is empty"}
	}
	return nil
}

// InTx runs fn in a transaction: in a savepoint of ctx's transaction when ctx
// carries one of this store (WithTx). fn's context carries tx, so the store's
// methods called with it run in tx too (bun hands a savepoint's function the
// context its transaction began with).
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return s.conn(ctx).RunInTx(ctx, nil, func(_ context.Context, tx bun.Tx) error {
		return fn(s.WithTx(ctx, tx), tx)
	})
}

// txKey is the context key of a transaction the store's methods run in.
type txKey struct{ db *bun.DB }

// WithTx returns ctx with tx: the store's methods called with it run in tx (one
// commit for many statements, as a batch writes a run of events). tx must not be
// used by two goroutines at once.
func (s *Store) WithTx(ctx context.Context, tx bun.Tx) context.Context {
	return context.WithValue(ctx, txKey{s.db}, tx)
}

// conn is where the store's statements run: ctx's transaction (WithTx), else the pool.
func (s *Store) conn(ctx context.Context) bun.IDB {
	if tx, ok := ctx.Value(txKey{s.db}).(bun.Tx); ok {
		return tx
	}
	return s.db
}
