package standby

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
)

// partCopy is one partition's copy.
type partCopy[T any] struct {
	// reading is set until the first read is in: events are buffered
	// meanwhile.
	reading  bool
	buffered []*clientv3.Event
	rev      int64 // of the first read: events up to it are in it
	kvs      map[string]*mvccpb.KeyValue
	// specs are the specs of kvs decoded, by their key-value; those are
	// held without their value.
	specs map[*mvccpb.KeyValue]*T
	bytes int64
}

func newPartCopy[T any]() *partCopy[T] {
	return &partCopy[T]{kvs: map[string]*mvccpb.KeyValue{}, specs: map[*mvccpb.KeyValue]*T{}}
}

// apply applies ev to the copy (buffering it while the copy is read),
// with e its spec decoded (nil: held as it is), and returns by how many
// bytes the copy grew.
func (c *partCopy[T]) apply(ev *clientv3.Event, e *T) int64 {
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
		delete(c.specs, old)
	}
	if ev.Type == mvccpb.DELETE {
		delete(c.kvs, k)
	} else {
		c.put(ev.Kv, e)
	}
	return c.bytes - before
}

// put holds kv, without its value if e is its spec decoded.
func (c *partCopy[T]) put(kv *mvccpb.KeyValue, e *T) {
	if e != nil {
		kv = &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		c.specs[kv] = e
	}
	c.kvs[string(kv.Key)] = kv
	c.bytes += kvBytes(kv)
}

func kvBytes(kv *mvccpb.KeyValue) int64 { return int64(len(kv.Key) + len(kv.Value)) }

// readLoop reads the copies queued by setHeirs, one at a time, each
// through Member.Read (in turn with the member's loads).
func (s *Standby[T]) readLoop(ctx context.Context) {
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
				retry.Sleep(ctx, s.m.Clock, bo.Next())
				continue
			}
			bo.Reset()
		}
	}
}

// readCopy reads partition p's keys into c, then applies the events
// buffered meanwhile that came after the read.
func (s *Standby[T]) readCopy(ctx context.Context, p int, c *partCopy[T]) error {
	read := newPartCopy[T]()
	rev, err := s.m.Read(ctx, p, func(kv *mvccpb.KeyValue) {
		var e *T
		if s.isSpec(p, kv) {
			e = s.m.Decode(kv)
		}
		read.put(kv, e)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copies[p] != c {
		return nil // dropped meanwhile
	}
	c.kvs, c.specs, c.rev, c.bytes, c.reading = read.kvs, read.specs, rev, read.bytes, false
	s.bytes += read.bytes
	s.reading--
	for _, ev := range c.buffered {
		var e *T
		if _, ok := s.specOf(ev); ok && ev.Kv.ModRevision > rev {
			e = s.m.Decode(ev.Kv) // under the lock: only what came during the read
		}
		s.bytes += c.apply(ev, e)
	}
	c.buffered = nil
	s.changedLocked()
	return nil
}
