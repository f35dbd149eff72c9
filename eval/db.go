package eval

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/engramhq/engram/storage"
)

// FreshDatabase creates an empty database next to the one baseURL names, migrates
// it and opens it. drop closes the store and removes the database (unless keep).
func FreshDatabase(ctx context.Context, baseURL string, keep bool) (st *storage.Store, name string, drop func(), err error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("database url: %w", err)
	}
	name = "engram_eval_" + randomID(10)
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(baseURL)))
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	dropDB := func() {
		a := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(baseURL)))
		defer a.Close()
		_, _ = a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	st, err = storage.Open(ctx, u.String())
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
