package admin

import (
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"

	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// Limits bound what one credential, and all of them together, may ask of
// a member. Every limit is per member: a client spreading its requests
// over n members gets up to n times as much.
type Limits struct {
	// Rate is the sustained number of requests per second each credential
	// may make, with bursts of Burst; beyond it requests get 429 with
	// Retry-After. It is a high ceiling on what a request costs the
	// member's CPU; what requests make etcd store is bounded by the write
	// budgets below. The worker protocol is not counted (polls are capped
	// below; heartbeats and completions follow the attempts a worker
	// holds). Default DefaultRate/s, burst DefaultBurst; a negative Rate
	// turns the limit off.
	Rate  float64
	Burst int
	// WriteBytes is the sustained bytes per second of etcd writes each
	// credential may cause, worker protocol included, with bursts of
	// WriteBytesBurst; WriteRevisions and WriteRevisionsBurst are the same
	// for key versions written (etcd keeps every version until it is
	// compacted, and its quota counts them). A request is charged what it
	// may write before it is served (budget.go) and refused with 429 and
	// Retry-After if its credential's budgets cannot pay it. WriteBytes 0
	// sizes the bytes budget from etcd's quota (WriteBytesFor, with
	// Member.StorageRoom): a sixteenth a second, in bursts of a quarter,
	// of the room between the high-water mark and the quota; WriteBytesBurst
	// 0 with a WriteBytes set is max(WriteBytes, 4 MiB). WriteRevisions
	// defaults to DefaultWriteRevisions/s (burst
	// DefaultWriteRevisionsBurst). A negative rate turns its budget off.
	WriteBytes          float64
	WriteBytesBurst     int
	WriteRevisions      float64
	WriteRevisionsBurst int
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
	// per-credential cap above the total is the total. Output streams
	// (GET /v1/runs/{id}/output?follow=1) have caps of their own of the
	// same sizes.
	MaxStreams              int
	MaxStreamsPerCredential int
}

// Defaults of Limits' request rate and write budgets.
const (
	// DefaultRate and DefaultBurst make the request rate a ceiling that
	// a client writing one job per request at etcd's speed stays under:
	// 16 clients of one credential creating jobs one request each at
	// some 2 500/s on a two-core machine (the store's speed) are not
	// slowed down.
	DefaultRate  = 5000
	DefaultBurst = 10000
	// DefaultWriteRevisions lets a credential write 50 000 key versions
	// a second, in bursts of DefaultWriteRevisionsBurst, 100 000: jobs
	// created through the batch endpoint (some 24 000 a second on a
	// two-core machine) run at the store's speed. Every key version is
	// also charged at least 256 bytes to the bytes budget.
	DefaultWriteRevisions      = 50000
	DefaultWriteRevisionsBurst = 100000
)

// WriteBytesFor returns the bytes budget of a credential (Limits.WriteBytes
// and WriteBytesBurst left at 0) when room bytes lie between etcd's
// high-water mark and its quota: a sixteenth of the room a second
// (between 256 KiB/s and 64 MiB/s), in bursts of a quarter (between
// 1 MiB and 256 MiB). On etcd's default 2 GiB quota with the default mark
// (409.6 MiB of room) that is 25.6 MiB/s in bursts of 102.4 MiB, more
// than etcd writes on a small machine: ordinary work runs at the store's
// speed. On a 64 MiB quota it is 0.8 MiB/s in bursts of 3.2 MiB: between
// two compactions by history size (a quarter of the room written, at
// least a second apart; internal/storage), one credential fills a
// fraction of the room.
func WriteBytesFor(room int64) (perSecond float64, burst int) {
	perSecond = float64(min(max(room/16, 256<<10), 64<<20))
	burst = int(min(max(room/4, 1<<20), 256<<20))
	return perSecond, burst
}

// defaultRoom is the room above the high-water mark of etcd's default
// quota (2 GiB) with the default mark (80%).
const defaultRoom = (2 << 30) / 5

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{Rate: DefaultRate, Burst: DefaultBurst,
		WriteRevisions: DefaultWriteRevisions, WriteRevisionsBurst: DefaultWriteRevisionsBurst,
		MaxPolls: 1024, MaxPollsPerCredential: 256, MaxStreams: 64, MaxStreamsPerCredential: 16}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Rate == 0 {
		l.Rate = d.Rate
	}
	if l.Burst <= 0 {
		l.Burst = max(d.Burst, int(l.Rate))
	}
	if l.WriteBytes > 0 && l.WriteBytesBurst <= 0 {
		l.WriteBytesBurst = max(4<<20, int(l.WriteBytes))
	}
	if l.WriteRevisions == 0 {
		l.WriteRevisions = d.WriteRevisions
	}
	if l.WriteRevisionsBurst <= 0 {
		l.WriteRevisionsBurst = max(d.WriteRevisionsBurst, int(l.WriteRevisions))
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
	case l.WriteBytesBurst < 0:
		return neg("api-write-bytes-burst", l.WriteBytesBurst)
	case l.WriteRevisionsBurst < 0:
		return neg("api-write-revisions-burst", l.WriteRevisionsBurst)
	case l.WriteBytes > 0 && l.WriteBytes < 1<<10:
		return settings.Invalid("api-write-bytes", l.WriteBytes, "want at least 1 KiB/s, or no job could be written (0: sized from etcd's quota; negative: no budget)")
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
	b := bucketOf(rl.buckets, id, maxIdleBuckets,
		func(b *rate.Limiter) bool { return b.TokensAt(now) >= float64(rl.burst) },
		func() *rate.Limiter { return rate.NewLimiter(rl.limit, rl.burst) })
	// Taken under the lock: a bucket let go of could be forgotten as idle
	// by another credential's request before its token is taken, and the
	// next request of id would get a full bucket.
	defer rl.mu.Unlock()
	return httpserver.TakeToken(b, now)
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
