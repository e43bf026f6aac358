package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// The checker is a pure function of what the harness recorded (Input): it
// reads no clock and does no I/O, so each of its rules is tested on
// hand-made histories (check_test.go).

// Slack around the instants the checker compares with scheduled times.
const (
	// requiredSlack: a scheduled time must have fired if it lies at least
	// this far inside the span in which its job's spec asked for it
	// (after an update, before an update, delete or pause): the owner sees
	// spec changes through a watch, a few milliseconds late.
	requiredSlack = time.Second
	// allowedSlack: a fire is unexpected if its time lies further than
	// this outside every span in which the spec asked for it.
	allowedSlack = 2 * time.Second
	// windowSlack widens a fault's window on both sides when deciding
	// whether a missed fire is allowed.
	windowSlack = time.Second
	// attributionLead: a scheduled time belongs to a fault from this long
	// before its injection (attempts in flight when it struck) until its
	// recovery plus the misfire grace.
	attributionLead = 3 * time.Second
	// deadWorkerSlack: a worker's report accepted later than this after
	// the worker's process ended is a report no live process sent.
	deadWorkerSlack = 2 * time.Second
	// earlySlack: a run created before its scheduled time by more than
	// the clock offset of the member that fired it, plus this, was fired
	// early. Every process reads one machine's clock, and the history
	// sees a creation after it happened, so any margin is generous.
	earlySlack = 50 * time.Millisecond
	// skewSettle: a member's clock offset may still show in its fires
	// this long after it was undone (the member reads its offset file
	// every 100ms; a fire decided before may be committed later).
	skewSettle = 2 * time.Second
)

// Input is everything the checker reads.
type Input struct {
	// Partitions is the cluster's partition count.
	Partitions int
	// Grace is the misfire grace.
	Grace time.Duration
	// End is the end of the checked span: every recurring job was paused
	// before it, every one-off was due well before it.
	End time.Time
	// Faults are the injected faults with their measured recoveries.
	Faults []Fault
	// LeaseLosses are the moments members stopped acting as owners on
	// their own (see leaseLosses), injected or not.
	LeaseLosses []Fault
	// History is the etcd history of specs, runs and owner keys.
	History History
	// Executions are the recorder's executions.
	Executions []Execution
	// Jobs are the workload's records of what the API accepted, and
	// Listed the jobs GET /v1/jobs returned at the end (nil if it failed).
	Jobs   map[string]JobRecord
	Listed map[string]api.Job
	// DeleteRequested is, per deleted job, when the workload sent the
	// delete that was accepted.
	DeleteRequested map[string]time.Time
	// Workers are the worker incarnations' lifetimes, with their labels
	// and credentials, by worker ID.
	Workers map[string]WorkerLife
	// Bounds are the recoveries the fleet promises per fault kind (see
	// Config.bounds); the report shows each kind's next to its measured
	// failovers, with how many exceeded it. A kind without one promises
	// none.
	Bounds map[Kind]time.Duration `json:",omitempty"`
	// Credentials are the worker credentials' worker label selectors
	// (what a worker holding one may have as labels), by credential ID.
	Credentials map[string]string
	// Noisy is what the noisy tenant did (nil: the run had none).
	Noisy *NoisyStats `json:",omitempty"`
	// Limits are the workload's limit keys and the keys its jobs name
	// (nil: the run had none), and LimitsHeld the slots still held, by
	// key, once the fleet had been quiet for a run lease and a worker
	// registration TTL.
	Limits     *LimitSpec                   `json:",omitempty"`
	LimitsHeld map[string][]api.LimitHolder `json:",omitempty"`
}

// KindStats are the checker's figures for the scheduled times attributed
// to one fault kind (or to Steady, or to all: the total).
type KindStats struct {
	Kind Kind `json:"kind"`
	// Injected is the number of faults of this kind.
	Injected int `json:"injected"`
	// FiresExpected counts the scheduled times that had to fire.
	FiresExpected int `json:"fires_expected"`
	// FiresRecorded counts the runs created (fires), expected or not.
	FiresRecorded int `json:"fires_recorded"`
	// FiresExecuted counts the fires the recorder saw succeed at least
	// once.
	FiresExecuted int `json:"fires_executed"`
	// MissedAllowed counts expected times that did not fire, inside a
	// fault's window, for jobs whose misfire policy lets them be skipped.
	MissedAllowed int `json:"missed_allowed"`
	// The must-be-zero counts.
	Missed               int `json:"missed"`
	DuplicateFires       int `json:"duplicate_fires"`
	DuplicateExecutions  int `json:"duplicate_executions"`
	StaleReportsAccepted int `json:"stale_reports_accepted"`
	UnexpectedFires      int `json:"unexpected_fires"`
	// FiredEarly counts runs created before their scheduled time by more
	// than the clock offset injected into the member that fired them.
	FiredEarly int `json:"fired_early"`
	// MaxLag is the longest fire lag: from the scheduled time to the
	// run's creation, as the history saw it (real time, whatever the
	// clock of the member that fired it said).
	MaxLag time.Duration `json:"max_lag_ns"`
	// MaxEarly is how early the earliest fire was (allowed by a clock
	// offset or not), 0 if none was early.
	MaxEarly time.Duration `json:"max_early_ns"`
	// Failovers are the measured recoveries of the faults of this kind.
	Failovers   int           `json:"failovers"`
	FailoverP50 time.Duration `json:"failover_p50_ns"`
	FailoverMax time.Duration `json:"failover_max_ns"`
	// Bound is the recovery promised for this kind (Input.Bounds), 0 if
	// none; OverBound counts its faults that recovered later than it, or
	// not at all. Not a violation by itself: a loaded machine can be
	// late; the must-be-zero counts say whether anything was lost.
	Bound     time.Duration `json:"bound_ns,omitempty"`
	OverBound int           `json:"over_bound,omitempty"`
}

