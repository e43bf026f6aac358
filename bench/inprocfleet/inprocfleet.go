// Package inprocfleet runs a fleet of real orchestrators
// (internal/orchestrator) in this process for the benchmarks that measure
// ownership: each member reaches every etcd member through a TCP bridge
// of its own (internal/netfault), so that a crash can cut it off from etcd
// as a SIGKILL or a network partition would, and Settle waits until every
// partition is owned by its ring target among the live members, as an
// observer's reads of the owner keys see it.
//
// bench/failover (on a multi-member etcd whose leader is killed) and
// bench/rebalance (on one embedded etcd) use it.
//
// What it does not promise: the members run no jobs (no Work, no API), and
// a Fleet is not safe for concurrent use: one goroutine joins, stops and
// waits.
package inprocfleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
	"github.com/jobfleet/jobfleet/shard"
)

// Config configures a Fleet.
type Config struct {
	// EtcdAddrs are the host:port client addresses of the etcd members;
	// every member reaches each through a bridge of its own.
	EtcdAddrs []string
	// Namespace is the fleet's key prefix (the orchestrators' --namespace).
	Namespace string
	// Members is how many members New joins: orchestrator-1 …
	// orchestrator-<Members>.
	Members int
	// Partitions is P.
	Partitions int
	// LeaseTTL is every member's lease TTL.
	LeaseTTL time.Duration
	// SettleTimeout bounds each Settle, counted from the start time it is
	// given.
	SettleTimeout time.Duration
	// ReadTimeout, if not 0, bounds each read of the owner keys by Settle,
	// and a read that fails is tried again until SettleTimeout (for an
	// etcd whose leader may be down). 0 leaves reads unbounded but by
	// Settle's context, and a failed read ends Settle with its error.
	ReadTimeout time.Duration
}

// Fleet is a set of real orchestrators in this process, sharing one
// namespace. Its methods must be called from one goroutine.
type Fleet struct {
	cfg Config
	obs *clientv3.Client

	members map[string]*member // joined, not yet stopped
	stopped []*member          // left or crashed, to wait for in StopAll
}

type member struct {
	bridges []*netfault.Bridge // one per etcd member
	client  *clientv3.Client
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run has returned
}

// New returns a fleet of cfg.Members members, joined without waiting for
// them to own anything (Settle does); obs is the observer's client, which
// Settle reads the owner keys with (straight to etcd, not through a
// bridge). The caller calls StopAll when done, and keeps obs open until
// then. On an error nothing is left running.
func New(obs *clientv3.Client, cfg Config) (*Fleet, error) {
	if len(cfg.EtcdAddrs) == 0 || cfg.Namespace == "" || cfg.Members < 0 || cfg.Partitions < 1 || cfg.LeaseTTL <= 0 || cfg.SettleTimeout <= 0 {
		return nil, errors.New("inprocfleet: need etcd addresses, a namespace, members ≥ 0, partitions ≥ 1, a lease TTL and a settle timeout")
	}
	f := &Fleet{cfg: cfg, obs: obs, members: map[string]*member{}}
	for i := range cfg.Members {
		if err := f.Join(fmt.Sprintf("orchestrator-%d", i+1)); err != nil {
			f.StopAll()
			return nil, err
		}
	}
	return f, nil
}

// Join starts a member with the given ID, which must not be live; it does
// not wait for the member to own anything (Settle does).
func (f *Fleet) Join(id string) error {
	m := &member{done: make(chan struct{})}
	var eps []string
	for _, addr := range f.cfg.EtcdAddrs {
		b, err := netfault.StartBridge(addr)
		if err != nil {
			m.close()
			return err
		}
		m.bridges = append(m.bridges, b)
		eps = append(eps, b.Endpoints()...)
	}
	c, err := bench.NewClient(eps, 0)
	if err != nil {
		m.close()
		return err
	}
	m.client = c
	o, err := orchestrator.New(c, orchestrator.Config{
		ID:         id,
		Advertise:  "http://" + id + ".invalid",
		Namespace:  f.cfg.Namespace,
		Partitions: f.cfg.Partitions,
		LeaseTTL:   f.cfg.LeaseTTL,
		// No address to probe: a crash here is a member cut off from
		// etcd, whose partitions wait for its lease.
		DeadMembers: deathwatch.Config{Interval: -1},
	})
	if err != nil {
		m.close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		o.Run(ctx)
	}()
	f.members[id] = m
	return nil
}

// close releases what Join made; the member's Run must have returned or
// never started. Closing twice is harmless.
func (m *member) close() {
	if m.client != nil {
		m.client.Close()
	}
	for _, b := range m.bridges {
		b.Close()
	}
}

// Leave stops live member id gracefully (it releases its partitions) and
// waits until it has returned.
func (f *Fleet) Leave(id string) {
	m := f.members[id]
	delete(f.members, id)
	m.cancel()
	<-m.done
	f.stopped = append(f.stopped, m)
}

// Crash cuts live member id off from etcd for good and stops it without
// waiting: from the fleet's point of view it died, and its lease expires
// after the TTL.
func (f *Fleet) Crash(id string) {
	m := f.members[id]
	delete(f.members, id)
	for _, b := range m.bridges {
		b.Cut()
	}
	m.cancel()
	f.stopped = append(f.stopped, m)
}

// StopAll stops every live member gracefully, then waits for the crashed
// ones (up to 30 s each, their bridges closed so that stalled requests
// fail) and releases everything. The fleet is empty afterwards.
func (f *Fleet) StopAll() {
	for _, m := range f.members {
		m.cancel()
		<-m.done
		f.stopped = append(f.stopped, m)
	}
	f.members = map[string]*member{}
	for _, m := range f.stopped {
		for _, b := range m.bridges {
			b.Close() // lets a crashed member's stalled requests fail
		}
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
		}
		m.close()
	}
	f.stopped = nil
}

// Live returns the IDs of the members that joined and neither left nor
// crashed, in no particular order.
func (f *Fleet) Live() []string {
	ids := make([]string, 0, len(f.members))
	for id := range f.members {
		ids = append(ids, id)
	}
	return ids
}

// Settle waits until every partition is owned by its ring target among
// the live members (polling the owner keys every 5 ms) and returns the
// time since start. It fails when SettleTimeout has passed since start,
// saying how far the fleet got, when ctx ends, or (ReadTimeout 0) when a
// read fails.
func (f *Fleet) Settle(ctx context.Context, start time.Time) (time.Duration, error) {
	p := f.cfg.Partitions
	ring, err := shard.NewRing(f.Live(), shard.DefaultRingConfig(p))
	if err != nil {
		return 0, err
	}
	deadline := start.Add(f.cfg.SettleTimeout)
	prefix := shard.OwnersPrefix(f.cfg.Namespace)
	last := "no answer from etcd"
	for {
		resp, err := f.readOwners(ctx, prefix)
		if err != nil && f.cfg.ReadTimeout == 0 {
			return 0, err
		}
		if err == nil {
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
			last = fmt.Sprintf("%d of %d partitions owned by their target", right, p)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not settled after %v: %s", f.cfg.SettleTimeout, last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// readOwners reads every owner key, within ReadTimeout if set.
func (f *Fleet) readOwners(ctx context.Context, prefix string) (*clientv3.GetResponse, error) {
	if f.cfg.ReadTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.cfg.ReadTimeout)
		defer cancel()
	}
	return f.obs.Get(ctx, prefix, clientv3.WithPrefix())
}
