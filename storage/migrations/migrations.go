// Package migrations embeds Engram's SQL migrations for bun/migrate.
package migrations

import (
	"embed"

	"github.com/uptrace/bun/migrate"
)

//go:embed *.sql
var sqlFiles embed.FS

// Files are the embedded SQL files (tests fingerprint them to know when a cached
// migrated template is stale).
var Files = sqlFiles

// Migrations is the ordered set of Engram's schema changes.
var Migrations = migrate.NewMigrations()

func init() {
	if err := Migrations.Discover(sqlFiles); err != nil {
		panic(err)
	}
}