func (k *KindStats) add(o KindStats) {
	k.Injected += o.Injected
	k.FiresExpected += o.FiresExpected
	k.FiresRecorded += o.FiresRecorded
	k.FiresExecuted += o.FiresExecuted
	k.MissedAllowed += o.MissedAllowed
	k.Missed += o.Missed
	k.DuplicateFires += o.DuplicateFires
	k.DuplicateExecutions += o.DuplicateExecutions
	k.StaleReportsAccepted += o.StaleReportsAccepted
	k.UnexpectedFires += o.UnexpectedFires
	k.FiredEarly += o.FiredEarly
	k.MaxLag = max(k.MaxLag, o.MaxLag)
	k.MaxEarly = max(k.MaxEarly, o.MaxEarly)
}

// Global are the checks that are not attributed to a fault kind.
type Global struct {
	Jobs         int `json:"jobs"`
	JobsDeleted  int `json:"jobs_deleted"`
	JobUpdates   int `json:"job_updates"`
	Executions   int `json:"executions"`
	OwnerEvents  int `json:"owner_events"`
	Refences     int `json:"owner_refences"`         // owner keys re-fenced by their owner (History.OwnerRefences)
	RunsRetried  int `json:"runs_retried"`           // runs with more than one attempt
	RunsRepeated int `json:"runs_executed_repeated"` // runs the recorder saw succeed more than once (at least once delivery)
	// RunsRepeatedWorkerAlive counts those of RunsRepeated whose first
	// successful execution's worker lived on for more than 2s after it:
	// the report of a success was lost without the worker dying.
	RunsRepeatedWorkerAlive int `json:"runs_executed_repeated_worker_alive"`
	// The must-be-zero counts.
	AcceptedJobsMissing int `json:"accepted_jobs_missing"`
	AcceptedWritesLost  int `json:"accepted_writes_lost"`
	OwnerOverlaps       int `json:"owner_overlaps"`
	UnfencedFires       int `json:"unfenced_fires"`
	UnknownRunsExecuted int `json:"unknown_runs_executed"`
	UnrecordedAttempts  int `json:"unrecorded_attempts_executed"`
	// CutOffReportsAccepted counts reports of attempts whose worker a
	// fault had cut off, accepted after a later attempt of the run was
	// handed out (the attempt had been reassigned).
	CutOffReportsAccepted int `json:"cut_off_reports_accepted"`
	// AttemptsMisplaced counts attempts (a run's own or an item's) handed
	// to a worker whose labels the job's placement selector does not
	// match, or whose credential does not allow its labels (or to a
	// worker or credential the harness does not know); AttemptsPlaced
	// counts the attempts checked.
	AttemptsMisplaced  int `json:"attempts_misplaced"`
	AttemptsPlaced     int `json:"attempts_placed"`
	RunsLost           int `json:"runs_lost"`
	RunsUnfinished     int `json:"runs_unfinished"`
	CorruptRuns        int `json:"corrupt_runs"`
	FaultsNotRecovered int `json:"faults_not_recovered"`
	Items              `json:"items"`
	After              After `json:"after"`
	Steps              Steps `json:"steps"`
	// Limits are the figures of limit keys, nil if the run had none.
	Limits *Limits `json:"limits,omitempty"`
}

// Violation is one broken rule, with enough detail to look it up in the
// logs.
type Violation struct {
	Check  string `json:"check"`
	Kind   Kind   `json:"kind,omitempty"`
	Detail string `json:"detail"`
}

// Result is the checker's output.
type Result struct {
	Kinds      []KindStats `json:"kinds"` // every kind injected, then Steady
	Total      KindStats   `json:"total"`
	Global     Global      `json:"global"`
	Violations []Violation `json:"violations"`
	// Truncated counts violations left out of Violations (at most
	// maxViolations per check are listed).
	Truncated int `json:"violations_truncated,omitempty"`
	// Noisy is what the noisy tenant did, if the run had one.
	Noisy *NoisyStats `json:"noisy,omitempty"`
}

// OK reports whether every must-be-zero count is zero.
func (r *Result) OK() bool { return len(r.Violations) == 0 && r.Truncated == 0 }

const maxViolations = 20

// checker holds the state of one Check.
type checker struct {
	in       Input
	stats    map[Kind]*KindStats
	res      Result
	perCheck map[string]int
	faults   []Fault  // injected faults and lease losses outside them, sorted by start
	extra    []Window // windows of lease losses caused by injected faults
}

