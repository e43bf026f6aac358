package admin

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
)

// Write budgets: what a request may make etcd store is counted against
// its credential's budgets of bytes and of key versions (revisions) per
// second, one token bucket each (golang.org/x/time/rate), per member.
// etcd keeps every version of a key written until it is compacted, and
// its quota counts them all: a request rate bounds requests, not what
// they store, and one request may store a megabyte. The budgets bound
// what hurts etcd, so that the request rate can stay a high ceiling.
//
// A request is charged before it is served what it may write at most,
// from the route's cost (writeCost) and its body's size: the bytes it
// makes etcd store are about its body (a job document, a completion's
// output, a registration), plus a fixed overhead for keys and etcd's own
// records. It is refused with 429 and Retry-After, and writes nothing, if
// its credential's budgets cannot pay it now; it is charged whatever its
// answer (a refused write still cost the member its work). Writes known
// only once served (the attempts a poll hands out, the items of a batch)
// are charged then, and may run a budget into debt, which the next
// request of the credential waits out.

// writeCost is what a route's request may make etcd store, charged
// before it is served.
type writeCost struct {
	// body: the request body's bytes count, up to maxBody (the route's
	// own cap: a larger body is refused by the handler, with 413).
	body    bool
	maxBody int64
	// bodyCopies is how many times the body is stored (0: once): a
	// trigger's payload is in its request and in each of its run's
	// versions.
	bodyCopies int
	// bytes and revisions are charged for every request: the keys and
	// etcd's records of each version, and the small keys written.
	bytes, revisions int
}

func (c writeCost) zero() bool { return !c.body && c.bytes == 0 && c.revisions == 0 }

// Costs of the routes that write (see routes.go).
const (
	// keyOverhead is what etcd stores for one key version besides its
	// value: the key, the revision and the version's record.
	keyOverhead = 256
	// runWrite is the bytes of a run document's rewrite, as an attempt
	// is started or recorded (without its output).
	runWrite = 1 << 10
	// grantBytes and grantRevisions are charged, once served, per
	// attempt a poll handed out: its run document rewritten, its index.
	grantBytes     = runWrite + keyOverhead
	grantRevisions = 2
	// backfillRecord is the bytes of the largest backfill record (its
	// times, outcomes and skipped times: about 55 bytes a time).
	backfillRecord = 2 * api.MaxBackfill * 55
)

var (
	costJobWrite   = writeCost{body: true, maxBody: maxJobBodyBytes, bytes: keyOverhead, revisions: 1}                                 // the spec (a pause key removed with it is a tombstone of a few bytes)
	costBatch      = writeCost{body: true, maxBody: maxBatchBodyBytes, bytes: keyOverhead, revisions: 1}                               // and a revision per item, once decoded
	costJobDelete  = writeCost{bytes: 8 * keyOverhead, revisions: 8}                                                                   // spec, pause key, state, queue, the runs' tombstones
	costPause      = writeCost{bytes: keyOverhead, revisions: 1}                                                                       // the pause key
	costTrigger    = writeCost{body: true, maxBody: maxTriggerBodyBytes, bodyCopies: 4, bytes: runWrite + 4*keyOverhead, revisions: 5} // request, run, queue entry, state, request deleted; a payload in the request, the run, and the run's rewrites as its attempt starts and ends
	costCancel     = writeCost{bytes: runWrite + 4*keyOverhead, revisions: 5}                                                          // request, run, queue and failing entries deleted, request deleted
	costBackfill   = writeCost{bytes: keyOverhead + backfillRecord, revisions: 1}                                                      // the record; its runs once known (chargeMore)
	costComplete   = writeCost{body: true, maxBody: maxProtocolBody, bytes: runWrite + 2*keyOverhead, revisions: 3}
	costRegister   = writeCost{body: true, maxBody: maxProtocolBody, bytes: 2 * keyOverhead, revisions: 2} // registration, its lease
	costDeregister = writeCost{bytes: keyOverhead, revisions: 1}
	// A presence stream stores nothing while it lasts; one that breaks
	// may end in a revocation of its registration, a deregister's worth.
	costPresence   = writeCost{bytes: keyOverhead, revisions: 1}
	costToken      = writeCost{body: true, maxBody: maxTokenBody, bytes: keyOverhead, revisions: 1}
	costAdminWrite = writeCost{bytes: keyOverhead, revisions: 1}
)

