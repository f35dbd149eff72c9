// Package client is the Go client of Engram's API: a typed wrapper over the
// generated Connect clients that sends the API key, generates idempotency keys for
// Ingest, retries calls that are safe to retry when the server is UNAVAILABLE, and
// any call the rate limiter refused after its Retry-After.
// It imports only the generated code.
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("ENGRAM_API_KEY"))
//	res, err := c.Ingest(ctx, &engramv1.Event{UserId: "u1", Content: "预算不超过8000元", Schema: "travel"}, client.Wait())
//	ctx, err := c.Recall(ctx, &engramv1.RecallRequest{UserId: "u1", Query: "budget"})
package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
	"github.com/engramhq/engram/gen/engram/v1/engramv1connect"
)

// Client calls one Engram server. It is safe for concurrent use.
type Client struct {
	Memory engramv1connect.MemoryServiceClient
	Review engramv1connect.ReviewServiceClient
	Task   engramv1connect.TaskServiceClient
	Schema engramv1connect.SchemaServiceClient

	retry retryPolicy
}

type options struct {
	http     connect.HTTPClient
	protocol connect.ClientOption
	retry    retryPolicy
	extra    []connect.ClientOption
}

type retryPolicy struct {
	attempts int
	initial  time.Duration
	max      time.Duration
}

// Option configures New.
type Option func(*options)

// WithHTTPClient sets the HTTP client (default: one that speaks HTTP/1.1 and, for
// gRPC, HTTP/2 without TLS).
func WithHTTPClient(c connect.HTTPClient) Option { return func(o *options) { o.http = c } }

// WithGRPC uses the gRPC protocol instead of Connect.
func WithGRPC() Option { return func(o *options) { o.protocol = connect.WithGRPC() } }

// WithGRPCWeb uses the gRPC-Web protocol instead of Connect.
func WithGRPCWeb() Option { return func(o *options) { o.protocol = connect.WithGRPCWeb() } }

// WithRetry sets how often a retryable call is tried (attempts ≥ 1; 1 disables
// retries) and the first backoff, which doubles up to 5s with jitter. Default: 5
// attempts from 200ms.
func WithRetry(attempts int, initial time.Duration) Option {
	return func(o *options) {
		if attempts < 1 {
			attempts = 1
		}
		o.retry.attempts, o.retry.initial = attempts, initial
	}
}

// WithClientOptions passes further Connect client options (interceptors, …).
func WithClientOptions(opts ...connect.ClientOption) Option {
	return func(o *options) { o.extra = append(o.extra, opts...) }
}

// DefaultHTTPClient speaks HTTP/2 without TLS (h2c) to http:// URLs, which gRPC
// needs and Connect and gRPC-Web accept, and HTTP/1.1 or HTTP/2 over TLS to https://.
func DefaultHTTPClient() *http.Client {
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	tls := new(http.Protocols)
	tls.SetHTTP1(true)
	tls.SetHTTP2(true)
	return &http.Client{Transport: bySchemeTransport{
		plain:  &http.Transport{Protocols: h2c, Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second},
		secure: &http.Transport{Protocols: tls, Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second},
	}}
}

type bySchemeTransport struct{ plain, secure http.RoundTripper }

func (t bySchemeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" {
		return t.plain.RoundTrip(r)
	}
	return t.secure.RoundTrip(r)
}

// New returns a client of the server at baseURL (e.g. http://127.0.0.1:8080) that
// authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	o := options{retry: retryPolicy{attempts: 5, initial: 200 * time.Millisecond, max: 5 * time.Second}}
	for _, f := range opts {
		f(&o)
	}
	if o.http == nil {
		o.http = DefaultHTTPClient()
	}
	if o.retry.max == 0 {
		o.retry.max = 5 * time.Second
	}
	copts := []connect.ClientOption{connect.WithInterceptors(bearer(apiKey))}
	if o.protocol != nil {
		copts = append(copts, o.protocol)
	}
	copts = append(copts, o.extra...)
	baseURL = strings.TrimRight(baseURL, "/")
	return &Client{
		Memory: engramv1connect.NewMemoryServiceClient(o.http, baseURL, copts...),
		Review: engramv1connect.NewReviewServiceClient(o.http, baseURL, copts...),
		Task:   engramv1connect.NewTaskServiceClient(o.http, baseURL, copts...),
		Schema: engramv1connect.NewSchemaServiceClient(o.http, baseURL, copts...),
		retry:  o.retry,
	}
}

func bearer(key string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if key != "" {
				req.Header().Set("Authorization", "Bearer "+key)
			}
			return next(ctx, req)
		}
	}
}

