package admin

import (
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// Limits bound what one credential, and all of them together, may ask of
// a member.
type Limits struct {
	// Rate is the sustained number of requests per second each credential
	// may make, with bursts of Burst; beyond it requests get 429 with
	// Retry-After. The worker protocol is not counted (polls are capped
	// below; heartbeats and completions follow the attempts a worker
	// holds). Default 100/s, burst 500; a negative Rate turns the
	// limit off.
	Rate  float64
	Burst int
	// MaxPolls is the most worker long polls this member holds at once,
	// and MaxPollsPerCredential the most per credential; beyond either a
	// poll gets 429 with Retry-After. Defaults 1024 and 256.
	MaxPolls              int
	MaxPollsPerCredential int
	// MaxStreams is the most partition streams (GET
	// /v1/cluster/partitions/watch, which the console holds open) this
	// member serves at once, and MaxStreamsPerCredential the most per
	// credential, so that one credential cannot take them all; beyond
	// either a stream gets 429 with Retry-After. Defaults 64 and 16; a
	// per-credential cap above the total is the total.
	MaxStreams              int
	MaxStreamsPerCredential int
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{Rate: 100, Burst: 500, MaxPolls: 1024, MaxPollsPerCredential: 256, MaxStreams: 64, MaxStreamsPerCredential: 16}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Rate == 0 {
		l.Rate = d.Rate
	}
	if l.Burst <= 0 {
		l.Burst = max(d.Burst, int(l.Rate))
	}
	if l.MaxPolls <= 0 {
		l.MaxPolls = d.MaxPolls
	}
	if l.MaxPollsPerCredential <= 0 {
		l.MaxPollsPerCredential = min(d.MaxPollsPerCredential, l.MaxPolls)
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = d.MaxStreams
	}
	if l.MaxStreamsPerCredential <= 0 {
		l.MaxStreamsPerCredential = min(d.MaxStreamsPerCredential, l.MaxStreams)
	}
	return l
}

// Validate reports a limit that makes no sense, as a *settings.Error
// naming its flag. Zero limits are their defaults.
func (l Limits) Validate() error {
	neg := func(key string, v int) error {
		return settings.Invalid(key, v, "want at least 1 (0: the default)")
	}
	switch {
	case l.Burst < 0:
		return neg("api-burst", l.Burst)
	case l.MaxStreams < 0:
		return neg("max-streams", l.MaxStreams)
	case l.MaxStreamsPerCredential < 0:
		return neg("max-streams-per-credential", l.MaxStreamsPerCredential)
	case l.MaxPolls < 0:
		return neg("max-polls", l.MaxPolls)
	case l.MaxPollsPerCredential < 0:
		return neg("max-polls-per-credential", l.MaxPollsPerCredential)
	case l.MaxPolls > 0 && l.MaxPollsPerCredential > l.MaxPolls:
		return settings.Invalid("max-polls-per-credential", l.MaxPollsPerCredential, "want at most --max-polls, %d", l.MaxPolls)
	}
	return nil
}

// rateLimiter keeps a token bucket (golang.org/x/time/rate) per
// credential ID. Buckets that have filled up again are forgotten when the
// map grows, so it stays bounded by the credentials active recently.
type rateLimiter struct {
	limit rate.Limit
	burst int
	clock clockwork.Clock
	off   bool

	mu      sync.Mutex // guards buckets
	buckets map[string]*rate.Limiter
}

// maxIdleBuckets is the size above which full (idle) buckets are dropped.
const maxIdleBuckets = 1024

func newRateLimiter(l Limits, clock clockwork.Clock) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(l.Rate), burst: l.Burst, clock: clock, off: l.Rate < 0, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token of credential id's bucket; if there is none, it
// returns false and how long until there is.
func (rl *rateLimiter) allow(id string) (time.Duration, bool) {
	if rl.off {
		return 0, true
	}
	now := rl.clock.Now()
	rl.mu.Lock()
	b := rl.buckets[id]
	if b == nil {
		if len(rl.buckets) >= maxIdleBuckets {
			for k, v := range rl.buckets {
				if v.TokensAt(now) >= float64(rl.burst) {
					delete(rl.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(rl.limit, rl.burst)
		rl.buckets[id] = b
	}
	rl.mu.Unlock()
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

// pollCaps counts the long polls held, in total and per credential.
type pollCaps struct {
	max, perCredential int

	mu    sync.Mutex // guards total and by
	total int
	by    map[string]int
}

func newPollCaps(l Limits) *pollCaps {
	return &pollCaps{max: l.MaxPolls, perCredential: l.MaxPollsPerCredential, by: map[string]int{}}
}

// acquire counts a poll of credential id, or says which cap it would
// exceed. release must be called when the poll ends.
func (pc *pollCaps) acquire(id string) (release func(), err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch {
	case pc.by[id] >= pc.perCredential:
		return nil, fmt.Errorf("too many concurrent polls: credential %q holds %d (the limit per credential); retry later", id, pc.by[id])
	case pc.total >= pc.max:
		return nil, fmt.Errorf("too many concurrent polls on this member (%d, the limit); retry later", pc.total)
	}
	pc.total++
	pc.by[id]++
	return func() {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pc.total--
		if pc.by[id]--; pc.by[id] == 0 {
			delete(pc.by, id)
		}
	}, nil
}
