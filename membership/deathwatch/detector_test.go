package deathwatch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// longTTL is the TTL of the test members' leases: none can expire while a
// test runs, so a registration that vanishes was revoked.
const longTTL = 60 * time.Second

// member stands for one member process: a listener on its advertised
// address that accepts and holds connections (as a serving process
// does), and a registration under a lease of its own.
type member struct {
	id    string
	ln    net.Listener
	sess  *membership.Session
	lease clientv3.LeaseID

	mu    sync.Mutex // guards conns
	conns []net.Conn
	wg    sync.WaitGroup // the accept loop
}

// listen opens a listener on addr ("127.0.0.1:0" for a free port) that
// holds the connections it accepts; accept false leaves them in the
// kernel's accept queue, as a paused (SIGSTOP) process does.
func listen(t *testing.T, addr string, accept bool) *member {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{ln: ln}
	if accept {
		m.wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				m.mu.Lock()
				m.conns = append(m.conns, c)
				m.mu.Unlock()
			}
		})
	}
	t.Cleanup(m.die)
	return m
}

// registeredMember starts a member listening on a loopback port
// (accepting connections if accept) and registers it as id in a fresh
// namespace ns of the test etcd, which client reaches.
func registeredMember(t *testing.T, id string, accept bool) (client *clientv3.Client, ns string, m *member) {
	t.Helper()
	client, ns = etcd.Client(t), etcdtest.Namespace(t)
	m = listen(t, "127.0.0.1:0", accept)
	m.register(t, client, ns, id)
	return client, ns, m
}

// register registers m as id in namespace ns under a new lease.
func (m *member) register(t *testing.T, client *clientv3.Client, ns, id string) {
	t.Helper()
	ctx := context.Background()
	s, err := membership.NewSession(ctx, client, membership.DefaultSessionConfig(longTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := membership.Register(ctx, client, s, ns, api.Member{ID: id, Addr: "http://" + m.ln.Addr().String()}, nil); err != nil {
		t.Fatal(err)
	}
	m.id, m.sess, m.lease = id, s, s.Lease()
}

// die is the process's death as its peers see it: the kernel closes the
// listener and every connection. The lease is left to expire (Orphan).
func (m *member) die() {
	m.ln.Close()
	m.wg.Wait()
	m.mu.Lock()
	for _, c := range m.conns {
		c.Close()
	}
	m.conns = nil
	m.mu.Unlock()
	if m.sess != nil {
		m.sess.Orphan()
	}
}

func (m *member) addr() string { return m.ln.Addr().String() }

// dialer dials for real and records each probe's outcome per address;
// script, if set, may replace a dial's result (before it is made).
type dialer struct {
	mu      sync.Mutex
	script  func(addr string, n int) error // n counts this address's dials from 1; nil result: dial for real
	counts  map[string]map[string]int      // addr → outcome → count
	dials   map[string]int
	changed chan struct{}
}

func newDialer() *dialer {
	return &dialer{counts: map[string]map[string]int{}, dials: map[string]int{}, changed: make(chan struct{})}
}

func (d *dialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials[addr]++
	n, script := d.dials[addr], d.script
	d.mu.Unlock()
	var (
		c   net.Conn
		err error
	)
	if script != nil {
		err = script(addr, n)
	}
	if err == nil {
		var nd net.Dialer
		c, err = nd.DialContext(ctx, network, addr)
	}
	outcome := "failed"
	switch {
	case err == nil:
		outcome = "connected"
	case errors.Is(err, syscall.ECONNREFUSED):
		outcome = "refused"
	}
	d.mu.Lock()
	if d.counts[addr] == nil {
		d.counts[addr] = map[string]int{}
	}
	d.counts[addr][outcome]++
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	return c, err
}

// count returns how many probes of addr had outcome.
func (d *dialer) count(addr, outcome string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[addr][outcome]
}

// waitFor waits until addr has had n probes with outcome, or fails the
// test after a minute.
func (d *dialer) waitFor(t *testing.T, addr, outcome string, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		d.mu.Lock()
		got, ch := d.counts[addr][outcome], d.changed
		d.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: %d probes %s, want %d within a minute", addr, got, outcome, n)
		}
	}
}

