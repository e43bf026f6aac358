package chaos

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The hosts' network is a switch in the harness (the fabric): each host is
// a network namespace with one TUN device, every IPv4 packet a host sends
// to another host is read from its TUN device, judged by the rule of its
// link (source host → destination host), and written to the destination's
// TUN device — at once, later, or never. Rules are directed, so one-way
// cuts, asymmetric latency and loss are rules like any other. Nothing else
// is forwarded: a packet to an address that is not a host's is dropped,
// so no packet can leave the namespaces the harness made.

// hostSubnet is the hosts' subnet: host n has address 10.213.0.n.
var hostSubnet = netip.MustParsePrefix("10.213.0.0/24")

// hostAddr returns the address of host number n (1..254).
func hostAddr(n int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 213, 0, byte(n)})
}

// LinkRule says what happens to packets on one directed link.
type LinkRule struct {
	// Down drops every packet.
	Down bool `json:"down,omitempty"`
	// Delay holds each packet this long, plus a uniform random extra of
	// up to Jitter. Packets of one link keep their order (a packet waits
	// for the one before it), like a slow link, not a reordering one.
	Delay  time.Duration `json:"delay_ns,omitempty"`
	Jitter time.Duration `json:"jitter_ns,omitempty"`
	// Loss is the probability, in [0, 1], that a packet is dropped.
	Loss float64 `json:"loss,omitempty"`
}

func (r LinkRule) String() string {
	switch {
	case r.Down:
		return "down"
	case r.Loss > 0 && r.Delay > 0:
		return fmt.Sprintf("delay %v±%v, loss %.0f%%", r.Delay, r.Jitter, r.Loss*100)
	case r.Loss > 0:
		return fmt.Sprintf("loss %.0f%%", r.Loss*100)
	default:
		return fmt.Sprintf("delay %v±%v", r.Delay, r.Jitter)
	}
}

// link is a directed pair of hosts, by number.
type link struct{ from, to byte }

// verdict is the fabric's decision on one packet.
type verdict struct {
	drop  bool
	delay time.Duration
}

// judge decides the fate of one packet on a link with rule r; u and v are
// uniform random numbers in [0, 1). It is a pure function.
func judge(r LinkRule, u, v float64) verdict {
	switch {
	case r.Down:
		return verdict{drop: true}
	case r.Loss > 0 && u < r.Loss:
		return verdict{drop: true}
	}
	return verdict{delay: r.Delay + time.Duration(v*float64(r.Jitter))}
}

// packetLink returns the link of an IPv4 packet between two hosts, or
// false for anything else (IPv6, a malformed packet, an address outside
// the hosts' subnet).
func packetLink(pkt []byte) (link, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return link{}, false
	}
	src := netip.AddrFrom4([4]byte(pkt[12:16]))
	dst := netip.AddrFrom4([4]byte(pkt[16:20]))
	if !hostSubnet.Contains(src) || !hostSubnet.Contains(dst) {
		return link{}, false
	}
	return link{from: pkt[15], to: pkt[19]}, true
}

// FabricStats counts what the fabric did with packets.
type FabricStats struct {
	Forwarded uint64 `json:"forwarded"`
	Delayed   uint64 `json:"delayed"`
	// Dropped by a rule (down or loss), and Foreign: not between two
	// hosts (IPv6 neighbour discovery, say), dropped too.
	Dropped uint64 `json:"dropped"`
	Foreign uint64 `json:"foreign"`
}

// fabric switches packets between hosts' ports (their TUN devices).
type fabric struct {
	lg    *zap.Logger
	ports map[byte]io.ReadWriteCloser // by host number; fixed before run

	mu     sync.Mutex // guards the fields below
	rules  map[link]LinkRule
	rng    *rand.Rand
	stats  FabricStats
	queue  delayQueue
	lastAt map[link]time.Time // due time of each link's latest delayed packet
	seq    uint64
	wake   chan struct{} // buffer 1: the queue's head changed

	wg sync.WaitGroup
}

