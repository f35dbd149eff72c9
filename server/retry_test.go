package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/internal/testenv"
)

// Fifty identical Ingest requests at once, without occurredAt (so each request
// defaults the time itself): every one is answered as the same write (none 409),
// one event row, one workflow, and so is a retry after them. The same key with
// another schema is refused and the error says why.
func TestConcurrentIdenticalRetries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client("agentA")
	key := "retry-" + testenv.RandomID(8)
	ev := func(schema string) *engramv1.Event {
		return &engramv1.Event{IdempotencyKey: key, UserId: "u1", Content: "I prefer window seats", Schema: schema}
	}
	before := e.count("events")
	var wg sync.WaitGroup
	errs := make([]error, 50)
	runs := make([]string, 50)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := c.Memory.Ingest(ctx, connect.NewRequest(&engramv1.IngestRequest{Event: ev("travel")}))
			errs[i] = err
			if err == nil {
				runs[i] = res.Msg.Results[0].WorkflowId
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
		assert.Equal(t, runs[0], runs[i])
	}
	assert.Equal(t, before+1, e.count("events"), "one event for the key")

	// A retry later, its time again defaulted to its own now: the insert finds the
	// key stored with another time, takes the stored one and joins the write.
	res, err := c.Memory.Ingest(ctx, connect.NewRequest(&engramv1.IngestRequest{Event: ev("travel")}))
	require.NoError(t, err)
	assert.Equal(t, runs[0], res.Msg.Results[0].WorkflowId)
	assert.Equal(t, before+1, e.count("events"))

	_, err = c.Memory.Ingest(ctx, connect.NewRequest(&engramv1.IngestRequest{Event: ev("general")}))
	require.Error(t, err)
	assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err))
	assert.True(t, strings.Contains(err.Error(), `schema "travel", not "general"`), err.Error())
	assert.Equal(t, before+1, e.count("events"))
}
