package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	"github.com/engramhq/engram/config"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
	"github.com/engramhq/engram/server"
	"github.com/engramhq/engram/server/servertest"
	"github.com/engramhq/engram/storage"
)

// One key over its rate, and one address that keeps sending bad keys, are told
// to slow down (RESOURCE_EXHAUSTED, HTTP 429, with Retry-After) instead of being
// served without limit; another key is not affected.
func TestRateLimits(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	cfg, err := config.FromEnv()
	require.NoError(t, err)
	cfg.RateLimitPerKey, cfg.AuthFailuresPerIP = 5, 1 // bursts of 10 calls and 10 failures
	h, err := server.New(server.Deps{Store: st, Temporal: testenv.Temporal(t), Config: cfg})
	require.NoError(t, err)
	url := servertest.Serve(t, h)
	key := func(name string) string {
		k, err := st.CreateAPIKey(ctx, &storage.APIKey{TenantID: "t-" + testenv.RandomID(6), Principal: name, Roles: []string{storage.RoleAgent}})
		require.NoError(t, err)
		return k
	}
	list := func(c *client.Client) error {
		_, err := c.Memory.ListFacts(ctx, connect.NewRequest(&engramv1.ListFactsRequest{UserId: "u1"}))
		return err
	}
	busyKey := key("busy")
	busy := client.New(url, busyKey, client.WithRetry(1, 0))
	served, limited := 0, 0
	var last error
	for range 40 {
		switch err := list(busy); connect.CodeOf(err) {
		case connect.CodeResourceExhausted:
			limited++
			last = err
		default:
			require.NoError(t, err)
			served++
		}
	}
	assert.GreaterOrEqual(t, served, 10, "the burst is served")
	assert.Less(t, served, 20, "a key at 5/s is not served 40 calls at once")
	assert.Positive(t, limited)
	var ce *connect.Error
	require.ErrorAs(t, last, &ce)
	assert.NotEmpty(t, ce.Meta().Get("Retry-After"))
	require.NoError(t, list(client.New(url, key("calm"), client.WithRetry(1, 0))), "another key has its own rate")
	// The Go client waits out the Retry-After of a rate limit, then is served.
	start := time.Now()
	_, err = client.New(url, busyKey, client.WithRetry(3, 0)).ListFacts(ctx, &engramv1.ListFactsRequest{UserId: "u1"})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "after the Retry-After second")

	bad := client.New(url, "egk_not-a-key", client.WithRetry(1, 0))
	codes := map[connect.Code]int{}
	for range 30 {
		codes[connect.CodeOf(list(bad))]++
	}
	assert.Equal(t, 10, codes[connect.CodeUnauthenticated], "the first failures are answered as such")
	assert.Equal(t, 20, codes[connect.CodeResourceExhausted], "then the address must slow down")
}

// The same limits hold for /mcp (a plain HTTP handler that checks the bearer
// token itself): a token over its rate gets 429 with Retry-After, and an address
// whose calls keep ending 401 is refused before its token is looked at.
func TestLimitHTTP(t *testing.T) {
	h := server.LimitHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), server.Limits{PerKey: 5, AuthFailuresPerIP: 1})
	call := func(token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.RemoteAddr = "192.0.2.7:5555"
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	codes := map[int]int{}
	for range 30 {
		codes[call("good").Code]++
	}
	assert.Equal(t, 10, codes[http.StatusOK], "the burst of 2 × 5/s")
	assert.Equal(t, 20, codes[http.StatusTooManyRequests])
	assert.NotEmpty(t, call("good").Header().Get("Retry-After"))

	codes = map[int]int{}
	for i := range 30 {
		codes[call(fmt.Sprintf("guess-%d", i)).Code]++ // a new token each time: only the address limit applies
	}
	assert.Equal(t, 10, codes[http.StatusUnauthorized])
	assert.Equal(t, 20, codes[http.StatusTooManyRequests])
}
