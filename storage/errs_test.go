package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/storage"
)

// Errors no retry can fix are recognised from Postgres' own answers: a value
// that is not of its type (SQLSTATE 22P02) or out of its range (22003); a
// lost connection or a missing row is not permanent. (A NUL byte never reaches
// Postgres: the API refuses it, naming the field.)
func TestPermanent(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	_, nul := st.DB().NewRaw("SELECT CAST(? AS uuid)", "not-a-uuid").Exec(ctx)
	_, long := st.DB().NewRaw("SELECT CAST(? AS smallint)", 99999).Exec(ctx)
	if nul == nil || !storage.Permanent(nul) {
		t.Fatalf("not a uuid: %v, permanent %v", nul, storage.Permanent(nul))
	}
	if long == nil || !storage.Permanent(long) {
		t.Fatalf("out of range: %v, permanent %v", long, storage.Permanent(long))
	}
	if storage.Permanent(errors.New("connection reset")) || storage.Permanent(storage.ErrNotFound) || storage.Permanent(nil) {
		t.Fatal("only Postgres data and limit errors are permanent")
	}
}
