package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// Errors of the worker protocol. Callers compare with errors.Is or As.
var (
	// ErrStaleAttempt: the reported attempt is not the run's current one
	// (its lease expired and it was retried, the run was replaced or
	// deleted, or it completed already). HTTP 409.
	ErrStaleAttempt = errors.New("stale attempt: the run has moved on")
	// ErrBadRequest: a malformed protocol request. HTTP 400.
	ErrBadRequest = errors.New("bad request")
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

// SpaceGate tells the scheduler whether etcd takes writes;
// *storage.Monitor implements it. Its methods answer from memory and are
// safe for concurrent use.
type SpaceGate interface {
	// WritesRefused returns why etcd refuses writes now (an error wrapping
	// store.ErrNoSpace: its NOSPACE alarm is raised), nil if it takes them.
	WritesRefused() error
	// NoteWriteError is told of each failed write, classified by
	// store.Classify, so that a refusal for lack of space stops the
	// other partitions' writes at once.
	NoteWriteError(err error)
}

// OwnerLookup returns the current owner of partition p and its address, ""
// if none.
type OwnerLookup func(p int) (member, addr string)

// Config configures a Dispatcher. Start from DefaultConfig.
type Config struct {
	// Namespace is the cluster's etcd key prefix.
	Namespace string
	// Partitions is the cluster's partition count.
	Partitions int
	// MemberID and MemberAddr identify this member in runs and
	// assignments.
	MemberID   string
	MemberAddr string
	// FireBatch is the most runs one fenced transaction creates. Each run
	// costs up to four operations and etcd allows 128 per transaction by
	// default. Default 25.
	FireBatch int
	// CommitsInFlight is the most fenced writes this member sends to etcd
	// at once; writes made while that many are in flight wait and go
	// together in the next request, each fenced on its own partition's
	// epoch (shard.CommitBatch). 0 sends every write on its own, as many
	// at once as partitions make. Default 8.
	CommitsInFlight int
	// RunLease is how long a worker holds an attempt without heartbeat.
	// Default 30s.
	RunLease time.Duration
	// HistoryLimit is how many runs are kept per job; the oldest final
	// ones are trimmed. Default 100.
	HistoryLimit int
	// MaxActivePerJob is the most runs of one job that may be active
	// (waiting for a worker, awaiting a retry, or running); fires beyond
	// it are recorded as skipped with the reason (see CapActive). Default
	// 100.
	MaxActivePerJob int
	// Misfire is the schedule policy's grace and cap (its Misfire field is
	// taken from each job).
	Misfire schedule.Policy
	// RequestTimeout bounds each etcd request. Default 5s.
	RequestTimeout time.Duration
	// Lookup finds partition owners for redirects; nil answers "no owner".
	Lookup OwnerLookup
	// Space, if set, stops the scheduler while etcd refuses writes for
	// lack of space: partitions neither fire nor hand out attempts, and
	// look again every second (in memory; Space does the checking), so
	// that a full etcd costs one log line instead of a retry per partition
	// per second. Nil: writes are always tried.
	Space SpaceGate
	// Clock; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

// DefaultConfig returns the defaults.
func DefaultConfig(ns string, partitions int, member, addr string) Config {
	return Config{
		Namespace:       ns,
		Partitions:      partitions,
		MemberID:        member,
		MemberAddr:      addr,
		FireBatch:       25,
		CommitsInFlight: 8,
		RunLease:        30 * time.Second,
		HistoryLimit:    100,
		MaxActivePerJob: 100,
		RequestTimeout:  5 * time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > shard.MaxPartitions:
		return fmt.Errorf("dispatch: partitions %d outside 1..%d", c.Partitions, shard.MaxPartitions)
	case c.MemberID == "":
		return errors.New("dispatch: empty member ID")
	case c.FireBatch < 1 || c.FireBatch > 30:
		return fmt.Errorf("dispatch: fire batch %d outside 1..30", c.FireBatch)
	case c.CommitsInFlight < 0:
		return fmt.Errorf("dispatch: commits in flight %d below 0", c.CommitsInFlight)
	case c.RunLease < time.Second:
		return fmt.Errorf("dispatch: run lease %v below 1s", c.RunLease)
	case c.MaxActivePerJob < 1:
		return fmt.Errorf("dispatch: max active runs per job %d below 1", c.MaxActivePerJob)
	case c.HistoryLimit < 1:
		return fmt.Errorf("dispatch: history limit %d below 1", c.HistoryLimit)
	case c.RequestTimeout <= 0:
		return errors.New("dispatch: request timeout must be positive")
	}
	return nil
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
		commits: &committer{kv: client, timeout: cfg.RequestTimeout, maxInFlight: cfg.CommitsInFlight},
		parts:   map[int]*partition{},
		avail:   make(chan struct{}),
	}
	cfg.Metrics.setActiveSource(d.countActive)
	return d, nil
}

// Work schedules partition o.Partition until ctx is cancelled: it is the
// shard.Work of the member's controller.
func (d *Dispatcher) Work(ctx context.Context, o *shard.Ownership) {
	pt := &partition{
		d:     d,
		own:   o,
		p:     o.Partition,
		lg:    d.lg.With(zap.Int("partition", o.Partition), zap.Int64("epoch", o.Epoch)),
		nudge: make(chan struct{}, 1),
	}
	pt.run(ctx)
}

func (d *Dispatcher) register(pt *partition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parts[pt.p] = pt
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

// countActive counts the active runs of the partitions owned here.
func (d *Dispatcher) countActive() (waiting, running int) {
	parts, _ := d.snapshot()
	for _, pt := range parts {
		pt.mu.Lock()
		for _, ar := range pt.active {
			if ar.run.Status == store.RunRunning {
				running++
			} else {
				waiting++
			}
		}
		pt.mu.Unlock()
	}
	return waiting, running
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

// Poll hands up to req.Max dispatchable runs of this member's partitions to
// worker req.Worker, waiting up to req.Wait for some. Each attempt is
// recorded in etcd before it is returned.
func (d *Dispatcher) Poll(ctx context.Context, req PollRequest) (PollResponse, error) {
	if err := validatePoll(req); err != nil {
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
		var out []Assignment
		for _, pt := range parts {
			if len(out) >= req.Max {
				break
			}
			out = append(out, pt.assign(ctx, req.Worker, executors, req.Max-len(out))...)
		}
		if len(out) > 0 && ctx.Err() != nil {
			// The worker gave up on this poll (shutdown, timeout): it will
			// never see these attempts, so take them back rather than let
			// them burn an attempt each when their leases expire.
			d.takeBack(out)
			return PollResponse{Attempts: []Assignment{}}, nil
		}
		if len(out) > 0 || wait <= 0 {
			return PollResponse{Attempts: nonNil(out)}, nil
		}
		select {
		case <-avail:
		case <-timer.Chan():
			return PollResponse{Attempts: []Assignment{}}, nil
		case <-ctx.Done():
			return PollResponse{Attempts: []Assignment{}}, nil
		}
	}
}

func nonNil(a []Assignment) []Assignment {
	if a == nil {
		return []Assignment{}
	}
	return a
}

func validatePoll(req PollRequest) error {
	switch {
	case req.Worker == "" || len(req.Worker) > 128:
		return fmt.Errorf("%w: worker: must be 1 to 128 bytes", ErrBadRequest)
	case len(req.Executors) == 0 || len(req.Executors) > 1000:
		return fmt.Errorf("%w: executors: must list 1 to 1000 executor types", ErrBadRequest)
	case req.Max < 1 || req.Max > 100:
		return fmt.Errorf("%w: max: must be 1 to 100, got %d", ErrBadRequest, req.Max)
	case req.Wait < 0 || req.Wait.Std() > MaxPollWait:
		return fmt.Errorf("%w: wait: must be 0 to %v", ErrBadRequest, MaxPollWait)
	}
	return nil
}

func validateReport(worker, runID string, attempt int) (string, error) {
	if worker == "" || len(worker) > 128 {
		return "", fmt.Errorf("%w: worker: must be 1 to 128 bytes", ErrBadRequest)
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

// takeBack returns attempts that were recorded but never delivered to
// pending.
func (d *Dispatcher) takeBack(as []Assignment) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	for _, a := range as {
		if pt, err := d.partitionFor(a.JobID); err == nil {
			pt.takeBack(ctx, a)
		}
	}
}

// Heartbeat extends the lease of a running attempt. It returns
// ErrStaleAttempt if the attempt is not current, or a *NotOwnerError.
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
// recorded), or a *NotOwnerError.
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
	pt, err := d.partitionFor(id)
	if err != nil {
		return CompleteResponse{}, err
	}
	return pt.complete(ctx, req)
}
