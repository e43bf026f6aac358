package rebalance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/internal/gapwatch"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/shard"
)

// Events measured by Gaps.
const (
	Join  = "graceful join"
	Leave = "graceful leave"
	Crash = "crash"
)

// GapConfig configures the measured part.
type GapConfig struct {
	// Partitions is P.
	Partitions int `json:"partitions"`
	// Members is the fleet's size before a member joins.
	Members int `json:"members"`
	// JoinLeaveReps is how many times a member joins and then leaves
	// gracefully.
	JoinLeaveReps int `json:"join_leave_reps"`
	// CrashReps is how many times a member joins and then crashes.
	CrashReps int `json:"crash_reps"`
	// LeaseTTL is every member's lease TTL (the orchestrator's default is
	// 5s); the crash failover is bounded by it.
	LeaseTTL time.Duration `json:"lease_ttl_ns"`
	// Timeout bounds the wait for the fleet to settle after each event.
	Timeout time.Duration `json:"timeout_ns"`
	// Progress shows what is running; nil shows nothing.
	Progress *bench.Progress `json:"-"`
}

// DefaultGapConfig: P=1024, 3 members, 20 join/leave pairs, 5 crashes,
// the orchestrator's default TTL of 5s.
func DefaultGapConfig() GapConfig {
	return GapConfig{Partitions: shard.DefaultPartitions, Members: 3, JoinLeaveReps: 20, CrashReps: 5, LeaseTTL: 5 * time.Second, Timeout: time.Minute}
}

// GapStats are the measurements of one kind of event.
type GapStats struct {
	Event string `json:"event"`
	Reps  int    `json:"reps"`
	// Gap is, over every partition that changed owner, the time from its
	// owner key's deletion (release, or lease expiry after a crash) to its
	// creation by the new owner, as an observer's watch sees them.
	Gap bench.Summary `json:"gap"`
	// Unowned is, over every partition that changed owner, the time from
	// the event (join started, leave started, crash) until it was owned by
	// its new owner: for a crash this includes the wait for the lease to
	// expire.
	Unowned bench.Summary `json:"unowned"`
	// Settle is, per repetition, the time from the event until every
	// partition was owned by its ring target.
	Settle bench.Summary `json:"settle"`
	// Moved is the mean number of partitions that changed owner per
	// repetition.
	Moved float64 `json:"moved_mean"`
}

// GapResult is the measured part.
type GapResult struct {
	Config GapConfig  `json:"config"`
	Stats  []GapStats `json:"stats"`
}

