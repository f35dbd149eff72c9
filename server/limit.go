package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/engramhq/engram/memory"
)

// requestLimit bounds one request message at max bytes, as sent and once
// decompressed, for every protocol. A larger one is INVALID_ARGUMENT naming the
// limit and how to send less (HTTP 413 over the Connect protocol's plain HTTP),
// never Connect's own RESOURCE_EXHAUSTED (WithReadMaxBytes): clients read that
// as a rate limit and retried a request that can never succeed.
//
// Connect checks WithReadMaxBytes before anything it is given can answer (a gRPC
// message's declared size is refused before its bytes are read), so the bound
// is enforced here instead: on the request body, and in the gzip decompressor.
type requestLimit struct{ max int64 }

// drainFactor: the rest of a body over the limit is read, up to this many times
// the limit, so the client gets the answer rather than a reset connection (a
// client that writes its whole body before reading, as Python's http.client
// does, would otherwise see a broken pipe and retry).
const drainFactor = 16

// envelopePrefix is the bytes the gRPC, gRPC-Web and Connect streaming protocols
// put before a message.
const envelopePrefix = 5

// handler bounds the body of every request to next.
func (l requestLimit) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		enveloped := strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")
		b := &limitedBody{ReadCloser: r.Body, l: l, limit: l.max}
		if enveloped {
			b.limit += envelopePrefix
		} else {
			w = &tooLargeWriter{ResponseWriter: w, body: b}
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// tooLarge is the answer to a message of the size what says ("1048651 bytes").
func (l requestLimit) tooLarge(what string) *connect.Error {
	problem := fmt.Sprintf("the request is %s, over the limit of %d bytes (%s) for one request; "+
		"it can never succeed as it is: send less per call (an event's content is at most %d KiB: split longer text into several events, and a large batch into several Ingest calls)",
		what, l.max, humanBytes(l.max), memory.MaxContentBytes>>10)
	return badRequest(fmt.Errorf("body: %s", problem), &errdetails.BadRequest_FieldViolation{Field: "body", Description: problem})
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// limitedBody reads at most limit bytes of a request body; the byte after them
// is the tooLarge error (which Connect passes on as it is).
type limitedBody struct {
	io.ReadCloser
	l     requestLimit
	limit int64
	read  int64
	err   *connect.Error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read <= b.limit {
		return n, err
	}
	drained, derr := io.CopyN(io.Discard, b.ReadCloser, drainFactor*b.l.max)
	size := b.read + drained
	if b.limit > b.l.max {
		size -= envelopePrefix
	}
	what := fmt.Sprintf("%d bytes", size)
	if derr == nil {
		what = "more than " + what
	}
	b.err = b.l.tooLarge(what)
	return n - 1, b.err
}

// tooLargeWriter answers 413 instead of 400 when the body was over the limit
// (the Connect protocol's unary calls, whose status is plain HTTP). A compressed
// body over the limit once decompressed stays 400: Connect decompresses it out
// of this handler's sight.
type tooLargeWriter struct {
	http.ResponseWriter
	body *limitedBody
}

func (w *tooLargeWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && w.body.err != nil {
		code = http.StatusRequestEntityTooLarge
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *tooLargeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *tooLargeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// options replace Connect's gzip with one whose output is bounded by the limit
// (a small compressed body can hold a large message).
func (l requestLimit) options() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCompression("gzip", nil, nil),
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &boundedGzip{l: l} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
	}
}

// boundedGzip is a gzip decompressor that fails with tooLarge past the limit.
type boundedGzip struct {
	gzip.Reader
	l    requestLimit
	read int64
}

func (g *boundedGzip) Reset(r io.Reader) error {
	g.read = 0
	return g.Reader.Reset(r)
}

func (g *boundedGzip) Read(p []byte) (int, error) {
	n, err := g.Reader.Read(p)
	g.read += int64(n)
	if g.read > g.l.max {
		return n, g.l.tooLarge(fmt.Sprintf("more than %d bytes once decompressed", g.l.max))
	}
	return n, err
}
