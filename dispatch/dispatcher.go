package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/jobfleet/jobfleet/dispatch/liveoutput"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// NotOwnerError says this member does not own the run's partition, and who
// does (empty while nobody does). HTTP 421.
type NotOwnerError struct {
	Partition int
	Owner     string
	OwnerAddr string
}

func (e *NotOwnerError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("partition %d has no owner right now; retry", e.Partition)
	}
	return fmt.Sprintf("partition %d is owned by %s at %s", e.Partition, e.Owner, e.OwnerAddr)
}

// Dispatcher runs the scheduler of every partition this member owns (its
// Work method is the shard.Work) and serves the worker protocol from their
// queues. Safe for concurrent use.
type Dispatcher struct {
	client *clientv3.Client
	cfg    Config
	keys   store.Keys
	lg     *zap.Logger

	commits *committer
	// loads bounds the member's loads (Config.LoadsInFlight and
	// LoadJobsInFlight), fires its fires in flight (Config.FiresInFlight).
	loads *loadBudget
	fires *fireBudget
	// backfillRate paces the runs backfills create (Config.BackfillRate),
	// nil without a bound; safe for concurrent use.
	backfillRate *rate.Limiter
	// loadHook, if set (tests), is called when a load has its slot, before
	// it reads etcd, and what it returns when the load ends, before the
	// slot is given back.
	loadHook func(p int) func()
	// fireHook, if set (tests), is called when partition p has planned a
	// write of fires holding runs runs, and what it returns when the
	// write's answer is in, before its room in the budget is given back.
	fireHook func(p, runs int) func()
	// standby is the member's warm standby (NewStandby), nil without one.
	standby atomic.Pointer[Standby]
	// live holds running attempts' output (output.go); safe for
	// concurrent use.
	live *liveoutput.Table

	mu    sync.Mutex         // guards parts and avail
	parts map[int]*partition // running schedulers by partition
	avail chan struct{}      // closed and replaced when runs may have become dispatchable

	pollsMu sync.Mutex            // guards polls and ended
	polls   map[*poll]struct{}    // the polls in progress (spread.go)
	ended   map[string]endedPolls // by worker ID: workers that ended their polls here (endpolls.go)
	// heldUntil is the latest end of a mark of ended, in the clock's
	// UnixNano: past it no mark holds, and polls skip the lock.
	heldUntil atomic.Int64

	healthMu sync.Mutex // guards writeErr
	writeErr error      // the latest write failure, nil once a write succeeds again
}

// New validates cfg (errors wrap ErrInvalidConfig) and returns a
// dispatcher; zero settings of cfg take DefaultConfig's values. It starts
// nothing.
func New(client *clientv3.Client, cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Lookup == nil {
		cfg.Lookup = func(int) (string, string) { return "", "" }
	}
	d := &Dispatcher{
		client:  client,
		cfg:     cfg,
		keys:    store.Keys{NS: cfg.Namespace},
		lg:      cfg.Logger.With(zap.String("member", cfg.MemberID)),
		commits: newCommitter(client, cfg.RequestTimeout, cfg.CommitsInFlight, cfg.CommitLatencyTarget, cfg.Clock, cfg.Metrics),
		loads:   newLoadBudget(cfg),
		fires:   newFireBudget(cfg),
		parts:   map[int]*partition{},
		avail:   make(chan struct{}),
		polls:   map[*poll]struct{}{},
		ended:   map[string]endedPolls{},
		live:    liveoutput.New(cfg.LiveOutput),
	}
	if cfg.BackfillRate > 0 {
		d.backfillRate = rate.NewLimiter(rate.Limit(cfg.BackfillRate), cfg.FireBatch)
	}
	cfg.Metrics.setSource(d.Stats)
	if cfg.Workers != nil {
		cfg.Workers.Subscribe(d.workersGone)
	}
	if cfg.Limits != nil {
		cfg.Limits.Subscribe(d.wakePollers) // a slot freed: waiting runs may start
		cfg.Metrics.setLimitSource(d.limitUse)
	}
	return d, nil
}

// Work schedules partition o.Partition until ctx is cancelled: it is the
// shard.Work of the member's controller.
func (d *Dispatcher) Work(ctx context.Context, o *shard.Ownership) {
	pt := &partition{
		d:      d,
		own:    o,
		p:      o.Partition,
		lg:     d.lg.With(zap.Int("partition", o.Partition), zap.Int64("epoch", o.Epoch)),
		nudge:  make(chan struct{}, 1),
		ctx:    ctx,
		unread: map[string]api.Run{},
	}
	pt.idx = newJobIndex(pt)
	if n := d.cfg.Notify.Notifier; n != nil {
		ob := n.Open(ctx, o.Partition, outboxStore{pt})
		defer ob.Close()
		pt.notes = ob
	}
	pt.run(ctx)
}