// retrying retries what can succeed later and nothing else: UNAVAILABLE (when
// safe) and RESOURCE_EXHAUSTED with Retry-After, which only the rate limiter
// sends. Bad input (an oversize request included) is never retried.
func retrying[T any](ctx context.Context, p retryPolicy, safe bool, f func(context.Context) (*T, error)) (*T, error) {
	wait := p.initial
	for attempt := 1; ; attempt++ {
		out, err := f(ctx)
		if err == nil || attempt >= p.attempts {
			return out, err
		}
		d := wait/2 + time.Duration(rand.Int64N(int64(wait)+1))/2
		if after, limited := RetryAfter(err); limited {
			d = max(d, after)
		} else if !safe || connect.CodeOf(err) != connect.CodeUnavailable {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(d):
		}
		wait = min(wait*2, p.max)
	}
}

// IngestOption tunes Ingest and IngestBatch.
type IngestOption func(*engramv1.IngestRequest)

// Wait blocks until the write committed or waits for review.
func Wait() IngestOption { return func(r *engramv1.IngestRequest) { r.Wait = true } }

// WaitFor is Wait with a bound.
func WaitFor(d time.Duration) IngestOption {
	return func(r *engramv1.IngestRequest) { r.Wait, r.WaitTimeout = true, durationpb.New(d) }
}

// BatchKey sets the idempotency key of a batch.
func BatchKey(k string) IngestOption { return func(r *engramv1.IngestRequest) { r.BatchKey = k } }

// NewIdempotencyKey returns a fresh idempotency key.
func NewIdempotencyKey() string { return "go-" + uuid.NewString() }

// Ingest sends one event. An empty idempotency key is replaced by a generated one
// (set on ev), so the retries below are the same write.
func (c *Client) Ingest(ctx context.Context, ev *engramv1.Event, opts ...IngestOption) (*engramv1.IngestResult, error) {
	if ev != nil && ev.IdempotencyKey == "" {
		ev.IdempotencyKey = NewIdempotencyKey()
	}
	req := &engramv1.IngestRequest{Event: ev}
	for _, o := range opts {
		o(req)
	}
	res, err := read(ctx, c, c.Memory.Ingest, req, whole)
	if err != nil {
		return nil, err
	}
	if len(res.Results) != 1 {
		return nil, errors.New("engram: Ingest answered without a result")
	}
	return res.Results[0], nil
}

// IngestBatch sends a batch (at most 500 events), generating missing keys.
func (c *Client) IngestBatch(ctx context.Context, evs []*engramv1.Event, opts ...IngestOption) (*engramv1.IngestResponse, error) {
	for _, ev := range evs {
		if ev != nil && ev.IdempotencyKey == "" {
			ev.IdempotencyKey = NewIdempotencyKey()
		}
	}
	req := &engramv1.IngestRequest{Events: evs}
	for _, o := range opts {
		o(req)
	}
	return read(ctx, c, c.Memory.Ingest, req, whole)
}

// Recall returns the context to remember for a user.
func (c *Client) Recall(ctx context.Context, req *engramv1.RecallRequest) (*engramv1.RecallResponse, error) {
	return read(ctx, c, c.Memory.Recall, req, whole)
}

// GetFact returns one fact revision with its evidence ids.
func (c *Client) GetFact(ctx context.Context, factID string) (*engramv1.Fact, error) {
	return read(ctx, c, c.Memory.GetFact, &engramv1.GetFactRequest{FactId: factID}, (*engramv1.GetFactResponse).GetFact)
}

// ListFacts lists facts, newest first.
func (c *Client) ListFacts(ctx context.Context, req *engramv1.ListFactsRequest) ([]*engramv1.Fact, error) {
	return read(ctx, c, c.Memory.ListFacts, req, (*engramv1.ListFactsResponse).GetFacts)
}

// FactHistory returns every revision of a memory key, oldest first.
func (c *Client) FactHistory(ctx context.Context, memoryKey string) ([]*engramv1.Fact, error) {
	return c.FactHistoryOf(ctx, &engramv1.FactHistoryRequest{MemoryKey: memoryKey})
}

// FactHistoryOf is FactHistory for a full request (e.g. known_at: the history
// as the memory held it then).
func (c *Client) FactHistoryOf(ctx context.Context, req *engramv1.FactHistoryRequest) ([]*engramv1.Fact, error) {
	return read(ctx, c, c.Memory.FactHistory, req, (*engramv1.FactHistoryResponse).GetRevisions)
}

