package httpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// anonLimiter rate-limits, per client address (AddrKey), the requests
// that present no valid credential: those that present none, and those
// whose handler does not mark them authenticated (MarkAuthenticated). See
// Config.AnonymousRate. Safe for concurrent use.
type anonLimiter struct {
	limit   rate.Limit
	burst   int
	hold    time.Duration // how long a refusal is held before it is answered
	clock   clockwork.Clock
	metrics *metrics

	mu      sync.Mutex // guards buckets
	buckets map[AddrKey]*rate.Limiter
}

// maxAnonBuckets bounds the addresses an anonLimiter keeps a bucket for.
// Beyond it, buckets that are full again are forgotten; if none is, the
// addresses without a bucket share one (overflowKey), so that a client
// with many addresses cannot grow the map.
const maxAnonBuckets = 1 << 16

// overflowKey is the shared bucket of addresses that found the map full.
// It is not a valid prefix, so no address has it.
var overflowKey = AddrKey{}

// anonHold is how long a refusal of the anonymous limit is held.
const anonHold = time.Second

func newAnonLimiter(r float64, burst int, hold time.Duration, clock clockwork.Clock, m *metrics) *anonLimiter {
	return &anonLimiter{limit: rate.Limit(r), burst: burst, hold: hold, clock: clock, metrics: m, buckets: map[AddrKey]*rate.Limiter{}}
}

// bucketLocked returns the bucket of key. The caller holds a.mu.
func (a *anonLimiter) bucketLocked(key AddrKey, now time.Time) *rate.Limiter {
	if b := a.buckets[key]; b != nil {
		return b
	}
	if len(a.buckets) >= maxAnonBuckets {
		for k, b := range a.buckets {
			if b.TokensAt(now) >= float64(a.burst) {
				delete(a.buckets, k)
			}
		}
		if len(a.buckets) >= maxAnonBuckets {
			key = overflowKey
			if b := a.buckets[key]; b != nil {
				return b
			}
		}
	}
	b := rate.NewLimiter(a.limit, a.burst)
	a.buckets[key] = b
	return b
}

// take takes a token of key's bucket; if there is none, it returns false
// and how long until there is one. The token is taken under the lock that
// finds the bucket: another address's request could otherwise forget the
// bucket as full in between, and key's next request would get a new one.
func (a *anonLimiter) take(key AddrKey) (time.Duration, bool) {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return TakeToken(a.bucketLocked(key, now), now)
}

// TakeToken takes one token of bucket b at now, or returns how long until
// b has one (a second where it never can: a burst of 0), taking nothing.
// It is what a limiter answering 429 with a Retry-After asks of its
// bucket; b is safe for concurrent use, but a caller that may forget
// buckets (a map bounded by evicting the full ones) takes the token under
// the lock that found b.
func TakeToken(b *rate.Limiter, now time.Time) (wait time.Duration, ok bool) {
	res := b.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, false
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// hasCredential reports whether r presents a credential: an
// Authorization header or a TLS client certificate.
func hasCredential(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || (r.TLS != nil && len(r.TLS.PeerCertificates) > 0)
}

// authMark is where MarkAuthenticated records that the handler accepted a
// request's credential.
type authMark struct{ ok atomic.Bool }

type authMarkKey struct{}

// MarkAuthenticated tells the listener's anonymous rate limit that the
// request of ctx (a request's context, or one derived from it) carries a
// valid credential, so that it is not counted: call it as soon as the
// handler has authenticated the request, before writing the reply. A
// request the handler does not mark counts as one without a valid
// credential (Config.AnonymousRate). It does nothing for a context of
// another server.
func MarkAuthenticated(ctx context.Context) {
	if m, ok := ctx.Value(authMarkKey{}).(*authMark); ok {
		m.ok.Store(true)
	}
}

// wrap returns h behind the limit: a request that presents no credential
// takes a token of its address's bucket before h runs, and is answered
// 429 with Retry-After if there is none. A request that presents one
// always reaches h, so that a valid credential is served whatever its
// address sends; if h does not mark it authenticated (MarkAuthenticated)
// before its reply, the reply takes a token, and becomes a 429 if there
// is none.
func (a *anonLimiter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := addrKeyOfRemote(r.RemoteAddr)
		if !hasCredential(r) {
			if wait, ok := a.take(key); !ok {
				a.refuse(r.Context(), w, key, wait)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		mark := &authMark{}
		r = r.WithContext(context.WithValue(r.Context(), authMarkKey{}, mark))
		h.ServeHTTP(&refusalWriter{ResponseWriter: w, a: a, key: key, mark: mark, ctx: r.Context()}, r)
	})
}

// refuse answers 429 for key's address, after holding the request for
// a.hold (or until ctx ends): a client that floods gets one refusal a
// second per connection instead of as many as it can send, which bounds
// what its refusals cost the member to its connections (of which its
// address may hold Config.MaxConnectionsPerAddress).
func (a *anonLimiter) refuse(ctx context.Context, w http.ResponseWriter, key AddrKey, wait time.Duration) {
	a.metrics.anonRefused.Inc()
	if a.hold > 0 {
		t := a.clock.NewTimer(a.hold)
		select {
		case <-t.Chan():
		case <-ctx.Done():
		}
		t.Stop()
		wait = max(0, wait-a.hold)
	}
	msg := fmt.Sprintf("too many requests without a valid credential from %s (at most %g a second, bursts of %d); retry later (Retry-After) or send a credential",
		key, float64(a.limit), a.burst)
	body, _ := json.Marshal(map[string]string{"error": msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}

// refusalWriter takes a token of its address's bucket when the handler
// replies to a request it did not mark authenticated, and turns the reply
// into a 429 (dropping the handler's) if there is none.
type refusalWriter struct {
	http.ResponseWriter
	a       *anonLimiter
	key     AddrKey
	mark    *authMark
	ctx     context.Context // the request's
	decided bool
	dropped bool // the handler's reply became a 429: its writes go nowhere
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.decided {
		if !w.dropped {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	w.decided = true
	if !w.mark.ok.Load() {
		if wait, ok := w.a.take(w.key); !ok {
			w.dropped = true
			h := w.Header()
			for k := range h {
				delete(h, k) // the handler's headers (a challenge, a content type) belong to its reply
			}
			w.a.refuse(w.ctx, w.ResponseWriter, w.key, wait)
			return
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Write(p []byte) (int, error) {
	if !w.decided {
		w.WriteHeader(http.StatusOK)
	}
	if w.dropped {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the reply, unless it was dropped.
func (w *refusalWriter) Flush() {
	if !w.decided {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.dropped {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
