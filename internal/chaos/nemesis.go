package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jobfleet/jobfleet/dispatch/placement"
	"go.uber.org/zap"
)

// Window is a span in which some partitions had no working owner because
// of a fault: from the fault's injection to the recovery the harness
// measured. Fires of those partitions scheduled in it may be late, and,
// for jobs whose misfire policy allows it, missed (see the checker).
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Partitions are the partitions affected; nil means all.
	Partitions []int `json:"partitions,omitempty"`
	// Skew is the clock offset of the partitions' owner in the window
	// (a clock-offset fault): positive, it may fire that much early.
	Skew time.Duration `json:"skew_ns,omitempty"`
}

// Fault is one injected fault.
type Fault struct {
	Kind   Kind      `json:"kind"`
	Target string    `json:"target"`
	Start  time.Time `json:"start"`
	// Recovered is when the fleet had recovered from it (what "recovered"
	// means depends on the kind; see docs/reliability.md); zero if it had
	// not within the timeout.
	Recovered time.Time `json:"recovered,omitzero"`
	// Failover is Recovered - Start (for a rolling restart, the longest
	// handoff of its steps).
	Failover time.Duration `json:"failover_ns"`
	// Windows are where the fault took partitions away from their owners.
	Windows []Window `json:"windows,omitempty"`
	// Healed is when the nemesis undid the fault itself (removed its
	// network rules, reset the clock offset); zero for the other kinds.
	// For faults that degrade rather than break (slow or lossy links,
	// clock offsets), Failover is measured from Healed.
	Healed time.Time `json:"healed,omitzero"`
	// ClockOffset is the offset a clock-offset fault gave Target's clock
	// from Start to Healed (positive: ahead).
	ClockOffset time.Duration `json:"clock_offset_ns,omitempty"`
	// CutWorkers are the worker incarnations the fault cut off from some
	// orchestrator from Start to Healed.
	CutWorkers []string `json:"cut_workers,omitempty"`
	// Settled is when the fleet had settled after the fault was healed.
	Settled time.Time `json:"settled,omitzero"`
	Detail  string    `json:"detail,omitempty"`
	// etcdRejoin: healing the fault let an etcd member back that had
	// been cut off; it serves slowly until it has caught up, and every
	// member's client sends it a share of its requests at once, so the
	// fault's window covers every partition until the fleet settled.
	etcdRejoin bool
	// Err is set if the fault could not be injected as intended.
	Err string `json:"error,omitempty"`
}

// recoveryTimeout bounds the wait for a fault's recovery.
const recoveryTimeout = 60 * time.Second

// nemesis injects faults into the fleet, one at a time, with quiet gaps.
type nemesis struct {
	f    *fleet
	w    *workload
	hist *historyWatch
	rec  *recorder
	cfg  Config
	lg   *zap.Logger

	mu     sync.Mutex // guards rng and faults
	rng    *rand.Rand
	faults []Fault
}

func newNemesis(f *fleet, w *workload, hist *historyWatch, rec *recorder, cfg Config, lg *zap.Logger) *nemesis {
	return &nemesis{f: f, w: w, hist: hist, rec: rec, cfg: cfg, lg: lg.Named("nemesis"),
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6e656d65736973))}
}

// weights makes quick faults more frequent than long ones.
var weights = map[Kind]int{
	OrchestratorKill: 3, OrchestratorRestart: 2, OrchestratorPause: 3, OrchestratorDrain: 2, RollingRestart: 1,
	WorkerKill: 3, EtcdLeaderKill: 2, EtcdRestart: 1, JobBurst: 2,
	ClockOffset: 2, HostIsolate: 2, PartitionHalves: 2, OrchestratorEtcdCut: 2, WorkerOrchestratorCut: 2,
	EtcdLeaderCut: 2, LinkSlow: 2, LinkLossy: 2,
}

// weight returns the weight of kind k in this run: with hosts, clock
// offsets are drawn more often, so that a 10-minute run has ten or more.
func (n *nemesis) weight(k Kind) int {
	if k == ClockOffset && n.cfg.Hosts {
		return 7
	}
	return weights[k]
}

// between returns a random duration in [lo, hi).
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

func (n *nemesis) intn(k int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.IntN(k)
}

