package membership_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/membership"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

func isDone(s *membership.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

func waitDone(t *testing.T, s *membership.Session, within time.Duration) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(within):
		t.Fatalf("session not done within %v", within)
	}
}

func TestSessionConfigValidate(t *testing.T) {
	good := membership.DefaultSessionConfig(5 * time.Second)
	tests := []struct {
		name   string
		mutate func(*membership.SessionConfig)
		ok     bool
	}{
		{"default", func(*membership.SessionConfig) {}, true},
		{"fractional TTL", func(c *membership.SessionConfig) { c.TTL = 1500 * time.Millisecond }, false},
		{"deadline not below TTL", func(c *membership.SessionConfig) { c.RenewDeadline = c.TTL }, false},
		{"interval not below deadline", func(c *membership.SessionConfig) { c.RenewInterval = c.RenewDeadline }, false},
		{"zero retry", func(c *membership.SessionConfig) { c.RetryInterval = 0 }, false},
		{"request timeout above deadline", func(c *membership.SessionConfig) { c.RequestTimeout = c.RenewDeadline + 1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			err := c.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, membership.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestSessionFencesItselfBeforeTheLeaseCanExpire cuts the session off from
// etcd and steps a fake clock: the session must not end before its renew
// deadline and must end at it, which is before the TTL after which the
// server may expire the lease.
func TestSessionFencesItselfBeforeTheLeaseCanExpire(t *testing.T) {
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	client := etcdtest.NewClient(t, bridge.Endpoints())
	fc := clockwork.NewFakeClock()
	cfg := membership.DefaultSessionConfig(5 * time.Second)
	cfg.Clock = fc
	cfg.Logger = zaptest.NewLogger(t)
	s := newSession(t, client, cfg)
	defer s.Orphan()

	// blockUntilWaiting waits until the keepalive loop waits on its renew
	// and fence timers, so an Advance is not lost before they exist.
	blockUntilWaiting := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := fc.BlockUntilContext(ctx, 2); err != nil {
			t.Fatalf("keepalive loop not waiting on its timers: %v", err)
		}
	}
	// Renewals succeed while connected: the session outlives its TTL.
	for range 8 {
		blockUntilWaiting()
		before := s.LastRenewal()
		fc.Advance(cfg.RenewInterval)
		deadline := time.Now().Add(10 * time.Second)
		for !s.LastRenewal().After(before) {
			if time.Now().After(deadline) {
				t.Fatalf("no renewal after advancing %v", cfg.RenewInterval)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if isDone(s) {
		t.Fatalf("session ended while renewals succeed: %v", s.Err())
	}

	blockUntilWaiting()
	bridge.Cut()
	last := s.LastRenewal()
	step := 50 * time.Millisecond
	for fc.Since(last)+step < cfg.RenewDeadline {
		fc.Advance(step)
		if isDone(s) {
			t.Fatalf("session ended %v after the last renewal, before the renew deadline %v", fc.Since(last), cfg.RenewDeadline)
		}
	}
	fc.Advance(cfg.RenewDeadline - fc.Since(last))
	waitDone(t, s, 10*time.Second)
	if !errors.Is(s.Err(), membership.ErrRenewDeadline) {
		t.Fatalf("Err() = %v, want ErrRenewDeadline", s.Err())
	}
	if ended := fc.Since(last); ended >= cfg.TTL {
		t.Fatalf("fenced %v after the last renewal, not before the TTL %v", ended, cfg.TTL)
	}
	if s.Ctx().Err() == nil {
		t.Fatal("session context not cancelled")
	}
	bridge.Restore()
}

func TestSessionEndsWhenLeaseRevoked(t *testing.T) {
	client := etcd.Client(t)
	s, err := membership.NewSession(context.Background(), client, membership.DefaultSessionConfig(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := client.Revoke(context.Background(), s.Lease()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, 5*time.Second)
	if !errors.Is(s.Err(), membership.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", s.Err())
	}
}

// TestSessionLostEndsAtOnce: a holder told that its lease is gone (its
// registration deleted) ends the session at once, without waiting for a
// keepalive to fail: a fake clock that never moves sends none.
func TestSessionLostEndsAtOnce(t *testing.T) {
	client := etcd.Client(t)
	cfg := membership.DefaultSessionConfig(5 * time.Second)
	cfg.Clock = clockwork.NewFakeClock()
	s := newSession(t, client, cfg)
	if _, err := client.Revoke(context.Background(), s.Lease()); err != nil {
		t.Fatal(err)
	}
	if isDone(s) {
		t.Fatal("session done before a keepalive or Lost could tell it")
	}
	s.Lost()
	waitDone(t, s, time.Second)
	s.Lost() // idempotent
	if !errors.Is(s.Err(), membership.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", s.Err())
	}
	if err := s.Close(); err != nil { // the lease is gone already: nothing to report
		t.Fatalf("Close() after Lost = %v, want nil", err)
	}
	if !errors.Is(s.Err(), membership.ErrLeaseLost) {
		t.Fatalf("Err() after Close = %v, want ErrLeaseLost still", s.Err())
	}
}

func TestSessionCloseRevokesLease(t *testing.T) {
	client := etcd.Client(t)
	s, err := membership.NewSession(context.Background(), client, membership.DefaultSessionConfig(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	key := etcdtest.Namespace(t) + "bound"
	if _, err := client.Put(context.Background(), key, "x", clientv3.WithLease(s.Lease())); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() = %v, want nil", err)
	}
	if !errors.Is(s.Err(), membership.ErrSessionClosed) {
		t.Fatalf("Err() = %v, want ErrSessionClosed", s.Err())
	}
	resp, err := client.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatal("key bound to the closed session's lease still exists")
	}
}

// newSession starts a session of cfg on client or fails the test.
func newSession(t *testing.T, client *clientv3.Client, cfg membership.SessionConfig) *membership.Session {
	t.Helper()
	s, err := membership.NewSession(context.Background(), client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRegisterWaitsForPreviousRegistration(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	cfg := membership.DefaultSessionConfig(5 * time.Second)
	first := newSession(t, client, cfg)
	defer first.Close()
	if _, err := membership.Register(context.Background(), client, first, ns, api.Member{ID: "m1", Addr: "http://a"}, nil); err != nil {
		t.Fatal(err)
	}

	second := newSession(t, client, cfg)
	defer second.Close()
	core, logs := observer.New(zap.InfoLevel)
	type result struct {
		m   api.Member
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := membership.Register(context.Background(), client, second, ns, api.Member{ID: "m1", Addr: "http://b"}, zap.New(core))
		done <- result{m, err}
	}()
	// It says why it waits, and does not register while the first lives.
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessageSnippet("waiting for it").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("second registration did not log why it waits")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("second registration returned while the first is alive: %+v", r)
	default:
	}

	if err := first.Close(); err != nil { // the first member leaves
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Register() = %v", r.err)
		}
		if r.m.LeaseID != int64(second.Lease()) || r.m.Addr != "http://b" {
			t.Fatalf("registered %+v, want lease %x addr http://b", r.m, second.Lease())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second registration still waiting after the first left")
	}
}

func TestRegisterReturnsWhenSessionEnds(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	cfg := membership.DefaultSessionConfig(5 * time.Second)
	holder := newSession(t, client, cfg)
	defer holder.Close()
	if _, err := membership.Register(context.Background(), client, holder, ns, api.Member{ID: "m1"}, nil); err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, client, cfg)
	done := make(chan error, 1)
	go func() {
		_, err := membership.Register(context.Background(), client, waiter, ns, api.Member{ID: "m1"}, nil)
		done <- err
	}()
	waiter.Close()
	select {
	case err := <-done:
		if !errors.Is(err, membership.ErrSessionClosed) {
			t.Fatalf("Register() = %v, want ErrSessionClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register did not return after its session ended")
	}
}

func TestDeregisterOnlyDeletesOwnRegistration(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s, err := membership.NewSession(context.Background(), client, membership.DefaultSessionConfig(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := membership.Register(context.Background(), client, s, ns, api.Member{ID: "m1"}, nil); err != nil {
		t.Fatal(err)
	}
	// A stale incarnation's deregister (another lease) must not remove it.
	if err := membership.Deregister(context.Background(), client, ns, "m1", s.Lease()+1); err != nil {
		t.Fatal(err)
	}
	if resp, _ := client.Get(context.Background(), membership.Key(ns, "m1")); len(resp.Kvs) != 1 {
		t.Fatal("deregister with another lease removed the registration")
	}
	if err := membership.Deregister(context.Background(), client, ns, "m1", s.Lease()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := client.Get(context.Background(), membership.Key(ns, "m1")); len(resp.Kvs) != 0 {
		t.Fatal("deregister with the own lease left the registration")
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"m1", "host-1:8080", "a.b_c", strings.Repeat("x", 128)} {
		if err := membership.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "a/b", "a b", "ü", strings.Repeat("x", 129)} {
		if err := membership.ValidateID(id); err == nil {
			t.Errorf("ValidateID(%q) = nil, want an error", id)
		}
	}
}

// startWatcher runs a watcher until the test ends.
func startWatcher(t *testing.T, client *clientv3.Client, ns string, lg *zap.Logger) *membership.Watcher {
	t.Helper()
	w, err := membership.NewWatcher(client, ns, lg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func putMember(t *testing.T, c *clientv3.Client, ns, id string) int64 {
	t.Helper()
	resp, err := c.Put(context.Background(), membership.Key(ns, id), fmt.Sprintf(`{"id":%q,"addr":"http://%s"}`, id, id))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func waitView(t *testing.T, w *membership.Watcher, want string) api.View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	v, err := w.WaitFor(ctx, func(v api.View) bool { return strings.Join(v.IDs(), ",") == want })
	if err != nil {
		t.Fatalf("view %v, want %s: %v", v.IDs(), want, err)
	}
	return v
}

func TestWatcherRecoversFromCompaction(t *testing.T) {
	direct := etcd.Client(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	viaBridge := etcdtest.NewClient(t, bridge.Endpoints())
	ns := etcdtest.Namespace(t)
	core, logs := observer.New(zap.InfoLevel)
	w := startWatcher(t, viaBridge, ns, zap.New(core))

	putMember(t, direct, ns, "a")
	putMember(t, direct, ns, "b")
	waitView(t, w, "a,b")

	// While the watcher is cut off, the set changes and history is
	// compacted past what it has seen; its connection then drops, so its
	// watch resumes from a compacted revision.
	bridge.Cut()
	if _, err := direct.Delete(context.Background(), membership.Key(ns, "a")); err != nil {
		t.Fatal(err)
	}
	putMember(t, direct, ns, "c")
	if _, err := etcdtest.Compact(context.Background(), direct); err != nil {
		t.Fatal(err)
	}
	bridge.DropConnections()
	bridge.Restore()

	v := waitView(t, w, "b,c")
	if logs.FilterMessageSnippet("re-listing").Len() == 0 {
		t.Error("the watcher converged without re-listing; the compaction path was not exercised")
	}
	if got, ok := v.Get("c"); !ok || got.Addr != "http://c" {
		t.Errorf("view member c = %+v, %v", got, ok)
	}
	// And it keeps following changes afterwards.
	putMember(t, direct, ns, "d")
	waitView(t, w, "b,c,d")
}

func TestWatcherRecoversFromEtcdRestart(t *testing.T) {
	own := etcdtest.New(t) // restarted: not the shared server
	client := own.Client(t)
	ns := etcdtest.Namespace(t)
	w := startWatcher(t, client, ns, zaptest.NewLogger(t))
	putMember(t, client, ns, "a")
	waitView(t, w, "a")

	own.Stop()
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	putMember(t, client, ns, "b")
	v := waitView(t, w, "a,b")
	if v.Revision == 0 {
		t.Error("view revision is 0 after restart")
	}
}

func TestWatcherSkipsUndecodableEntries(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	w := startWatcher(t, client, ns, nil)
	putMember(t, client, ns, "good")
	if _, err := client.Put(context.Background(), membership.Key(ns, "bad"), "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(context.Background(), membership.Key(ns, "liar"), `{"id":"someone-else"}`); err != nil {
		t.Fatal(err)
	}
	putMember(t, client, ns, "z")
	waitView(t, w, "good,z")
}

// Watcher.Member answers as the view does for registered, absent and
// corrupt registrations.
func TestWatcherMemberLooksUpOne(t *testing.T) {
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	w := startWatcher(t, c, ns, zap.NewNop())
	putMember(t, c, ns, "a")
	putMember(t, c, ns, "b")
	if _, err := c.Put(context.Background(), membership.Key(ns, "c"), `{"id":"not-c"}`); err != nil {
		t.Fatal(err)
	}
	v := waitView(t, w, "a,b")
	for _, id := range []string{"a", "b", "c", "zz"} {
		got, gotOK := w.Member(id)
		want, wantOK := v.Get(id)
		if gotOK != wantOK || got != want {
			t.Errorf("Member(%q) = %+v, %v; the view has %+v, %v", id, got, gotOK, want, wantOK)
		}
	}
	if m, ok := w.Member("a"); !ok || m.Addr != "http://a" {
		t.Errorf("Member(a) = %+v, %v, want its address", m, ok)
	}
}

// TestSessionRecordsKeepaliveRoundTrips: every keepalive request is
// observed in jobfleet_lease_keepalive_seconds, with its round trip.
func TestSessionRecordsKeepaliveRoundTrips(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := membership.DefaultSessionConfig(2 * time.Second)
	cfg.Metrics = membership.NewMetrics(reg)
	s, err := membership.NewSession(context.Background(), etcd.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	observed := func() (uint64, float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "jobfleet_lease_keepalive_seconds" {
				h := mf.Metric[0].GetHistogram()
				return h.GetSampleCount(), h.GetSampleSum()
			}
		}
		t.Fatal("jobfleet_lease_keepalive_seconds not registered")
		return 0, 0
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, sum := observed()
		if n >= 2 {
			if sum <= 0 || sum/float64(n) > cfg.RequestTimeout.Seconds() {
				t.Fatalf("%d keepalives took %vs in all, want each more than 0 and at most the request timeout %v", n, sum, cfg.RequestTimeout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keepalives observed after 10s, want 2 (renew interval %v)", n, cfg.RenewInterval)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if isDone(s) {
		t.Fatalf("session ended: %v", s.Err())
	}
}

// slowLease answers keepalives delay after they were sent, on a fake
// clock, without asking etcd, as a server behind a backlog of writes to
// apply would.
type slowLease struct {
	clientv3.Lease
	clock *clockwork.FakeClock

	mu         sync.Mutex
	delay      time.Duration
	inProgress int
}

func (l *slowLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	l.mu.Lock()
	l.inProgress++
	answer := l.clock.After(l.delay)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inProgress--
		l.mu.Unlock()
	}()
	select {
	case <-answer:
		return &clientv3.LeaseKeepAliveResponse{ID: id, TTL: 5}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSessionRenewsThroughSlowKeepalives: keepalives that each take half
// the renew deadline (longer than the renew interval) keep the session
// alive, since requests overlap and each may take until the deadline;
// keepalives slower than the deadline end it at the deadline.
func TestSessionRenewsThroughSlowKeepalives(t *testing.T) {
	client := etcdtest.NewClient(t, etcd.Endpoints())
	fc := clockwork.NewFakeClock()
	lease := &slowLease{Lease: client.Lease, clock: fc, delay: 1500 * time.Millisecond}
	client.Lease = lease
	cfg := membership.DefaultSessionConfig(5 * time.Second)
	cfg.Clock = fc
	cfg.Logger = zaptest.NewLogger(t)
	s := newSession(t, client, cfg)
	defer s.Orphan()
	// step advances the clock by d in small steps, each once the session
	// waits on its timers and every keepalive in progress on its answer.
	step := func(d time.Duration) {
		t.Helper()
		for end := fc.Now().Add(d); fc.Now().Before(end) && !isDone(s); {
			lease.mu.Lock()
			waiters := 1 + 2*lease.inProgress // the fence; each request's deadline and answer
			lease.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := fc.BlockUntilContext(ctx, waiters)
			cancel()
			if err != nil {
				t.Fatalf("session not waiting on its timers: %v", err)
			}
			fc.Advance(10 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	}
	start := fc.Now()
	step(20 * time.Second)
	if isDone(s) {
		t.Fatalf("keepalives answered in %v (renew deadline %v): session ended: %v", lease.delay, cfg.RenewDeadline, s.Err())
	}
	if got := s.LastRenewal().Sub(start); got < 17*time.Second {
		t.Fatalf("after 20s of keepalives answered in %v, the last renewal was sent at %v, want after 17s", lease.delay, got)
	}
	lease.mu.Lock()
	lease.delay = cfg.RenewDeadline + time.Second
	lease.mu.Unlock()
	for !isDone(s) && fc.Since(s.LastRenewal()) < cfg.TTL {
		step(10 * time.Millisecond)
	}
	waitDone(t, s, 10*time.Second)
	if !errors.Is(s.Err(), membership.ErrRenewDeadline) {
		t.Fatalf("Err() = %v, want ErrRenewDeadline", s.Err())
	}
	if ended := fc.Since(s.LastRenewal()); ended > cfg.RenewDeadline+50*time.Millisecond {
		t.Fatalf("fenced %v after the last renewal was sent, want at the renew deadline %v", ended, cfg.RenewDeadline)
	}
}