// Gaps measures ownership gaps with real orchestrators on the etcd at
// endpoints (reached directly by the observer, through a TCP bridge by
// each member so that a crash can cut one off).
func Gaps(ctx context.Context, endpoints []string, etcdAddr string, cfg GapConfig) (*GapResult, error) {
	if cfg.Partitions < 1 || cfg.Members < 1 || cfg.LeaseTTL < 2*time.Second || cfg.Timeout <= 0 {
		return nil, errors.New("rebalance: need partitions ≥ 1, members ≥ 1, a lease TTL ≥ 2s and a timeout")
	}
	obs, err := bench.NewClient(endpoints, 0)
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	f := &fleet{cfg: cfg, obs: obs, addr: etcdAddr, ns: fmt.Sprintf("/jobfleet-bench/gaps-%d/", time.Now().UnixNano()), members: map[string]*member{}}
	defer f.stopAll()
	for i := range cfg.Members {
		if err := f.join(fmt.Sprintf("orchestrator-%d", i+1)); err != nil {
			return nil, err
		}
	}
	if _, err := f.settle(ctx, time.Now()); err != nil {
		return nil, err
	}
	stats := map[string]*samples{Join: {}, Leave: {}, Crash: {}}
	measure := func(event string, act func() error) error {
		rec, err := f.record(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := act(); err != nil {
			rec.Stop()
			return err
		}
		settle, err := f.settle(ctx, start)
		res := rec.Stop()
		gaps, created, open := res.Gaps, res.Created, res.Open
		if err != nil {
			return fmt.Errorf("%s: %w", event, err)
		}
		if open > 0 {
			return fmt.Errorf("%s: %d partitions left without an owner", event, open)
		}
		s := stats[event]
		s.reps++
		s.settle = append(s.settle, settle)
		s.gaps = append(s.gaps, gaps...)
		for _, c := range created {
			s.unowned = append(s.unowned, c.Sub(start))
		}
		s.moved += len(created)
		cfg.Progress.Step("gaps: %-14s rep %2d: %4d partitions moved, gap max %v, settled in %v", event, s.reps, len(created), maxDur(gaps).Round(time.Millisecond), settle.Round(time.Millisecond))
		return nil
	}
	for rep := range cfg.JoinLeaveReps {
		id := fmt.Sprintf("joiner-%d", rep+1)
		if err := measure(Join, func() error { return f.join(id) }); err != nil {
			return nil, err
		}
		if err := measure(Leave, func() error { return f.leave(id) }); err != nil {
			return nil, err
		}
	}
	for rep := range cfg.CrashReps {
		id := fmt.Sprintf("crasher-%d", rep+1)
		if err := f.join(id); err != nil {
			return nil, err
		}
		if _, err := f.settle(ctx, time.Now()); err != nil {
			return nil, err
		}
		if err := measure(Crash, func() error { return f.crash(id) }); err != nil {
			return nil, err
		}
	}
	res := &GapResult{Config: cfg}
	for _, ev := range []string{Join, Leave, Crash} {
		s := stats[ev]
		if s.reps == 0 {
			continue
		}
		res.Stats = append(res.Stats, GapStats{
			Event: ev, Reps: s.reps,
			Gap: bench.Summarize(s.gaps), Unowned: bench.Summarize(s.unowned), Settle: bench.Summarize(s.settle),
			Moved: float64(s.moved) / float64(s.reps),
		})
	}
	return res, nil
}

type samples struct {
	reps                  int
	gaps, unowned, settle []time.Duration
	moved                 int
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// fleet is a set of real orchestrators in this process.
type fleet struct {
	cfg  GapConfig
	obs  *clientv3.Client
	addr string
	ns   string

	members map[string]*member // joined, not yet stopped
	stopped []*member          // left or crashed, to wait for at the end
}

type member struct {
	bridge *netfault.Bridge
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func (f *fleet) join(id string) error {
	b, err := netfault.StartBridge(f.addr)
	if err != nil {
		return err
	}
	c, err := bench.NewClient(b.Endpoints(), 0)
	if err != nil {
		b.Close()
		return err
	}
	o, err := orchestrator.New(c, orchestrator.Config{
		ID:         id,
		Advertise:  "http://" + id + ".invalid",
		Namespace:  f.ns,
		Partitions: f.cfg.Partitions,
		LeaseTTL:   f.cfg.LeaseTTL,
	})
	if err != nil {
		c.Close()
		b.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{bridge: b, client: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		o.Run(ctx)
	}()
	f.members[id] = m
	return nil
}

// leave stops member id gracefully and waits until it has left.
func (f *fleet) leave(id string) error {
	m := f.members[id]
	delete(f.members, id)
	m.cancel()
	<-m.done
	f.stopped = append(f.stopped, m)
	return nil
}

// crash cuts member id off from etcd for good: from the fleet's point of
// view it died; its lease expires after the TTL.
func (f *fleet) crash(id string) error {
	m := f.members[id]
	delete(f.members, id)
	m.bridge.Cut()
	m.cancel()
	f.stopped = append(f.stopped, m)
	return nil
}

func (f *fleet) stopAll() {
	for _, m := range f.members {
		m.cancel()
		<-m.done
		f.stopped = append(f.stopped, m)
	}
	for _, m := range f.stopped {
		m.bridge.Close() // lets a crashed member's stalled requests fail
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
		}
		m.client.Close()
	}
}

func (f *fleet) live() []string {
	ids := make([]string, 0, len(f.members))
	for id := range f.members {
		ids = append(ids, id)
	}
	return ids
}

// settle waits until every partition is owned by the ring target of the
// live members and returns the time since start.
func (f *fleet) settle(ctx context.Context, start time.Time) (time.Duration, error) {
	p := f.cfg.Partitions
	ring, err := shard.NewRing(f.live(), shard.DefaultRingConfig(p))
	if err != nil {
		return 0, err
	}
	deadline := start.Add(f.cfg.Timeout)
	prefix := shard.OwnersPrefix(f.ns)
	for {
		resp, err := f.obs.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return 0, err
		}
		right := 0
		for _, kv := range resp.Kvs {
			part, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
			if err == nil && part < p && ring.Target(part) == string(kv.Value) {
				right++
			}
		}
		if right == p {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not settled after %v: %d of %d partitions owned by their target", f.cfg.Timeout, right, p)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fleet) record(ctx context.Context) (*gapwatch.Recorder, error) {
	return gapwatch.Start(ctx, f.obs, shard.OwnersPrefix(f.ns))
}
