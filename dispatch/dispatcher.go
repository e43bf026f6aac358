package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/jobfleet/jobfleet/api"
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
	// loads bounds the partitions loading at once (Config.LoadsInFlight),
	// loadJobs the jobs they load (Config.LoadJobsInFlight, each load
	// weighing its partition's keys); nil: no bound. Their waiters are
	// served in the order they came; a load takes loads, then loadJobs.
	loads    *semaphore.Weighted
	loadJobs *semaphore.Weighted
	// fires bounds the runs of fire writes planned and not yet answered
	// (Config.FiresInFlight); nil: no bound. Served in the order asked.
	fires *semaphore.Weighted
	// loadHook, if set (tests), is called when a load has its slot, before
	// it reads etcd, and what it returns when the load ends, before the
	// slot is given back.
	loadHook func(p int) func()
	// fireHook, if set (tests), is called when partition p has planned a
	// write of fires holding runs runs, and what it returns when the
	// write's answer is in, before its room in the budget is given back.
	fireHook func(p, runs int) func()
	// standby is the member's warm standby (NewStandby), nil without one.
	standby standbyPtr
	// pending counts the partitions waiting for their load or loading:
	// standby copies are read only while there are none.
	pending loadGate

	mu    sync.Mutex         // guards parts and avail
	parts map[int]*partition // running schedulers by partition
	avail chan struct{}      // closed and replaced when runs may have become dispatchable

	healthMu sync.Mutex // guards writeErr
	writeErr error      // the latest write failure, nil once a write succeeds again
}

// New returns a dispatcher. It starts nothing.
func New(client *clientv3.Client, cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
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
		parts:   map[int]*partition{},
		avail:   make(chan struct{}),
	}
	if cfg.LoadsInFlight > 0 {
		d.loads = semaphore.NewWeighted(int64(cfg.LoadsInFlight))
	}
	if cfg.LoadJobsInFlight > 0 {
		d.loadJobs = semaphore.NewWeighted(int64(cfg.LoadJobsInFlight))
	}
	if cfg.FiresInFlight > 0 {
		d.fires = semaphore.NewWeighted(int64(cfg.FiresInFlight))
	}
	cfg.Metrics.setSource(d.Stats)
	if cfg.Workers != nil {
		cfg.Workers.subscribe(d.workersGone)
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
		unread: map[string]store.Run{},
		idx:    newJobIndex(),
	}
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
	// Unservable counts the waiting runs no live worker can take (see
	// WhyPending), by executor type; nil without a worker registry.
	Unservable map[string]int
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
		st.HistoryBudget += pt.budgetShare()
	}
	st.Unservable = d.unservable(parts)
	return st
}

