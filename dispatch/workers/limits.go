package workers

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// budgets keeps two token buckets (golang.org/x/time/rate) per credential
// ID: its registration requests and its registration writes. Credentials
// whose buckets have both filled up again are forgotten when the map
// grows, so it stays bounded by the credentials active recently. Safe for
// concurrent use.
type budgets struct {
	requests, writes limit
	clock            clockwork.Clock

	mu sync.Mutex // guards by
	by map[string]*budget
}

// limit is one bucket's rate and burst; off when the rate is negative.
type limit struct {
	rate  float64
	burst int
}

func (l limit) off() bool { return l.rate < 0 }

type budget struct {
	requests, writes *rate.Limiter // nil when their limit is off
}

// maxIdleBudgets is the size above which full (idle) budgets are dropped.
const maxIdleBudgets = 1024

func newBudgets(cfg Config) *budgets {
	return &budgets{
		requests: limit{cfg.RequestRate, cfg.RequestBurst},
		writes:   limit{cfg.WriteRate, cfg.WriteBurst},
		clock:    cfg.Clock,
		by:       map[string]*budget{},
	}
}

// of returns credential id's budget, creating it.
func (b *budgets) of(id string, now time.Time) *budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bg := b.by[id]; bg != nil {
		return bg
	}
	if len(b.by) >= maxIdleBudgets {
		for k, v := range b.by {
			if full(v.requests, b.requests, now) && full(v.writes, b.writes, now) {
				delete(b.by, k)
			}
		}
	}
	bg := &budget{}
	if !b.requests.off() {
		bg.requests = rate.NewLimiter(rate.Limit(b.requests.rate), b.requests.burst)
	}
	if !b.writes.off() {
		bg.writes = rate.NewLimiter(rate.Limit(b.writes.rate), b.writes.burst)
	}
	b.by[id] = bg
	return bg
}

func full(l *rate.Limiter, lim limit, now time.Time) bool {
	return l == nil || l.TokensAt(now) >= float64(lim.burst)
}

// request takes a token of credential id's request bucket, or returns a
// *RateError saying when one will be there.
func (b *budgets) request(id string) error {
	now := b.clock.Now()
	return take(b.of(id, now).requests, b.requests, "requests", now)
}

// write takes n tokens of credential id's write bucket, or returns a
// *RateError saying when they will be there.
func (b *budgets) write(id string, n int) error {
	now := b.clock.Now()
	return takeN(b.of(id, now).writes, b.writes, "writes", n, now)
}

// tryWrite takes n tokens of credential id's write bucket if they are
// there, and reports whether it did.
func (b *budgets) tryWrite(id string, n int) bool {
	now := b.clock.Now()
	l := b.of(id, now).writes
	return l == nil || l.AllowN(now, n)
}

func take(l *rate.Limiter, lim limit, what string, now time.Time) error {
	return takeN(l, lim, what, 1, now)
}

func takeN(l *rate.Limiter, lim limit, what string, n int, now time.Time) error {
	if l == nil {
		return nil
	}
	r := l.ReserveN(now, n)
	if !r.OK() {
		return &RateError{What: what, Rate: lim.rate, Burst: lim.burst, RetryAfter: time.Second}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &RateError{What: what, Rate: lim.rate, Burst: lim.burst, RetryAfter: d}
	}
	return nil
}