// run injects faults: first every enabled kind once, in a random order
// (however long that takes), then kinds drawn by weight until `until`. A
// fault started before until runs to its end.
func (n *nemesis) run(ctx context.Context, until time.Time) {
	kinds := n.cfg.kinds()
	n.mu.Lock()
	plan := slices.Clone(kinds)
	n.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	n.mu.Unlock()
	for i := 0; ; i++ {
		if !sleepCtx(ctx, n.between(n.cfg.Gap, 2*n.cfg.Gap)) || (i >= len(plan) && time.Now().After(until)) {
			return
		}
		var k Kind
		if i < len(plan) {
			k = plan[i]
		} else {
			k = n.draw(kinds)
		}
		n.inject(ctx, k)
	}
}

func (n *nemesis) draw(kinds []Kind) Kind {
	total := 0
	for _, k := range kinds {
		total += n.weight(k)
	}
	r := n.intn(total)
	for _, k := range kinds {
		if r < n.weight(k) {
			return k
		}
		r -= n.weight(k)
	}
	return kinds[0]
}

// inject injects one fault of kind k, waits for its recovery, heals what
// is left (restarts, continues) and waits for the fleet to settle.
func (n *nemesis) inject(ctx context.Context, k Kind) {
	n.lg.Info("injecting", zap.String("kind", string(k)))
	var ft Fault
	switch k {
	case OrchestratorKill:
		ft = n.orchestratorKill(ctx)
	case OrchestratorRestart:
		ft = n.orchestratorRestart(ctx)
	case OrchestratorPause:
		ft = n.orchestratorPause(ctx)
	case OrchestratorDrain:
		ft = n.orchestratorDrain(ctx, nil)
	case RollingRestart:
		ft = n.rollingRestart(ctx)
	case WorkerKill:
		ft = n.workerKill(ctx)
	case EtcdLeaderKill:
		ft = n.etcdLeaderKill(ctx)
	case EtcdRestart:
		ft = n.etcdRestart(ctx)
	case JobBurst:
		ft = n.jobBurst(ctx)
	case ClockOffset:
		ft = n.clockOffset(ctx)
	case HostIsolate:
		ft = n.hostIsolate(ctx)
	case PartitionHalves:
		ft = n.partitionHalves(ctx)
	case OrchestratorEtcdCut:
		ft = n.orchestratorEtcdCut(ctx)
	case WorkerOrchestratorCut:
		ft = n.workerOrchestratorCut(ctx)
	case EtcdLeaderCut:
		ft = n.etcdLeaderCut(ctx)
	case LinkSlow, LinkLossy:
		ft = n.linkFault(ctx, k)
	}
	ft.Kind = k
	if !ft.Recovered.IsZero() && ft.Failover == 0 {
		ft.Failover = ft.Recovered.Sub(ft.Start)
	}
	if err := n.heal(ctx); err != nil {
		ft.Err = joinMsg(ft.Err, err.Error())
	}
	at, why := waitFor(ctx, recoveryTimeout, 100*time.Millisecond, func() (bool, string) { return n.f.settled(ctx) })
	if at.IsZero() {
		ft.Detail = joinMsg(ft.Detail, "fleet not settled "+recoveryTimeout.String()+" after the fault: "+why)
		at = time.Now()
	}
	ft.Settled = at
	if ft.etcdRejoin && !ft.Healed.IsZero() {
		ft.Windows = append(ft.Windows, Window{Start: ft.Healed, End: at})
	}
	n.lg.Info("fault done", zap.String("kind", string(k)), zap.String("target", ft.Target),
		zap.Duration("failover", ft.Failover), zap.String("detail", ft.Detail), zap.String("error", ft.Err))
	n.mu.Lock()
	n.faults = append(n.faults, ft)
	n.mu.Unlock()
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// heal removes every network rule, resets every clock offset, starts
// every process that is not running and continues every paused one.
func (n *nemesis) heal(ctx context.Context) error {
	n.healNetwork()
	for _, o := range n.f.orchs {
		if err := n.setOffset(o, 0); err != nil {
			return err
		}
		n.f.setAvoid(o.id, false)
	}
	if err := n.f.etcd.startStopped(); err != nil {
		return err
	}
	for _, m := range n.f.etcd.members {
		if m.running() && !m.live() {
			_ = m.signal(syscall.SIGCONT)
		}
	}
	for _, o := range n.f.orchs {
		if o.running() && !o.live() {
			_ = o.signal(syscall.SIGCONT)
		}
		if !o.running() {
			if err := n.f.startOrch(o); err != nil {
				return err
			}
		}
	}
	for _, w := range n.f.workers {
		if !w.running() {
			if err := n.f.startWorker(w); err != nil {
				return err
			}
		}
	}
	return nil
}

// results returns the faults injected so far.
func (n *nemesis) results() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.faults)
}

