package admin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/console"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/store"
)

// Authenticator authenticates requests; *auth.Cache implements it.
type Authenticator interface {
	// Authenticate returns the principal of a request with bearer token
	// bearer and verified client certificate CommonName certID (either
	// may be ""); errors match auth.ErrUnauthenticated or
	// auth.ErrNotReady.
	Authenticate(bearer, certID string) (auth.Principal, error)
	// WaitRevision waits until credentials written at etcd revision rev
	// are in effect here.
	WaitRevision(ctx context.Context, rev int64) error
}

// CredentialFollower is an Authenticator that can tell when a credential
// it authenticated stops being valid; *auth.Cache is one. With one, the
// API's long-lived responses (the partition stream, worker long polls)
// run under Follow's context and end as soon as their credential is
// revoked, replaced or expires; without one they end with their request.
type CredentialFollower interface {
	// Follow returns a context derived from ctx that ends when p's
	// credential stops being valid, and a stop function that releases it
	// (see auth.Cache.Follow).
	Follow(ctx context.Context, p auth.Principal) (context.Context, func())
}

// realm is the WWW-Authenticate challenge of every 401.
const realm = `Bearer realm="jobfleet"`

// guard is the one middleware in front of the mux. For every request it
// checks, in order (the first failure answers):
//
//	Host on a loopback listener      403 (DNS rebinding)
//	Origin / Sec-Fetch-Site          403 (another site's page)
//	credential, unless the route is anonymous
//	                                 401 (none, unknown, revoked, expired), 503 (not loaded yet)
//
// and then, in the matched route's wrapper (route):
//
//	role and job-ID prefix           403
//	Content-Type of a body           415
//	rate limit per credential        429 (not the worker protocol)
//	long-poll caps (poll only)       429
//	write budgets per credential     429 (what the request may write, budget.go)
//
// Long-lived responses (long polls, streams) run under a context that
// ends when their credential is revoked or expires (follow).
//
// It counts every request in jobfleet_api_requests_total{route,code},
// every refusal for a limit in jobfleet_api_throttled_total{reason}, and
// writes one audit line per request that may change something (any
// method but GET and HEAD).
type guard struct {
	cfg       Config
	m         Member        // sizes the write budgets, is told what they charged
	authn     Authenticator // nil: none (503 unless cfg.Insecure)
	audit     *zap.Logger
	requests  *prometheus.CounterVec
	throttled throttleCounter
	limiter   *rateLimiter
	budgets   *budgets
	spent     budgetMetrics
	polls     *pollCaps
	mux       *http.ServeMux
	next      http.Handler    // the mux, with JSON replies for unknown routes
	anon      map[string]bool // patterns of the routes that need no credential
	static    map[string]bool // patterns of the console's static files (AccessStatic)
	anonLog   *anonLog        // which refused anonymous requests are audited at info
}

func newGuard(cfg Config, m Member, authn Authenticator, throttled throttleCounter) *guard {
	g := &guard{
		cfg:   cfg,
		m:     m,
		authn: authn,
		audit: cfg.Logger.Named("audit"),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_api_requests_total",
			Help: "HTTP API requests by route (the route pattern, \"unmatched\" for none) and status code.",
		}, []string{"route", "code"}),
		throttled: throttled,
		limiter:   newRateLimiter(cfg.Limits, cfg.Clock),
		budgets:   newBudgets(cfg.Limits, m.StorageRoom, cfg.Clock),
		spent:     newBudgetMetrics(cfg.Registry),
		anonLog:   &anonLog{clock: cfg.Clock, last: map[string]time.Time{}},
		polls:     newPollCaps(cfg.Limits),
		anon:      map[string]bool{},
		static:    map[string]bool{},
	}
	g.requests = registerCounterVec(cfg.Registry, g.requests)
	return g
}

// charged records what credential p was charged: in the metrics, and as
// etcd history written since the last compaction (Member.NoteWritten).
func (g *guard) charged(p auth.Principal, nbytes, nrevs int) {
	g.spent.add(p, nbytes, nrevs)
	if nbytes > 0 {
		g.m.NoteWritten(int64(nbytes))
	}
}

