// Package fleettest runs a fleet of orchestrators in one test process
// against a real etcd, each member behind its own TCP bridge so a test can
// cut it off from etcd, and checks the ownership invariants over what the
// members did and what etcd recorded.
package fleettest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
	"github.com/jobfleet/jobfleet/shard"
)

// Options configures a Fleet.
type Options struct {
	// Partitions is the cluster's partition count. Default 32.
	Partitions int
	// LeaseTTL is every member's lease TTL. Default 2s (etcd's minimum).
	LeaseTTL time.Duration
	// WriteInterval is how often each partition's Work makes a fenced
	// write. Default 100ms.
	WriteInterval time.Duration
	// Quiet drops member logs below warnings.
	Quiet bool
	// Scheduler runs the real job scheduler (package dispatch) as each
	// partition's Work instead of the Tracker's, and serves each member's
	// HTTP API (jobs, worker protocol) on a free loopback port.
	Scheduler bool
	// RunLease is the run lease with Scheduler. Default 3s.
	RunLease time.Duration
	// PresenceGrace is the members' worker presence grace (zero: the
	// default; see workers.Config).
	PresenceGrace time.Duration
	// PriorityAging is the members' priority aging with Scheduler (zero:
	// the default, negative: none; see dispatch.Config).
	PriorityAging time.Duration
	// APILimits are the members' API limits with Scheduler (zero:
	// admin's defaults).
	APILimits admin.Limits
	// Storage is every member's storage configuration (compaction, quota
	// watch); zero fields take the orchestrator's defaults.
	Storage storage.Config
	// Notify is every member's run notification configuration (with
	// Scheduler).
	Notify orchestrator.NotifyConfig
	// WarmStandby makes every member keep standby copies of the
	// partitions it is the heir of (with Scheduler).
	WarmStandby bool
	// NoDeadMemberDetector turns the members' dead member detectors off:
	// a crashed member's partitions move only when its lease expires, for
	// tests that need an outage of a lease's length.
	NoDeadMemberDetector bool
	// Logs, if set, also receives every member's logs (at every level),
	// so a test can assert on them with a zaptest/observer core.
	Logs zapcore.Core
}

// Fleet is a set of in-process members sharing one etcd and namespace.
type Fleet struct {
	t       testing.TB
	etcd    *etcdtest.Server
	Client  *clientv3.Client // an observer's client, straight to etcd
	NS      string
	opts    Options
	Tracker *Tracker
	lg      *zap.Logger

	// AdminToken and WorkerToken are bearer tokens of an admin and a
	// worker credential stored in the fleet's namespace (with Scheduler),
	// made before any member starts so that every member knows them.
	AdminToken  string
	WorkerToken string

	mu      sync.Mutex
	members map[string]*Member
}

// Member is one orchestrator of the fleet.
type Member struct {
	ID     string
	Orch   *orchestrator.Orchestrator
	Bridge *netfault.Bridge
	client *clientv3.Client
	// URL is the member's HTTP API, with Options.Scheduler.
	URL string
	// Metrics holds the member's metrics.
	Metrics *prometheus.Registry
	http    *http.Server
	cancel  context.CancelFunc
	done    chan error // receives Run's result
	live    bool       // joined and neither left nor crashed
}

// New returns an empty fleet on etcd in a fresh namespace. Members still
// running when the test ends are stopped.
func New(t testing.TB, etcd *etcdtest.Server, opts Options) *Fleet {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 32
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 2 * time.Second
	}
	if opts.WriteInterval == 0 {
		opts.WriteInterval = 100 * time.Millisecond
	}
	if opts.RunLease == 0 {
		opts.RunLease = 3 * time.Second
	}
	lg := zaptest.NewLogger(t)
	if opts.Quiet {
		lg = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	if opts.Logs != nil {
		lg = lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, opts.Logs) }))
	}
	f := &Fleet{
		t:       t,
		etcd:    etcd,
		Client:  etcd.Client(t),
		NS:      etcdtest.Namespace(t),
		opts:    opts,
		Tracker: newTracker(),
		lg:      lg,
		members: map[string]*Member{},
	}
	t.Cleanup(f.stopAll)
	if opts.Scheduler {
		f.AdminToken = authtest.Token(t, f.Client, f.NS, api.RoleAdmin, "")
		f.WorkerToken = authtest.Token(t, f.Client, f.NS, api.RoleWorker, "")
	}
	return f
}

// Token stores a credential of role, limited to job IDs starting with
// prefix ("" for all), and returns its bearer token once every live
// member's credential cache has it.
func (f *Fleet) Token(role api.Role, prefix string) string {
	f.t.Helper()
	return f.TokenFor(api.CreateRequest{Role: role, Prefix: prefix})
}

