package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/shard"
)

// Heirs says which standby copies a member keeps.
type Heirs struct {
	// Of are the partitions the member is the heir of (see
	// shard.Ring.Heirs: it would be given each if its owner went away):
	// their copies are made and followed.
	Of map[int]bool
	// Given are the partitions the ring gives the member: the copy of one
	// it was the heir of is kept, for its acquisition to take, but none
	// is made.
	Given map[int]bool
}

// HeirSource returns the member's Heirs and a channel closed when they may
// have changed. A Standby calls it from one goroutine only.
type HeirSource func() (Heirs, <-chan struct{})

// ControllerHeirs is the HeirSource of member id following ctrl's ring:
// the heirs are computed again each time the ring changes (not on every
// status change). It is not safe for concurrent use (one Standby calls
// it).
func ControllerHeirs(ctrl *shard.Controller, id string, lg *zap.Logger) HeirSource {
	var ring *shard.Ring
	heirs := Heirs{Of: map[int]bool{}, Given: map[int]bool{}}
	return func() (Heirs, <-chan struct{}) {
		st, changed := ctrl.Status()
		if st.Ring != ring && st.Ring != nil {
			ring = st.Ring
			h, err := ring.Heirs(id)
			if err != nil {
				lg.Warn("cannot compute the partitions this member is heir of; keeping no standby copies", zap.Error(err))
			}
			heirs = Heirs{Of: make(map[int]bool, len(h)), Given: map[int]bool{}}
			for p := range h {
				heirs.Of[p] = true
			}
			for _, p := range ring.Targets(id) {
				heirs.Given[p] = true
			}
		}
		return heirs, changed
	}
}

// StandbyConfig configures a Standby.
type StandbyConfig struct {
	// CatchUp bounds how long an acquisition waits for a copy to have
	// seen every change up to the ownership's epoch before the partition
	// is read from etcd instead. Default 2s.
	CatchUp time.Duration
	// Metrics records the standby's metrics; nil records nothing.
	Metrics *StandbyMetrics
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
// The standby never writes to etcd. It reads each new copy while holding
// one of the member's load slots (Config.LoadsInFlight), like a load, and
// only while none of the member's partitions waits for its load. Create
// it with Dispatcher.NewStandby before the partitions run, then Run it
// once; the partitions' loads call it from their goroutines.
type Standby struct {
	d     *Dispatcher
	heirs HeirSource
	cfg   StandbyConfig
	lg    *zap.Logger
	lo    string // the watched range: [lo, hi)
	hi    string
	want  chan struct{} // buffer 1: an acquisition waits for the progress
	read  chan struct{} // buffer 1: copies are waiting to be read

	// applyHook, if set (tests), is called by the watch loop with each
	// watch response before it looks at it.
	applyHook func(*clientv3.WatchResponse)

	mu       sync.Mutex // guards the fields below
	copies   map[int]*standbyCopy
	queue    []int         // partitions whose copy is to be read, in order
	live     bool          // the watch runs: copies are followed
	progress int64         // every change up to this revision is applied to the copies
	bytes    int64         // of every copy
	reading  int           // copies not read yet
	changed  chan struct{} // closed and replaced when any of the above changes
}

// standbyCopy is one partition's copy.
type standbyCopy struct {
	// reading is set until the first read is in: events are buffered
	// meanwhile.
	reading  bool
	buffered []*clientv3.Event
	rev      int64 // of the first read: events up to it are in it
	kvs      map[string]*mvccpb.KeyValue
	// jobs are the specs of kvs decoded, by their key-value; those are
	// held without their value.
	jobs  map[*mvccpb.KeyValue]*jobEntry
	bytes int64
}

// NewStandby returns the standby of d following heirs. It starts nothing;
// it must be called before d's partitions run (before the controller),
// and at most once.
func (d *Dispatcher) NewStandby(heirs HeirSource, cfg StandbyConfig) (*Standby, error) {
	if heirs == nil {
		return nil, fmt.Errorf("%w: a standby needs its heir source", ErrInvalidConfig)
	}
	if cfg.CatchUp < 0 {
		return nil, fmt.Errorf("%w: standby catch-up %v is negative", ErrInvalidConfig, cfg.CatchUp)
	}
	if cfg.CatchUp == 0 {
		cfg.CatchUp = 2 * time.Second
	}
	kinds := []string{d.keys.JobsPrefix(), d.keys.AllStatePrefix(), d.keys.AllQueuePrefix(), d.keys.AllFailingPrefix(), d.keys.AllRunsPrefix()}
	slices.Sort(kinds)
	s := &Standby{
		d: d, heirs: heirs, cfg: cfg,
		lg:      d.lg.Named("standby"),
		lo:      kinds[0],
		hi:      clientv3.GetPrefixRangeEnd(kinds[len(kinds)-1]),
		want:    make(chan struct{}, 1),
		read:    make(chan struct{}, 1),
		copies:  map[int]*standbyCopy{},
		changed: make(chan struct{}),
	}
	if !d.standby.CompareAndSwap(nil, s) {
		return nil, fmt.Errorf("%w: the dispatcher has a standby already", ErrInvalidConfig)
	}
	return s, nil
}

// Run follows the copies until ctx is cancelled; it returns once every
// goroutine it started has returned.
func (s *Standby) Run(ctx context.Context) {
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
		retry.Sleep(ctx, s.d.cfg.Clock, bo.Next())
	}
}