// Check runs every check over in.
func Check(in Input) Result {
	c := &checker{in: in, stats: map[Kind]*KindStats{}, perCheck: map[string]int{}}
	c.faults = slices.SortedFunc(slices.Values(in.Faults), func(a, b Fault) int { return a.Start.Compare(b.Start) })
	var losses []Fault
	for _, f := range in.LeaseLosses {
		if c.kindOf(f.Start) != Steady {
			c.extra = append(c.extra, f.Windows...) // an effect of an injected fault
		} else {
			losses = append(losses, f)
		}
	}
	c.faults = slices.SortedFunc(slices.Values(append(c.faults, losses...)), func(a, b Fault) int { return a.Start.Compare(b.Start) })
	for _, f := range c.faults {
		c.stat(f.Kind).Injected++
		if f.Recovered.IsZero() {
			c.res.Global.FaultsNotRecovered++
			c.violate("faults_not_recovered", f.Kind, fmt.Sprintf("%s of %s at %s: no recovery within %v (%s)", f.Kind, f.Target, ts(f.Start), recoveryTimeout, f.Err))
		}
	}
	c.failovers()
	execs := c.indexExecutions()
	c.checkSchedules()
	c.checkRuns(execs)
	c.checkExecutions(execs)
	c.checkPlacement()
	c.checkAfter()
	c.checkJobs()
	c.checkNoisy()
	c.checkLimits()
	c.res.Global.OwnerEvents = in.History.OwnerEvents
	c.res.Global.Refences = in.History.OwnerRefences
	for _, o := range in.History.OwnerOverlaps {
		c.res.Global.OwnerOverlaps++
		c.violate("owner_overlaps", "", fmt.Sprintf("partition %d at revision %d: %s", o.Partition, o.Rev, o.Detail))
	}
	c.res.Global.Executions = len(in.Executions)

	for _, k := range append(slices.Clone(AllKinds), LeaseLoss, Steady) {
		if s := c.stats[k]; s != nil && (s.Injected > 0 || s.FiresRecorded > 0 || s.FiresExpected > 0) {
			c.res.Kinds = append(c.res.Kinds, *s)
			c.res.Total.add(*s)
		}
	}
	c.res.Total.Kind = "total"
	var all []time.Duration
	for _, f := range c.faults {
		if !f.Recovered.IsZero() {
			all = append(all, f.Failover)
		}
	}
	c.res.Total.Failovers, c.res.Total.FailoverP50, c.res.Total.FailoverMax = summarize(all)
	return c.res
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000") }

func (c *checker) stat(k Kind) *KindStats {
	s := c.stats[k]
	if s == nil {
		s = &KindStats{Kind: k}
		c.stats[k] = s
	}
	return s
}

func (c *checker) violate(check string, k Kind, detail string) {
	c.perCheck[check]++
	if c.perCheck[check] > maxViolations {
		c.res.Truncated++
		return
	}
	c.res.Violations = append(c.res.Violations, Violation{Check: check, Kind: k, Detail: detail})
}

func summarize(ds []time.Duration) (n int, p50, maxD time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(ds))
	return len(s), s[(len(s)-1)/2], s[len(s)-1]
}

func (c *checker) failovers() {
	by := map[Kind][]time.Duration{}
	for _, f := range c.faults {
		if !f.Recovered.IsZero() {
			by[f.Kind] = append(by[f.Kind], f.Failover)
		}
		if b := c.in.Bounds[f.Kind]; b > 0 {
			s := c.stat(f.Kind)
			s.Bound = b
			if f.Recovered.IsZero() || f.Failover > b {
				s.OverBound++
			}
		}
	}
	for k, ds := range by {
		s := c.stat(k)
		s.Failovers, s.FailoverP50, s.FailoverMax = summarize(ds)
	}
}

// kindOf attributes scheduled time t to the latest fault whose span
// [start - attributionLead, recovered + grace + windowSlack] holds it (the
// spans of consecutive faults can overlap), or to Steady.
func (c *checker) kindOf(t time.Time) Kind {
	k := Steady
	for _, f := range c.faults {
		end := f.Recovered
		if end.IsZero() {
			end = f.Start.Add(recoveryTimeout)
		}
		if !t.Before(f.Start.Add(-attributionLead)) && !t.After(end.Add(c.in.Grace+windowSlack)) {
			k = f.Kind
		}
	}
	return k
}

// windows returns the fault windows that affect partition p.
func (c *checker) windows(p int) []Window {
	var out []Window
	add := func(w Window) {
		if w.End.IsZero() {
			w.End = w.Start.Add(recoveryTimeout)
		}
		if w.Partitions == nil || slices.Contains(w.Partitions, p) {
			out = append(out, w)
		}
	}
	for _, f := range c.faults {
		for _, w := range f.Windows {
			add(w)
		}
	}
	for _, w := range c.extra {
		add(w)
	}
	return out
}

// mayMiss reports whether scheduled time t of partition p may have been
// skipped by a misfire policy: some fault window of p (windows that
// overlap joined into one, mergeWindows) began before t
// (less windowSlack) and ended more than the grace after t (plus
// windowSlack). Only then can t have been more than the grace old when
// the partition's next owner first looked at it. A window of a clock
// offset (Skew) allows it for every time it holds if the offset is about
// the grace or more: ahead, the owner's timers still wake at real time, when
// its clock says the time is the offset old; behind, the times it had not
// fired when its clock is set right are as old as the offset.
//
// Faults compound: a member whose clock is behind looks at a time of its
// window only when its clock reaches it, the offset late (its timers run
// on real time, so setting the clock right does not wake them sooner). If
// another window of the partition holds that later instant, the time
// counts as seen then, and the grace is still measured from the time
// itself.
func (c *checker) mayMiss(p int, t time.Time) bool {
	ws := c.windows(p)
	seen := []time.Time{t}
	for _, w := range ws {
		if w.Skew < 0 && within(t, w) {
			seen = append(seen, t.Add(-w.Skew))
		}
	}
	var outages []Window
	for _, w := range ws {
		if w.Skew != 0 {
			if within(t, w) && max(w.Skew, -w.Skew)+windowSlack >= c.in.Grace {
				return true
			}
			continue
		}
		outages = append(outages, w)
	}
	for _, w := range mergeWindows(outages) {
		if t.Add(c.in.Grace).After(w.End.Add(windowSlack)) {
			continue
		}
		for _, at := range seen {
			if !at.Before(w.Start.Add(-windowSlack)) {
				return true
			}
		}
	}
	return false
}