// TokenFor stores the credential req asks for (a worker credential
// limited to worker labels, for one) and returns its bearer token once
// every live member's credential cache has it.
func (f *Fleet) TokenFor(req api.CreateRequest) string {
	f.t.Helper()
	req.Description = "test " + f.t.Name()
	c, rev := authtest.Create(f.t, f.Client, f.NS, req)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range f.Live() {
		if err := f.member(id).Orch.Credentials().WaitRevision(ctx, rev); err != nil {
			f.t.Fatalf("fleettest: member %s did not load the new credential: %v", id, err)
		}
	}
	return c.Secret
}

// HTTPClient returns a client that sends token (the fleet's AdminToken or
// WorkerToken, or one of authtest's).
func (f *Fleet) HTTPClient(token string) *http.Client { return authtest.Client(f.t, token) }

// Partitions returns the fleet's partition count.
func (f *Fleet) Partitions() int { return f.opts.Partitions }

// Join starts a member with the given ID.
func (f *Fleet) Join(id string) *Member {
	f.t.Helper()
	// The bridge and client are closed by stopAll after the member
	// returned, not by t.Cleanup, which would close them first.
	bridge, err := netfault.StartBridge(f.etcd.ClientAddr())
	if err != nil {
		f.t.Fatalf("fleettest: bridge: %v", err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: bridge.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		bridge.Close()
		f.t.Fatalf("fleettest: client: %v", err)
	}
	var ln net.Listener
	advertise := "http://" + id + ".invalid"
	work := f.Tracker.Work(id, f.opts.WriteInterval, f.NS)
	if f.opts.Scheduler {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			f.t.Fatalf("fleettest: listen: %v", err)
		}
		advertise, work = "http://"+ln.Addr().String(), nil
	}
	reg := prometheus.NewRegistry()
	var deadMembers deathwatch.Config
	if !f.opts.Scheduler || f.opts.NoDeadMemberDetector {
		deadMembers.Interval = -1 // no address to probe, or not asked to: a crash is the lease's
	}
	orch, err := orchestrator.New(client, orchestrator.Config{
		ID:             id,
		Advertise:      advertise,
		Namespace:      f.NS,
		Partitions:     f.opts.Partitions,
		LeaseTTL:       f.opts.LeaseTTL,
		RebalanceDelay: 100 * time.Millisecond,
		LeaveTimeout:   3 * time.Second,
		Work:           work,
		Dispatch:       dispatch.Config{RunLease: f.opts.RunLease, PriorityAging: f.opts.PriorityAging},
		Notify:         f.opts.Notify,
		Storage:        f.opts.Storage,
		WarmStandby:    f.opts.WarmStandby,
		DeadMembers:    deadMembers,
		Workers:        workers.Config{PresenceGrace: f.opts.PresenceGrace},
		// Peers' figures reach the charts at once, not 15s late.
		ActivityInterval: 200 * time.Millisecond,
		Logger:           f.lg.With(zap.String("test_member", id)),
		Registry:         reg,
	})
	if err != nil {
		f.t.Fatalf("fleettest: new member %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{ID: id, Orch: orch, Bridge: bridge, client: client, Metrics: reg, cancel: cancel, done: make(chan error, 1), live: true}
	if ln != nil {
		m.URL = advertise
		m.http = &http.Server{Handler: admin.Handler(admin.MemberOf(orch), admin.Config{
			Tokens:   auth.NewStore(client, f.NS, nil),
			Loopback: true,
			Limits:   f.opts.APILimits,
			Logger:   f.lg.With(zap.String("test_member", id)),
			Registry: reg,
			// As a real member does: workers deny etcd to http jobs (here
			// both the bridge the member uses and etcd behind it).
			EtcdEndpoints: func() []string { return append(client.Endpoints(), f.etcd.Endpoints()...) },
		})}
		go m.http.Serve(ln)
	}
	go func() { m.done <- orch.Run(ctx) }()
	f.mu.Lock()
	f.members[id] = m
	f.mu.Unlock()
	return m
}

// Leave stops member id gracefully and waits for it to return.
func (f *Fleet) Leave(id string) {
	f.t.Helper()
	m := f.member(id)
	f.setLive(id, false)
	m.cancel()
	if err := <-m.done; err != nil {
		f.t.Errorf("fleettest: member %s: Run returned %v", id, err)
	}
	m.done <- nil // let stopAll see it has returned
}

// Crash cuts member id off from etcd for good and stops it; from the
// fleet's point of view it crashed. Its lease expires after the TTL;
// with Options.Scheduler its HTTP listener closes too, as a dead
// process's does, and the others' dead member detectors revoke the lease
// at once.
func (f *Fleet) Crash(id string) {
	f.t.Helper()
	m := f.member(id)
	f.setLive(id, false)
	m.Bridge.Cut()
	if m.http != nil {
		m.http.Close() // a crashed process serves nothing
	}
	m.cancel() // Run returns after its timeouts; stopAll waits for it
}

// Pause cuts member id off from etcd, as a network partition or a
// SIGSTOP would. Resume reconnects it.
func (f *Fleet) Pause(id string) {
	f.member(id).Bridge.Cut()
}

// Resume reconnects a paused member.
func (f *Fleet) Resume(id string) {
	f.member(id).Bridge.Restore()
}

// Live returns the IDs of members that joined and neither left nor
// crashed, sorted.
func (f *Fleet) Live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, m := range f.members {
		if m.live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// URLs returns the HTTP API URLs of the live members (Options.Scheduler).
func (f *Fleet) URLs() []string {
	var urls []string
	for _, id := range f.Live() {
		urls = append(urls, f.member(id).URL)
	}
	return urls
}

// Member returns member id; it fails the test if there is none.
func (f *Fleet) Member(id string) *Member { return f.member(id) }

func (f *Fleet) member(id string) *Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[id]
	if !ok {
		f.t.Fatalf("fleettest: no member %s", id)
	}
	return m
}

func (f *Fleet) setLive(id string, live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[id].live = live
}

func (f *Fleet) stopAll() {
	f.mu.Lock()
	ms := slices.Collect(maps.Values(f.members))
	f.mu.Unlock()
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		<-m.done
		if m.http != nil {
			m.http.Close()
		}
		m.client.Close()
		m.Bridge.Close()
	}
}

// Owners reads the owner table straight from etcd.
func (f *Fleet) Owners(ctx context.Context) ([]shard.OwnerInfo, int64, error) {
	resp, err := f.Client.Get(ctx, shard.OwnersPrefix(f.NS), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	t := make([]shard.OwnerInfo, f.opts.Partitions)
	for _, kv := range resp.Kvs {
		p, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), shard.OwnersPrefix(f.NS)))
		if err != nil || p >= len(t) {
			return nil, 0, fmt.Errorf("unexpected owner key %q", kv.Key)
		}
		t[p] = shard.OwnerInfo{Member: string(kv.Value), Epoch: kv.CreateRevision, Lease: kv.Lease}
	}
	return t, resp.Header.Revision, nil
}

