package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/client"
	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

// onlyReader hides a body's length, so the request goes chunked.
type onlyReader struct{ io.Reader }

// Issue 50, finding 3: a request over the 1 MiB limit was RESOURCE_EXHAUSTED
// (429, no Retry-After) and clients retried it. It is INVALID_ARGUMENT naming
// the limit and what to do, HTTP 413 over plain HTTP: with and without a
// Content-Length, far over the limit (the client still gets the answer),
// gzip-compressed (the limit holds once decompressed; 400 there), over gRPC; the Go client
// sends it once; nothing is written; a request at the limit is decoded.
func TestOversizeIsInvalidArgument(t *testing.T) {
	e := newEnv(t)
	before := e.counts()
	ingest := func(content string) []byte {
		return []byte(`{"event":{"userId":"u1","content":"` + content + `"}}`)
	}
	over := ingest(strings.Repeat("a", 1<<20))
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(ingest(strings.Repeat("a", 2<<20)))
	require.NoError(t, zw.Close())
	require.Less(t, zipped.Len(), 1<<16, "small as sent")

	send := func(body io.Reader, gz bool) (int, string, string) {
		req, err := http.NewRequest("POST", e.url+"/engram.v1.MemoryService/Ingest", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.keys["agentA"])
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "the client gets the answer, not a reset connection")
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Retry-After"), string(b)
	}
	huge := ingest(strings.Repeat("a", 5<<20))
	for _, tc := range []struct {
		name   string
		body   io.Reader
		gz     bool
		status int
		size   string
	}{
		{"with a length", bytes.NewReader(over), false, 413, fmt.Sprintf("the request is %d bytes,", len(over))},
		{"chunked", onlyReader{bytes.NewReader(over)}, false, 413, fmt.Sprintf("the request is %d bytes,", len(over))},
		{"5 MiB", bytes.NewReader(huge), false, 413, fmt.Sprintf("the request is %d bytes,", len(huge))},
		{"gzip", bytes.NewReader(zipped.Bytes()), true, 400, "the request is more than 1048576 bytes once decompressed,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, retryAfter, body := send(tc.body, tc.gz)
			assert.Equal(t, tc.status, status, body)
			assert.Empty(t, retryAfter)
			assert.Contains(t, body, `"code":"invalid_argument"`)
			assert.Contains(t, body, "body: "+tc.size)
			assert.Contains(t, body, "over the limit of 1048576 bytes (1 MiB) for one request")
			assert.Contains(t, body, "at most 64 KiB: split longer text into several events")
			assert.Contains(t, body, "google.rpc.BadRequest", "with the field named in a detail")
		})
	}

	// Just at the limit: decoded (and refused for its content's length, by name).
	at := ingest(strings.Repeat("a", 1<<20-len(ingest(""))))
	require.Len(t, at, 1<<20)
	status, _, body := send(bytes.NewReader(at), false)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "event.content")

	// The Go client over Connect (binary, gzip) and gRPC: one attempt each.
	ev := &engramv1.Event{UserId: "u1", Content: strings.Repeat("a", 1<<20+10)}
	for _, p := range []struct {
		name string
		opts []client.Option
	}{
		{"connect", nil},
		{"connect+gzip", []client.Option{client.WithClientOptions(connect.WithSendGzip())}},
		{"grpc", []client.Option{client.WithGRPC()}},
	} {
		t.Run(p.name, func(t *testing.T) {
			attempts := 0
			count := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
				return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
					attempts++
					return next(ctx, req)
				}
			})
			c := client.New(e.url, e.keys["agentA"], append(p.opts, client.WithRetry(5, 0), client.WithClientOptions(connect.WithInterceptors(count)))...)
			_, err := c.Ingest(context.Background(), ev)
			assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
			assert.Contains(t, err.Error(), "over the limit of 1048576 bytes")
			vs := client.FieldViolations(err)
			require.NotEmpty(t, vs)
			assert.Equal(t, "body", vs[0].Field)
			assert.Equal(t, 1, attempts, "not retried")
		})
	}
	assert.Equal(t, before, e.counts(), "nothing is written")
}