// drop forgets every copy: the watch that kept them ended.
func (s *Standby) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = false
	s.copies, s.queue, s.bytes, s.reading = map[int]*standbyCopy{}, nil, 0, 0
	s.changedLocked()
}

func (s *Standby) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
	s.cfg.Metrics.held(len(s.copies), s.reading, s.bytes)
}

// follow watches the copies' keys from the present until ctx ends or the
// watch fails; followed tells whether the watch started.
func (s *Standby) follow(ctx context.Context) (followed bool, err error) {
	// A watch stream of its own: progress requests are answered per
	// stream, once every watcher on it has caught up.
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "jobfleet-watch", "standby"))
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, s.d.cfg.RequestTimeout)
	resp, err := s.d.client.Get(rctx, s.lo) // one key: the revision
	rcancel()
	if err != nil {
		return false, err
	}
	rev := resp.Header.Revision
	wch := s.d.client.Watch(wctx, s.lo, clientv3.WithRange(s.hi), clientv3.WithRev(rev+1))
	s.mu.Lock()
	s.live, s.progress = true, rev
	s.changedLocked()
	s.mu.Unlock()
	heirs, heirsChanged := s.heirs()
	s.setHeirs(heirs)
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-heirsChanged:
			heirs, heirsChanged = s.heirs()
			s.setHeirs(heirs)
		case <-s.want:
			if err := s.d.client.RequestProgress(wctx); err != nil {
				s.lg.Debug("progress request failed", zap.Error(err))
			}
		case wr, ok := <-wch:
			if !ok {
				return true, errors.New("watch closed")
			}
			if s.applyHook != nil {
				s.applyHook(&wr)
			}
			if err := wr.Err(); err != nil {
				return true, err
			}
			s.apply(&wr)
		}
	}
}