// mergeWindows returns windows ws with those that overlap once widened
// by windowSlack joined into one, ordered by start. Two faults in a row
// are one outage when the second strikes before the fleet is back from
// the first: the first's window ends when the nemesis saw the fleet
// healthy, which can be before its effects (a member whose lease
// renewals went to the cut-off etcd member fences itself a TTL later)
// have passed, so a time missed from inside the first until after the
// second is as missable as one inside a single long fault.
func mergeWindows(ws []Window) []Window {
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b Window) int { return a.Start.Compare(b.Start) })
	var out []Window
	for _, w := range ws {
		if n := len(out); n > 0 && !w.Start.Add(-windowSlack).After(out[n-1].End.Add(windowSlack)) {
			out[n-1].End = maxTime(out[n-1].End, w.End)
			continue
		}
		out = append(out, w)
	}
	return out
}

// within reports whether instant t lies in window w, widened by
// windowSlack.
func within(t time.Time, w Window) bool {
	return !t.Before(w.Start.Add(-windowSlack)) && !t.After(w.End.Add(windowSlack))
}

// inWindow returns the window of partition p that holds instant t
// (widened by windowSlack), if any.
func (c *checker) inWindow(p int, t time.Time) (Window, bool) {
	for _, w := range c.windows(p) {
		if !t.Before(w.Start.Add(-windowSlack)) && !t.After(w.End.Add(windowSlack)) {
			return w, true
		}
	}
	return Window{}, false
}

// skewAhead returns how far ahead the nemesis had set member's clock at
// instant t (0 if not ahead): the most a fire of that member may be
// early.
func (c *checker) skewAhead(member string, t time.Time) time.Duration {
	var ahead time.Duration
	for _, f := range c.in.Faults {
		if f.Kind != ClockOffset || f.Target != member || f.ClockOffset <= 0 {
			continue
		}
		end := f.Healed
		if end.IsZero() {
			end = f.Start.Add(recoveryTimeout)
		}
		if !t.Before(f.Start) && !t.After(end.Add(skewSettle)) {
			ahead = max(ahead, f.ClockOffset)
		}
	}
	return ahead
}

// cutOff returns the fault that cut worker off from some orchestrator at
// some instant in [from, to], if any.
func (c *checker) cutOff(worker string, from, to time.Time) (Fault, bool) {
	for _, f := range c.in.Faults {
		if !slices.Contains(f.CutWorkers, worker) {
			continue
		}
		end := f.Healed
		if end.IsZero() {
			end = f.Start.Add(recoveryTimeout)
		}
		if !f.Start.After(to) && !end.Before(from) {
			return f, true
		}
	}
	return Fault{}, false
}

// segment is a span of a job's life under one schedule.
type segment struct {
	from, to time.Time // to is zero if the span lasts to the end
	first    bool      // starts at the job's creation
	// initial is, for the first span, the job's InitialLast: its times
	// strictly after it fire (a one-off's run_at may precede its
	// creation).
	initial time.Time
	active  bool // not paused
	sched   schedule.Schedule
	oneOff  *time.Time
	misfire api.MisfirePolicy
}

