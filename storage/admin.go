package storage

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/uptrace/bun/driver/pgdriver"
)

var databaseName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// SiblingDatabase is baseURL with the database name replaced: a database on the
// same server (the bench's engram_bench, an eval run's own database).
func SiblingDatabase(baseURL, name string) (string, error) {
	if !databaseName.MatchString(name) {
		return "", fmt.Errorf("database name %q: lower-case letters, digits and _ only", name)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("database url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// CreateDatabase creates database name on baseURL's server; with ifMissing, an
// existing one is kept.
func CreateDatabase(ctx context.Context, baseURL, name string, ifMissing bool) error {
	if !databaseName.MatchString(name) {
		return fmt.Errorf("database name %q: lower-case letters, digits and _ only", name)
	}
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(baseURL)))
	defer admin.Close()
	if ifMissing {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			return fmt.Errorf("look for database %s: %w", name, err)
		}
		if n > 0 {
			return nil
		}
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil && !(ifMissing && strings.Contains(err.Error(), "already exists")) {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase removes database name from baseURL's server, closing its
// connections.
func DropDatabase(ctx context.Context, baseURL, name string) error {
	if !databaseName.MatchString(name) {
		return fmt.Errorf("database name %q: lower-case letters, digits and _ only", name)
	}
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(baseURL)))
	defer admin.Close()
	_, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}
