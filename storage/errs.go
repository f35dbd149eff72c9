package storage

import (
	"database/sql"
	"errors"
	"strings"

	"github.com/uptrace/bun/driver/pgdriver"
)

var errNoRows = sql.ErrNoRows

// Permanent reports whether err is a Postgres error that retrying the same
// statement can never fix: a data exception (SQLSTATE class 22: a NUL byte,
// invalid UTF-8, a value too long for its column) or a program limit (class 54:
// an index row too large). Activities turn it into a non-retryable failure, so a
// write that can never be stored fails at once with the reason instead of being
// retried forever.
func Permanent(err error) bool {
	code := SQLState(err)
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "54")
}

// SQLState is the SQLSTATE of a Postgres error in err's chain ("" when none).
func SQLState(err error) string {
	var pe pgdriver.Error
	if !errors.As(err, &pe) {
		return ""
	}
	return pe.Field('C')
}
