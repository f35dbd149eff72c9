package storage

import "database/sql"

var errNoRows = sql.ErrNoRows