// setHeirs starts a copy of each new heir partition and drops those of
// partitions this member neither inherits nor is given.
func (s *Standby) setHeirs(heirs Heirs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.queue)
	for p, c := range s.copies {
		if !heirs.Of[p] && !heirs.Given[p] {
			s.bytes -= c.bytes
			if c.reading {
				s.reading--
			}
			delete(s.copies, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(heirs.Of)) {
		if s.copies[p] == nil {
			s.copies[p] = &standbyCopy{reading: true, kvs: map[string]*mvccpb.KeyValue{}, jobs: map[*mvccpb.KeyValue]*jobEntry{}}
			s.queue = append(s.queue, p)
			s.reading++
		}
	}
	s.changedLocked()
	if len(s.queue) > n {
		select {
		case s.read <- struct{}{}:
		default:
		}
	}
}

// apply applies a watch response to the copies and advances the
// progress. The specs of partitions held are decoded first, without the
// lock.
func (s *Standby) apply(wr *clientv3.WatchResponse) {
	var specs map[*clientv3.Event]*jobEntry
	if !wr.IsProgressNotify() {
		s.mu.Lock()
		for _, ev := range wr.Events {
			if p, ok := s.specOf(ev); ok && s.copies[p] != nil {
				if specs == nil {
					specs = map[*clientv3.Event]*jobEntry{}
				}
				specs[ev] = nil
			}
		}
		s.mu.Unlock()
		for ev := range specs {
			specs[ev] = cacheable(ev.Kv)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rev := wr.Header.Revision // a progress notification: everything up to it was sent
	if !wr.IsProgressNotify() {
		rev = 0
		for _, ev := range wr.Events {
			rev = max(rev, ev.Kv.ModRevision)
			p, ok := s.partitionOf(ev.Kv.Key)
			if !ok {
				continue
			}
			if c := s.copies[p]; c != nil {
				s.bytes += c.apply(ev, specs[ev])
			}
		}
	}
	if rev > s.progress {
		s.progress = rev
		s.changedLocked()
	}
}

// apply applies ev to the copy (buffering it while the copy is read),
// with e its spec decoded (nil: held as it is), and returns by how many
// bytes the copy grew.
func (c *standbyCopy) apply(ev *clientv3.Event, e *jobEntry) int64 {
	if c.reading {
		c.buffered = append(c.buffered, ev)
		return 0
	}
	if ev.Kv.ModRevision <= c.rev {
		return 0 // in the read already
	}
	before := c.bytes
	k := string(ev.Kv.Key)
	if old := c.kvs[k]; old != nil {
		c.bytes -= kvBytes(old)
		delete(c.jobs, old)
	}
	if ev.Type == mvccpb.DELETE {
		delete(c.kvs, k)
	} else {
		c.put(ev.Kv, e)
	}
	return c.bytes - before
}

// put holds kv, without its value if e is its spec decoded.
func (c *standbyCopy) put(kv *mvccpb.KeyValue, e *jobEntry) {
	if e != nil {
		kv = &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		c.jobs[kv] = e
	}
	c.kvs[string(kv.Key)] = kv
	c.bytes += kvBytes(kv)
}

// cacheable returns the spec kv decoded, or nil if it does not decode
// cleanly: a load decodes it again then, and logs why.
func cacheable(kv *mvccpb.KeyValue) *jobEntry {
	e, err := decodeEntry(kv)
	if err != nil || e == nil || e.schedErr != nil {
		return nil
	}
	return e
}

// specOf returns the partition of ev if it puts a job's spec.
func (s *Standby) specOf(ev *clientv3.Event) (int, bool) {
	if ev.Type != mvccpb.PUT {
		return 0, false
	}
	p, ok := s.partitionOf(ev.Kv.Key)
	if !ok {
		return 0, false
	}
	_, at, ok := s.d.keys.ParseSpecKey(p, string(ev.Kv.Key))
	return p, ok && at.IsZero()
}

func kvBytes(kv *mvccpb.KeyValue) int64 { return int64(len(kv.Key) + len(kv.Value)) }

// partitionOf returns the partition of a key of the watched range, if it
// is one a copy holds.
func (s *Standby) partitionOf(key []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(key, []byte(s.d.keys.NS))
	if !ok {
		return 0, false
	}
	kind, rest, ok := bytes.Cut(rest, []byte{'/'})
	if !ok {
		return 0, false
	}
	switch string(kind) {
	case "jobs", "state", "queue", "failing", "runs":
	default:
		return 0, false
	}
	num, _, ok := bytes.Cut(rest, []byte{'/'})
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(string(num))
	return p, err == nil
}

// readLoop reads the copies queued by setHeirs, one at a time, each while
// holding a load slot of the member, and only when none of the member's
// partitions waits for its load.
func (s *Standby) readLoop(ctx context.Context) {
	bo := retry.New(retry.Etcd)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.read:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			p := s.queue[0]
			s.queue = s.queue[1:]
			c := s.copies[p]
			s.mu.Unlock()
			if c == nil || !c.reading {
				continue
			}
			if err := s.readCopy(ctx, p, c); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.lg.Debug("reading a standby copy failed; retrying", zap.Int("partition", p), zap.Error(err))
				s.mu.Lock()
				if s.copies[p] == c {
					s.queue = append(s.queue, p)
				}
				s.mu.Unlock()
				retry.Sleep(ctx, s.d.cfg.Clock, bo.Next())
				continue
			}
			bo.Reset()
		}
	}
}

