package standby

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/store"
)

// ErrInvalidConfig wraps every error of New.
var ErrInvalidConfig = errors.New("standby: invalid config")

// Member is what a Standby needs of the member it keeps copies for: its
// etcd client and keys, its clock and request timeout, its reads of a
// partition and its decoding of specs into T (the memory the member's
// loads build from a spec). Dispatcher.NewStandby (package dispatch)
// fills it in.
type Member[T any] struct {
	// Client is the member's etcd client. Required.
	Client *clientv3.Client
	// Keys are the cluster's keys (its namespace).
	Keys store.Keys
	// Clock; nil is the real clock.
	Clock clockwork.Clock
	// RequestTimeout bounds each etcd request the standby makes itself.
	// Default 5s.
	RequestTimeout time.Duration
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Read calls fn for every key of partition p that a load reads (specs
	// and triggers, states, queue and failing-runs entries, runs), each
	// prefix in key order, all at one revision, which it returns. It reads
	// in turn with the member's loads: only while none of its partitions
	// waits for its load, holding one of its load slots. Required.
	Read func(ctx context.Context, p int, fn func(kv *mvccpb.KeyValue)) (int64, error)
	// Decode returns a spec's value decoded, or nil if it does not decode
	// cleanly (a load decodes it again then, and logs why). Copies hold
	// what it returns; Snapshot.Decoded hands out shallow copies. Required.
	Decode func(kv *mvccpb.KeyValue) *T
}

// Config configures a Standby.
type Config struct {
	// CatchUp bounds how long an acquisition waits for a copy to have
	// seen every change up to the ownership's epoch before the partition
	// is read from etcd instead. Default 2s.
	CatchUp time.Duration
	// Metrics records the standby's metrics; nil records nothing.
	Metrics *Metrics
}

// Standby keeps warm copies of the partitions this member is the heir of,
// so that when it acquires one (its owner crashed or left) it builds the
// partition's memory from the copy instead of reading it from etcd.
//
// A copy is one read of the partition's specs, triggers, states, queue,
// failing-runs entries and runs at a revision (the reads a load makes),
// then every change after it, from one watch of the member over those
// keys of every partition. The watch delivers changes in revision order,
// so the copies are exact as of the last revision it delivered (its
// progress). An acquisition with epoch E (the owner key's creation
// revision) takes the copy once the progress reached E, asking etcd for
// a progress notification if need be: the previous owner could write
// nothing after its owner key was deleted, before E, so the copy is then
// what a read of etcd would return, at the revision the copy is at. Any
// doubt falls back to reading etcd: no copy, a copy still being read, a
// watch that failed (compaction, cancellation: every copy is dropped and
// read again), a progress that does not reach E within CatchUp.
//
// Copies hold specs decoded (decoded as they come, outside the watch
// loop's lock), other keys as etcd returned them.
//
// The standby never writes to etcd. It reads each new copy through
// Member.Read, in turn with the member's loads. Create it before the
// member's partitions run, then Run it once; the partitions' loads call
// Take, Skip and Loaded from their goroutines.
type Standby[T any] struct {
	m     Member[T]
	heirs HeirSource
	cfg   Config
	lg    *zap.Logger
	lo    string // the watched range: [lo, hi)
	hi    string
	want  chan struct{} // buffer 1: an acquisition waits for the progress
	read  chan struct{} // buffer 1: copies are waiting to be read

	// applyHook, if set (SetWatchHook), is called by the watch loop with
	// each watch response before it looks at it.
	applyHook func(*clientv3.WatchResponse)

	mu       sync.Mutex // guards the fields below
	copies   map[int]*partCopy[T]
	queue    []int         // partitions whose copy is to be read, in order
	live     bool          // the watch runs: copies are followed
	progress int64         // every change up to this revision is applied to the copies
	bytes    int64         // of every copy
	reading  int           // copies not read yet
	changed  chan struct{} // closed and replaced when any of the above changes
}

// New returns the standby of member m following heirs. It starts nothing.
// Errors wrap ErrInvalidConfig.
func New[T any](m Member[T], heirs HeirSource, cfg Config) (*Standby[T], error) {
	switch {
	case heirs == nil:
		return nil, fmt.Errorf("%w: a standby needs its heir source", ErrInvalidConfig)
	case m.Client == nil || m.Read == nil || m.Decode == nil:
		return nil, fmt.Errorf("%w: a standby needs its member's client, reads and decoding", ErrInvalidConfig)
	case cfg.CatchUp < 0:
		return nil, fmt.Errorf("%w: standby catch-up %v is negative", ErrInvalidConfig, cfg.CatchUp)
	}
	if cfg.CatchUp == 0 {
		cfg.CatchUp = 2 * time.Second
	}
	if m.Clock == nil {
		m.Clock = clockwork.NewRealClock()
	}
	if m.RequestTimeout == 0 {
		m.RequestTimeout = 5 * time.Second
	}
	if m.Logger == nil {
		m.Logger = zap.NewNop()
	}
	k := m.Keys
	kinds := []string{k.JobsPrefix(), k.AllStatePrefix(), k.AllQueuePrefix(), k.AllFailingPrefix(), k.AllRunsPrefix()}
	slices.Sort(kinds)
	return &Standby[T]{
		m: m, heirs: heirs, cfg: cfg,
		lg:      m.Logger,
		lo:      kinds[0],
		hi:      clientv3.GetPrefixRangeEnd(kinds[len(kinds)-1]),
		want:    make(chan struct{}, 1),
		read:    make(chan struct{}, 1),
		copies:  map[int]*partCopy[T]{},
		changed: make(chan struct{}),
	}, nil
}

// SetWatchHook makes the standby's watch loop call f with each watch
// response before it looks at it (f may block it, or change the
// response): for tests that hold a copy back. Call it before Run.
func (s *Standby[T]) SetWatchHook(f func(*clientv3.WatchResponse)) { s.applyHook = f }

// Run follows the copies until ctx is cancelled; it returns once every
// goroutine it started has returned.
func (s *Standby[T]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.readLoop(ctx) })
	defer wg.Wait()
	bo := retry.New(retry.Etcd)
	for ctx.Err() == nil {
		followed, err := s.follow(ctx)
		s.drop()
		if ctx.Err() != nil {
			break
		}
		if followed {
			bo.Reset()
		}
		s.lg.Warn("standby watch ended; copies dropped, reading them again", zap.Error(err))
		retry.Sleep(ctx, s.m.Clock, bo.Next())
	}
}

// Held reports whether the standby holds partition p's copy, read and
// followed.
func (s *Standby[T]) Held(p int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.copies[p]
	return s.live && c != nil && !c.reading
}

// drop forgets every copy: the watch that kept them ended.
func (s *Standby[T]) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = false
	s.copies, s.queue, s.bytes, s.reading = map[int]*partCopy[T]{}, nil, 0, 0
	s.changedLocked()
}

func (s *Standby[T]) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
	s.cfg.Metrics.held(len(s.copies), s.reading, s.bytes)
}