// tooMany writes a 429 with Retry-After wait (whole seconds, at least
// one) and counts it under reason.
func (g *guard) tooMany(w http.ResponseWriter, reason string, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	g.throttled.inc(reason)
	WriteError(w, http.StatusTooManyRequests, msg)
}

// requestInfo is what the guard learns about a request as it is served,
// for the audit line.
type requestInfo struct {
	principal *auth.Principal
	jobID     string
}

type infoKey struct{}

// setJobID records the job a request concerns, for the audit line (the
// create handler knows it only from the body).
func setJobID(ctx context.Context, id string) {
	if info, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		info.jobID = id
	}
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := g.mux.Handler(r)
	label := pattern
	if label == "" {
		label = "unmatched"
	}
	sw := &statusWriter{ResponseWriter: w}
	info := &requestInfo{}
	defer g.finish(sw, r, label, info)
	if g.static[pattern] {
		// Every reply of the console's routes carries its headers: also
		// the redirects of / and /ui to /ui/ and of the paths the mux
		// cleans, and refusals.
		console.SetSecurityHeaders(sw.Header())
	}

	if g.cfg.Loopback {
		if err := checkLoopbackHost(r); err != nil {
			WriteError(sw, http.StatusForbidden, err.Error())
			return
		}
	}
	// A link from another site to the console's page is a navigation
	// like any other: its static files hold no data and change nothing,
	// so the origin check is left to the API requests the page makes.
	if !(g.static[pattern] && (r.Method == http.MethodGet || r.Method == http.MethodHead)) {
		if err := checkOrigin(r); err != nil {
			WriteError(sw, http.StatusForbidden, err.Error())
			return
		}
	}
	ctx := context.WithValue(r.Context(), infoKey{}, info)
	if !g.anonymous(pattern) {
		p, code, err := g.authenticate(r)
		if err != nil {
			if code == http.StatusUnauthorized {
				sw.Header().Set("WWW-Authenticate", realm)
			} else {
				sw.Header().Set("Retry-After", "1")
			}
			WriteError(sw, code, err.Error())
			return
		}
		info.principal = &p
		ctx = auth.NewContext(ctx, p)
		// Not counted as a request without a valid credential by the
		// listener's per-address limit.
		httpserver.MarkAuthenticated(ctx)
	}
	g.next.ServeHTTP(sw, r.WithContext(ctx))
}

// anonymous reports whether the route of pattern needs no credential.
func (g *guard) anonymous(pattern string) bool { return g.anon[pattern] }

// authenticate returns the request's principal, or the status code and
// error of the refusal.
func (g *guard) authenticate(r *http.Request) (auth.Principal, int, error) {
	if g.cfg.Insecure {
		return auth.Principal{ID: auth.AnonymousID, Role: api.RoleAdmin}, 0, nil
	}
	if g.authn == nil {
		return auth.Principal{}, http.StatusServiceUnavailable, errors.New("this member has no credential store; it serves only /healthz and /readyz")
	}
	bearer, err := auth.BearerToken(r)
	if err != nil {
		return auth.Principal{}, http.StatusUnauthorized, err
	}
	certID := ""
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		certID = r.TLS.VerifiedChains[0][0].Subject.CommonName
		if certID == "" {
			return auth.Principal{}, http.StatusUnauthorized, fmt.Errorf("%w: the client certificate has no Subject CommonName naming a credential", auth.ErrUnauthenticated)
		}
	}
	p, err := g.authn.Authenticate(bearer, certID)
	switch {
	case err == nil:
		return p, 0, nil
	case errors.Is(err, auth.ErrNotReady):
		return auth.Principal{}, http.StatusServiceUnavailable, fmt.Errorf("cannot check credentials yet: %w", err)
	default:
		return auth.Principal{}, http.StatusUnauthorized, err
	}
}