// readCopy reads partition p's keys into c, then applies the events
// buffered meanwhile that came after the read.
func (s *Standby) readCopy(ctx context.Context, p int, c *standbyCopy) error {
	if err := s.d.pending.wait(ctx); err != nil {
		return err // the member's own loads go first
	}
	if s.d.loads != nil {
		if err := s.d.loads.Acquire(ctx, 1); err != nil {
			return err
		}
		defer s.d.loads.Release(1)
	}
	k := s.d.keys
	read := &standbyCopy{kvs: map[string]*mvccpb.KeyValue{}, jobs: map[*mvccpb.KeyValue]*jobEntry{}}
	keep := func(kv *mvccpb.KeyValue) { read.put(kv, nil) }
	rev, err := s.d.rangePages(ctx, k.PartitionJobsPrefix(p), 0, loadPage, func(kv *mvccpb.KeyValue) {
		var e *jobEntry
		if _, at, ok := k.ParseSpecKey(p, string(kv.Key)); ok && at.IsZero() {
			e = cacheable(kv)
		}
		read.put(kv, e)
	})
	if err != nil {
		return err
	}
	for _, prefix := range []string{k.StatePrefix(p), k.QueuePrefix(p), k.FailingPrefix(p)} {
		if _, err := s.d.rangePages(ctx, prefix, rev, loadPage, keep); err != nil {
			return err
		}
	}
	if _, err := s.d.rangePages(ctx, k.PartitionRunsPrefix(p), rev, loadRunsPage, keep); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copies[p] != c {
		return nil // dropped meanwhile
	}
	c.kvs, c.jobs, c.rev, c.bytes, c.reading = read.kvs, read.jobs, rev, read.bytes, false
	s.bytes += read.bytes
	s.reading--
	for _, ev := range c.buffered {
		var e *jobEntry
		if _, ok := s.specOf(ev); ok && ev.Kv.ModRevision > rev {
			e = cacheable(ev.Kv) // under the lock: only what came during the read
		}
		s.bytes += c.apply(ev, e)
	}
	c.buffered = nil
	s.changedLocked()
	return nil
}