// budgets keeps each credential's two buckets. Buckets that have filled
// up again are forgotten when the map grows, so it stays bounded by the
// credentials active recently. Safe for concurrent use.
type budgets struct {
	revisions              rate.Limit
	revsBurst              int
	offBytes, offRevisions bool
	clock                  clockwork.Clock
	// room, if not nil, sizes the bytes budget (WriteBytesFor) from the
	// room above the high-water mark, read at every charge.
	room func() int64

	mu         sync.Mutex // guards the fields below
	bytes      rate.Limit
	bytesBurst int
	sizedFor   int64 // the room bytes and bytesBurst were sized for
	buckets    map[string]*budget
}

// budget is one credential's buckets.
type budget struct {
	bytes, revisions *rate.Limiter
}

func newBudgets(l Limits, room func() int64, clock clockwork.Clock) *budgets {
	b := &budgets{
		bytes: rate.Limit(l.WriteBytes), revisions: rate.Limit(l.WriteRevisions),
		bytesBurst: l.WriteBytesBurst, revsBurst: l.WriteRevisionsBurst,
		offBytes: l.WriteBytes < 0, offRevisions: l.WriteRevisions < 0,
		clock: clock, buckets: map[string]*budget{},
	}
	if l.WriteBytes == 0 {
		b.room = room
		if b.room == nil {
			b.room = func() int64 { return defaultRoom }
		}
		b.resizeLocked(clock.Now())
	}
	return b
}

// resizeLocked sizes the bytes budget from the room, if it is sized so
// and the room changed, every bucket with it.
func (b *budgets) resizeLocked(now time.Time) {
	if b.room == nil {
		return
	}
	room := b.room()
	if room <= 0 {
		room = defaultRoom
	}
	if room == b.sizedFor {
		return
	}
	perSecond, burst := WriteBytesFor(room)
	b.bytes, b.bytesBurst, b.sizedFor = rate.Limit(perSecond), burst, room
	for _, bg := range b.buckets {
		bg.bytes.SetLimitAt(now, b.bytes)
		bg.bytes.SetBurstAt(now, b.bytesBurst)
	}
}

// bytesBudget returns the bytes budget now: per second, and its burst.
func (b *budgets) bytesBudget() (float64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.bytes), b.bytesBurst
}

// of returns credential id's buckets, and the bytes burst.
func (b *budgets) of(id string, now time.Time) (*budget, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resizeLocked(now)
	bg := bucketOf(b.buckets, id, maxIdleBuckets,
		func(v *budget) bool {
			return (b.offBytes || v.bytes.TokensAt(now) >= float64(b.bytesBurst)) && (b.offRevisions || v.revisions.TokensAt(now) >= float64(b.revsBurst))
		},
		func() *budget {
			return &budget{bytes: rate.NewLimiter(b.bytes, b.bytesBurst), revisions: rate.NewLimiter(b.revisions, b.revsBurst)}
		})
	return bg, b.bytesBurst
}

// Reasons of a 429 (jobfleet_api_throttled_total).
const (
	reasonRate      = "request_rate"    // Limits.Rate
	reasonBytes     = "write_bytes"     // Limits.WriteBytes
	reasonRevisions = "write_revisions" // Limits.WriteRevisions
	reasonPolls     = "polls"           // Limits.MaxPolls, MaxPollsPerCredential
	reasonTrigger   = "trigger_rate"    // Config.TriggerRate
	reasonRunIDs    = "trigger_run_ids" // every run ID a trigger could take is taken
)

// throttleCounter counts 429s by reason; the zero value counts nothing.
type throttleCounter struct{ c *prometheus.CounterVec }

func newThrottleCounter(reg prometheus.Registerer) throttleCounter {
	return throttleCounter{registerCounterVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobfleet_api_throttled_total",
		Help: "Requests refused with 429 for a limit, by reason: request_rate, write_bytes, write_revisions, polls, trigger_rate, trigger_run_ids (other 429s are counted by route in jobfleet_api_requests_total).",
	}, []string{"reason"}))}
}

func (t throttleCounter) inc(reason string) {
	if t.c != nil {
		t.c.WithLabelValues(reason).Inc()
	}
}

