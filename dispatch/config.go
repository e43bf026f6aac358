package dispatch

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/liveoutput"
	"github.com/jobfleet/jobfleet/internal/settings"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// OwnerLookup returns the current owner of partition p and its address, ""
// if none.
type OwnerLookup func(p int) (member, addr string)

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
	// Quota returns etcd's space quota in bytes (as last seen, or as
	// configured before the first check); 0 if unknown. The history
	// budget is at most half of it.
	Quota() int64
}

// Config configures a Dispatcher. Its numbers and durations follow the
// zero convention of package settings: 0 is the default (DefaultConfig's
// value), a negative value is unbounded where the field says so and
// refused elsewhere. New and Validate apply the defaults to zero fields.
type Config struct {
	// Namespace is the cluster's etcd key prefix.
	Namespace string
	// Partitions is the cluster's partition count.
	Partitions int
	// MemberID and MemberAddr identify this member in runs and
	// attempt grants.
	MemberID   string
	MemberAddr string
	// FireBatch is the most runs one fenced transaction creates. Each run
	// costs up to four operations and etcd allows 128 per transaction by
	// default. 1 to 30; default 25.
	FireBatch int
	// CommitsInFlight is the most fenced writes this member sends to etcd
	// at once; writes made while that many are in flight wait and go
	// together in the next request, each fenced on its own partition's
	// epoch (shard.CommitBatch). Negative: no bound, and no batching
	// across partitions (every write goes on its own, as many at once as
	// partitions make; for benchmarks). Default 8.
	CommitsInFlight int
	// CommitLatencyTarget steers how much of its writes this member keeps
	// in flight: a request whose round trip exceeds it halves the
	// operations that may be in flight, answers within it let them grow
	// back, up to CommitsInFlight requests of the largest batch. It
	// bounds the member's share of etcd's backlog of transactions to
	// apply, behind which etcd's linearizable reads and, on a busy server,
	// lease keepalives wait: well below the lease's renew deadline, so
	// that a herd of due jobs slows down rather than starving the
	// member's lease renewal. Negative: no target, CommitsInFlight
	// requests in flight whatever their round trip. Below RequestTimeout.
	// Default 250ms.
	CommitLatencyTarget time.Duration
	// LoadsInFlight is the most partitions this member loads from etcd at
	// once; the others it owns wait for a slot, in the order they asked,
	// before they are served. It bounds the requests and goroutines of
	// loads; LoadJobsInFlight bounds their work. Negative: no bound on
	// the partitions. Default 16 (--loads-in-flight).
	LoadsInFlight int
	// LoadJobsInFlight is the most jobs (spec and trigger keys) this
	// member loads from etcd at once, summed over the partitions loading.
	// A load with a partition slot counts its partition's keys (a
	// count-only serializable read, answered from etcd's index) and waits,
	// in the order the loads asked, until that many jobs fit (at least 1;
	// a partition larger than the whole budget takes all of it and loads
	// alone). A member that acquires hundreds of partitions (a takeover, a
	// start) would otherwise read and decode all of them at once: their
	// reads, JSON decoding and heap grow with their jobs and compete for
	// the member's CPU with its lease keepalives, and for etcd with
	// everyone's requests, and at hundreds of thousands of jobs the
	// member missed its renew deadline while loading. Weighing loads by
	// their jobs lets a small fleet's partitions (a few jobs each) load
	// many at once, up to LoadsInFlight, while a million jobs over 1 024
	// partitions (about a thousand each) load about two at a time.
	// Negative: no bound on the jobs, and no count read. Default 2048
	// (--load-jobs-in-flight).
	LoadJobsInFlight int
	// FiresInFlight is the most runs this member has planned and not yet
	// written at once, over all its partitions: a partition plans its due
	// jobs one write at a time (at most FireBatch runs), each once there
	// is room for FireBatch runs, in the order the partitions asked, and
	// gives the room back when the write's answer is in. Under a herd
	// (every job of every partition due in the same second) planning all
	// of them at once made hundreds of thousands of runs and their writes
	// in one burst: the member's CPU and heap went to them and to writes
	// waiting for etcd, and its lease keepalives waited behind. The
	// default is above what the commit window lets into etcd at most
	// (CommitsInFlight requests of 512 operations, about 800 runs), so
	// that the window, not this bound, paces the writes. Negative: no
	// bound (each partition still plans one write at a time). Otherwise at
	// least FireBatch. Default 2048.
	FiresInFlight int
	// RunLease is how long a worker holds an attempt without heartbeat.
	// At least 1s; default 30s (--run-lease).
	RunLease time.Duration
	// HistoryMaxRuns is how many runs a job keeps, active ones included,
	// unless its history.max_runs says otherwise; the oldest final ones
	// are trimmed. 1 to api.MaxHistoryRuns; default 100
	// (--history-max-runs).
	HistoryMaxRuns int
	// HistoryMaxAge is how long a final run is kept after its scheduled
	// time unless its job's history.max_age says otherwise. Negative:
	// runs are kept whatever their age. Default DefaultHistoryMaxAge
	// (--history-max-age).
	HistoryMaxAge time.Duration
	// HistoryBudget bounds the bytes of run documents the fleet stores.
	// Each partition's owner keeps its partition's within
	// HistoryBudget/Partitions by trimming final runs of the job that
	// stores the most beyond its floor (HistoryFloor), oldest first;
	// since every partition has one owner, the fleet's total stays within
	// HistoryBudget (plus the documents of active runs and the floors,
	// which are never trimmed for it) with no coordination between
	// members. It is at most half of etcd's quota as Space reports it,
	// whatever is set here, so that run history alone cannot fill etcd.
	// At least 16 KiB per partition; default DefaultHistoryBudget
	// (--history-budget).
	HistoryBudget int64
	// HistoryFloor is how many of each job's newest final runs the
	// history budget never trims, with the job's newest dead run,
	// whatever the other jobs of its partition store: at most the job's
	// own max_runs (its count and age limits still apply). 1 to
	// api.MaxHistoryRuns; default DefaultHistoryFloor (--history-floor).
	HistoryFloor int
	// MaxRunBytes is the budget of one run document: outputs of attempts
	// beyond it are cut (store.FitRun). At least store.MinMaxRunBytes and
	// well under etcd's request limit (1.5 MiB by default). Default
	// store.DefaultMaxRunBytes.
	MaxRunBytes int
	// DeleteAfter is how long a finished one-off job is kept, with its
	// runs, unless its delete_after says otherwise. Negative: they are
	// kept forever. Default DefaultDeleteAfter (--delete-after).
	DeleteAfter time.Duration
	// MaxActivePerJob is the most runs of one job that may be active
	// (waiting for a worker, awaiting a retry, or running); fires beyond
	// it are recorded as skipped with the reason (see CapActive). At least
	// 1; default 100.
	MaxActivePerJob int
	// BackfillRate is the most runs backfills create per second on this
	// member, over all its partitions (POST /v1/jobs/{id}/backfill), in
	// bursts of up to FireBatch: a backfill of a thousand times comes in
	// over a while instead of in one burst of writes and waiting runs.
	// Negative: no bound. Default 20 (--backfill-rate).
	BackfillRate float64
	// BackfillActive is the most runs of one job's backfill that may be
	// active at once: the next are created as earlier ones finish, so
	// that a backfill shares the workers with the fleet's other runs
	// instead of queueing its thousand runs before theirs. At least 1;
	// default 10.
	BackfillActive int
	// LiveOutput bounds the output of running attempts held in memory
	// for GET /v1/runs/{id}/output (--live-output-bytes,
	// --live-output-attempts).
	LiveOutput liveoutput.Config
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
	// Notify configures run notifications (the job document's "notify");
	// its zero value sends none.
	Notify NotifyConfig
	// Workers, if set, is the worker registry (package dispatch/workers):
	// attempts of a worker whose registration ends are lost at once (not a
	// run lease later), polls under a worker ID bound to another
	// credential are refused, and the unservable gauge counts the waiting
	// runs no live worker serves. Nil: run leases alone detect lost
	// workers.
	Workers Registry
	// Calendars, if set, are the fleet's calendars (a CalendarCache): a
	// job's times inside one it excludes are recorded skipped. While they
	// are not read yet, jobs that exclude calendars are not planned. Nil:
	// no calendars, and a job's exclude excludes nothing.
	Calendars CalendarSource
	// Limits, if set, are the fleet's limit keys (a *limits.Table): an
	// attempt of a job naming keys starts only within their room and
	// holds their slots while it runs. Nil: limits bound nothing.
	Limits LimitTable
	// Dependencies, if set, is the dependency index (a DependencyCache):
	// a run's end is handed over to the jobs that run after its job.
	// Nil: no run end fires another job.
	Dependencies DependencySource
	// PriorityAging is how long a waiting run takes to gain one point of
	// effective priority (api.EffectivePriority): a run is handed out
	// ahead of every run that started waiting more than ten agings after
	// it. Negative: no aging (priority alone orders). Default 10s.
	PriorityAging time.Duration
	// LimitQueueInterval is how often, at most, a partition's owner
	// publishes the best run it has waiting for each limit key, for the
	// other partitions to grant in priority order across the fleet
	// (docs/ownership.md). Negative: nothing published, each partition
	// orders only its own runs. Default 1s.
	LimitQueueInterval time.Duration
	// Clock; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

// Defaults of the history bounds.
const (
	// DefaultHistoryMaxAge keeps a month of runs: a daily job shows every
	// run of the last month (its 100 runs reach further back, but a
	// month is what an on-call review looks at), while a job firing every
	// minute is bounded by its count first.
	DefaultHistoryMaxAge = 30 * 24 * time.Hour
	// DefaultHistoryBudget is half of etcd's default 2 GiB quota, leaving
	// the rest to specs, states and the revisions between compactions.
	DefaultHistoryBudget = 1 << 30
	// DefaultHistoryFloor keeps each job's last three runs (and its last
	// dead run) whatever its neighbours store: enough to see what a job
	// did lately, cheap enough that a million jobs' floors (about 2 GB
	// at 700 bytes a run) are not a fleet's whole store.
	DefaultHistoryFloor = 3
	// DefaultDeleteAfter keeps finished one-off jobs for a week.
	DefaultDeleteAfter = 7 * 24 * time.Hour
	// minBudgetShare is the smallest share of the history budget a
	// partition may have: a few dozen small runs.
	minBudgetShare = 16 << 10
	// maxRunBytes keeps a run document, with the other writes of its
	// transaction, well under etcd's default 1.5 MiB request limit.
	maxRunBytes = 1 << 20
)

// DefaultConfig returns the defaults for member (reached at addr) of a
// cluster of partitions partitions under namespace ns.
func DefaultConfig(ns string, partitions int, member, addr string) Config {
	return Config{
		Namespace:           ns,
		Partitions:          partitions,
		MemberID:            member,
		MemberAddr:          addr,
		FireBatch:           25,
		CommitsInFlight:     8,
		CommitLatencyTarget: 250 * time.Millisecond,
		LoadsInFlight:       16,
		LoadJobsInFlight:    2048,
		FiresInFlight:       2048,
		RunLease:            30 * time.Second,
		HistoryMaxRuns:      100,
		HistoryMaxAge:       DefaultHistoryMaxAge,
		HistoryBudget:       DefaultHistoryBudget,
		HistoryFloor:        DefaultHistoryFloor,
		MaxRunBytes:         store.DefaultMaxRunBytes,
		DeleteAfter:         DefaultDeleteAfter,
		MaxActivePerJob:     100,
		BackfillRate:        20,
		BackfillActive:      10,
		RequestTimeout:      5 * time.Second,
		PriorityAging:       10 * time.Second,
		LimitQueueInterval:  time.Second,
	}
}

// WithDefaults returns c with its zero settings replaced by
// DefaultConfig's (the identity fields, the hooks and the logger as they
// are).
func (c Config) WithDefaults() Config {
	d := DefaultConfig(c.Namespace, c.Partitions, c.MemberID, c.MemberAddr)
	settings.Default(&c.FireBatch, d.FireBatch)
	settings.Default(&c.CommitsInFlight, d.CommitsInFlight)
	settings.Default(&c.CommitLatencyTarget, d.CommitLatencyTarget)
	settings.Default(&c.LoadsInFlight, d.LoadsInFlight)
	settings.Default(&c.LoadJobsInFlight, d.LoadJobsInFlight)
	settings.Default(&c.FiresInFlight, d.FiresInFlight)
	settings.Default(&c.RunLease, d.RunLease)
	settings.Default(&c.HistoryMaxRuns, d.HistoryMaxRuns)
	settings.Default(&c.HistoryFloor, d.HistoryFloor)
	settings.Default(&c.HistoryMaxAge, d.HistoryMaxAge)
	settings.Default(&c.HistoryBudget, d.HistoryBudget)
	settings.Default(&c.MaxRunBytes, d.MaxRunBytes)
	settings.Default(&c.DeleteAfter, d.DeleteAfter)
	settings.Default(&c.MaxActivePerJob, d.MaxActivePerJob)
	settings.Default(&c.BackfillRate, d.BackfillRate)
	settings.Default(&c.BackfillActive, d.BackfillActive)
	settings.Default(&c.RequestTimeout, d.RequestTimeout)
	settings.Default(&c.PriorityAging, d.PriorityAging)
	settings.Default(&c.LimitQueueInterval, d.LimitQueueInterval)
	c.LiveOutput = c.LiveOutput.WithDefaults()
	return c
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig, or on a Config whose values the flags are to show):
// --run-lease, --loads-in-flight, --load-jobs-in-flight,
// --history-max-runs, --history-max-age, --history-budget,
// --history-floor, --delete-after, --backfill-rate, --priority-aging,
// --limit-queue-interval, --live-output-bytes and --live-output-attempts.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.RunLease, "run-lease", c.RunLease, "how long a worker holds an attempt without heartbeat before it is lost and retried (at least 1s)")
	fs.IntVar(&c.LoadsInFlight, "loads-in-flight", c.LoadsInFlight, "partitions this member loads from etcd at once after acquiring them (a takeover, a start), the others waiting their turn (--load-jobs-in-flight still bounds their jobs)")
	settings.Unbounded(fs, "loads-in-flight", "no bound on the partitions")
	fs.IntVar(&c.LoadJobsInFlight, "load-jobs-in-flight", c.LoadJobsInFlight, "jobs this member loads from etcd at once, summed over the partitions loading: each load first counts its partition's jobs and waits its turn until they fit (a partition larger than this loads alone; a member loading hundreds of thousands of jobs at once can miss its lease renewal)")
	settings.Unbounded(fs, "load-jobs-in-flight", "no bound on the jobs")
	fs.IntVar(&c.HistoryMaxRuns, "history-max-runs", c.HistoryMaxRuns, fmt.Sprintf("runs kept per job (active ones included) unless the job's history.max_runs says otherwise (1 to %d)", api.MaxHistoryRuns))
	fs.DurationVar(&c.HistoryMaxAge, "history-max-age", c.HistoryMaxAge, "how long final runs are kept after their scheduled time unless the job's history.max_age says otherwise")
	settings.Unbounded(fs, "history-max-age", "kept whatever their age")
	settings.BytesVar(fs, &c.HistoryBudget, "history-budget", c.HistoryBudget, "bytes of run documents the whole fleet keeps, like 1GiB or 500MB (each partition's owner keeps its share, trimming the job that stores the most first, its oldest final runs first); at most half of etcd's quota, whatever is given; every member must be given the same value")
	fs.IntVar(&c.HistoryFloor, "history-floor", c.HistoryFloor, fmt.Sprintf("newest final runs of each job (with its newest dead run) the history budget never trims, whatever the job's neighbours store (1 to %d)", api.MaxHistoryRuns))
	fs.DurationVar(&c.DeleteAfter, "delete-after", c.DeleteAfter, "how long a finished one-off job is kept, with its runs, unless its delete_after says otherwise")
	settings.Unbounded(fs, "delete-after", "kept forever")
	fs.Float64Var(&c.BackfillRate, "backfill-rate", c.BackfillRate, "runs backfills create per second on this member, over all its partitions (a backfill's runs come in paced, not in one burst)")
	settings.Unbounded(fs, "backfill-rate", "no bound")
	fs.DurationVar(&c.PriorityAging, "priority-aging", c.PriorityAging, "how long a waiting run takes to gain one point of priority when workers or a limit key are scarce: a run is handed out ahead of every run that started waiting more than ten agings after it")
	settings.Unbounded(fs, "priority-aging", "no aging: priority alone orders")
	fs.DurationVar(&c.LimitQueueInterval, "limit-queue-interval", c.LimitQueueInterval, "how often, at most, each partition's owner publishes in etcd the best run it has waiting for each limit key, so that every member grants the key's slots in priority order across the fleet; a slot may wait up to this long for a run that was granted elsewhere")
	settings.Unbounded(fs, "limit-queue-interval", "nothing published: each partition orders only its own runs")
	c.LiveOutput.AddFlags(fs)
}