// victim picks a random live orchestrator.
func (n *nemesis) victim() *orchProc {
	live := n.f.liveOrchs()
	if len(live) == 0 {
		return nil
	}
	return live[n.intn(len(live))]
}

// awaitMoved polls etcd, from now on, until every partition in old has a
// newer owner than the epoch listed, and sends when (zero on timeout).
func (n *nemesis) awaitMoved(ctx context.Context, old map[int]int64) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		at, _ := waitFor(ctx, recoveryTimeout, 50*time.Millisecond, func() (bool, string) {
			owners, _, err := n.f.ownerTable(ctx)
			return err == nil && movedOn(owners, old), ""
		})
		ch <- at
	}()
	return ch
}

// awaitHealthy polls until the fleet is healthy (see fleet.healthy) and has
// stayed so for a second, and sends when it became so (zero on timeout).
func (n *nemesis) awaitHealthy(ctx context.Context) <-chan time.Time {
	return n.awaitHealthyWithout(ctx, nil)
}

// awaitHealthyWithout is awaitHealthy for the fleet less the orchestrators
// in cut (see fleet.healthyWithout).
func (n *nemesis) awaitHealthyWithout(ctx context.Context, cut map[string]bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		var since time.Time
		at, _ := waitFor(ctx, recoveryTimeout, 100*time.Millisecond, func() (bool, string) {
			ok, why := n.f.healthyWithout(ctx, cut)
			switch {
			case !ok:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			}
			return ok && time.Since(since) >= time.Second, why
		})
		if at.IsZero() {
			since = time.Time{}
		}
		ch <- since
	}()
	return ch
}

// ownedBy returns the partitions member owns with their epochs, or all
// partitions if etcd cannot tell.
func (n *nemesis) ownedBy(ctx context.Context, member string) map[int]int64 {
	parts, err := n.f.partitionsOf(ctx, member)
	if err != nil {
		return n.f.allPartitions(ctx)
	}
	return parts
}

func keys(m map[int]int64) []int {
	out := make([]int, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// orchestratorKill kills an orchestrator and keeps it down until its
// partitions have moved: a process that died and stays dead, whose
// death its peers detect (KillBound). Then it starts it again.
func (n *nemesis) orchestratorKill(ctx context.Context) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	ft := Fault{Target: o.id, Start: o.kill()}
	ft.Recovered = <-n.awaitMoved(ctx, parts)
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered, Partitions: keys(parts)}}
	delay := n.between(0, time.Second)
	sleepCtx(ctx, delay)
	if err := n.f.startOrch(o); err != nil {
		ft.Err = err.Error()
	}
	ft.Detail = fmt.Sprintf("%d partitions; restarted %v after they moved", len(parts), delay.Round(time.Millisecond))
	return ft
}

// orchestratorRestart kills an orchestrator and starts it again on the
// same address after a random delay.
func (n *nemesis) orchestratorRestart(ctx context.Context) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	ft := Fault{Target: o.id, Start: o.kill()}
	moved := n.awaitMoved(ctx, parts)
	// Restart at a random point, sometimes before its peers saw its
	// address refuse and before the lease has expired (the new
	// incarnation then waits for the old registration to go).
	delay := n.between(0, n.cfg.LeaseTTL+time.Second)
	sleepCtx(ctx, delay)
	if err := n.f.startOrch(o); err != nil {
		ft.Err = err.Error()
	}
	ft.Recovered = <-moved
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered, Partitions: keys(parts)}}
	ft.Detail = fmt.Sprintf("%d partitions; restarted %v after the kill", len(parts), delay.Round(time.Millisecond))
	return ft
}

func (n *nemesis) orchestratorPause(ctx context.Context) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	ft := Fault{Target: o.id, Start: time.Now()}
	if err := o.signal(syscall.SIGSTOP); err != nil {
		return Fault{Target: o.id, Err: err.Error()}
	}
	moved := n.awaitMoved(ctx, parts)
	pause := n.cfg.LeaseTTL + n.between(time.Second, 3*time.Second)
	sleepCtx(ctx, pause)
	if err := o.signal(syscall.SIGCONT); err != nil {
		ft.Err = err.Error()
	}
	ft.Recovered = <-moved
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered, Partitions: keys(parts)}}
	ft.Detail = fmt.Sprintf("%d partitions; paused %v", len(parts), pause.Round(time.Millisecond))
	return ft
}

