package server

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/engramhq/engram/storage"
)

// blockingKeys answers no lookup until the lookup's context ends.
type blockingKeys struct{}

func (blockingKeys) LookupAPIKey(ctx context.Context, _ string) (*storage.APIKey, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A key lookup that does not end (a pool with no free connection, a stuck
// statement) ends at keyLookupTimeout as UNAVAILABLE, though the caller set no
// deadline; a caller's own earlier deadline is DEADLINE_EXCEEDED.
func TestAuthenticateHasADeadline(t *testing.T) {
	defer func(d time.Duration) { keyLookupTimeout = d }(keyLookupTimeout)
	keyLookupTimeout = 50 * time.Millisecond

	started := time.Now()
	_, err := Authenticate(context.Background(), blockingKeys{}, "egk_0123456789ab_secret")
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("no caller deadline: %v (code %s), want unavailable", err, connect.CodeOf(err))
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("the lookup waited %s", took)
	}

	keyLookupTimeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = Authenticate(ctx, blockingKeys{}, "egk_0123456789ab_secret")
	if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("caller's deadline: %v (code %s), want deadline_exceeded", err, connect.CodeOf(err))
	}
}
