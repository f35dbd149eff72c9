// Package server is Engram's API: Connect handlers for MemoryService, ReviewService,
// TaskService and SchemaService (Connect, gRPC and gRPC-Web on one port), gRPC health
// and reflection, and API-key authentication. Handlers map RPCs to the feature
// packages (Ingest to write.Ingestor) and to Temporal starts, updates and
// queries, read Postgres, and map the answers back; the tenant of every call
// comes from its API key.
//
// It may import memory, schema, governance, storage, recall, config and the
// feature packages (write, task, lifecycle) whose workflows it starts; it runs no
// SQL of its own.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.temporal.io/sdk/client"

	"github.com/engramhq/engram/config"
	"github.com/engramhq/engram/gen/engram/v1/engramv1connect"
	"github.com/engramhq/engram/recall"
	"github.com/engramhq/engram/storage"
	"github.com/engramhq/engram/write"
)

// DefaultReadMaxBytes bounds one request message (1 MiB).
const DefaultReadMaxBytes = 1 << 20

// Recaller answers recalls (recall.Engine).
type Recaller interface {
	Recall(ctx context.Context, req recall.Request) (recall.Response, error)
}

// Deps are what the handlers need.
type Deps struct {
	Store *storage.Store
	// ReadStore serves the API's pure reads (GetFact, ListFacts, FactHistory,
	// ListPending, GetTask, GetSchema, SuggestSchemaChanges): a Store.Reader,
	// whose statements Postgres ends at its statement timeout, and each read is
	// bounded by that timeout or the caller's deadline, whichever comes first
	// (see read). Writes, and the reads of write calls, use Store. Nil: Store,
	// with no bound but the caller's deadline.
	ReadStore *storage.Store
	Temporal  client.Client
	Config    config.Config // task queue, write-path and task defaults
	// Recaller answers Recall; nil makes Recall UNAVAILABLE.
	Recaller Recaller
	// Ingestor takes Ingest's events in (app.Build makes it, with the Starter of
	// acknowledged writes and its worker's Notices); nil: one over Store and
	// Temporal that starts writes inside the call and waits for their results.
	Ingestor *write.Ingestor
	Logger   *slog.Logger
	// ReadMaxBytes bounds one request message, as sent and decompressed (default
	// DefaultReadMaxBytes); a larger one is INVALID_ARGUMENT.
	ReadMaxBytes int
}

// Services lists the fully-qualified names of the services New mounts.
var Services = []string{
	engramv1connect.MemoryServiceName,
	engramv1connect.ReviewServiceName,
	engramv1connect.TaskServiceName,
	engramv1connect.SchemaServiceName,
}

// New returns the API's HTTP handler: the four services behind the API-key
// interceptor, plus gRPC health (grpc.health.v1) and reflection (v1 and v1alpha),
// which need no key.
func New(d Deps) (http.Handler, error) {
	d, err := d.withDefaults()
	if err != nil {
		return nil, err
	}
	hs, err := NewHandlers(d)
	if err != nil {
		return nil, err
	}
	opts := append([]connect.HandlerOption{
		connect.WithInterceptors(NewAuthInterceptor(d.Store, Limits{PerKey: d.Config.RateLimitPerKey, AuthFailuresPerIP: d.Config.AuthFailuresPerIP}), NewValidateInterceptor()),
		// A reply shorter than this goes uncompressed even to a client that accepts
		// gzip: compressing an Ingest answer of a few hundred bytes cost the server
		// more CPU (a deflate block, its Huffman tables) than the bytes it saved.
		connect.WithCompressMinBytes(CompressMinBytes),
	}, JSONCodecs()...)
	// One request message is bounded by ReadMaxBytes; over it is INVALID_ARGUMENT
	// (see requestLimit), so Connect's own bound is not set.
	limit := requestLimit{max: int64(d.ReadMaxBytes)}
	opts = append(opts, limit.options()...)
	mux := http.NewServeMux()
	mount := func(path string, h http.Handler) { mux.Handle(path, limit.handler(h)) }
	mount(engramv1connect.NewMemoryServiceHandler(hs.Memory, opts...))
	mount(engramv1connect.NewReviewServiceHandler(hs.Review, opts...))
	mount(engramv1connect.NewTaskServiceHandler(hs.Task, opts...))
	mount(engramv1connect.NewSchemaServiceHandler(hs.Schema, opts...))
	mux.Handle(grpchealth.NewHandler(&healthChecker{d: d}))
	reflector := grpcreflect.NewStaticReflector(Services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	return mux, nil
}

// CompressMinBytes is the smallest reply the API compresses (for clients that
// accept gzip).
const CompressMinBytes = 1024

// healthChecker reports SERVING when Postgres answers; Temporal is checked too
// for the overall ("") service.
type healthChecker struct{ d Deps }

func (h *healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	known := req.Service == ""
	for _, s := range Services {
		known = known || s == req.Service
	}
	if !known {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := h.d.Store.DB().PingContext(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	if _, err := h.d.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// HTTPServer returns an http.Server for h that speaks HTTP/1.1 and HTTP/2 without
// TLS (h2c), so Connect, gRPC and gRPC-Web share one port.
func HTTPServer(addr string, h http.Handler) *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Serve listens on addr and serves h until ctx is cancelled, then shuts down
// gracefully: it stops accepting, lets running calls finish for up to grace, and
// returns. ready, when not nil, receives the bound address once listening.
func Serve(ctx context.Context, addr string, h http.Handler, grace time.Duration, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := HTTPServer(addr, h)
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func slogDefault() *slog.Logger { return slog.Default() }