// orchestratorDrain drains a random orchestrator and starts it again;
// during runs while its partitions move (a burst of job writes).
func (n *nemesis) orchestratorDrain(ctx context.Context, during func()) Fault {
	o := n.victim()
	if o == nil {
		return Fault{Err: "no live orchestrator"}
	}
	parts := n.ownedBy(ctx, o.id)
	ft := Fault{Target: o.id, Start: time.Now()}
	var wg sync.WaitGroup
	if during != nil {
		wg.Go(during)
	}
	defer wg.Wait()
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	status, _, err := n.f.do(dctx, http.MethodPost, o.url()+"/v1/cluster/drain", nil)
	cancel()
	if err != nil || status != http.StatusAccepted {
		ft.Err = fmt.Sprintf("drain: %d %v", status, err)
	}
	moved := n.awaitMoved(ctx, parts)
	if !o.waitExit(20 * time.Second) {
		ft.Err = joinMsg(ft.Err, "did not exit within 20s of the drain; killed")
		o.kill()
	}
	exited := time.Since(ft.Start)
	delay := n.between(500*time.Millisecond, 2*time.Second)
	sleepCtx(ctx, delay)
	if err := n.f.startOrch(o); err != nil {
		ft.Err = joinMsg(ft.Err, err.Error())
	}
	ft.Recovered = <-moved
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered, Partitions: keys(parts)}}
	ft.Detail = fmt.Sprintf("%d partitions; exited %v after the drain request", len(parts), exited.Round(time.Millisecond))
	return ft
}

func (n *nemesis) rollingRestart(ctx context.Context) Fault {
	ft := Fault{Target: "all orchestrators, then all workers", Start: time.Now()}
	for _, o := range n.f.orchs {
		if !o.live() {
			continue
		}
		parts := n.ownedBy(ctx, o.id)
		start := time.Now()
		moved := n.awaitMoved(ctx, parts)
		if !o.terminate(20 * time.Second) {
			ft.Err = joinMsg(ft.Err, o.id+" did not exit within 20s of SIGTERM; killed")
		}
		if err := n.f.startOrch(o); err != nil {
			ft.Err = joinMsg(ft.Err, err.Error())
		}
		at := <-moved
		ft.Windows = append(ft.Windows, Window{Start: start, End: at, Partitions: keys(parts)})
		if at.IsZero() {
			ft.Err = joinMsg(ft.Err, o.id+"'s partitions did not move")
		} else {
			ft.Failover = max(ft.Failover, at.Sub(start))
		}
		if t, why := waitFor(ctx, recoveryTimeout, 100*time.Millisecond, func() (bool, string) { return n.f.settled(ctx) }); t.IsZero() {
			ft.Err = joinMsg(ft.Err, "not settled after restarting "+o.id+": "+why)
		}
	}
	for _, w := range n.f.workers {
		if !w.terminate(n.cfg.SlowFor + 5*time.Second) {
			ft.Err = joinMsg(ft.Err, fmt.Sprintf("worker-%d did not exit after SIGTERM; killed", w.index))
		}
		if err := n.f.startWorker(w); err != nil {
			ft.Err = joinMsg(ft.Err, err.Error())
		}
	}
	ft.Recovered = time.Now()
	ft.Detail = fmt.Sprintf("%d orchestrators, %d workers", len(n.f.orchs), len(n.f.workers))
	return ft
}

// workerKill kills a worker that holds an attempt of a slow job in flight
// (the recorder has not answered it), found through the run's attempts.
func (n *nemesis) workerKill(ctx context.Context) Fault {
	victim, held := n.slowHolder(ctx)
	if victim == nil {
		return Fault{Err: "no worker found holding a slow attempt"}
	}
	ft := Fault{Target: victim.incarnationID(victim.Incarnation()), Start: n.f.killWorker(victim)}
	ft.Detail = fmt.Sprintf("held run %s attempt %d", held.Run, held.Attempt)
	retried := n.awaitRetried(ctx, held)
	sleepCtx(ctx, n.between(500*time.Millisecond, 2*time.Second))
	if err := n.f.startWorker(victim); err != nil {
		ft.Err = err.Error()
	}
	ft.Recovered = <-retried
	return ft
}

