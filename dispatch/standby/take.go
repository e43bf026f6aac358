package standby

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap"
)

// Take hands over partition p's copy for an ownership with epoch epoch:
// it waits (at most Config.CatchUp) until the copy has seen every change
// up to epoch, then returns it as of the progress. It returns nil if the
// standby has no usable copy: then the partition is read from etcd. The
// copy leaves the standby either way (the partition is owned here now).
func (s *Standby[T]) Take(ctx context.Context, p int, epoch int64) *Snapshot[T] {
	clock := s.m.Clock
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
			return newSnapshot(c, s.progress)
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

// Skip drops partition p's copy, if any, for a load that reads etcd
// whatever the copy (a later load of an ownership: its partition has
// been written here since the epoch).
func (s *Standby[T]) Skip(p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(p)
}

// Loaded records a load of this member: built from a copy (warm) or read
// from etcd.
func (s *Standby[T]) Loaded(warm bool) { s.cfg.Metrics.loaded(warm) }

// forgetLocked drops partition p's copy, if any.
func (s *Standby[T]) forgetLocked(p int) {
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

// Snapshot is a copy handed over to a load: its keys in key order, as of
// one revision. It is not modified once handed over; safe for concurrent
// reads.
type Snapshot[T any] struct {
	rev   int64
	kvs   []*mvccpb.KeyValue
	specs map[*mvccpb.KeyValue]*T // specs decoded, held without their value
}

func newSnapshot[T any](c *partCopy[T], rev int64) *Snapshot[T] {
	kvs := slices.Collect(maps.Values(c.kvs))
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return &Snapshot[T]{rev: rev, kvs: kvs, specs: c.specs}
}

// Rev returns the revision the snapshot is at.
func (c *Snapshot[T]) Rev() int64 { return c.rev }

// KVs returns the snapshot's keys in key order; they must not be
// modified. A spec held decoded has no value (see Decoded).
func (c *Snapshot[T]) KVs() []*mvccpb.KeyValue { return c.kvs }

// Decoded returns a spec's value as the copy decoded it (Member.Decode),
// a shallow copy of its own, or nil if the copy holds the spec's value
// instead.
func (c *Snapshot[T]) Decoded(kv *mvccpb.KeyValue) *T {
	e := c.specs[kv]
	if e == nil {
		return nil
	}
	cp := *e
	return &cp
}

// Scan calls fn for every key under prefix, in key order, as of the
// snapshot's revision, and returns that revision. rev must be 0 or that
// revision; page is ignored (the snapshot is in memory). Its signature
// is that of the member's paged reads of etcd, so that a load reads
// either the same way.
func (c *Snapshot[T]) Scan(ctx context.Context, prefix string, rev int64, _ int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
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
