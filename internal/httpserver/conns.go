package httpserver

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"go.uber.org/zap"
)

// AddrKey is the client address a per-address limit counts by: an IPv4
// address (an IPv4-mapped IPv6 address counts as the IPv4 one), or the
// /64 prefix of an IPv6 address, the block one subscriber is usually
// given, so that a client cannot escape the limit by taking new
// addresses from its own /64. Addresses that are not IP (a Unix socket)
// all share the zero AddrKey.
type AddrKey = netip.Prefix

// AddrKeyOf returns the AddrKey of a connection's remote address.
func AddrKeyOf(a net.Addr) AddrKey {
	if ta, ok := a.(*net.TCPAddr); ok {
		return prefixOf(ta.AddrPort().Addr())
	}
	return AddrKey{}
}

// addrKeyOfRemote returns the AddrKey of an http.Request's RemoteAddr
// ("host:port").
func addrKeyOfRemote(remote string) AddrKey {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return AddrKey{}
	}
	return prefixOf(ap.Addr())
}

func prefixOf(ip netip.Addr) AddrKey {
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	if err != nil { // an invalid address
		return AddrKey{}
	}
	return p
}

// connTracker admits the connections of one listener and follows their
// state, so that a connection above the cap can take the place of the
// connection idle the longest. Its methods are safe for concurrent use.
//
// Admission, for a connection from address a (see admit):
//
//	a holds perAddr connections already   refused: closed at once
//	fewer than max open                    admitted
//	max open, one of them idle             the one idle longest is closed; admitted
//	max open, none idle                    waits until one closes or turns idle
type connTracker struct {
	max     int // connections open at once
	perAddr int // connections of one address at once; < 0 unbounded
	metrics *metrics
	lg      *zap.Logger // sampled: one refusal line a second

	mu     sync.Mutex // guards the fields below and every trackedConn's elem
	open   int
	byAddr map[AddrKey]int
	idle   list.List // of *trackedConn in StateIdle, the longest idle first
	closed bool

	// wake has a value when a connection has closed or turned idle since
	// the accept loop last looked (buffer 1: signals coalesce; only the
	// accept loop waits on it). done is closed when the listener closes.
	wake chan struct{}
	done chan struct{}
}

func newConnTracker(maxConns, perAddr int, m *metrics, lg *zap.Logger) *connTracker {
	return &connTracker{
		max: maxConns, perAddr: perAddr, metrics: m, lg: lg,
		byAddr: map[AddrKey]int{},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// signal wakes the accept loop if it waits.
func (t *connTracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// admit decides on connection c (see connTracker): it returns c wrapped
// for tracking, or nil after closing c (refused, or the listener closed
// while c waited).
func (t *connTracker) admit(c net.Conn) net.Conn {
	key := AddrKeyOf(c.RemoteAddr())
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return nil
		}
		if t.perAddr >= 0 && t.byAddr[key] >= t.perAddr {
			n := t.byAddr[key]
			t.mu.Unlock()
			t.metrics.closed.WithLabelValues(ReasonPerAddress).Inc()
			c.Close()
			t.lg.Warn("connection refused: its address holds the most connections one address may",
				zap.String("address", key.String()), zap.Int("connections", n))
			return nil
		}
		if t.open < t.max {
			t.open++
			t.byAddr[key]++
			t.metrics.open.Inc()
			t.mu.Unlock()
			return &trackedConn{Conn: c, t: t, key: key}
		}
		if front := t.idle.Front(); front != nil {
			victim := front.Value.(*trackedConn)
			t.unidleLocked(victim)
			t.mu.Unlock()
			// Its slot is free once Close returns; the loop then takes it
			// (this goroutine is the only one that admits).
			victim.Close()
			t.metrics.closed.WithLabelValues(ReasonIdleEvicted).Inc()
			continue
		}
		t.mu.Unlock()
		select {
		case <-t.wake:
		case <-t.done:
		}
	}
}

// setState follows the server's view of a connection (http.Server's
// ConnState hook): idle connections join the idle list at its back, the
// others leave it.
func (t *connTracker) setState(c net.Conn, s http.ConnState) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = nc.NetConn()
	}
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case s == http.StateIdle && tc.elem == nil && !tc.gone:
		tc.elem = t.idle.PushBack(tc)
		t.metrics.idle.Inc()
		if t.open >= t.max {
			t.signal() // the accept loop may wait for it
		}
	case s != http.StateIdle:
		t.unidleLocked(tc)
	}
}

// unidleLocked takes tc off the idle list if it is on it.
func (t *connTracker) unidleLocked(tc *trackedConn) {
	if tc.elem != nil {
		t.idle.Remove(tc.elem)
		tc.elem = nil
		t.metrics.idle.Dec()
	}
}

// release frees tc's slot.
func (t *connTracker) release(tc *trackedConn) {
	t.mu.Lock()
	tc.gone = true
	t.unidleLocked(tc)
	t.open--
	if t.byAddr[tc.key]--; t.byAddr[tc.key] <= 0 {
		delete(t.byAddr, tc.key)
	}
	t.metrics.open.Dec()
	t.mu.Unlock()
	t.signal()
}

// shut makes admit refuse from now on and wakes it.
func (t *connTracker) shut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
}

// trackedConn is an admitted connection; closing it frees its slot once.
type trackedConn struct {
	net.Conn
	t    *connTracker
	key  AddrKey
	once sync.Once

	// Guarded by t.mu.
	elem *list.Element // on t.idle while idle
	gone bool          // released: never idle again
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.t.release(c) })
	return err
}

// fairListener admits the connections of the listener it wraps through a
// connTracker.
type fairListener struct {
	net.Listener
	t *connTracker
}

func (l *fairListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.t.admit(c); tc != nil {
			return tc, nil
		}
	}
}

func (l *fairListener) Close() error {
	l.t.shut()
	return l.Listener.Close()
}