// register makes pt's runs available to polls, and wakes the polls that
// wait: a poll that looked before pt was loaded must look again.
func (d *Dispatcher) register(pt *partition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parts[pt.p] = pt
	d.wakePollersLocked()
}

func (d *Dispatcher) unregister(pt *partition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.parts[pt.p] == pt {
		delete(d.parts, pt.p)
	}
}

// wakePollers tells waiting polls that runs may be dispatchable.
func (d *Dispatcher) wakePollers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wakePollersLocked()
}

func (d *Dispatcher) wakePollersLocked() {
	close(d.avail)
	d.avail = make(chan struct{})
}

func (d *Dispatcher) snapshot() ([]*partition, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Values(d.parts)), d.avail
}

// partitionFor returns the running scheduler of job id's partition, or a
// *NotOwnerError.
func (d *Dispatcher) partitionFor(id string) (*partition, error) {
	p := shard.Partition(id, d.cfg.Partitions)
	d.mu.Lock()
	pt := d.parts[p]
	d.mu.Unlock()
	if pt == nil {
		owner, addr := d.cfg.Lookup(p)
		if owner == d.cfg.MemberID { // acquired, not loaded yet
			owner, addr = "", ""
		}
		return nil, &NotOwnerError{Partition: p, Owner: owner, OwnerAddr: addr}
	}
	return pt, nil
}

// Stats describes the partitions a member owns: their active runs and
// their stored history.
type Stats struct {
	// Waiting and Running count the active runs: waiting for a worker
	// (pending, or failed with a retry due) and held by one.
	Waiting, Running int
	// HistoryRuns and HistoryBytes count the stored run documents (active
	// and final) and their bytes, with those (key and value) of their
	// failing-runs index entries.
	HistoryRuns  int
	HistoryBytes int64
	// HistoryBudget is these partitions' share of the fleet's history
	// budget. Final runs are trimmed (the job storing the most beyond its
	// floor first) to keep HistoryBytes within it; active runs and the
	// jobs' floors are not.
	HistoryBudget int64
	// Completed counts the completed jobs (JobState.FinishedAt set), kept
	// until their delete_after.
	Completed int
	// Overdue counts the jobs whose state records an overdue episode
	// (expect_success_within, JobState.Overdue).
	Overdue int
	// Unservable counts the waiting runs no live worker can take (see
	// Registry.WhyPending), by executor type; nil without a worker
	// registry.
	Unservable map[string]int
	// Unplaceable counts those of Unservable that a live worker could
	// take but for their job's placement selector, which matches none of
	// their labels.
	Unplaceable int
}

// Stats returns the state of the partitions owned here. It takes each
// partition's state lock briefly, never its writer lock, so it does not
// wait for etcd (it serves /metrics). Summed over the members, the history
// figures are the fleet's.
func (d *Dispatcher) Stats() Stats {
	parts, _ := d.snapshot()
	var st Stats
	for _, pt := range parts {
		ps := pt.stats()
		st.Waiting += ps.Waiting
		st.Running += ps.Running
		st.HistoryRuns += ps.HistoryRuns
		st.HistoryBytes += ps.HistoryBytes
		st.Completed += ps.Completed
		st.Overdue += ps.Overdue
		st.HistoryBudget += pt.budgetShare()
	}
	st.Unservable, st.Unplaceable = d.unservable(parts)
	return st
}

// recordWrite notes the outcome of a fenced write for Health, and tells
// the space gate of a failure.
func (d *Dispatcher) recordWrite(err error) {
	if err != nil && (errors.Is(err, shard.ErrFenced) || errors.Is(err, shard.ErrRefenced)) {
		return // ownership moved (the controller handles it) or re-fenced: the store is fine
	}
	if err != nil && d.cfg.Space != nil {
		d.cfg.Space.NoteWriteError(err)
	}
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	d.writeErr = err
}

// writesRefused returns the space gate's verdict, nil without a gate.
func (d *Dispatcher) writesRefused() error {
	if d.cfg.Space == nil {
		return nil
	}
	return d.cfg.Space.WritesRefused()
}

// Health returns the latest failure of the scheduler's writes to etcd
// (classified by store.Classify: store.ErrNoSpace, store.ErrUnavailable,
// …), or nil if the latest write succeeded. A member whose writes fail
// cannot fire or dispatch and should not be reported ready.
func (d *Dispatcher) Health() error {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	return d.writeErr
}

// Owned returns the partitions whose schedulers run here, ascending.
func (d *Dispatcher) Owned() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.parts))
}

// Loaded reports whether partition p's scheduler runs here: its state was
// read (from etcd or a warm copy) after its ownership was acquired, so it
// fires and dispatches. changed is closed the next time a partition
// loads (it may be closed for other reasons too: look again).
func (d *Dispatcher) Loaded(p int) (loaded bool, changed <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, loaded = d.parts[p]
	return loaded, d.avail
}