// recordWrite notes the outcome of a fenced write for Health, and tells
// the space gate of a failure.
func (d *Dispatcher) recordWrite(err error) {
	if err != nil && errors.Is(err, shard.ErrFenced) {
		return // ownership moved: the controller handles it; the store is fine
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

// Poll hands up to req.Max dispatchable runs of this member's partitions
// (of jobs starting with req.Prefix) to worker req.Worker, waiting up to
// req.Wait for some. Each attempt is recorded in etcd, with req.Worker and
// req.Credential, before it is returned.
func (d *Dispatcher) Poll(ctx context.Context, req PollRequest) (PollResponse, error) {
	if err := validatePoll(req); err != nil {
		return PollResponse{}, err
	}
	if err := d.checkWorkerID(req.Worker, req.Credential); err != nil {
		return PollResponse{}, err
	}
	clock := d.cfg.Clock
	wait := min(req.Wait.Std(), MaxPollWait)
	timer := clock.NewTimer(wait)
	defer timer.Stop()
	executors := make(map[string]bool, len(req.Executors))
	for _, e := range req.Executors {
		executors[e] = true
	}
	for {
		parts, avail := d.snapshot()
		rand.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		var out []AttemptGrant
		for _, pt := range parts {
			if len(out) >= req.Max {
				break
			}
			out = append(out, pt.assign(req, executors, req.Max-len(out))...)
		}
		if len(out) > 0 && ctx.Err() != nil {
			// The worker gave up on this poll (shutdown, timeout): it will
			// never see these attempts, so take them back rather than let
			// them burn an attempt each when their leases expire.
			d.takeBack(req.Worker, out)
			return PollResponse{Attempts: []AttemptGrant{}}, nil
		}
		if len(out) > 0 || wait <= 0 {
			return PollResponse{Attempts: nonNil(out)}, nil
		}
		select {
		case <-avail:
		case <-timer.Chan():
			return PollResponse{Attempts: []AttemptGrant{}}, nil
		case <-ctx.Done():
			return PollResponse{Attempts: []AttemptGrant{}}, nil
		}
	}
}

func nonNil(a []AttemptGrant) []AttemptGrant {
	if a == nil {
		return []AttemptGrant{}
	}
	return a
}

func validatePoll(req PollRequest) error {
	if err := validateWorkerID(req.Worker); err != nil {
		return err
	}
	switch {
	case len(req.Executors) == 0 || len(req.Executors) > 1000:
		return fmt.Errorf("%w: executors: must list 1 to 1000 executor types", ErrBadRequest)
	case req.Max < 1 || req.Max > 100:
		return fmt.Errorf("%w: max: must be 1 to 100, got %d", ErrBadRequest, req.Max)
	case req.Wait < 0 || req.Wait.Std() > MaxPollWait:
		return fmt.Errorf("%w: wait: must be 0 to %v", ErrBadRequest, MaxPollWait)
	}
	return nil
}

// validateWorkerID checks a protocol request's worker ID: 1 to 128 bytes
// under the rules of every name of the API (api.ValidateName: no control,
// invisible or look-alike characters), since it is recorded in attempts,
// listed by GET /v1/cluster/workers and printed by clients.
func validateWorkerID(worker string) error {
	if err := api.ValidateName("worker", worker, 128); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// validateText checks a completion's error or output: valid UTF-8 without
// control characters other than newline and tab (workers escape the
// others), so that what is recorded cannot drive a reader's terminal.
func validateText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s: not valid UTF-8", ErrBadRequest, field)
	}
	for i, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fmt.Errorf("%w: %s: control character %U at byte %d (escape it)", ErrBadRequest, field, r, i)
		}
	}
	return nil
}

func validateReport(worker, runID string, attempt int) (string, error) {
	if err := validateWorkerID(worker); err != nil {
		return "", err
	}
	if attempt < 1 {
		return "", fmt.Errorf("%w: attempt: must be at least 1", ErrBadRequest)
	}
	id, _, err := store.ParseRunID(runID)
	if err != nil {
		return "", fmt.Errorf("%w: run_id: %q is not a run ID", ErrBadRequest, runID)
	}
	return id, nil
}

// takeBack hands attempts that were recorded but never delivered to
// their partitions' loops, which return the runs to pending (see
// partition.queueTakeBack).
func (d *Dispatcher) takeBack(worker string, as []AttemptGrant) {
	for _, a := range as {
		if pt, err := d.partitionFor(a.JobID); err == nil {
			pt.queueTakeBack(worker, a)
		}
	}
}

// Heartbeat extends the lease of a running attempt. It returns
// ErrStaleAttempt if the attempt is not current, ErrForbidden if it was
// handed to another credential than req.Credential, or a *NotOwnerError.
func (d *Dispatcher) Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResponse, error) {
	id, err := validateReport(req.Worker, req.RunID, req.Attempt)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	return pt.heartbeat(req)
}

// Complete records an attempt's result. It returns the run's new status,
// ErrStaleAttempt if the attempt is not current (the report is not
// recorded), ErrForbidden if it was handed to another credential than
// req.Credential (not recorded either), or a *NotOwnerError.
func (d *Dispatcher) Complete(ctx context.Context, req CompleteRequest) (CompleteResponse, error) {
	id, err := validateReport(req.Worker, req.RunID, req.Attempt)
	if err != nil {
		return CompleteResponse{}, err
	}
	if len(req.Output) > MaxOutputBytes {
		return CompleteResponse{}, fmt.Errorf("%w: output: longer than %d bytes", ErrBadRequest, MaxOutputBytes)
	}
	if len(req.Error) > MaxOutputBytes {
		return CompleteResponse{}, fmt.Errorf("%w: error: longer than %d bytes", ErrBadRequest, MaxOutputBytes)
	}
	if err := validateText("output", req.Output); err != nil {
		return CompleteResponse{}, err
	}
	if err := validateText("error", req.Error); err != nil {
		return CompleteResponse{}, err
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return CompleteResponse{}, err
	}
	return pt.complete(req)
}
