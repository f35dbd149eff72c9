package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
)

// Limits is how fast one caller may call the API. Zero values disable a limit.
type Limits struct {
	// PerKey: calls per second one API key may make (burst: twice that).
	PerKey float64
	// AuthFailuresPerIP: failed authentications per second one client address may
	// make before its calls are refused without looking at the key (burst: ten
	// times that), so guessing keys is slow.
	AuthFailuresPerIP float64
}

// limiter holds one token bucket per key or address, forgetting those idle for
// a while so the map stays small under many callers.
type limiter struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

const limiterIdle = 10 * time.Minute

func newLimiter(perSecond float64, burstFactor int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{rate: rate.Limit(perSecond), burst: max(1, int(perSecond*float64(burstFactor))), m: map[string]*bucket{}, swept: time.Now()}
}

func (l *limiter) get(k string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > limiterIdle {
		for key, b := range l.m {
			if now.Sub(b.seen) > limiterIdle {
				delete(l.m, key)
			}
		}
		l.swept = now
	}
	b, ok := l.m[k]
	if !ok {
		b = &bucket{l: rate.NewLimiter(l.rate, l.burst)}
		l.m[k] = b
	}
	b.seen = now
	return b.l
}

// allow takes a token for k; false with the wait until one is free.
func (l *limiter) allow(k string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	r := l.get(k, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// blocked reports whether k has no token left, without taking one.
func (l *limiter) blocked(k string) (bool, time.Duration) {
	if l == nil {
		return false, 0
	}
	now := time.Now()
	lim := l.get(k, now)
	if lim.TokensAt(now) >= 1 {
		return false, 0
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return true, d
}

func tooMany(what string, wait time.Duration) error {
	secs := int(wait/time.Second) + 1
	err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s: slow down, retry in %ds", what, secs))
	err.Meta().Set("Retry-After", strconv.Itoa(secs))
	return err
}

func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// NewAuthInterceptor resolves `Authorization: Bearer <key>` to a Principal on every
// unary call; a missing, malformed, unknown or revoked key is UNAUTHENTICATED. With
// limits, a key over its rate and an address that keeps failing authentication
// are RESOURCE_EXHAUSTED (HTTP 429) with Retry-After.
func NewAuthInterceptor(keys KeyResolver, limits ...Limits) connect.UnaryInterceptorFunc {
	var perKey, fails *limiter
	if len(limits) > 0 {
		perKey = newLimiter(limits[0].PerKey, 2)
		fails = newLimiter(limits[0].AuthFailuresPerIP, 10)
	}
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().IsClient {
				return next(ctx, req)
			}
			host := peerHost(req.Peer().Addr)
			if busy, wait := fails.blocked(host); busy {
				return nil, tooMany("too many failed authentications from "+host, wait)
			}
			p, err := AuthenticateHeader(ctx, keys, req.Header().Get("Authorization"))
			if err != nil {
				if connect.CodeOf(err) == connect.CodeUnauthenticated {
					fails.allow(host)
				}
				return nil, err
			}
			if ok, wait := perKey.allow(p.KeyID); !ok {
				return nil, tooMany("the key of "+p.Name+" is over its rate", wait)
			}
			return next(WithPrincipal(ctx, p), req)
		}
	}
}

// LimitHTTP applies the same limits to a plain HTTP handler that authenticates
// by bearer token itself (MCP's Streamable HTTP at /mcp): calls per second per
// token, and an address whose calls keep ending 401 is refused with 429 before
// the token is looked at.
func LimitHTTP(next http.Handler, l Limits) http.Handler {
	perKey, fails := newLimiter(l.PerKey, 2), newLimiter(l.AuthFailuresPerIP, 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := peerHost(r.RemoteAddr)
		if busy, wait := fails.blocked(host); busy {
			httpTooMany(w, "too many failed authentications from "+host, wait)
			return
		}
		if tok := r.Header.Get("Authorization"); tok != "" {
			sum := sha256.Sum256([]byte(tok))
			if ok, wait := perKey.allow(hex.EncodeToString(sum[:8])); !ok {
				httpTooMany(w, "this key is over its rate", wait)
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized {
			fails.allow(host)
		}
	})
}

func httpTooMany(w http.ResponseWriter, what string, wait time.Duration) {
	secs := int(wait/time.Second) + 1
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, fmt.Sprintf("%s: slow down, retry in %ds", what, secs), http.StatusTooManyRequests)
}

// statusWriter remembers the status a handler wrote (and passes flushes on, for
// streaming responses).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
