package eval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/engramhq/engram/storage"
)

// FreshDatabase creates an empty database next to the one baseURL names, migrates
// it and opens it. drop closes the store and removes the database (unless keep).
func FreshDatabase(ctx context.Context, baseURL string, keep bool) (st *storage.Store, name string, drop func(), err error) {
	name = "engram_eval_" + randomID(10)
	u, err := storage.SiblingDatabase(baseURL, name)
	if err != nil {
		return nil, "", nil, err
	}
	if err := storage.CreateDatabase(ctx, baseURL, name, false); err != nil {
		return nil, "", nil, err
	}
	dropDB := func() { _ = storage.DropDatabase(context.Background(), baseURL, name) }
	st, err = storage.Open(ctx, u)
	if err != nil {
		dropDB()
		return nil, "", nil, fmt.Errorf("open %s: %w", name, err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		dropDB()
		return nil, "", nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	drop = func() {
		st.Close()
		if !keep {
			dropDB()
		}
	}
	return st, name, drop, nil
}

func randomID(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// ExistingDatabase opens a database an earlier run kept (--keep-db), next to the
// one baseURL names, for asking its probes again (Options.Reuse). It migrates it,
// so a database kept by an older build reads with today's schema.
func ExistingDatabase(ctx context.Context, baseURL, name string) (*storage.Store, error) {
	u, err := storage.SiblingDatabase(baseURL, name)
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return st, nil
}

// openRunDB opens the run's database: the kept one of cfg.ReuseDB (with the run
// id it was ingested under) or a fresh one. runID is the id the probes' turns are
// keyed by; reuse says whether to skip the ingest.
func openRunDB(ctx context.Context, cfg Config) (st *storage.Store, name, runID string, reuse bool, drop func(), err error) {
	if cfg.ReuseDB != "" {
		if cfg.RunID == "" {
			return nil, "", "", false, nil, fmt.Errorf("eval: --reuse-db %s needs --run-id (the kept run's note names both)", cfg.ReuseDB)
		}
		st, err := ExistingDatabase(ctx, cfg.DatabaseURL, cfg.ReuseDB)
		if err != nil {
			return nil, "", "", false, nil, err
		}
		return st, cfg.ReuseDB, cfg.RunID, true, func() { st.Close() }, nil
	}
	st, name, drop, err = FreshDatabase(ctx, cfg.DatabaseURL, cfg.KeepDB)
	if err != nil {
		return nil, "", "", false, nil, err
	}
	runID = cfg.RunID
	if runID == "" {
		runID = randomID(10)
	}
	return st, name, runID, false, drop, nil
}