// slowHolder finds a live worker holding an attempt of a slow job that
// the recorder has not answered yet, through the run's attempts (about
// every other time one of a job naming a limit key, if there is one); it
// waits up to 10s for one.
func (n *nemesis) slowHolder(ctx context.Context) (*workerProc, Execution) {
	var (
		victim *workerProc
		held   Execution
	)
	// About every other time, an attempt holding a slot of a limit key
	// if one is in flight (its slot must be given back, and not before
	// its execution ended).
	preferLimited := n.intn(2) == 0
	waitFor(ctx, 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		open := n.rec.openSlow(time.Now().Add(-200 * time.Millisecond))
		if preferLimited {
			unlimited := func(e Execution) int {
				if limitedKind(e.Job) != "" {
					return 0
				}
				return 1
			}
			slices.SortStableFunc(open, func(a, b Execution) int { return unlimited(a) - unlimited(b) })
		}
		for _, e := range open {
			run, ok := n.hist.run(e.Run)
			if !ok || len(run.Attempts) < e.Attempt {
				continue
			}
			if w := n.f.workerByID(run.Attempts[e.Attempt-1].Worker); w != nil && w.live() && n.retriableElsewhere(run.JobID, w) {
				victim, held = w, e
				return true, ""
			}
		}
		return false, ""
	})
	return victim, held
}

// retriableElsewhere reports whether a run of job id held by worker w
// may be retried by another live worker: one whose labels its selector
// allows. A fault that cuts w off until the run is retried elsewhere must
// not pick a run of a job only w's pool may run (pool=a with one worker
// in pool a): nothing could retry it until w is back.
func (n *nemesis) retriableElsewhere(id string, w *workerProc) bool {
	sel := selectorFor(id, n.f.cfg.Workers)
	for _, o := range n.f.workers {
		if o != w && o.live() && placement.Allows(sel, workerLabels(o.index, n.f.cfg.Workers)) {
			return true
		}
	}
	return false
}

// awaitRetried sends when the run of held has moved past the attempt (its
// lease expired and another attempt started, or the run ended), zero on
// timeout.
func (n *nemesis) awaitRetried(ctx context.Context, held Execution) <-chan time.Time {
	retried := make(chan time.Time, 1)
	go func() {
		at, _ := waitFor(ctx, recoveryTimeout, 50*time.Millisecond, func() (bool, string) {
			run, ok := n.hist.run(held.Run)
			return ok && (len(run.Attempts) > held.Attempt || run.Status.Final()), ""
		})
		retried <- at
	}()
	return retried
}

func (n *nemesis) etcdLeaderKill(ctx context.Context) Fault {
	leader := n.f.etcd.awaitLeader(ctx, n.f.client)
	if leader == nil {
		return Fault{Err: "no etcd leader found"}
	}
	ft := Fault{Target: leader.name, Start: leader.kill()}
	healthy := n.awaitHealthy(ctx)
	down := n.between(time.Second, 3*time.Second)
	sleepCtx(ctx, down)
	if err := leader.start(n.f.cfg.Binary); err != nil {
		ft.Err = err.Error()
	}
	ft.Recovered = <-healthy
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered}}
	ft.Detail = fmt.Sprintf("restarted after %v", down.Round(time.Millisecond))
	return ft
}

func (n *nemesis) etcdRestart(ctx context.Context) Fault {
	ft := Fault{Target: fmt.Sprintf("all %d etcd members", len(n.f.etcd.members)), Start: time.Now()}
	n.f.etcd.kill()
	down := n.between(time.Second, 3*time.Second)
	sleepCtx(ctx, down)
	if err := n.f.etcd.startStopped(); err != nil {
		ft.Err = err.Error()
	}
	ft.Recovered = <-n.awaitHealthy(ctx)
	ft.Windows = []Window{{Start: ft.Start, End: ft.Recovered}}
	ft.Detail = fmt.Sprintf("down %v", down.Round(time.Millisecond))
	return ft
}

// jobBurst writes jobs while an orchestrator's partitions move: it drains
// the orchestrator, or kills it, and restarts it, with the burst running
// meanwhile.
func (n *nemesis) jobBurst(ctx context.Context) Fault {
	ops := 10 + n.intn(15)
	burst := func() { n.w.burst(ctx, 4*time.Second, ops) }
	var ft Fault
	if n.intn(2) == 0 {
		ft = n.orchestratorDrain(ctx, burst)
		ft.Detail = joinMsg(ft.Detail, fmt.Sprintf("%d job writes during a drain and restart", ops))
	} else {
		var wg sync.WaitGroup
		wg.Go(burst)
		ft = n.orchestratorRestart(ctx)
		wg.Wait()
		ft.Detail = joinMsg(ft.Detail, fmt.Sprintf("%d job writes during a kill and restart", ops))
	}
	return ft
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
