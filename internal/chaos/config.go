package chaos

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/schedule"
)

// Kind is a kind of fault the nemesis injects.
type Kind string

// The fault kinds.
const (
	// OrchestratorKill: SIGKILL an orchestrator and keep it down until
	// its partitions have moved (its peers' dead member detector revokes
	// its lease), then restart it with the same ID.
	OrchestratorKill Kind = "orchestrator-kill"
	// OrchestratorRestart: SIGKILL an orchestrator and restart it with
	// the same ID on the same address after a random delay, sometimes
	// before its peers could see its address refuse (a container
	// restart): then its lease expires, and the new incarnation waits for
	// it.
	OrchestratorRestart Kind = "orchestrator-restart"
	// OrchestratorPause: SIGSTOP an orchestrator for longer than the lease
	// TTL, then SIGCONT it: the zombie owner.
	OrchestratorPause Kind = "orchestrator-pause"
	// OrchestratorDrain: POST /v1/cluster/drain to an orchestrator, then
	// start it again.
	OrchestratorDrain Kind = "orchestrator-drain"
	// RollingRestart: SIGTERM and restart every orchestrator, then every
	// worker, one at a time.
	RollingRestart Kind = "rolling-restart"
	// WorkerKill: SIGKILL a worker while it holds an attempt of a slow
	// job, then start a new incarnation of it.
	WorkerKill Kind = "worker-kill"
	// EtcdLeaderKill: SIGKILL the raft leader of a multi-member etcd
	// cluster, restart it after a random delay.
	EtcdLeaderKill Kind = "etcd-leader-kill"
	// EtcdRestart: SIGKILL every etcd member, restart them all after a
	// random delay (the full restart of a single-member etcd).
	EtcdRestart Kind = "etcd-restart"
	// JobBurst: a burst of job creates, updates (schedule changes) and
	// deletes while an orchestrator is drained or killed and restarted, so
	// that partitions move under the writes.
	JobBurst Kind = "job-burst"
	// ClockOffset: step one orchestrator's clock forward or backward by
	// several seconds (through its hidden offset file), hold, step it back.
	ClockOffset Kind = "clock-offset"

	// The network faults need hosts (Config.Hosts).

	// HostIsolate: cut one host (an orchestrator, a worker or an etcd
	// member) off from every other host of the fleet, then heal.
	HostIsolate Kind = "host-isolate"
	// PartitionHalves: split the fleet's hosts into two halves, the etcd
	// majority on one side, then heal.
	PartitionHalves Kind = "partition-halves"
	// OrchestratorEtcdCut: one orchestrator loses etcd (both ways, or one
	// way) but still reaches its workers and the other orchestrators.
	OrchestratorEtcdCut Kind = "orchestrator-etcd-cut"
	// WorkerOrchestratorCut: a worker holding an attempt loses the
	// orchestrator that handed it out, but still reaches etcd and the
	// others; the attempt is reassigned before the cut heals.
	WorkerOrchestratorCut Kind = "worker-orchestrator-cut"
	// EtcdLeaderCut: the etcd leader loses its followers (all of them, or
	// one) while clients still reach every member.
	EtcdLeaderCut Kind = "etcd-leader-cut"
	// LinkSlow: latency and jitter on the links of one host pair or group
	// (an orchestrator and etcd, etcd's leader and a follower, a worker
	// and the orchestrators).
	LinkSlow Kind = "link-slow"
	// LinkLossy: packet loss on such links.
	LinkLossy Kind = "link-lossy"
)

// Pseudo-kinds of the report.
const (
	// LeaseLoss is a member that stopped acting as owner on its own (its
	// lease was not renewed in time, or was lost) outside every injected
	// fault: a machine too loaded to renew a short lease, for example.
	// The harness finds these in the orchestrators' logs.
	LeaseLoss Kind = "lease-loss"
	// Steady is the pseudo-kind of scheduled times outside every fault's
	// window.
	Steady Kind = "steady"
)

// AllKinds lists every fault kind.
var AllKinds = []Kind{OrchestratorKill, OrchestratorRestart, OrchestratorPause, OrchestratorDrain, RollingRestart, WorkerKill, EtcdLeaderKill, EtcdRestart, JobBurst,
	ClockOffset, HostIsolate, PartitionHalves, OrchestratorEtcdCut, WorkerOrchestratorCut, EtcdLeaderCut, LinkSlow, LinkLossy}

// NetworkKinds are the kinds that need hosts.
var NetworkKinds = []Kind{HostIsolate, PartitionHalves, OrchestratorEtcdCut, WorkerOrchestratorCut, EtcdLeaderCut, LinkSlow, LinkLossy}