// detector runs a detector named observer over ns, seeing the members
// through a membership.Watcher, until the test ends.
func detector(t *testing.T, client *clientv3.Client, ns string, cfg deathwatch.Config) *prometheus.Registry {
	t.Helper()
	w, err := membership.NewWatcher(client, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return detectorOf(t, client, ns, w, cfg)
}

// detectorOf runs a detector named observer over ns, seeing the members
// through view, until the test ends.
func detectorOf(t *testing.T, client *clientv3.Client, ns string, view deathwatch.MemberView, cfg deathwatch.Config) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Namespace, cfg.Self = ns, "observer"
	cfg.Metrics = deathwatch.NewMetrics(reg)
	cfg.Logger = zaptest.NewLogger(t)
	d, err := deathwatch.New(client, view, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return reg
}

// eventually polls cond every 5ms until it holds, or fails the test
// after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// waitGone waits until id's registration is gone and returns the
// revision of its deletion.
func waitGone(t *testing.T, client *clientv3.Client, ns, id string, within time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	key := membership.Key(ns, id)
	resp, err := client.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return resp.Header.Revision
	}
	for wr := range client.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if len(wr.Events) > 0 {
			return wr.Events[0].Kv.ModRevision
		}
	}
	t.Fatalf("registration of %s still there after %v", id, within)
	return 0
}

// leaseAlive reports whether lease still exists on the server.
func leaseAlive(t *testing.T, client *clientv3.Client, lease clientv3.LeaseID) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := client.TimeToLive(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL > 0
}

// expectNoDetections checks that the detector of reg confirmed no death.
func expectNoDetections(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	if got := metrictest.Value(t, reg, "jobfleet_dead_member_detections_total"); got != 0 {
		t.Errorf("detections = %v, want 0", got)
	}
}