// WaitSettled waits until every partition is owned by the member the ring
// of the live members assigns it to and, with the Tracker's Work, until
// that member runs the partition's Work under the owner key's epoch (an
// owner key is written before its Work starts); it returns how long that
// took. It fails the test after timeout.
func (f *Fleet) WaitSettled(timeout time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	ring, err := shard.NewRing(f.Live(), shard.DefaultRingConfig(f.opts.Partitions))
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wch := f.Client.Watch(ctx, shard.OwnersPrefix(f.NS), clientv3.WithPrefix())
	var last string
	for {
		table, _, err := f.Owners(ctx)
		if err == nil {
			wrong := 0
			for p, o := range table {
				if o.Member != ring.Target(p) {
					wrong++
				}
			}
			idle := 0
			if !f.opts.Scheduler {
				idle = f.Tracker.notRunning(table)
			}
			if wrong == 0 && idle == 0 {
				return time.Since(start)
			}
			last = fmt.Sprintf("%d of %d partitions not owned by their target among %v; %d owned but their Work not started", wrong, len(table), f.Live(), idle)
		}
		select {
		case <-wch:
		case <-time.After(20 * time.Millisecond): // Work starts without an etcd event
		case <-ctx.Done():
			f.t.Fatalf("fleettest: not settled after %v: %s", timeout, last)
		}
	}
}