func newFabric(ports map[byte]io.ReadWriteCloser, seed int64, lg *zap.Logger) *fabric {
	return &fabric{
		lg: lg, ports: ports, rules: map[link]LinkRule{},
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x666162726963)),
		lastAt: map[link]time.Time{}, wake: make(chan struct{}, 1),
	}
}

// run starts a reader per port and the delay line; they end when ctx ends
// and the ports are closed (stop does both).
func (f *fabric) run(ctx context.Context) {
	for n, p := range f.ports {
		f.wg.Go(func() { f.read(n, p) })
	}
	f.wg.Go(func() { f.delayLine(ctx) })
}

// stop closes every port and waits for the fabric's goroutines; ctx must
// be cancelled by the caller first or together.
func (f *fabric) stop() {
	for _, p := range f.ports {
		_ = p.Close()
	}
	f.wg.Wait()
}

// setRule sets the rule of the link from → to; a zero rule heals it.
func (f *fabric) setRule(from, to byte, r LinkRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == (LinkRule{}) {
		delete(f.rules, link{from, to})
		return
	}
	f.rules[link{from, to}] = r
}

// heal removes every rule. Packets already delayed are still delivered.
func (f *fabric) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.rules)
}

// Stats returns the counters so far.
func (f *fabric) Stats() FabricStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fabric) read(n byte, p io.ReadWriteCloser) {
	buf := make([]byte, 1<<16)
	for {
		k, err := p.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errClosedPort) && !isClosed(err) {
				f.lg.Warn("fabric: reading a host's port failed; the host is cut off", zap.Int("host", int(n)), zap.Error(err))
			}
			return
		}
		f.forward(buf[:k])
	}
}

// forward judges one packet and sends it on (pkt is reused by the caller
// once forward returns).
func (f *fabric) forward(pkt []byte) {
	l, ok := packetLink(pkt)
	f.mu.Lock()
	out := f.ports[l.to]
	if !ok || out == nil {
		f.stats.Foreign++
		f.mu.Unlock()
		return
	}
	r := f.rules[l]
	v := judge(r, f.rng.Float64(), f.rng.Float64())
	if v.drop {
		f.stats.Dropped++
		f.mu.Unlock()
		return
	}
	if v.delay <= 0 && f.lastAt[l].IsZero() {
		f.stats.Forwarded++
		f.mu.Unlock()
		_, _ = out.Write(pkt) // a full queue or a closed port drops it, as a link would
		return
	}
	due := time.Now().Add(v.delay)
	if last := f.lastAt[l]; due.Before(last) {
		due = last // keep the link's order
	}
	f.lastAt[l] = due
	f.seq++
	heap.Push(&f.queue, &delayed{due: due, seq: f.seq, l: l, pkt: append([]byte(nil), pkt...)})
	f.stats.Delayed++
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// delayLine delivers delayed packets when they are due.
func (f *fabric) delayLine(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var due []*delayed
		f.mu.Lock()
		now := time.Now()
		for f.queue.Len() > 0 && !f.queue[0].due.After(now) {
			d := heap.Pop(&f.queue).(*delayed)
			if f.lastAt[d.l].Equal(d.due) {
				delete(f.lastAt, d.l) // the link's queue is empty
			}
			due = append(due, d)
		}
		next := time.Hour
		if f.queue.Len() > 0 {
			next = f.queue[0].due.Sub(now)
		}
		f.stats.Forwarded += uint64(len(due))
		f.mu.Unlock()
		for _, d := range due {
			_, _ = f.ports[d.l.to].Write(d.pkt)
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-t.C:
		}
	}
}

// delayed is one packet waiting in the delay line.
type delayed struct {
	due time.Time
	seq uint64
	l   link
	pkt []byte
}

// delayQueue is a min-heap of delayed packets by due time, then arrival.
type delayQueue []*delayed

func (q delayQueue) Len() int { return len(q) }
func (q delayQueue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q delayQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)   { *q = append(*q, x.(*delayed)) }
func (q *delayQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

// errClosedPort is what a closed in-memory port returns (tests).
var errClosedPort = errors.New("port closed")

func isClosed(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed)
}
