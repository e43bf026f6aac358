// Package failover measures, for a grid of member lease TTLs, how fast a
// fleet takes over a crashed member's partitions and how often a live
// member loses its partitions for nothing (a spurious handoff) while the
// etcd cluster under it elects a new leader, on a machine whose CPU is
// busy.
//
// For each TTL it runs real orchestrators (internal/orchestrator, in this
// process, each reaching etcd through TCP bridges so that a crash can cut
// it off) on a three-member etcd cluster of `jobfleet etcd` processes,
// and an observer that watches the owner and member keys:
//
//   - leader kills: SIGKILL the raft leader, keep it down EtcdDown,
//     start it again, wait until the cluster serves and a lease's time has
//     passed; with Stress busy processes spinning meanwhile. Nothing asks
//     any partition to move, so every owner key handed over (deleted and
//     created again) is spurious, and every member key created again is a
//     member that fenced itself and registered anew;
//   - crashes: a member joins, the fleet settles, the member is cut off
//     from etcd for good and stopped (as a SIGKILL or a network partition
//     would); the failover time is from the crash until every partition is
//     owned by the ring target of the survivors.
//
// It also checks that nothing is lost: every partition has an owner at
// the end of each step.
//
// Then, with the dead member detector (membership/deathwatch) on and off,
// it kills real member processes: Config.KillMembers `jobfleet
// orchestrator` processes on the same etcd at the default lease TTL,
// Config.KillJobs jobs firing every second, and Config.Kills times one
// member (another each time) SIGKILLed, the jobs of its partitions
// triggered through a survivor at once, and the member started again once
// the survivors own everything. It measures kill → owned (every partition
// of the killed member owned by a live member) and kill → firing again
// (every one of those triggers fired under the new owner), and checks the
// recorded history of the fires as the fault suite does (no duplicate or
// unfenced fire, never two owners).
package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/inprocfleet"
	"github.com/jobfleet/jobfleet/internal/gapwatch"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/shard"
)

// Config configures a run.
type Config struct {
	// TTLs are the member lease TTLs measured, whole seconds each.
	TTLs []time.Duration `json:"ttls_ns"`
	// Members is the fleet's size (a crashing member joins it).
	Members int `json:"members"`
	// Partitions is P.
	Partitions int `json:"partitions"`
	// LeaderKills is how many times, per TTL, the etcd leader is killed.
	LeaderKills int `json:"leader_kills"`
	// EtcdDown is how long a killed leader stays down.
	EtcdDown time.Duration `json:"etcd_down_ns"`
	// Crashes is how many members crash, per TTL.
	Crashes int `json:"crashes"`
	// Kills is how many times, with the dead member detector and
	// without, a member process (`jobfleet orchestrator`, default lease
	// TTL) is killed with SIGKILL; 0 skips these measurements.
	Kills int `json:"kills"`
	// KillMembers is the fleet's size for the kills.
	KillMembers int `json:"kill_members"`
	// KillJobs is how many jobs fire every second during the kills.
	KillJobs int `json:"kill_jobs"`
	// Stress is how many busy processes spin during the leader kills.
	Stress int `json:"stress"`
	// Fsync runs etcd with fsync, as in production.
	Fsync bool `json:"fsync"`
	// Timeout bounds each wait for the fleet to settle.
	Timeout time.Duration `json:"timeout_ns"`
	// Binary is the jobfleet binary whose `etcd` command runs the etcd
	// members.
	Binary string `json:"-"`
	// Dir holds the etcd data and logs.
	Dir string `json:"-"`
	// PortBase, if not 0, puts etcd member i's client and peer listeners
	// on 127.0.0.1 ports PortBase+2i and PortBase+2i+1; 0 picks free
	// ports.
	PortBase int `json:"-"`
	// Progress shows what is running; nil shows nothing.
	Progress *bench.Progress `json:"-"`
}

// DefaultConfig measures TTLs 1, 2, 3 and 5 s on 3 members and P=1024,
// with 5 leader kills (2 s down) under 2 busy processes and 5 crashes per
// TTL; then 20 kills of a member process of 3, with 64 jobs firing every
// second, with the dead member detector and without.
func DefaultConfig() Config {
	return Config{
		TTLs:        []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second},
		Members:     3,
		Partitions:  shard.DefaultPartitions,
		LeaderKills: 5,
		EtcdDown:    2 * time.Second,
		Crashes:     5,
		Kills:       20,
		KillMembers: 3,
		KillJobs:    64,
		Stress:      2,
		Fsync:       true,
		Timeout:     time.Minute,
	}
}

