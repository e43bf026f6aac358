package dispatch

import (
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetWatchHook makes the standby's watch loop call f with each watch
// response before it looks at it (f may block it, or change the
// response). Call it before Run.
func (s *Standby) SetWatchHook(f func(*clientv3.WatchResponse)) { s.applyHook = f }

// Held reports whether the standby holds partition p's copy, read.
func (s *Standby) Held(p int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.copies[p]
	return s.live && c != nil && !c.reading
}

// Loads returns how many loads were served from a copy (source "warm")
// or from etcd ("cold").
func (m *StandbyMetrics) Loads(source string) float64 {
	return testutil.ToFloat64(m.loads.WithLabelValues(source))
}

// CatchUpTimeouts returns how many acquisitions found their copy behind
// past the catch-up bound.
func (m *StandbyMetrics) CatchUpTimeouts() float64 { return testutil.ToFloat64(m.timeouts) }
