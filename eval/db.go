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
