package standby

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// follow watches the copies' keys from the present until ctx ends or the
// watch fails; followed tells whether the watch started.
func (s *Standby[T]) follow(ctx context.Context) (followed bool, err error) {
	// A watch stream of its own: progress requests are answered per
	// stream, once every watcher on it has caught up.
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "jobfleet-watch", "standby"))
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, s.m.RequestTimeout)
	resp, err := s.m.Client.Get(rctx, s.lo) // one key: the revision
	rcancel()
	if err != nil {
		return false, err
	}
	rev := resp.Header.Revision
	wch := s.m.Client.Watch(wctx, s.lo, clientv3.WithRange(s.hi), clientv3.WithRev(rev+1))
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
			if err := s.m.Client.RequestProgress(wctx); err != nil {
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
func (s *Standby[T]) setHeirs(heirs Heirs) {
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
			c := newPartCopy[T]()
			c.reading = true
			s.copies[p] = c
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
func (s *Standby[T]) apply(wr *clientv3.WatchResponse) {
	var specs map[*clientv3.Event]*T
	if !wr.IsProgressNotify() {
		s.mu.Lock()
		for _, ev := range wr.Events {
			if p, ok := s.specOf(ev); ok && s.copies[p] != nil {
				if specs == nil {
					specs = map[*clientv3.Event]*T{}
				}
				specs[ev] = nil
			}
		}
		s.mu.Unlock()
		for ev := range specs {
			specs[ev] = s.m.Decode(ev.Kv)
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

// specOf returns the partition of ev if it puts a job's spec.
func (s *Standby[T]) specOf(ev *clientv3.Event) (int, bool) {
	if ev.Type != mvccpb.PUT {
		return 0, false
	}
	p, ok := s.partitionOf(ev.Kv.Key)
	if !ok {
		return 0, false
	}
	return p, s.isSpec(p, ev.Kv)
}

// isSpec reports whether kv is the spec of a job of partition p (not a
// trigger request).
func (s *Standby[T]) isSpec(p int, kv *mvccpb.KeyValue) bool {
	_, at, ok := s.m.Keys.ParseSpecKey(p, string(kv.Key))
	return ok && at.IsZero()
}

// partitionOf returns the partition of a key of the watched range, if it
// is one a copy holds.
func (s *Standby[T]) partitionOf(key []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(key, []byte(s.m.Keys.NS))
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