// ParseKinds parses fault kind names.
func ParseKinds(names []string) ([]Kind, error) {
	var out []Kind
	for _, n := range names {
		k := Kind(n)
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %v)", n, AllKinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// Config configures a chaos run. Start from DefaultConfig.
type Config struct {
	// Binary is the jobfleet binary the fleet runs (its orchestrator,
	// worker and etcd commands). Required.
	Binary string
	// Hosts runs every process on a host of its own: a Linux network
	// namespace per etcd member, orchestrator and worker, one for the
	// recorder and one for the harness, joined by a switch in the harness
	// that the network faults program. It needs root. Without Hosts every
	// process shares loopback and the network faults are left out.
	Hosts bool
	// Dir is the run's directory: etcd data, one log per process, the
	// recorder's executions, the history and the report. Required.
	Dir string
	// Seed makes the nemesis's choices, the workload and the recorder's
	// injected failures reproducible (the timing of a real fleet is not).
	Seed int64
	// Duration is how long the nemesis injects faults; it injects one
	// fault of every kind first, even if that takes longer. The run takes
	// about a minute more (start, healing, settling, checking).
	Duration time.Duration
	// EtcdMembers is the etcd cluster's size: 1 or 3.
	EtcdMembers int
	// Orchestrators is the number of orchestrator processes, 2 to 9.
	Orchestrators int
	// Workers is the number of worker processes, 1 to 9.
	Workers int
	// WorkerConcurrency is each worker's --concurrency.
	WorkerConcurrency int
	// Partitions is the cluster's partition count.
	Partitions int
	// LeaseTTL is the orchestrators' --lease-ttl (whole seconds).
	LeaseTTL time.Duration
	// RunLease is the orchestrators' --run-lease.
	RunLease time.Duration
	// Faults are the kinds the nemesis injects; kinds that do not apply
	// (EtcdLeaderKill with one etcd member, network faults without Hosts)
	// are left out. Empty means all.
	Faults []Kind
	// Gap is the quiet time between two faults: a random duration in
	// [Gap, 2·Gap).
	Gap time.Duration
	// RecurringJobs, SlowJobs and FlakyJobs are the every-second jobs of
	// the base workload, answered at once, after SlowFor, and with
	// injected failures.
	RecurringJobs int
	SlowJobs      int
	FlakyJobs     int
	// ShardedJobs are sharded jobs (every 2s, ShardItems items,
	// alternately answered with injected failures and slowly, the slow
	// ones with a parameter per item) and BroadcastJobs broadcast jobs
	// (every 2s, answered at once).
	ShardedJobs int
	// StepJobs are jobs made of steps (every 3s: extract, a sharded and
	// flaky transform, load, then an "always" cleanup and a "failure"
	// alert), whose order the checker verifies (check_steps.go).
	StepJobs      int
	ShardItems    int
	BroadcastJobs int
	// LimitedJobs are jobs sharing the limit key limitRunning
	// (max_running 2): every 2s, answered after 150ms, the last one
	// slow and every 6s, so that a killed worker may hold a slot.
	// RateJobs share the rate key limitRate (3 starts per 2s): every 4s,
	// due at the same instants, answered at once; the first also names
	// limitRunning (a grant under two keys). See workload_limits.go.
	LimitedJobs int
	RateJobs    int
	// SlowFor is how long the recorder takes to answer a slow job.
	SlowFor time.Duration
	// OneOffEvery is the interval between two one-off jobs (run_at a few
	// seconds ahead); 0 creates none.
	OneOffEvery time.Duration
	// Grace is the fleet's misfire grace: the checker derives the windows
	// in which fires may be missed from it. Zero means the orchestrators'
	// own, derived from LeaseTTL (see MisfireGrace).
	Grace time.Duration
	// NoisyTenant adds a noisy tenant to the workload while the nemesis
	// runs (noisy.go): an operator and a worker, each scoped to a prefix
	// of their own, that flood the fleet with writes (pauses, resumes and
	// replacements of a job of about a megabyte; the largest worker
	// registrations), as fast as they are answered; the checker verifies
	// that the other tenants' jobs keep firing and that etcd never ran
	// out of space.
	NoisyTenant bool
	// Logger receives the harness's progress; nil means none.
	Logger *zap.Logger
}

// DefaultConfig returns a configuration for a run of d: a 3-member etcd,
// 4 orchestrators and 3 workers.
func DefaultConfig(binary, dir string, seed int64, d time.Duration) Config {
	return Config{
		Binary:            binary,
		Dir:               dir,
		Seed:              seed,
		Duration:          d,
		EtcdMembers:       3,
		Orchestrators:     4,
		Workers:           3,
		WorkerConcurrency: 16,
		Partitions:        64,
		LeaseTTL:          2 * time.Second,
		RunLease:          4 * time.Second,
		Gap:               3 * time.Second,
		RecurringJobs:     12,
		SlowJobs:          2,
		FlakyJobs:         3,
		ShardedJobs:       2,
		StepJobs:          1,
		ShardItems:        6,
		BroadcastJobs:     1,
		LimitedJobs:       6,
		RateJobs:          4,
		SlowFor:           2500 * time.Millisecond,
		OneOffEvery:       700 * time.Millisecond,
		NoisyTenant:       true,
	}
}

// HostsGap is the default Gap of runs with hosts: their faults last longer
// and are more varied, and a 10-minute run should still inject a hundred.
const HostsGap = 500 * time.Millisecond

// MisfireGrace is the misfire grace of orchestrators with lease TTL ttl, as
// internal/orchestrator sets it: longer than a crash failover.
func MisfireGrace(ttl time.Duration) time.Duration {
	return max(schedule.DefaultGrace, 2*ttl+2*time.Second)
}

// KillBound is the recovery the fleet promises after an orchestrator's
// process is killed and stays down: its peers' dead member detector
// revokes its lease and its partitions are owned again within a second.
const KillBound = time.Second

// bounds returns the recovery each kind of fault is promised, for the
// checker's report: a second for a killed orchestrator or worker process
// that stays dead (their death is detected), the lease TTL and a second
// for an orchestrator that keeps its lease until it expires (paused, or
// restarted before its death was seen). Other kinds promise none here.
func (c Config) bounds() map[Kind]time.Duration {
	return map[Kind]time.Duration{
		OrchestratorKill:    KillBound,
		OrchestratorRestart: c.LeaseTTL + time.Second,
		OrchestratorPause:   c.LeaseTTL + time.Second,
		// The presence grace (500ms), then the slow jobs' first retry
		// backoff (100ms) and the next poll.
		WorkerKill: KillBound,
	}
}

// grace returns the misfire grace the checker assumes.
func (c Config) grace() time.Duration {
	if c.Grace > 0 {
		return c.Grace
	}
	return MisfireGrace(c.LeaseTTL)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("chaos: Binary is required")
	case c.Dir == "":
		return errors.New("chaos: Dir is required")
	case c.Duration <= 0:
		return errors.New("chaos: Duration must be positive")
	case c.EtcdMembers != 1 && c.EtcdMembers != 3:
		return fmt.Errorf("chaos: EtcdMembers must be 1 or 3, got %d", c.EtcdMembers)
	case c.Orchestrators < 2 || c.Orchestrators > 9:
		return fmt.Errorf("chaos: Orchestrators must be 2 to 9, got %d", c.Orchestrators)
	case c.Workers < 1 || c.Workers > 9:
		return fmt.Errorf("chaos: Workers must be 1 to 9, got %d", c.Workers)
	case c.WorkerConcurrency < c.Orchestrators:
		return fmt.Errorf("chaos: WorkerConcurrency %d is below the number of orchestrators %d", c.WorkerConcurrency, c.Orchestrators)
	case c.Partitions < 1:
		return errors.New("chaos: Partitions must be positive")
	case c.LeaseTTL < 2*time.Second || c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("chaos: LeaseTTL %v must be whole seconds, at least 2s", c.LeaseTTL)
	case c.RunLease < time.Second:
		return fmt.Errorf("chaos: RunLease %v below 1s", c.RunLease)
	case c.Gap <= 0:
		return errors.New("chaos: Gap must be positive")
	case c.RecurringJobs < 1 || c.SlowJobs < 0 || c.FlakyJobs < 0 || c.ShardedJobs < 0 || c.StepJobs < 0 || c.BroadcastJobs < 0 || c.LimitedJobs < 0 || c.RateJobs < 0:
		return errors.New("chaos: want at least one recurring job, and no negative job counts")
	case c.ShardedJobs > 0 && (c.ShardItems < 1 || c.ShardItems > 100):
		return fmt.Errorf("chaos: ShardItems %d outside 1 to 100", c.ShardItems)
	case c.SlowFor <= 0 || c.SlowFor >= time.Minute:
		return fmt.Errorf("chaos: SlowFor %v outside (0, 1m)", c.SlowFor)
	case c.OneOffEvery < 0:
		return errors.New("chaos: OneOffEvery must not be negative")
	case c.Grace < 0:
		return errors.New("chaos: Grace must not be negative")
	}
	_, err := ParseKinds(kindNames(c.Faults))
	return err
}

// kinds returns the fault kinds that apply to this configuration.
func (c Config) kinds() []Kind {
	ks := c.Faults
	if len(ks) == 0 {
		ks = AllKinds
	}
	var out []Kind
	for _, k := range ks {
		if (k == EtcdLeaderKill || k == EtcdLeaderCut) && c.EtcdMembers < 3 {
			continue
		}
		if slices.Contains(NetworkKinds, k) && !c.Hosts {
			continue
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func kindNames(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// workerPool returns the pool of worker index (from 1) of a run with
// workers workers: "a" for odd indexes, "b" for even ones; "a" alone with
// a single worker, so that every pool has a worker.
func workerPool(index, workers int) string {
	if workers < 2 || index%2 == 1 {
		return "a"
	}
	return "b"
}

// workerLabels returns the labels of worker index: its pool, and its own
// name.
func workerLabels(index, workers int) map[string]string {
	return map[string]string{"pool": workerPool(index, workers), "host": fmt.Sprintf("w%d", index)}
}