// take charges credential id nbytes and nrevs now if its buckets can pay
// them (each up to its burst; the rest runs it into debt, so that no
// request is too large ever to pass). If one cannot, it charges nothing
// and returns how long until both can, and the reason.
func (b *budgets) take(id string, nbytes, nrevs int) (wait time.Duration, reason string, ok bool) {
	if (b.offBytes || nbytes == 0) && (b.offRevisions || nrevs == 0) {
		return 0, "", true
	}
	now := b.clock.Now()
	bg, bytesBurst := b.of(id, now)
	var held []*rate.Reservation
	refuse := func(d time.Duration, why string) (time.Duration, string, bool) {
		for _, r := range held {
			r.CancelAt(now)
		}
		return d, why, false
	}
	for _, c := range []struct {
		lim    *rate.Limiter
		n      int
		burst  int
		off    bool
		reason string
	}{{bg.bytes, nbytes, bytesBurst, b.offBytes, reasonBytes}, {bg.revisions, nrevs, b.revsBurst, b.offRevisions, reasonRevisions}} {
		if c.off || c.n == 0 {
			continue
		}
		r := c.lim.ReserveN(now, min(c.n, c.burst))
		if !r.OK() {
			return refuse(time.Second, c.reason)
		}
		held = append(held, r)
		if d := r.DelayFrom(now); d > 0 {
			return refuse(d, c.reason)
		}
	}
	b.owe(bg.bytes, nbytes-bytesBurst, bytesBurst, b.offBytes, now)
	b.owe(bg.revisions, nrevs-b.revsBurst, b.revsBurst, b.offRevisions, now)
	return 0, "", true
}

// charge charges credential id nbytes and nrevs now, whatever its
// buckets hold: what a request wrote beyond what it was charged before.
func (b *budgets) charge(id string, nbytes, nrevs int) {
	now := b.clock.Now()
	bg, bytesBurst := b.of(id, now)
	b.owe(bg.bytes, nbytes, bytesBurst, b.offBytes, now)
	b.owe(bg.revisions, nrevs, b.revsBurst, b.offRevisions, now)
}

// owe takes n tokens of lim, running it into debt if need be (in steps
// of at most burst, which a reservation may not exceed).
func (b *budgets) owe(lim *rate.Limiter, n, burst int, off bool, now time.Time) {
	if off || burst <= 0 {
		return
	}
	for n > 0 {
		step := min(n, burst)
		lim.ReserveN(now, step) // kept: the wait it implies is the debt
		n -= step
	}
}

// budgetMetrics are the budgets' metrics: what was charged, by class of
// credential (its role, and whether it is scoped to a prefix), never by
// credential, so that the series stay few.
type budgetMetrics struct {
	bytes     *prometheus.CounterVec
	revisions *prometheus.CounterVec
}

func newBudgetMetrics(reg prometheus.Registerer) budgetMetrics {
	m := budgetMetrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_api_write_bytes_total",
			Help: "Bytes of etcd writes charged to credentials' write budgets, by the credentials' role and scope (\"prefix\" or \"all\").",
		}, []string{"role", "scope"}),
		revisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_api_write_revisions_total",
			Help: "Key versions (etcd revisions) of writes charged to credentials' write budgets, by the credentials' role and scope (\"prefix\" or \"all\").",
		}, []string{"role", "scope"}),
	}
	m.bytes = registerCounterVec(reg, m.bytes)
	m.revisions = registerCounterVec(reg, m.revisions)
	return m
}

func (m budgetMetrics) add(p auth.Principal, nbytes, nrevs int) {
	scope := "all"
	if p.Prefix != "" {
		scope = "prefix"
	}
	if nbytes > 0 {
		m.bytes.WithLabelValues(string(p.Role), scope).Add(float64(nbytes))
	}
	if nrevs > 0 {
		m.revisions.WithLabelValues(string(p.Role), scope).Add(float64(nrevs))
	}
}

// registerCounterVec registers c with reg (nil: not registered) and
// returns it, or the one registered already under its name (several
// handlers of one registry, as in tests).
func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
	}
	return c
}

// bodySize returns the size of r's body as cost counts it, reading a body
// of unknown length (no Content-Length) into memory, at most maxBody+1
// bytes, and putting it back in front of the rest.
func bodySize(r *http.Request, maxBody int64) int64 {
	if r.ContentLength >= 0 {
		return min(r.ContentLength, maxBody+1)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return 0
	}
	head, _ := io.ReadAll(io.LimitReader(r.Body, maxBody+1)) // a read error is the handler's to report
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return int64(len(head))
}

// chargeKey carries a request's charge function, for handlers that learn
// what they write only as they serve (chargeMore).
type chargeKey struct{}

// chargeMore charges the request's credential for writes beyond what its
// route's cost charged before (the items of a batch); nothing without a
// budget.
func chargeMore(ctx context.Context, nbytes, nrevs int) {
	if f, ok := ctx.Value(chargeKey{}).(func(int, int)); ok {
		f(nbytes, nrevs)
	}
}