// segments splits a job's spec history into spans of one schedule. Spec
// writes that change neither the schedule nor the paused flag (payload
// updates) do not start a new span.
func (c *checker) segments(id string, versions []SpecVersion) []segment {
	var segs []segment
	var cur *api.Job
	closeAt := func(t time.Time) {
		if len(segs) > 0 && segs[len(segs)-1].to.IsZero() {
			segs[len(segs)-1].to = t
		}
	}
	for _, v := range versions {
		if v.Deleted {
			at := v.Seen
			if req, ok := c.in.DeleteRequested[id]; ok && req.Before(at) {
				at = req
			}
			closeAt(at)
			cur = nil
			continue
		}
		j := v.Job
		if cur != nil && cur.CreatedAt.Equal(j.CreatedAt) && cur.Schedule == j.Schedule && cur.Paused == j.Paused &&
			equalTimes(cur.RunAt, j.RunAt) && cur.Timezone == j.Timezone {
			cur = &j
			continue
		}
		from := j.UpdatedAt
		first := cur == nil
		if first {
			from = j.CreatedAt
		}
		closeAt(from)
		sched, err := j.ParseSchedule()
		if err != nil {
			continue
		}
		segs = append(segs, segment{from: from, first: first, initial: j.InitialLast(), active: !j.Paused, sched: sched, oneOff: j.RunAt, misfire: j.MisfirePolicy})
		cur = &j
	}
	return segs
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// times returns the scheduled times of s in [lo, hi] (lo exclusive if
// open).
func times(s schedule.Schedule, lo, hi time.Time, open bool) []time.Time {
	var out []time.Time
	start := lo.Add(-time.Nanosecond)
	if open {
		start = lo
	}
	for t := s.Next(start); !t.IsZero() && !t.After(hi); t = s.Next(t) {
		out = append(out, t)
		if len(out) > 1_000_000 {
			break
		}
	}
	return out
}

// checkSchedules derives, for every job, the scheduled times that had to
// fire and those that may, and compares them with the runs created.
func (c *checker) checkSchedules() {
	created := map[string]bool{} // run keys created at least once
	for key, h := range c.in.History.Runs {
		if len(h.Creates) > 0 {
			created[key] = true
		}
	}
	byJob := map[string][]*RunHistory{}
	for _, h := range c.in.History.Runs {
		byJob[h.JobID] = append(byJob[h.JobID], h)
	}
	for _, id := range slices.Sorted(maps.Keys(c.in.History.Specs)) {
		if noisy(id) {
			continue
		}
		versions := c.in.History.Specs[id]
		p := shard.Partition(id, c.in.Partitions)
		segs := c.segments(id, versions)
		// Keyed by Unix nanoseconds: time.Time values of one instant can
		// differ as map keys (location, monotonic reading).
		required := map[int64]api.MisfirePolicy{}
		allowed := map[int64]bool{}
		oneOff := false
		for i, sg := range segs {
			if !sg.active {
				continue
			}
			oneOff = oneOff || sg.oneOff != nil
			to := sg.to
			if to.IsZero() {
				to = c.in.End
			}
			// Allowed: the span, widened; at a boundary inside a fault
			// window the next owner may re-plan from before the fault.
			alo, ahi := sg.from.Add(-allowedSlack), to.Add(allowedSlack)
			if w, ok := c.inWindow(p, sg.from); ok && !sg.first {
				alo = minTime(alo, w.Start.Add(-allowedSlack))
			}
			// A member whose clock is ahead fires a span's times up to
			// its offset before the span ends, and one whose clock is
			// behind plans a new span from its idea of now.
			for _, w := range c.windows(p) {
				if w.Skew > 0 && !sg.to.IsZero() && within(sg.to, w) {
					ahi = maxTime(ahi, sg.to.Add(w.Skew+allowedSlack))
				}
				if w.Skew < 0 && !sg.first && within(sg.from, w) {
					alo = minTime(alo, sg.from.Add(w.Skew-allowedSlack))
				}
			}
			if sg.first {
				alo = sg.initial.Add(time.Nanosecond)
			}
			for _, t := range times(sg.sched, alo, ahi, false) {
				allowed[t.UnixNano()] = true
			}
			// Required: the span, narrowed; a span ending inside a fault
			// window is required only up to the window's start (its
			// remaining times may have been planned by nobody).
			rlo, hi := sg.from.Add(requiredSlack), to.Add(-requiredSlack)
			open := false
			if sg.first {
				rlo, open = sg.initial, true
			}
			if !sg.to.IsZero() {
				if w, ok := c.inWindow(p, sg.to); ok {
					hi = minTime(hi, w.Start.Add(-windowSlack))
				}
			}
			if i == len(segs)-1 && sg.to.IsZero() {
				hi = c.in.End.Add(-requiredSlack)
			}
			for _, t := range times(sg.sched, rlo, hi, open) {
				required[t.UnixNano()] = sg.misfire
			}
		}
		for _, ns := range slices.Sorted(maps.Keys(required)) {
			t := time.Unix(0, ns).UTC()
			k := c.kindOf(t)
			s := c.stat(k)
			s.FiresExpected++
			if created[c.runKey(p, id, t)] {
				continue
			}
			policy := required[ns]
			if !oneOff && policy != api.MisfireRunAll && c.mayMiss(p, t) {
				s.MissedAllowed++
				continue
			}
			if !oneOff && (policy == "" || policy == api.MisfireRunOnce) && c.collapsed(byJob[id], t) {
				s.MissedAllowed++ // run_once: a later time fired on time in the same decision
				continue
			}
			s.Missed++
			c.violate("missed", k, fmt.Sprintf("job %q (partition %d, misfire %q): scheduled time %s never fired", id, p, cmp.Or(string(policy), "run_once"), ts(t)))
		}
		for _, h := range byJob[id] {
			if len(h.Creates) == 0 || len(h.Versions) > 0 && h.Versions[0].Run.CausedBy != nil {
				continue // a run an upstream run's end fired: checkAfter's
			}
			why := ""
			if !allowed[h.At.UnixNano()] {
				why = "a time its spec never asked for"
			}
			for _, cr := range h.Creates {
				// The job's spec when the run was created: a job deleted
				// and created again starts afresh, so no run of the new
				// job may be for a time before its creation.
				i, _ := slices.BinarySearchFunc(versions, cr.Rev, func(v SpecVersion, rev int64) int { return cmp.Compare(v.Rev, rev) })
				if i > 0 && !versions[i-1].Deleted && !h.At.After(versions[i-1].Job.InitialLast()) {
					why = fmt.Sprintf("a time before the creation (%s) of the job it was fired for", ts(versions[i-1].Job.CreatedAt))
				}
			}
			if why == "" {
				continue
			}
			k := c.kindOf(h.At)
			c.stat(k).UnexpectedFires++
			c.violate("unexpected_fires", k, fmt.Sprintf("job %q: run %s fired at revision %d, %s", id, h.Key, h.Creates[len(h.Creates)-1].Rev, why))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// collapsed reports whether scheduled time t of a run_once job, never
// fired, was late by more than the grace when the job's next run fired,
// whose own time was within it: run_once then fires the time on time and
// skips the missed ones (schedule.RunOnce), whatever outage made t late.
func (c *checker) collapsed(runs []*RunHistory, t time.Time) bool {
	var next *RunHistory
	for _, h := range runs {
		if len(h.Creates) == 0 || len(h.Versions) == 0 || !h.At.After(t) || h.Versions[0].Run.CausedBy != nil {
			continue
		}
		if next == nil || h.At.Before(next.At) {
			next = h
		}
	}
	if next == nil {
		return false
	}
	fired := next.Versions[0].Run.FiredAt
	return fired.Sub(t) > c.in.Grace && fired.Sub(next.At) <= c.in.Grace+windowSlack
}

func (c *checker) runKey(p int, id string, t time.Time) string {
	return c.in.History.nsKeys().Run(p, id, t)
}

// nsKeys returns the key layout of the history's namespace, derived from
// a run key.
func (h History) nsKeys() store.Keys {
	for key := range h.Runs {
		if i := strings.Index(key, "runs/"); i >= 0 {
			return store.Keys{NS: key[:i]}
		}
	}
	return store.Keys{}
}

// execKey identifies one attempt of one run's chain: the run's own (item
// noItem) or one of its items.
type execKey struct {
	run     string
	item    int
	attempt int
}

// noItem is the item of a run's own chain (a run of one item).
const noItem = -1

func (c *checker) indexExecutions() map[execKey][]Execution {
	out := map[execKey][]Execution{}
	for _, e := range c.in.Executions {
		item := noItem
		if e.Item != nil {
			item = *e.Item
		}
		k := execKey{e.Run, item, e.Attempt}
		out[k] = append(out[k], e)
	}
	return out
}

// chainAttempts returns the attempts of chain item of r: its own, or its
// item's (none if it has no such item).
func chainAttempts(r api.Run, item int) []api.Attempt {
	if item == noItem {
		return r.Attempts
	}
	if item < 0 || item >= len(r.Items) {
		return nil
	}
	return r.Items[item].Attempts
}

// chainName names a chain in violations: "run X", "run X item 3".
func chainName(runID string, item int) string {
	if item == noItem {
		return "run " + runID
	}
	return fmt.Sprintf("run %s item %d", runID, item)
}

// handedOver reports whether h is a run fired by a hand-over from an
// upstream run (caused_by): its scheduled time is the upstream run's.
func handedOver(h *RunHistory) bool {
	return len(h.Versions) > 0 && h.Versions[0].Run.CausedBy != nil
}

// orchestratorReasons are the errors an orchestrator itself records when
// it ends an attempt; every other attempt result is a worker's report.
var orchestratorReasons = []string{"run lease expired", "timed out: still running", "cancelled: "}

func workerReported(a api.Attempt) bool {
	for _, r := range orchestratorReasons {
		if strings.HasPrefix(a.Error, r) {
			return false
		}
	}
	// The worker lost with its registration (`worker "w-1" lost: ...`).
	return !strings.HasPrefix(a.Error, "worker ") || !strings.Contains(a.Error, " lost: ")
}

// checkRuns checks every run key's history: created once, by the owner of
// the partition at that revision; attempts only ever appended and
// finished, never rewritten once finished, never two running at once;
// success only for an execution the recorder answered 2xx; no report
// accepted from a worker that no longer ran; every run final at the end
// and executed.
func (c *checker) checkRuns(execs map[execKey][]Execution) {
	// A run deleted with its job is not expected to finish or run: its job
	// was deleted after the run was created, or the run's key was deleted
	// (only a deleted job's runs are deleted before they are final) after
	// a deletion of its job (an owner may fire a time of the deleted job
	// before its watch tells it of the deletion).
	deletions := map[string][]int64{}
	for id, vs := range c.in.History.Specs {
		for _, v := range vs {
			if v.Deleted {
				deletions[id] = append(deletions[id], v.Rev)
			}
		}
	}
	deletedWithJob := func(h *RunHistory) bool {
		created := h.Creates[len(h.Creates)-1].Rev
		return slices.ContainsFunc(deletions[h.JobID], func(rev int64) bool {
			return rev > created || (h.Deleted && rev < h.DeletedRev)
		})
	}
	for _, key := range slices.Sorted(maps.Keys(c.in.History.Runs)) {
		h := c.in.History.Runs[key]
		if noisy(h.JobID) {
			continue
		}
		k := c.kindOf(h.At)
		s := c.stat(k)
		if len(h.Corrupt) > 0 {
			c.res.Global.CorruptRuns++
			c.violate("corrupt_runs", k, fmt.Sprintf("run %s: %s", key, strings.Join(h.Corrupt, "; ")))
		}
		if len(h.Creates) == 0 {
			continue // only seen deleted: fired before the history began
		}
		s.FiresRecorded++
		if len(h.Creates) > 1 {
			s.DuplicateFires += len(h.Creates) - 1
			c.violate("duplicate_fires", k, fmt.Sprintf("run %s created %d times (revisions %v)", key, len(h.Creates), revs(h.Creates)))
		}
		for _, cr := range h.Creates {
			if cr.Epoch != cr.KeyEpoch || cr.Owner != cr.KeyOwner {
				c.res.Global.UnfencedFires++
				c.violate("unfenced_fires", k, fmt.Sprintf("run %s created at revision %d by %s with epoch %d while the owner key said %q epoch %d", key, cr.Rev, cr.Owner, cr.Epoch, cr.KeyOwner, cr.KeyEpoch))
			}
		}
		for _, cr := range h.Creates {
			if cr.Seen.IsZero() { // not recorded: the run document's own word
				if len(h.Versions) > 0 {
					first := h.Versions[0].Run
					s.MaxLag = max(s.MaxLag, first.FiredAt.Sub(first.ScheduledAt))
				}
				continue
			}
			s.MaxLag = max(s.MaxLag, cr.Seen.Sub(h.At))
			early := h.At.Sub(cr.Seen)
			if early <= 0 || handedOver(h) {
				// A run handed over from an upstream run takes that run's
				// scheduled time: it may be created before it once the
				// upstream run fired early (on a clock ahead) and ended.
				// checkAfter checks it against its cause instead.
				continue
			}
			s.MaxEarly = max(s.MaxEarly, early)
			if allowed := c.skewAhead(cr.Owner, cr.Seen); early > allowed+earlySlack {
				s.FiredEarly++
				c.violate("fired_early", k, fmt.Sprintf("run %s created by %s at %s, %v before its time (clock offset of %s then: %v)", key, cr.Owner, ts(cr.Seen), early.Round(time.Millisecond), cr.Owner, allowed))
			}
		}
		runID := store.RunID(h.JobID, h.At)
		if last := h.Last(); len(last.Items) > 0 || last.Broadcast {
			c.checkItemRun(h, runID, k, execs, deletedWithJob(h))
			continue
		}
		c.checkAttempts(h, runID, noItem, k, execs)

		last := h.Last()
		if len(last.Attempts) > 1 {
			c.res.Global.RunsRetried++
		}
		succeeded := 0
		var first *Execution
		for a := 1; a <= len(last.Attempts); a++ {
			for _, e := range execs[execKey{runID, noItem, a}] {
				if e.Succeeded() {
					succeeded++
					if first == nil {
						first = &e
					}
				}
			}
		}
		if succeeded > 0 {
			s.FiresExecuted++
		}
		if succeeded > 1 {
			c.res.Global.RunsRepeated++
			w := last.Attempts[first.Attempt-1].Worker
			if life, ok := c.in.Workers[w]; ok && (life.Ended.IsZero() || life.Ended.After(first.End.Add(deadWorkerSlack))) {
				c.res.Global.RunsRepeatedWorkerAlive++
			}
		}
		if deletedWithJob(h) || last.Status == api.RunSkipped || last.Status == api.RunCancelled {
			continue // nothing was owed: never run, or stopped on request
		}
		switch {
		case !last.Status.Final():
			c.res.Global.RunsUnfinished++
			c.violate("runs_unfinished", k, fmt.Sprintf("run %s still %s at the end (%d attempts)", runID, last.Status, len(last.Attempts)))
		case last.Status == api.RunDead || succeeded == 0:
			c.res.Global.RunsLost++
			c.violate("runs_lost", k, fmt.Sprintf("run %s ended %s with no successful execution recorded (%d attempts: %s)", runID, last.Status, len(last.Attempts), attemptSummary(last.Attempts)))
		}
	}
}

func revs(cs []RunCreate) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Rev
	}
	return out
}

func attemptSummary(as []api.Attempt) string {
	var parts []string
	for _, a := range as {
		res := "ok"
		if a.Error != "" {
			res = a.Error
		}
		parts = append(parts, fmt.Sprintf("#%d %s: %s", a.Attempt, a.Worker, res))
	}
	return strings.Join(parts, "; ")
}

func sameAttempt(a, b api.Attempt) bool {
	return a.Attempt == b.Attempt && a.Worker == b.Worker && a.StartedAt.Equal(b.StartedAt) &&
		a.FinishedAt.Equal(b.FinishedAt) && a.Error == b.Error
}

// checkAttempts replays the versions of one run document, for the
// attempt chain item of it (noItem: the run's own).
func (c *checker) checkAttempts(h *RunHistory, runID string, item int, k Kind, execs map[execKey][]Execution) {
	s := c.stat(k)
	finished := map[int]api.Attempt{} // first finished form of each attempt
	type seenAt struct {
		rev  int64
		seen time.Time
	}
	appeared := map[int]seenAt{} // first version listing each attempt
	done := map[int]seenAt{}     // first version with each attempt finished
	// Reports of attempts accepted after the next attempt was handed
	// out: the first such form of each attempt, and where.
	type lateReport struct {
		a  api.Attempt
		at seenAt
	}
	form := map[int]api.Attempt{} // each attempt's form in the previous version
	late := map[int]lateReport{}
	stale := func(detail string) {
		s.StaleReportsAccepted++
		c.violate("stale_reports_accepted", k, fmt.Sprintf("%s: %s", chainName(runID, item), detail))
	}
	for _, v := range h.Versions {
		as := chainAttempts(v.Run, item)
		for i, a := range as {
			n := i + 1
			if _, ok := appeared[n]; !ok {
				appeared[n] = seenAt{v.Rev, v.Seen}
			}
			if prev, ok := form[n]; (!ok || !sameAttempt(prev, a)) && !a.FinishedAt.IsZero() && workerReported(a) {
				if next, ok := appeared[n+1]; ok && next.rev < v.Rev {
					if _, seen := late[n]; !seen {
						late[n] = lateReport{a, seenAt{v.Rev, v.Seen}}
					}
				}
			}
			form[n] = a
			if a.Attempt != n {
				stale(fmt.Sprintf("revision %d lists attempt %d at position %d", v.Rev, a.Attempt, n))
				continue
			}
			if f, ok := finished[n]; ok {
				if !sameAttempt(f, a) {
					stale(fmt.Sprintf("finished attempt %d (%s, %q) rewritten at revision %d as (%s, finished %s, %q)", n, f.Worker, f.Error, v.Rev, a.Worker, ts(a.FinishedAt), a.Error))
				}
				continue
			}
			if !a.FinishedAt.IsZero() {
				finished[n] = a
				done[n] = seenAt{v.Rev, v.Seen}
			}
			if a.FinishedAt.IsZero() && i < len(as)-1 {
				stale(fmt.Sprintf("revision %d has attempt %d unfinished while attempt %d exists", v.Rev, n, len(as)))
			}
		}
		for n := range finished {
			if n > len(as) {
				stale(fmt.Sprintf("finished attempt %d dropped at revision %d", n, v.Rev))
				delete(finished, n)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(finished)) {
		a := finished[n]
		if a.Error == "" {
			ok := false
			for _, e := range execs[execKey{runID, item, n}] {
				ok = ok || e.Succeeded()
			}
			if !ok {
				stale(fmt.Sprintf("attempt %d by %s recorded as succeeded, but the recorder answered no execution of it with 2xx", n, a.Worker))
			}
		}
		if !workerReported(a) {
			continue
		}
		// When the report was accepted: when the history saw it (the
		// orchestrator's own clock may have been off).
		at := done[n].seen
		if at.IsZero() {
			at = a.FinishedAt
		}
		if life, ok := c.in.Workers[a.Worker]; ok && !life.Ended.IsZero() && at.After(life.Ended.Add(deadWorkerSlack)) {
			stale(fmt.Sprintf("attempt %d's report (%q) accepted at %s, %v after worker %s's process ended", n, a.Error, ts(at), at.Sub(life.Ended).Round(time.Millisecond), a.Worker))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(late)) {
		l := late[n]
		if f, cut := c.cutOff(l.a.Worker, appeared[n].seen, l.at.seen); cut {
			c.res.Global.CutOffReportsAccepted++
			c.violate("cut_off_reports_accepted", f.Kind, fmt.Sprintf("%s: attempt %d's report (%q) by %s, cut off by %s at %s, accepted at revision %d, after attempt %d was handed out at revision %d",
				chainName(runID, item), n, l.a.Error, l.a.Worker, f.Kind, ts(f.Start), l.at.rev, n+1, appeared[n+1].rev))
		}
	}
}

// checkExecutions checks the recorder's log against the history: every
// execution is of a run that was fired, with an attempt the store
// recorded before it ran, and no attempt ran twice.
func (c *checker) checkExecutions(execs map[execKey][]Execution) {
	keys := c.in.History.nsKeys()
	attemptsSeen := map[string]map[[2]int]bool{} // by run key: (item, attempt)
	for key, h := range c.in.History.Runs {
		m := map[[2]int]bool{}
		for _, v := range h.Versions {
			for _, a := range v.Run.Attempts {
				m[[2]int{noItem, a.Attempt}] = true
			}
			for i, it := range v.Run.Items {
				for _, a := range it.Attempts {
					m[[2]int{i, a.Attempt}] = true
				}
			}
		}
		attemptsSeen[key] = m
	}
	for _, ek := range slices.SortedFunc(maps.Keys(execs), func(a, b execKey) int {
		return cmp.Or(strings.Compare(a.run, b.run), a.item-b.item, a.attempt-b.attempt)
	}) {
		es := execs[ek]
		id, at, err := store.ParseRunID(ek.run)
		if err != nil {
			c.res.Global.UnknownRunsExecuted++
			c.violate("unknown_runs_executed", Steady, fmt.Sprintf("recorder saw run ID %q, which is no run ID", ek.run))
			continue
		}
		k := c.kindOf(at)
		key := keys.Run(shard.Partition(id, c.in.Partitions), id, at)
		h := c.in.History.Runs[key]
		if h == nil || len(h.Creates) == 0 {
			c.res.Global.UnknownRunsExecuted++
			c.violate("unknown_runs_executed", k, fmt.Sprintf("recorder saw run %s attempt %d, a run the store never recorded", ek.run, ek.attempt))
			continue
		}
		if !attemptsSeen[key][[2]int{ek.item, ek.attempt}] {
			c.res.Global.UnrecordedAttempts++
			c.violate("unrecorded_attempts_executed", k, fmt.Sprintf("recorder saw %s attempt %d, an attempt the store never recorded", chainName(ek.run, ek.item), ek.attempt))
		}
		if len(es) > 1 {
			c.stat(k).DuplicateExecutions += len(es) - 1
			c.violate("duplicate_executions", k, fmt.Sprintf("%s attempt %d executed %d times (starts %s)", chainName(ek.run, ek.item), ek.attempt, len(es), execStarts(es)))
		}
		for _, e := range es {
			if e.Job != id || e.ScheduledAt != api.FormatTime(at) {
				c.res.Global.CorruptRuns++
				c.violate("corrupt_runs", k, fmt.Sprintf("run %s executed with job %q scheduled at %q", ek.run, e.Job, e.ScheduledAt))
			}
		}
	}
}

func execStarts(es []Execution) string {
	var out []string
	for _, e := range es {
		out = append(out, ts(e.Start))
	}
	return strings.Join(out, ", ")
}

// checkJobs compares what the API accepted with the jobs listed at the
// end: every accepted job is there with its last accepted payload, every
// deleted one is gone.
func (c *checker) checkJobs() {
	g := &c.res.Global
	for _, id := range slices.Sorted(maps.Keys(c.in.Jobs)) {
		r := c.in.Jobs[id]
		if r.Accepted {
			g.Jobs++
		}
		if r.Deleted {
			g.JobsDeleted++
		}
		if !r.Accepted || r.Uncertain || c.in.Listed == nil {
			continue
		}
		j, listed := c.in.Listed[id]
		switch {
		case r.Deleted && listed:
			g.AcceptedWritesLost++
			c.violate("accepted_writes_lost", "", fmt.Sprintf("job %q: deleted (204), but still listed", id))
		case !r.Deleted && !listed:
			g.AcceptedJobsMissing++
			c.violate("accepted_jobs_missing", "", fmt.Sprintf("job %q: created (201), never deleted, but not listed at the end", id))
		case !r.Deleted && payloadVersion(j.Payload) != r.Version:
			g.AcceptedWritesLost++
			c.violate("accepted_writes_lost", "", fmt.Sprintf("job %q: last accepted write has payload version %d, listed job has %s", id, r.Version, strconv.Quote(string(j.Payload))))
		}
	}
	if c.in.Listed == nil {
		c.violate("accepted_jobs_missing", "", "the job list could not be read at the end")
	}
}

// noisy reports whether job id is the noisy tenant's, which the fire
// checks leave out.
func noisy(id string) bool { return strings.HasPrefix(id, noisyPrefix) }

// checkNoisy checks what the noisy tenant saw: etcd never refused a write
// for lack of space (no credential but an admin's can fill it), and the
// flood got writes done (else the run did not test that). That the other
// tenants' jobs kept firing is what the other checks verify.
func (c *checker) checkNoisy() {
	n := c.in.Noisy
	if n == nil {
		return
	}
	c.res.Noisy = n
	if n.NoSpace > 0 {
		c.violate("noisy_tenant_filled_etcd", "", fmt.Sprintf("%d of the noisy tenant's requests were refused for lack of space in etcd", n.NoSpace))
	}
	for who, by := range map[string]map[string]int{"operator": n.Operator, "worker": n.Worker} {
		if by["200"]+by["201"] == 0 {
			c.violate("noisy_tenant_idle", "", fmt.Sprintf("none of the noisy %s's %d requests was accepted (%v): the run did not flood", who, sum(by), by))
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