// TTLResult is the measurement of one TTL.
type TTLResult struct {
	TTL time.Duration `json:"ttl_ns"`
	// RenewDeadline is when a member fences itself after the send time of
	// its last successful keepalive (membership.DefaultSessionConfig).
	RenewDeadline time.Duration `json:"renew_deadline_ns"`
	// LeaderKills is how many leader kills were made.
	LeaderKills int `json:"leader_kills"`
	// Election is, per kill, the time until the cluster served a write
	// again.
	Election bench.Summary `json:"election"`
	// SpuriousHandoffs is how many owner keys were handed over during the
	// kills (none had to be), and SpuriousKills after how many kills any
	// was.
	SpuriousHandoffs int `json:"spurious_handoffs"`
	SpuriousKills    int `json:"spurious_kills"`
	// Fences is how many times a member registered anew during the kills
	// (it had fenced itself or lost its lease).
	Fences int `json:"fences"`
	// SpuriousGap is the distribution of the ownership gaps of the
	// spurious handoffs.
	SpuriousGap bench.Summary `json:"spurious_gap"`
	// Crashes is how many members crashed.
	Crashes int `json:"crashes"`
	// Failover is, per crash, the time from the crash until every
	// partition is owned by the survivors' ring target.
	Failover bench.Summary `json:"failover"`
	// Unowned is the number of partitions without an owner at the end of
	// any step (nothing may be lost: always 0).
	Unowned int `json:"unowned"`
	// Unsettled, if not empty, says why the measurement of this TTL
	// stopped: the fleet did not settle within the timeout after a step
	// (members fencing themselves over and over), so the later steps
	// were not run.
	Unsettled string `json:"unsettled,omitempty"`
}

// Result is a whole run.
type Result struct {
	Config Config      `json:"config"`
	TTLs   []TTLResult `json:"ttls"`
	// Kills are the process kills with the detector, then without.
	Kills []KillResult `json:"kills,omitempty"`
}

// Run measures every TTL of cfg.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.TTLs) == 0 && cfg.Kills == 0 || cfg.Members < 1 || cfg.Partitions < 1 || cfg.Timeout <= 0 || cfg.Binary == "" || cfg.Dir == "" {
		return nil, errors.New("failover: need TTLs or kills, members ≥ 1, partitions ≥ 1, a timeout, the jobfleet binary and a directory")
	}
	if cfg.Kills > 0 && (cfg.KillMembers < 2 || cfg.KillJobs < 1) {
		return nil, errors.New("failover: kills need at least 2 members and 1 job")
	}
	for _, ttl := range cfg.TTLs {
		if err := membership.DefaultSessionConfig(ttl).Validate(); err != nil {
			return nil, fmt.Errorf("failover: TTL %v: %w", ttl, err)
		}
	}
	cfg.Progress.Step("failover: starting a 3-member etcd cluster in %s", cfg.Dir)
	etcd, err := startCluster(ctx, cfg.Binary, cfg.Dir, 3, cfg.Fsync, cfg.PortBase)
	if err != nil {
		return nil, err
	}
	defer etcd.kill()
	obs, err := bench.NewClient(etcd.endpoints(), 0)
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	res := &Result{Config: cfg}
	for _, ttl := range cfg.TTLs {
		r, err := measureTTL(ctx, cfg, etcd, obs, ttl)
		if err != nil {
			return nil, fmt.Errorf("failover: TTL %v: %w", ttl, err)
		}
		res.TTLs = append(res.TTLs, *r)
	}
	if cfg.Kills > 0 {
		for _, detector := range []bool{true, false} {
			r, err := measureKills(ctx, cfg, etcd, obs, detector)
			if err != nil {
				return nil, fmt.Errorf("failover: kills (detector %v): %w", detector, err)
			}
			res.Kills = append(res.Kills, *r)
		}
	}
	return res, nil
}