// route wraps rt's handler with its authorization, body type, rate limit
// and poll caps.
func (g *guard) route(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access.Anonymous() {
			rt.handler.ServeHTTP(w, r)
			return
		}
		p, ok := auth.FromContext(r.Context())
		if !ok { // cannot happen: the guard authenticated every non-anonymous route
			WriteError(w, http.StatusUnauthorized, "no credential")
			return
		}
		jobID, hasJob := "", false
		switch rt.scope {
		case scopeJob:
			jobID, hasJob = r.PathValue("id"), true
		case scopeQueryJob:
			jobID, hasJob = r.URL.Query().Get("job"), true
		case scopeCalendar:
			jobID, hasJob = r.PathValue("name"), true
		case scopeLimit:
			jobID, hasJob = r.PathValue("key"), true
		case scopeRun:
			jobID, _, _ = store.ParseRunID(r.PathValue("run_id")) // an invalid run ID is in no scope
			hasJob = true
		}
		setJobID(r.Context(), jobID)
		if err := auth.Authorize(p, rt.access, jobID, hasJob); err != nil {
			WriteError(w, http.StatusForbidden, err.Error())
			return
		}
		if err := checkContentType(r); err != nil {
			WriteError(w, http.StatusUnsupportedMediaType, err.Error())
			return
		}
		if rt.longPoll {
			release, err := g.polls.acquire(p.ID)
			if err != nil {
				g.tooMany(w, reasonPolls, time.Second, err.Error())
				return
			}
			defer release()
		} else if rt.access != api.AccessWork {
			if wait, ok := g.limiter.allow(p.ID); !ok {
				g.tooMany(w, reasonRate, wait, fmt.Sprintf("rate limit of credential %q exceeded (%g requests/s, burst %d); retry in %v", p.ID, g.cfg.Limits.Rate, g.cfg.Limits.Burst, wait.Round(1e6)))
				return
			}
		}
		if !g.pay(w, r, rt, p) {
			return
		}
		if rt.longPoll || rt.stream {
			ctx, stop := g.follow(r.Context(), p)
			defer stop()
			r = r.WithContext(ctx)
		}
		rt.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chargeKey{}, func(nbytes, nrevs int) {
			g.budgets.charge(p.ID, nbytes, nrevs)
			g.charged(p, nbytes, nrevs)
		})))
	})
}

// follow returns the context a long-lived response of p runs under: one
// that ends when p's credential stops being valid, if the Authenticator
// can tell (CredentialFollower).
func (g *guard) follow(ctx context.Context, p auth.Principal) (context.Context, func()) {
	if f, ok := g.authn.(CredentialFollower); ok && !g.cfg.Insecure {
		return f.Follow(ctx, p)
	}
	return ctx, func() {}
}

// pay charges the request's credential its route's cost (a poll: one
// attempt's; the rest once served), or answers 429 and returns false.
func (g *guard) pay(w http.ResponseWriter, r *http.Request, rt route, p auth.Principal) bool {
	nbytes, nrevs := rt.cost.bytes, rt.cost.revisions
	if rt.longPoll {
		nbytes, nrevs = grantBytes, grantRevisions
	}
	if rt.cost.body {
		nbytes += int(bodySize(r, rt.cost.maxBody)) * max(1, rt.cost.bodyCopies)
	}
	if nbytes == 0 && nrevs == 0 {
		return true
	}
	wait, reason, ok := g.budgets.take(p.ID, nbytes, nrevs)
	if !ok {
		perSecond, burst := g.budgets.bytesBudget()
		what := fmt.Sprintf("%s a second (bursts of %s)", humanize.IBytes(uint64(perSecond)), humanize.IBytes(uint64(burst)))
		if reason == reasonRevisions {
			what = fmt.Sprintf("%g key versions a second (bursts of %d)", g.cfg.Limits.WriteRevisions, g.cfg.Limits.WriteRevisionsBurst)
		}
		g.tooMany(w, reason, wait, fmt.Sprintf("write budget of credential %q exceeded: it may write %s to etcd through this member, and this request may write %s (%d key versions); retry in %v",
			p.ID, what, humanize.IBytes(uint64(nbytes)), nrevs, wait.Round(time.Millisecond)))
		return false
	}
	g.charged(p, nbytes, nrevs)
	return true
}