// InvalidateFact closes a fact's ACTIVE revision (reviewer or admin keys).
func (c *Client) InvalidateFact(ctx context.Context, factID, reason string) (*engramv1.Fact, error) {
	req := &engramv1.InvalidateFactRequest{FactId: factID, Reason: reason}
	return read(ctx, c, c.Memory.InvalidateFact, req, (*engramv1.InvalidateFactResponse).GetFact)
}

// ListPending lists candidates awaiting review (reviewer keys); user may be empty.
func (c *Client) ListPending(ctx context.Context, user string, limit int) ([]*engramv1.PendingReview, error) {
	req := &engramv1.ListPendingRequest{UserId: user, Limit: int32(limit)}
	return read(ctx, c, c.Review.ListPending, req, (*engramv1.ListPendingResponse).GetPending)
}

// Decide sends a review decision. It is not retried: a repeated decision on the
// same candidate is refused as already reviewed.
func (c *Client) Decide(ctx context.Context, req *engramv1.DecideRequest) (*engramv1.DecideResponse, error) {
	return send(ctx, c, c.Review.Decide, req, whole)
}

// StartTask creates a task. Not retried (a retry of a start that went through
// answers ALREADY_EXISTS).
func (c *Client) StartTask(ctx context.Context, req *engramv1.StartTaskRequest) (*engramv1.Task, error) {
	return send(ctx, c, c.Task.StartTask, req, (*engramv1.StartTaskResponse).GetTask)
}

// UpdateTask applies one operation (plan, request_confirmation, confirm, complete,
// cancel). Not retried.
func (c *Client) UpdateTask(ctx context.Context, req *engramv1.UpdateTaskRequest) (*engramv1.Task, error) {
	return send(ctx, c, c.Task.UpdateTask, req, (*engramv1.UpdateTaskResponse).GetTask)
}

// RunStep runs the named step, or the next one when step is empty. Not retried: a
// lost answer is read back with GetTask (the step itself is idempotent at the
// action endpoint by its key).
func (c *Client) RunStep(ctx context.Context, taskID, step string) (*engramv1.Task, error) {
	req := &engramv1.RunStepRequest{TaskId: taskID, Step: step}
	return send(ctx, c, c.Task.RunStep, req, (*engramv1.RunStepResponse).GetTask)
}

// GetTask returns a task's state.
func (c *Client) GetTask(ctx context.Context, taskID string) (*engramv1.Task, error) {
	return read(ctx, c, c.Task.GetTask, &engramv1.GetTaskRequest{TaskId: taskID}, (*engramv1.GetTaskResponse).GetTask)
}

// GetSchema returns a schema (version 0: the latest).
func (c *Client) GetSchema(ctx context.Context, name string, version int) (*engramv1.GetSchemaResponse, error) {
	req := &engramv1.GetSchemaRequest{Name: name, Version: int32(version)}
	return read(ctx, c, c.Schema.GetSchema, req, whole)
}

// PutSchema stores a new version of a schema (admin keys). Not retried.
func (c *Client) PutSchema(ctx context.Context, req *engramv1.PutSchemaRequest) (*engramv1.SchemaInfo, error) {
	return send(ctx, c, c.Schema.PutSchema, req, (*engramv1.PutSchemaResponse).GetSchema)
}

// method is a generated Connect client's unary method.
type method[Req, Res any] func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)

// read calls m with req and returns what pick takes from its answer, retrying
// with backoff while the server answers UNAVAILABLE, and after the server's
// Retry-After while it answers a rate limit. Only calls that are safe to repeat
// go through it: reads, and Ingest, which is idempotent by its key.
func read[Req, Res, Out any](ctx context.Context, c *Client, m method[Req, Res], req *Req, pick func(*Res) Out) (Out, error) {
	return unary(ctx, c.retry, true, m, req, pick)
}

// send is read retrying only a rate limit: the server refuses those before it
// does anything, so a call that must not be repeated is not.
func send[Req, Res, Out any](ctx context.Context, c *Client, m method[Req, Res], req *Req, pick func(*Res) Out) (Out, error) {
	return unary(ctx, c.retry, false, m, req, pick)
}

func unary[Req, Res, Out any](ctx context.Context, p retryPolicy, safe bool, m method[Req, Res], req *Req, pick func(*Res) Out) (Out, error) {
	res, err := retrying(ctx, p, safe, func(ctx context.Context) (*connect.Response[Res], error) {
		return m(ctx, connect.NewRequest(req))
	})
	if err != nil {
		var none Out
		return none, err
	}
	return pick(res.Msg), nil
}

// whole is the pick of a method whose whole answer is the result.
func whole[T any](msg *T) *T { return msg }