func measureTTL(ctx context.Context, cfg Config, etcd *cluster, obs *clientv3.Client, ttl time.Duration) (*TTLResult, error) {
	res := &TTLResult{TTL: ttl, RenewDeadline: membership.DefaultSessionConfig(ttl).RenewDeadline}
	ns := fmt.Sprintf("/jobfleet-bench/failover-%d/", time.Now().UnixNano())
	f, err := inprocfleet.New(obs, inprocfleet.Config{
		EtcdAddrs:     etcd.clientAddrs(),
		Namespace:     ns,
		Members:       cfg.Members,
		Partitions:    cfg.Partitions,
		LeaseTTL:      ttl,
		SettleTimeout: cfg.Timeout,
		ReadTimeout:   time.Second, // the etcd leader is killed meanwhile
	})
	if err != nil {
		return nil, err
	}
	defer f.StopAll()
	if _, err := f.Settle(ctx, time.Now()); err != nil {
		res.Unsettled = fmt.Sprintf("start: %v", err)
		return res, nil
	}

	// Leader kills, under stress.
	stop, err := startStress(cfg.Stress)
	if err != nil {
		return nil, err
	}
	var elections, spurious []time.Duration
	for k := range cfg.LeaderKills {
		owners, err := gapwatch.Start(ctx, obs, shard.OwnersPrefix(ns))
		if err != nil {
			stop()
			return nil, err
		}
		members, err := gapwatch.Start(ctx, obs, membership.Prefix(ns))
		if err != nil {
			owners.Stop()
			stop()
			return nil, err
		}
		elected, err := etcd.killLeader(ctx, obs, cfg.EtcdDown)
		if err == nil {
			// Let whatever the election caused play out: a member that
			// fenced itself waits for its old lease to expire.
			sleep(ctx, 2*ttl+time.Second)
			_, err = f.Settle(ctx, time.Now())
		}
		or, mr := owners.Stop(), members.Stop()
		if err != nil {
			stop()
			res.Unsettled = fmt.Sprintf("leader kill %d: %v", k+1, err)
			res.SpuriousHandoffs += len(or.Created)
			res.SpuriousKills++
			res.Fences += len(mr.Created)
			res.LeaderKills++
			cfg.Progress.Step("failover: TTL %v: %s; %d partitions handed over, %d members registered anew; next TTL",
				ttl, res.Unsettled, len(or.Created), len(mr.Created))
			res.Election, res.SpuriousGap = bench.Summarize(elections), bench.Summarize(append(spurious, or.Gaps...))
			return res, nil
		}
		elections = append(elections, elected)
		res.LeaderKills++
		res.SpuriousHandoffs += len(or.Created)
		res.Unowned += or.Open
		if len(or.Created) > 0 || or.Open > 0 {
			res.SpuriousKills++
		}
		res.Fences += len(mr.Created)
		spurious = append(spurious, or.Gaps...)
		cfg.Progress.Step("failover: TTL %v: leader kill %d: served again after %v; %d partitions handed over, %d members registered anew",
			ttl, k+1, elected.Round(time.Millisecond), len(or.Created), len(mr.Created))
	}
	stop()
	res.Election, res.SpuriousGap = bench.Summarize(elections), bench.Summarize(spurious)

	// Crashes.
	var failovers []time.Duration
	for c := range cfg.Crashes {
		id := fmt.Sprintf("crasher-%d", c+1)
		if err := f.Join(id); err != nil {
			return nil, err
		}
		if _, err := f.Settle(ctx, time.Now()); err != nil {
			res.Unsettled = fmt.Sprintf("join before crash %d: %v", c+1, err)
			break
		}
		start := time.Now()
		f.Crash(id)
		took, err := f.Settle(ctx, start)
		if err != nil {
			res.Unsettled = fmt.Sprintf("crash %d: %v", c+1, err)
			break
		}
		failovers = append(failovers, took)
		res.Crashes++
		cfg.Progress.Step("failover: TTL %v: crash %d: every partition owned again after %v", ttl, c+1, took.Round(time.Millisecond))
	}
	res.Failover = bench.Summarize(failovers)
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// logDir returns dir/logs, created.
func logDir(dir string) (string, error) {
	d := filepath.Join(dir, "logs")
	return d, os.MkdirAll(d, 0o755)
}