// TestDeadMemberIsRevoked: a member the detector has reached dies (its
// listener and connections close); the detector revokes its lease, and
// its registration and owner keys go with it, long before the lease could
// have expired.
func TestDeadMemberIsRevoked(t *testing.T) {
	client, ns, victim := registeredMember(t, "victim", true)
	survivor := listen(t, "127.0.0.1:0", true)
	survivor.register(t, client, ns, "survivor")
	ctx := context.Background()
	ownerKey := ns + "owners/00007"
	if _, err := client.Put(ctx, ownerKey, "victim", clientv3.WithLease(victim.lease)); err != nil {
		t.Fatal(err)
	}
	d := newDialer()
	reg := detector(t, client, ns, deathwatch.Config{Dial: d.Dial})
	d.waitFor(t, victim.addr(), "connected", 1)

	ttl, err := client.TimeToLive(ctx, victim.lease)
	if err != nil {
		t.Fatal(err)
	}
	victim.die()
	waitGone(t, client, ns, "victim", 30*time.Second)
	if leaseAlive(t, client, victim.lease) {
		t.Fatal("registration gone but the victim's lease lives")
	}
	// The registration went within 30 s of the kill; the lease had
	// ttl.TTL seconds left (about 60), so it was revoked, not expired.
	if ttl.TTL < 40 {
		t.Fatalf("the victim's lease had %ds left before the kill; the test cannot tell revocation from expiry", ttl.TTL)
	}
	resp, err := client.Get(ctx, ownerKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("the victim's owner key outlived its lease's revocation")
	}
	if !leaseAlive(t, client, survivor.lease) {
		t.Errorf("the survivor's lease was revoked too")
	}
	if n := d.count(victim.addr(), "refused"); n < 2 {
		t.Errorf("revoked after %d refused probes, want at least 2", n)
	}
	// The detector counts the revocation once etcd answered it, which
	// may be after the deletion reached the test's watch.
	eventually(t, "the revocation counted", func() bool { return metrictest.Value(t, reg, "jobfleet_dead_member_revocations_total") > 0 })
	for name, want := range map[string]float64{
		"jobfleet_dead_member_detections_total":   1,
		"jobfleet_dead_member_revocations_total":  1,
		"jobfleet_dead_member_revocation_seconds": 1,
	} {
		if got := metrictest.Value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestHeldConnectionRevealsDeath: with probes an hour apart, only the
// connection the detector holds open can tell it that the member died;
// it does, and the lease is revoked.
func TestHeldConnectionRevealsDeath(t *testing.T) {
	client, ns, victim := registeredMember(t, "victim", true)
	d := newDialer()
	detector(t, client, ns, deathwatch.Config{Dial: d.Dial, Interval: time.Hour})
	d.waitFor(t, victim.addr(), "connected", 1)
	// Accepted or still in the accept queue, the held connection ends
	// when the process does.
	victim.die()
	waitGone(t, client, ns, "victim", 30*time.Second)
	if got := d.count(victim.addr(), "connected"); got != 1 {
		t.Errorf("%d probes connected, want 1: the interval alone cannot have found the death", got)
	}
}

// TestPausedMemberIsNotRevoked: a member whose process accepts nothing
// (SIGSTOP: connections wait in the kernel's accept queue) is probed
// successfully again and again and keeps its lease.
func TestPausedMemberIsNotRevoked(t *testing.T) {
	client, ns, paused := registeredMember(t, "paused", false)
	d := newDialer()
	reg := detector(t, client, ns, deathwatch.Config{Dial: d.Dial, Interval: 10 * time.Millisecond, Confirm: 5 * time.Millisecond})
	d.waitFor(t, paused.addr(), "connected", 10)
	if !leaseAlive(t, client, paused.lease) {
		t.Fatal("a paused member's lease was revoked")
	}
	if got := d.count(paused.addr(), "refused"); got != 0 {
		t.Errorf("%d probes of a paused member refused, want 0", got)
	}
	expectNoDetections(t, reg)
}

// TestNeverReachedAddressIsNoEvidence: a registration whose address has
// never accepted a probe (a wrong --advertise, a firewall that rejects)
// is refused again and again and is not revoked.
func TestNeverReachedAddressIsNoEvidence(t *testing.T) {
	client, ns, m := registeredMember(t, "elsewhere", true)
	d := newDialer()
	d.script = func(addr string, _ int) error {
		if addr == m.addr() {
			return fmt.Errorf("dial %s: %w", addr, syscall.ECONNREFUSED)
		}
		return nil
	}
	reg := detector(t, client, ns, deathwatch.Config{Dial: d.Dial, Interval: 20 * time.Millisecond, Confirm: 5 * time.Millisecond})
	d.waitFor(t, m.addr(), "refused", 20)
	if !leaseAlive(t, client, m.lease) {
		t.Fatal("a member never reached was revoked")
	}
	expectNoDetections(t, reg)
}

// TestOnlyRefusalsInARowConfirm: after the member was reached, refusals
// alternating with timeouts or with successful connects never confirm a
// death.
func TestOnlyRefusalsInARowConfirm(t *testing.T) {
	for name, between := range map[string]error{
		"timeouts":         fmt.Errorf("dial: %w", os.ErrDeadlineExceeded),
		"unreachable host": fmt.Errorf("dial: %w", syscall.EHOSTUNREACH),
		"connects":         nil, // dial for real: the listener accepts
	} {
		t.Run(name, func(t *testing.T) {
			client, ns, m := registeredMember(t, "flaky", true)
			d := newDialer()
			d.script = func(addr string, n int) error {
				switch {
				case addr != m.addr() || n == 1:
					return nil
				case n%2 == 0:
					return fmt.Errorf("dial %s: %w", addr, syscall.ECONNREFUSED)
				default:
					return between
				}
			}
			reg := detector(t, client, ns, deathwatch.Config{Dial: d.Dial, Interval: 4 * time.Millisecond, Confirm: 2 * time.Millisecond})
			d.waitFor(t, m.addr(), "refused", 15)
			if !leaseAlive(t, client, m.lease) {
				t.Fatal("revoked on refusals that were not in a row")
			}
			expectNoDetections(t, reg)
		})
	}
}

// TestRestartedMemberIsNotRevoked: the member dies and registers again
// under a new lease, on the same address (not listening yet), while the
// detector's view still shows its predecessor (a view lags etcd). The
// detector confirms the predecessor's death, but the registration carries
// another lease now: the revocation is refused and the new lease lives.
func TestRestartedMemberIsNotRevoked(t *testing.T) {
	client, ns, old := registeredMember(t, "restarted", true)
	addr := old.addr()
	view := staticView{api.View{Revision: 1, Members: []api.Member{{ID: "restarted", Addr: "http://" + addr, LeaseID: int64(old.lease)}}}}
	d := newDialer()
	reg := detectorOf(t, client, ns, view, deathwatch.Config{Dial: d.Dial, Interval: 20 * time.Millisecond, Confirm: 5 * time.Millisecond})
	d.waitFor(t, addr, "connected", 1)

	// The restart, before the detector saw the death: the old
	// registration's lease ended, the new incarnation registered.
	old.die()
	if _, err := client.Revoke(context.Background(), old.lease); err != nil {
		t.Fatal(err)
	}
	next := &member{ln: old.ln}
	next.register(t, client, ns, "restarted")

	refused := func() float64 {
		return metrictest.Value(t, reg, "jobfleet_dead_member_revocations_refused_total", "reason", "lease_changed")
	}
	eventually(t, "a revocation refused because the lease changed", func() bool { return refused() > 0 })
	if !leaseAlive(t, client, next.lease) {
		t.Fatal("the restarted member's new lease was revoked")
	}
	if got := metrictest.Value(t, reg, "jobfleet_dead_member_detections_total"); got != 1 {
		t.Errorf("detections = %v, want 1 (the predecessor's death)", got)
	}
	if got := metrictest.Value(t, reg, "jobfleet_dead_member_revocations_total"); got != 0 {
		t.Errorf("revocations = %v, want 0", got)
	}
	if got := refused(); got != 1 {
		t.Errorf("revocations refused for a changed lease = %v, want 1", got)
	}
}

// TestSelfIsNotProbed: the detector never probes its own member's
// address.
func TestSelfIsNotProbed(t *testing.T) {
	client, ns, self := registeredMember(t, "observer", true) // the detector's own ID
	other := listen(t, "127.0.0.1:0", true)
	other.register(t, client, ns, "other")
	d := newDialer()
	detector(t, client, ns, deathwatch.Config{Dial: d.Dial, Interval: 20 * time.Millisecond, Confirm: 5 * time.Millisecond})
	d.waitFor(t, other.addr(), "connected", 1)
	d.waitFor(t, other.addr(), "connected", 2) // at least one interval later
	if n := d.count(self.addr(), "connected") + d.count(self.addr(), "refused") + d.count(self.addr(), "failed"); n != 0 {
		t.Errorf("the detector probed its own address %d times", n)
	}
}

// TestOffDoesNothing: a negative interval turns the detector off.
func TestOffDoesNothing(t *testing.T) {
	d, err := deathwatch.New(etcd.Client(t), staticView{}, deathwatch.Config{Namespace: "/x/", Self: "a", Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	d.Run(context.Background()) // returns at once
}

type staticView struct{ v api.View }

func (s staticView) View() (api.View, <-chan struct{}) { return s.v, make(chan struct{}) }

// TestConfigDefaults: DefaultConfig writes out the defaults; a zero
// Confirm is half a short Interval, and the default when the detector is
// off (never negative).
func TestConfigDefaults(t *testing.T) {
	if d := deathwatch.DefaultConfig(); d.Interval != deathwatch.DefaultInterval || d.Confirm != deathwatch.DefaultConfirm || d.DialTimeout != deathwatch.DefaultDialTimeout || d.RequestTimeout != deathwatch.DefaultRequestTimeout {
		t.Errorf("DefaultConfig() = %+v, want the Default constants", d)
	}
	for _, tt := range []struct{ interval, want time.Duration }{
		{40 * time.Millisecond, 20 * time.Millisecond},
		{time.Second, deathwatch.DefaultConfirm},
		{-1, deathwatch.DefaultConfirm},
	} {
		if got := (deathwatch.Config{Interval: tt.interval}).WithDefaults().Confirm; got != tt.want {
			t.Errorf("interval %v: confirm %v, want %v", tt.interval, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  deathwatch.Config
		want string // "" for valid
	}{
		{"defaults", deathwatch.Config{Namespace: "/ns/", Self: "a"}, ""},
		{"off ignores the rest", deathwatch.Config{Namespace: "/ns/", Self: "a", Interval: -1, Confirm: time.Hour}, ""},
		{"namespace", deathwatch.Config{Namespace: "/ns", Self: "a"}, "namespace"},
		{"self", deathwatch.Config{Namespace: "/ns/"}, "member ID"},
		{"confirm not below interval", deathwatch.Config{Namespace: "/ns/", Self: "a", Interval: 100 * time.Millisecond, Confirm: 100 * time.Millisecond}, "confirm delay"},
		{"negative confirm", deathwatch.Config{Namespace: "/ns/", Self: "a", Confirm: -time.Millisecond}, "dead-member-confirm"},
		{"confirm over a short interval", deathwatch.Config{Namespace: "/ns/", Self: "a", Interval: 40 * time.Millisecond, Confirm: deathwatch.DefaultConfirm}, "dead-member-confirm"},
		{"zero confirm follows a short interval", deathwatch.Config{Namespace: "/ns/", Self: "a", Interval: 40 * time.Millisecond}, ""},
		{"negative dial timeout", deathwatch.Config{Namespace: "/ns/", Self: "a", DialTimeout: -1}, "dial timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !errors.Is(err, deathwatch.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an ErrInvalidConfig naming %q", err, tt.want)
			}
		})
	}
}