// take hands over partition p's copy for an ownership with epoch epoch:
// it waits (at most CatchUp) until the copy has seen every change up to
// epoch, then returns it as of the progress. It returns nil if the
// standby has no usable copy: then the partition is read from etcd. The
// copy leaves the standby either way (the partition is owned here now).
// A nil *Standby has none.
func (s *Standby) take(ctx context.Context, p int, epoch int64) *copySnapshot {
	if s == nil {
		return nil
	}
	clock := s.d.cfg.Clock
	start := clock.Now()
	deadline := clock.NewTimer(s.cfg.CatchUp)
	defer deadline.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		c := s.copies[p]
		if !s.live || c == nil || c.reading {
			s.forgetLocked(p)
			return nil
		}
		if s.progress >= max(epoch, c.rev) {
			s.forgetLocked(p)
			s.cfg.Metrics.caughtUp(clock.Since(start).Seconds(), true)
			return newCopySnapshot(c, s.progress)
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case s.want <- struct{}{}:
		default:
		}
		var timedOut, released bool
		select {
		case <-changed:
		case <-deadline.Chan():
			timedOut = true
		case <-ctx.Done():
			released = true
		}
		s.mu.Lock()
		if timedOut {
			s.lg.Info("standby copy did not catch up in time; reading the partition from etcd",
				zap.Int("partition", p), zap.Int64("epoch", epoch), zap.Int64("progress", s.progress), zap.Duration("catch_up", s.cfg.CatchUp))
			s.cfg.Metrics.caughtUp(clock.Since(start).Seconds(), false)
		}
		if timedOut || released {
			s.forgetLocked(p)
			return nil
		}
	}
}

// skip drops partition p's copy, if any, for a load that reads etcd
// whatever the copy (a reload of an ownership, see partition.load). A nil
// *Standby has no copies.
func (s *Standby) skip(p int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(p)
}

// counted records a load of this member: built from a copy (warm) or read
// from etcd. A nil *Standby records nothing.
func (s *Standby) counted(warm bool) {
	if s != nil {
		s.cfg.Metrics.loaded(warm)
	}
}

// forgetLocked drops partition p's copy, if any.
func (s *Standby) forgetLocked(p int) {
	c := s.copies[p]
	if c == nil {
		return
	}
	delete(s.copies, p)
	s.bytes -= c.bytes
	if c.reading {
		s.reading--
	}
	s.changedLocked()
}

// copySnapshot is a copy handed over to a load: its keys in key order, as
// of revision rev.
type copySnapshot struct {
	rev  int64
	kvs  []*mvccpb.KeyValue
	jobs map[*mvccpb.KeyValue]*jobEntry // specs decoded, held without their value
}

func newCopySnapshot(c *standbyCopy, rev int64) *copySnapshot {
	kvs := slices.Collect(maps.Values(c.kvs))
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return &copySnapshot{rev: rev, kvs: kvs, jobs: c.jobs}
}

// decoded returns a spec's job entry as the copy decoded it, a copy of
// its own (loadFrom's decoded), or nil if the copy holds the spec's
// value instead.
func (c *copySnapshot) decoded(kv *mvccpb.KeyValue) *jobEntry {
	e := c.jobs[kv]
	if e == nil {
		return nil
	}
	cp := *e
	return &cp
}

// scan is the snapshot as a loadSource.
func (c *copySnapshot) scan(ctx context.Context, prefix string, rev int64, _ int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	if rev != 0 && rev != c.rev {
		return 0, fmt.Errorf("standby copy is at revision %d, not %d", c.rev, rev)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	i := sort.Search(len(c.kvs), func(i int) bool { return string(c.kvs[i].Key) >= prefix })
	for ; i < len(c.kvs) && bytes.HasPrefix(c.kvs[i].Key, []byte(prefix)); i++ {
		fn(c.kvs[i])
	}
	return c.rev, nil
}

// standbyPtr is the Dispatcher's reference to its standby, set once.
type standbyPtr = atomic.Pointer[Standby]

// loadGate counts the partitions waiting for their load or loading.
type loadGate struct {
	mu   sync.Mutex // guards n and idle
	n    int
	idle chan struct{} // closed when n is 0; nil: never made (n is 0)
}

func (g *loadGate) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n += d
	switch {
	case g.n == 0 && g.idle != nil:
		close(g.idle)
	case g.n == d && d > 0: // from 0
		g.idle = make(chan struct{})
	}
}

// wait returns once no partition waits for its load or loads, or ctx's
// error.
func (g *loadGate) wait(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	n := g.n
	g.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