// CheckHistory replays etcd's history of the namespace from revision
// from+1 and checks:
//   - an owner key is only ever created (PUT on an absent key), deleted,
//     or rewritten by its owner with the same member and epoch (a
//     re-fence, shard.Ownership.Refence), never overwritten by another:
//     one owner at every revision;
//   - every write a partition's Work made (a fenced data key holding its
//     epoch) happened while the owner key had exactly that epoch.
//
// It returns the number of owner changes and Work writes checked.
func (f *Fleet) CheckHistory(from int64) (ownerEvents, writes int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := f.Client.Get(ctx, "history-probe")
	if err != nil {
		f.t.Fatal(err)
	}
	end := resp.Header.Revision
	owners := map[string]shard.OwnerInfo{} // owner key → its owner while it exists
	if from > 0 {
		// Start from the state at from.
		r, err := f.Client.Get(ctx, shard.OwnersPrefix(f.NS), clientv3.WithPrefix(), clientv3.WithRev(from))
		if err != nil {
			f.t.Fatal(err)
		}
		for _, kv := range r.Kvs {
			owners[string(kv.Key)] = shard.OwnerInfoOf(kv)
		}
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := f.Client.Watch(wctx, f.NS, clientv3.WithPrefix(), clientv3.WithRev(from+1))
	ownersPrefix, dataPrefix := shard.OwnersPrefix(f.NS), f.NS+"data/"
	for wr := range wch {
		if err := wr.Err(); err != nil {
			f.t.Fatalf("fleettest: history watch: %v", err)
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			switch {
			case strings.HasPrefix(key, ownersPrefix):
				ownerEvents++
				if ev.Type == mvccpb.Event_DELETE {
					delete(owners, key)
					continue
				}
				prev, exists := owners[key]
				if exists && shard.IsRefence(prev, shard.OwnerInfoOf(ev.Kv)) {
					continue
				}
				if exists || ev.Kv.CreateRevision != ev.Kv.ModRevision {
					f.t.Errorf("history: owner key %s overwritten at revision %d (value %q): two owners", key, ev.Kv.ModRevision, ev.Kv.Value)
				}
				owners[key] = shard.OwnerInfoOf(ev.Kv)
			case strings.HasPrefix(key, dataPrefix) && ev.Type == mvccpb.Event_PUT:
				writes++
				p := strings.TrimPrefix(key, dataPrefix)
				epoch, _ := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
				n, _ := strconv.Atoi(p)
				if got := owners[shard.OwnerKey(f.NS, n)].Epoch; got != epoch {
					f.t.Errorf("history: partition %s written with epoch %d at revision %d while the owner key's epoch was %d: fencing broken", p, epoch, ev.Kv.ModRevision, got)
				}
			}
		}
		if wr.Header.Revision >= end {
			break
		}
	}
	return ownerEvents, writes
}

// Tracker records which member runs Work for which partition, and every
// instant two members ran it for the same partition at once.
type Tracker struct {
	mu       sync.Mutex
	active   map[int]map[string]int64    // partition → member → epoch
	last     map[string]*shard.Ownership // member → its latest acquired ownership
	overlaps []string
	starts   int
	stops    int
}

func newTracker() *Tracker {
	return &Tracker{active: map[int]map[string]int64{}, last: map[string]*shard.Ownership{}}
}

// LastOwnership returns the latest ownership member acquired, nil if none.
func (tr *Tracker) LastOwnership(member string) *shard.Ownership {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.last[member]
}

// Active returns the partitions whose Work member is running now.
func (tr *Tracker) Active(member string) []int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ps []int
	for p, ms := range tr.active {
		if _, ok := ms[member]; ok {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// Work returns a shard.Work for member that records starts and stops and
// writes the epoch to <ns>data/<partition> through the fenced Commit every
// interval.
func (tr *Tracker) Work(member string, interval time.Duration, ns string) shard.Work {
	return func(ctx context.Context, o *shard.Ownership) {
		tr.start(o.Partition, member, o.Epoch)
		defer tr.stop(o.Partition, member)
		key := ns + "data/" + strconv.Itoa(o.Partition)
		t := time.NewTicker(interval)
		defer t.Stop()
		tr.mu.Lock()
		tr.last[member] = o
		tr.mu.Unlock()
		for {
			// Errors are expected here: etcd unreachable while cut off, or
			// ErrFenced after ownership moved (the controller then cancels
			// ctx). CheckHistory verifies what did get written.
			_, _ = o.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, strconv.FormatInt(o.Epoch, 10))}, nil)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

func (tr *Tracker) start(p int, member string, epoch int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.starts++
	if tr.active[p] == nil {
		tr.active[p] = map[string]int64{}
	}
	for other, e := range tr.active[p] {
		tr.overlaps = append(tr.overlaps, fmt.Sprintf("partition %d: %s started (epoch %d) while %s still ran it (epoch %d)", p, member, epoch, other, e))
	}
	tr.active[p][member] = epoch
}

func (tr *Tracker) stop(p int, member string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.stops++
	delete(tr.active[p], member)
}

// notRunning counts the partitions of table whose owner does not run
// their Work under the owner key's epoch.
func (tr *Tracker) notRunning(table []shard.OwnerInfo) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for p, o := range table {
		if e, ok := tr.active[p][o.Member]; !ok || e != o.Epoch {
			n++
		}
	}
	return n
}

// Overlaps returns every instant two members ran one partition's Work.
func (tr *Tracker) Overlaps() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.overlaps)
}

// Counts returns how many Work calls started and stopped.
func (tr *Tracker) Counts() (starts, stops int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.starts, tr.stops
}