// Validate reports the first problem with c, after WithDefaults: a field
// out of its range or fields that do not fit together. Errors wrap
// ErrInvalidConfig and start with "dispatch: invalid config"; a setting
// with a flag is reported as a *settings.Error naming it.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	switch {
	case c.Namespace == "" || !strings.HasSuffix(c.Namespace, "/"):
		return bad("namespace %q must be non-empty and end in '/'", c.Namespace)
	case c.Partitions < 1 || c.Partitions > shard.MaxPartitions:
		return bad("partitions %d outside 1..%d", c.Partitions, shard.MaxPartitions)
	case c.MemberID == "":
		return bad("empty member ID")
	case c.FireBatch < 1 || c.FireBatch > 30:
		return bad("fire batch %d outside 1..30", c.FireBatch)
	case c.FiresInFlight > 0 && c.FiresInFlight < c.FireBatch:
		return bad("fires in flight %d below the fire batch %d (negative: no bound)", c.FiresInFlight, c.FireBatch)
	case c.RunLease < time.Second:
		return invalid("run-lease", c.RunLease, "want at least 1s (0: the default, 30s)")
	case c.MaxActivePerJob < 1:
		return bad("max active runs per job %d below 1", c.MaxActivePerJob)
	case c.BackfillActive < 1:
		return bad("active backfilled runs per job %d below 1", c.BackfillActive)
	case math.IsNaN(c.BackfillRate) || math.IsInf(c.BackfillRate, 0):
		return invalid("backfill-rate", c.BackfillRate, "want a number of runs a second (negative: no bound)")
	case c.HistoryMaxRuns < 1 || c.HistoryMaxRuns > api.MaxHistoryRuns:
		return invalid("history-max-runs", c.HistoryMaxRuns, "want 1 to %d (0: the default, 100)", api.MaxHistoryRuns)
	case c.HistoryFloor < 1 || c.HistoryFloor > api.MaxHistoryRuns:
		return invalid("history-floor", c.HistoryFloor, "want 1 to %d (0: the default, %d)", api.MaxHistoryRuns, DefaultHistoryFloor)
	case c.HistoryBudget < int64(c.Partitions)*minBudgetShare:
		return invalid("history-budget", settings.FormatBytes(c.HistoryBudget), "want at least %s per partition, %s for %d partitions", settings.FormatBytes(minBudgetShare), settings.FormatBytes(int64(c.Partitions)*minBudgetShare), c.Partitions)
	case c.MaxRunBytes < store.MinMaxRunBytes || c.MaxRunBytes > maxRunBytes:
		return bad("run document budget %d bytes outside %d..%d", c.MaxRunBytes, store.MinMaxRunBytes, maxRunBytes)
	case c.RequestTimeout < 0:
		return bad("request timeout %v is negative", c.RequestTimeout)
	case c.CommitLatencyTarget >= c.RequestTimeout:
		return bad("commit latency target %v must be below the request timeout %v (negative: none)", c.CommitLatencyTarget, c.RequestTimeout)
	}
	if err := c.LiveOutput.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
