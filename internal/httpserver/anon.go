package httpserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// anonLimiter rate-limits, per client address (AddrKey), the requests
// that present no credential, and counts against the same budget the
// requests whose credential the handler refuses (401). See
// Config.AnonymousRate. Safe for concurrent use.
type anonLimiter struct {
	limit   rate.Limit
	burst   int
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

func newAnonLimiter(r float64, burst int, clock clockwork.Clock, m *metrics) *anonLimiter {
	return &anonLimiter{limit: rate.Limit(r), burst: burst, clock: clock, metrics: m, buckets: map[AddrKey]*rate.Limiter{}}
}

// bucket returns the bucket of key.
func (a *anonLimiter) bucket(key AddrKey, now time.Time) *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
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
// and how long until there is one.
func (a *anonLimiter) take(key AddrKey) (time.Duration, bool) {
	now := a.clock.Now()
	res := a.bucket(key, now).ReserveN(now, 1)
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

// wrap returns h behind the limit: a request without a credential takes a
// token of its address's bucket before h runs, and is answered 429 with
// Retry-After if there is none; a request with a credential always
// reaches h (so that a valid credential is served whatever its address
// sends), and if h answers it 401 it takes a token then, its 401 becoming
// a 429 if there is none.
func (a *anonLimiter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := addrKeyOfRemote(r.RemoteAddr)
		if !hasCredential(r) {
			if wait, ok := a.take(key); !ok {
				a.refuse(w, key, wait)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&refusalWriter{ResponseWriter: w, a: a, key: key}, r)
	})
}

// refuse answers 429 for key's address.
func (a *anonLimiter) refuse(w http.ResponseWriter, key AddrKey, wait time.Duration) {
	a.metrics.anonRefused.Inc()
	msg := fmt.Sprintf("too many requests without a valid credential from %s (at most %g a second, bursts of %d); retry in %v or send a credential",
		key, float64(a.limit), a.burst, wait.Round(time.Millisecond))
	body, _ := json.Marshal(map[string]string{"error": msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}

// refusalWriter takes a token of its address's bucket when the handler
// answers 401, and turns the reply into a 429 (dropping the handler's
// body) if there is none.
type refusalWriter struct {
	http.ResponseWriter
	a       *anonLimiter
	key     AddrKey
	decided bool
	dropped bool // the handler's 401 became a 429: its writes go nowhere
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.decided {
		if !w.dropped {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	w.decided = true
	if code == http.StatusUnauthorized {
		if wait, ok := w.a.take(w.key); !ok {
			w.dropped = true
			h := w.Header()
			h.Del("WWW-Authenticate")
			w.a.refuse(w.ResponseWriter, w.key, wait)
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

// Unwrap lets http.ResponseController reach the connection.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
