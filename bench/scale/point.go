package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"syscall"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/scaling"
	"github.com/jobfleet/jobfleet/shard"
)

// Point is one measurement: N resident jobs on M members. Durations are
// nanoseconds in JSON; zero figures were not measured (their phase was
// not run).
type Point struct {
	Jobs       int `json:"jobs"`
	Members    int `json:"members"`
	Partitions int `json:"partitions"`

	// Create is creating the N jobs (one-offs due in a year).
	Create Create `json:"create"`
	// Size is what a job and a run cost in etcd.
	Size Size `json:"size"`
	// RSS is the members' resident memory with the N jobs loaded (before
	// the herd), RSSAfterFires after the herd and spread fired 2N runs.
	RSS           Spread `json:"rss_bytes"`
	RSSAfterFires Spread `json:"rss_after_fires_bytes"`
	// HeapLive is the members' Go heap live at their last garbage
	// collection with the N jobs loaded (from their /metrics: the heap
	// goal over 1 + GOGC/100), in bytes: what the jobs hold, without the
	// room the collector leaves for garbage.
	HeapLive Spread `json:"heap_live_bytes"`
	// List is listing the jobs through GET /v1/jobs pages.
	List List `json:"list"`
	// Takeover is a member SIGKILLed and its partitions taken over.
	Takeover Takeover `json:"takeover"`
	// Restart is a rolling restart of every member.
	Restart Restart `json:"restart"`
	// Herd is the N jobs due in the same second, Spread the N jobs spread
	// over a period.
	Herd       Workload `json:"herd"`
	SpreadLoad Workload `json:"spread"`
	// Jittered is the N jobs on one hourly schedule with a jitter
	// (PhaseJitter).
	Jittered Workload `json:"jitter"`
	// Errors are the phases that failed, with why; their figures are
	// partial or missing.
	Errors []string `json:"errors,omitempty"`
	// StoreLimit is the store's limit in runs/s, measured on the filled
	// etcd with the members stopped (the best of StoreLevels); see
	// package scaling.
	StoreLimit  float64              `json:"store_limit_runs_per_sec"`
	StoreLevels []scaling.StoreLevel `json:"store_levels,omitempty"`
}

// Create is the creation of the resident jobs.
type Create struct {
	// Method is "batch" (POST /v1/jobs:batch) or "single" (one POST
	// /v1/jobs per job, CreateConcurrency in flight).
	Method string        `json:"method"`
	Took   time.Duration `json:"took_ns"`
	// Rate is jobs created per second.
	Rate float64 `json:"jobs_per_second"`
	// Retries counts requests sent again (busy or restarting members).
	Retries int64 `json:"retries"`
	// TakenIn is the time from the last create until every job had a
	// scheduling state (its owner took it in).
	TakenIn time.Duration `json:"taken_in_ns"`
}

// Size is what the fleet's documents cost in etcd. Logical sizes are keys
// plus values (means of up to 2000 documents); in-use ones are the growth
// of etcd's in-use database size per document, with the revisions that
// wrote them (before compaction).
type Size struct {
	JobBytes      float64 `json:"job_bytes"`
	JobInUseBytes float64 `json:"job_in_use_bytes"`
	RunBytes      float64 `json:"run_bytes"`
	RunInUseBytes float64 `json:"run_in_use_bytes"`
}

// Spread is the smallest and the largest of one figure over the members.
type Spread struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// List is listing every job (up to ListMax) through the API.
type List struct {
	Jobs  int           `json:"jobs"`
	Pages int           `json:"pages"`
	Took  time.Duration `json:"took_ns"`
	Rate  float64       `json:"jobs_per_second"`
	// CPU time per job listed (µs, user + system, Linux; 0 elsewhere) of
	// the members together (one serves the listing, the others idle) and
	// of the bench's process (the embedded etcd, and the client decoding
	// the pages): on a loaded machine, the figures to compare.
	MembersCPU float64 `json:"members_cpu_us_per_job"`
	SelfCPU    float64 `json:"etcd_client_cpu_us_per_job"`
}

// Takeover is a member SIGKILLed: times from the kill.
type Takeover struct {
	Victim string `json:"victim"`
	// Partitions the victim owned, and probes in them.
	Partitions int `json:"partitions"`
	Probes     int `json:"probes"`
	// Owned: every partition owned by a survivor and every survivor
	// ready (it owns what the ring assigns it, its partitions loaded).
	Owned time.Duration `json:"owned_ns"`
	// FiresAgain: every probe of the victim's partitions fired a time
	// after the kill (its partition loaded and scheduling).
	FiresAgain time.Duration `json:"fires_again_ns"`
	// Rejoin: from restarting the victim until the fleet is settled with
	// it.
	Rejoin time.Duration `json:"rejoin_ns"`
}

// Restart is a rolling restart: each member in turn SIGTERMed, started
// again, and the fleet settled (every member ready, every partition
// owned) before the next.
type Restart struct {
	// Each is each member's time from SIGTERM until the fleet settled
	// with it back; Total is the whole restart.
	Each  []time.Duration `json:"each_ns"`
	Max   time.Duration   `json:"max_ns"`
	Total time.Duration   `json:"total_ns"`
	// Misfires counts the probes' scheduled times skipped or dropped
	// meanwhile (want 0); Fires the times they fired, Expected those due.
	Misfires int64 `json:"misfires"`
	Fires    int64 `json:"fires"`
	Expected int64 `json:"expected"`
	// LagMax is the probes' largest fire lag (fired_at − scheduled) over
	// the restart.
	LagMax time.Duration `json:"lag_max_ns"`
}

// Workload is one-off jobs firing: all N due in one second (herd), or
// Jobs of them (N, or Config.SpreadJobs) spread over Period.
type Workload struct {
	// Jobs is how many of the resident jobs were given a new run_at and
	// fired; the others stayed resident.
	Jobs int `json:"jobs"`
	// Method wrote the jobs' new run_at (create or replace), taking
	// Write.
	Method string        `json:"method"`
	Write  time.Duration `json:"write_ns"`
	// Period is the spread's period (0 for the herd).
	Period time.Duration `json:"period_ns"`
	// Late says the writes ended after the first job was due: the
	// workload started before all its jobs were in (its figures are
	// pessimistic).
	Late bool `json:"late"`
	// Durable is the time from the last scheduled time until the last run
	// was visible in etcd; Rate is runs per second from the first
	// scheduled time until then.
	Durable time.Duration `json:"durable_ns"`
	Rate    float64       `json:"runs_per_second"`
	// Counted is the time from the last scheduled time until a count of
	// the runs in etcd (every 250 ms, or four times as long as a count
	// takes) first showed them all: durability without the watch's
	// delivery; it may be above Durable when the watch was faster than
	// the counts.
	Counted time.Duration `json:"counted_ns"`
	// MemberCPU is the CPU time the members used together from the end of
	// the writes until the last run was durable, per run; SelfCPU the
	// same for the bench's process (the embedded etcd with the bench's
	// watch and clients). Seconds per run.
	MemberCPU float64 `json:"member_cpu_seconds_per_run"`
	SelfCPU   float64 `json:"self_cpu_seconds_per_run"`
	FireStats
}

// FireStats are the lags of a workload's runs.
type FireStats struct {
	Runs int `json:"runs"`
	// LagFired is fired_at − scheduled_at (the owner's clock), LagVisible
	// the bench seeing the run in etcd (a watch) − scheduled_at.
	LagFired   bench.Summary `json:"lag_fired"`
	LagVisible bench.Summary `json:"lag_visible"`
	// PeakPerSecond is the most runs fired in one second of the wall
	// clock (by their fired_at, truncated to the second), PeakAt that
	// second (the earliest, if several).
	PeakPerSecond int       `json:"peak_fires_per_second"`
	PeakAt        time.Time `json:"peak_at"`
	peakSecond    int64
}

// run runs the point's phases on f. A phase that fails (the fleet
// overloaded, a timeout) is recorded in Errors and the next phases run;
// run returns an error only when the jobs could not be created, or ctx
// ended.
func (p *Point) run(ctx context.Context, f *fleet) error {
	cfg := f.cfg
	owners, err := f.owners(ctx)
	if err != nil {
		return err
	}
	p.Partitions = len(owners)
	if err := p.create(ctx, f); err != nil {
		return err
	}
	phase := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		if err := fn(); err != nil {
			p.Errors = append(p.Errors, name+": "+err.Error())
			f.cfg.Progress.Step("  %s failed: %v", name, err)
			// Let the fleet (if it still runs) settle before the next
			// phase.
			if len(f.live()) == 0 {
				return
			}
			if _, err := f.waitReady(ctx, "", 5*time.Minute); err != nil {
				p.Errors = append(p.Errors, name+": fleet not settled after: "+err.Error())
			}
		}
	}
	if cfg.runs(PhaseList) {
		phase(PhaseList, func() error { return p.list(ctx, f) })
	}
	if cfg.runs(PhaseTakeover) || cfg.runs(PhaseRestart) {
		var pr *probes
		phase("probes", func() (err error) { pr, err = newProbes(ctx, f, p.Partitions); return err })
		if pr != nil {
			if cfg.runs(PhaseTakeover) {
				phase(PhaseTakeover, func() error { return p.takeover(ctx, f, pr) })
			}
			if cfg.runs(PhaseRestart) {
				phase(PhaseRestart, func() error { return p.restart(ctx, f, pr) })
			}
			phase("probes removed", func() error { return pr.remove(ctx, f) })
		}
	}
	fired := false // RSS after fires is measured only if a workload ran
	if cfg.runs(PhaseHerd) && ctx.Err() == nil {
		phase(PhaseHerd, func() (err error) { p.Herd, err = p.workload(ctx, f, p.Jobs, 0, "herd"); return err })
		fired = true
	}
	if cfg.runs(PhaseJitter) && ctx.Err() == nil {
		phase(PhaseJitter, func() (err error) { p.Jittered, err = p.jitter(ctx, f); return err })
		fired = true
	}
	if cfg.runs(PhaseSpread) && ctx.Err() == nil {
		k := p.Jobs
		if cfg.SpreadJobs > 0 {
			k = min(k, cfg.SpreadJobs)
		}
		period := max(cfg.MinSpread, time.Duration(float64(k)/cfg.SpreadRate*float64(time.Second))).Round(time.Second)
		phase(PhaseSpread, func() (err error) { p.SpreadLoad, err = p.workload(ctx, f, k, period, "spread"); return err })
		fired = true
	}
	if fired {
		p.RSSAfterFires = rss(f)
	}
	if cfg.runs(PhaseStoreLimit) {
		phase(PhaseStoreLimit, func() error { return p.storeLimit(ctx, f) })
	}
	return ctx.Err()
}

// storeLimit stops the members and measures the store's limit on the
// filled etcd: fenced transactions of the scheduler's shape, batched
// across 8 partitions per request, from each count of StoreWriters
// writers. A level that fails (requests timing out: etcd cannot keep up
// with that many writers) ends the measurement with the levels before
// it; it fails only if none was measured.
func (p *Point) storeLimit(ctx context.Context, f *fleet) error {
	f.stopMembers()
	sc := scaling.DefaultConfig()
	sc.StoreLimitShares = []int{8}
	sc.StoreLimitDuration = f.cfg.StoreLimitDuration
	sc.Progress = f.cfg.Progress
	for _, w := range f.cfg.StoreWriters {
		sc.StoreLimitConcurrency = []int{w}
		levels, best, err := scaling.StoreLimitOn(ctx, f.etcd.Endpoints(), sc)
		if err != nil {
			if len(p.StoreLevels) == 0 || ctx.Err() != nil {
				return err
			}
			f.cfg.Progress.Step("  store limit: %d writers: %v; the limit is that of fewer writers", w, err)
			return nil
		}
		p.StoreLevels = append(p.StoreLevels, levels...)
		p.StoreLimit = max(p.StoreLimit, best)
	}
	return nil
}

func rss(f *fleet) Spread {
	s := Spread{Min: math.Inf(1)}
	for _, m := range f.members {
		r := float64(m.rss())
		s.Min, s.Max = min(s.Min, r), max(s.Max, r)
	}
	return s
}

// create creates the N resident jobs (one-offs due in a year) and
// measures the rate, the take-in, the sizes and the members' memory.
func (p *Point) create(ctx context.Context, f *fleet) error {
	if f.cfg.Reuse != "" {
		// The jobs are there: wait until their owners hold them. A
		// --jobs above what the directory holds would wait out the
		// whole timeout: refuse it at once.
		start := time.Now()
		resp, err := f.client.Get(ctx, f.keys().JobsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count < int64(p.Jobs) {
			return fmt.Errorf("--reuse %s holds %d jobs, fewer than --jobs %d: give the job count of the point kept there", f.cfg.Reuse, resp.Count, p.Jobs)
		}
		if err := f.waitStates(ctx, p.Jobs, 2*time.Minute+time.Duration(p.Jobs)*time.Millisecond); err != nil {
			return err
		}
		if err := f.waitLoaded(ctx, 5*time.Minute); err != nil {
			return err
		}
		f.cfg.Progress.Step("  reusing %d jobs in %s, every partition loaded %v after the fleet was ready", p.Jobs, f.cfg.Reuse, time.Since(start).Round(time.Millisecond))
		return p.memory(ctx, f)
	}
	before, err := f.inUse(ctx)
	if err != nil {
		return err
	}
	at := time.Now().Add(365 * 24 * time.Hour).Truncate(time.Second)
	st, err := f.writeJobs(ctx, p.Jobs, "create", "create", func(i int) jobDoc { return oneOff(i, at) })
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	p.Create = Create{Method: st.method, Took: st.took, Rate: float64(p.Jobs) / st.took.Seconds(), Retries: st.retries}
	end := time.Now()
	if err := f.waitStates(ctx, p.Jobs, 2*time.Minute+time.Duration(p.Jobs)*time.Millisecond); err != nil {
		return err
	}
	p.Create.TakenIn = time.Since(end)
	f.cfg.Progress.Step("  created %d jobs in %v (%.0f/s, %s), taken in %v later", p.Jobs, st.took.Round(time.Millisecond), p.Create.Rate, st.method, p.Create.TakenIn.Round(time.Millisecond))
	after, err := f.inUse(ctx)
	if err != nil {
		return err
	}
	spec, err := f.meanBytes(ctx, f.keys().JobsPrefix(), jobPrefix)
	if err != nil {
		return err
	}
	state, err := f.meanBytes(ctx, f.keys().AllStatePrefix(), jobPrefix)
	if err != nil {
		return err
	}
	p.Size.JobBytes = spec + state
	p.Size.JobInUseBytes = float64(after-before) / float64(p.Jobs)
	return p.memory(ctx, f)
}

// memory measures the members' RSS and Go heap live with the jobs loaded.
func (p *Point) memory(ctx context.Context, f *fleet) error {
	p.RSS = rss(f)
	p.HeapLive = Spread{Min: math.Inf(1)}
	for _, m := range f.members {
		h, err := f.heapLive(ctx, m)
		if err != nil {
			return err
		}
		p.HeapLive.Min, p.HeapLive.Max = min(p.HeapLive.Min, h), max(p.HeapLive.Max, h)
	}
	return nil
}

// list pages through the jobs on one member.
func (p *Point) list(ctx context.Context, f *fleet) error {
	limit := p.Jobs
	if f.cfg.ListMax > 0 {
		limit = min(limit, f.cfg.ListMax)
	}
	m := f.members[0]
	start := time.Now()
	members0, self0 := f.cpu()
	cursor := ""
	for p.List.Jobs < limit {
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			NextCursor string `json:"next_cursor"`
		}
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := f.do(ctx, http.MethodGet, m.url(), "/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		p.List.Jobs += len(page.Jobs)
		p.List.Pages++
		f.cfg.Progress.Update("  list: %d of %d jobs", p.List.Jobs, limit)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	p.List.Took = time.Since(start)
	p.List.Rate = float64(p.List.Jobs) / p.List.Took.Seconds()
	if p.List.Jobs < limit {
		return fmt.Errorf("list: %d jobs listed, want %d", p.List.Jobs, limit)
	}
	if members1, self1 := f.cpu(); p.List.Jobs > 0 {
		p.List.MembersCPU = (members1 - members0) * 1e6 / float64(p.List.Jobs)
		p.List.SelfCPU = (self1 - self0) * 1e6 / float64(p.List.Jobs)
	}
	f.cfg.Progress.Step("  listed %d jobs in %v (%.0f/s; CPU per job: members %.1f µs, etcd and client %.1f µs)",
		p.List.Jobs, p.List.Took.Round(time.Millisecond), p.List.Rate, p.List.MembersCPU, p.List.SelfCPU)
	return nil
}

// probes are "@every 1s" jobs whose states show when partitions fire.
type probes struct {
	ids   []string
	parts []int
}

func newProbes(ctx context.Context, f *fleet, partitions int) (*probes, error) {
	pr := &probes{}
	for i := range f.cfg.Probes {
		id := fmt.Sprintf("%s%04d", probePrefix, i)
		pr.ids = append(pr.ids, id)
		pr.parts = append(pr.parts, shard.Partition(id, partitions))
		doc := jobDoc{ID: id, Schedule: "@every 1s", Executor: api.Executor{Type: noopExecutor}}
		if _, err := f.call(ctx, http.MethodPost, "/v1/jobs", doc, nil); err != nil {
			return nil, fmt.Errorf("probe %s: %w", id, err)
		}
	}
	// Wait until every probe has fired once.
	deadline := time.Now().Add(time.Minute)
	for {
		sts, err := f.states(ctx, pr.ids, pr.parts)
		if err != nil {
			return nil, err
		}
		fired := 0
		for _, st := range sts {
			if st.Fired > 0 {
				fired++
			}
		}
		if fired == len(pr.ids) {
			return pr, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("probes: %d of %d fired after a minute", fired, len(pr.ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remove deletes the probes.
func (pr *probes) remove(ctx context.Context, f *fleet) error {
	for _, id := range pr.ids {
		if _, err := f.call(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, nil); err != nil {
			return fmt.Errorf("delete probe %s: %w", id, err)
		}
	}
	return nil
}

// totals sums the probes' fired and missed counts.
func (pr *probes) totals(ctx context.Context, f *fleet) (fired, missed int64, err error) {
	sts, err := f.states(ctx, pr.ids, pr.parts)
	if err != nil {
		return 0, 0, err
	}
	for _, st := range sts {
		fired += st.Fired
		missed += st.Skipped + st.Dropped
	}
	return fired, missed, nil
}

// takeover SIGKILLs the first member and measures how long its partitions
// take to be owned, loaded and firing again, then starts it again.
func (p *Point) takeover(ctx context.Context, f *fleet, pr *probes) error {
	victim := f.members[0]
	owners, err := f.owners(ctx)
	if err != nil {
		return err
	}
	var ids []string
	var parts []int
	for i, id := range pr.ids {
		if owners[pr.parts[i]] == victim.id {
			ids, parts = append(ids, id), append(parts, pr.parts[i])
		}
	}
	t := Takeover{Victim: victim.id, Probes: len(ids)}
	for _, o := range owners {
		if o == victim.id {
			t.Partitions++
		}
	}
	killed := victim.Signal(syscall.SIGKILL, 10*time.Second)
	f.cfg.Progress.Step("  takeover: %s killed, it owned %d partitions (%d probes)", victim.id, t.Partitions, len(ids))
	timeout := 2*time.Minute + time.Duration(p.Jobs/1000)*time.Second
	owned, err := f.waitReady(ctx, "", timeout)
	if err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	t.Owned = owned.Sub(killed)
	deadline := time.Now().Add(timeout)
	for len(ids) > 0 {
		sts, err := f.states(ctx, ids, parts)
		if err != nil {
			return err
		}
		again := 0
		for _, id := range ids {
			if st, ok := sts[id]; ok && st.Last.After(killed) {
				again++
			}
		}
		if again == len(ids) {
			t.FiresAgain = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("takeover: %d of %d probes fired again after %v", again, len(ids), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	warm, cold := f.standbyLoads(ctx)
	if warm+cold > 0 {
		f.cfg.Progress.Step("  takeover: survivors' loads with a warm standby: %v from their copies, %v from etcd", warm, cold)
	}
	start := time.Now()
	if err := victim.start(f.cfg.Binary); err != nil {
		return err
	}
	back, err := f.waitReady(ctx, "", timeout)
	if err != nil {
		return fmt.Errorf("takeover: rejoin: %w", err)
	}
	t.Rejoin = back.Sub(start)
	p.Takeover = t
	f.cfg.Progress.Step("  takeover: owned and ready after %v, probes firing again after %v; rejoined in %v",
		t.Owned.Round(time.Millisecond), t.FiresAgain.Round(time.Millisecond), t.Rejoin.Round(time.Millisecond))
	return nil
}

// restart restarts every member in turn (SIGTERM, start, settled) while
// the probes fire, and counts their misfires.
func (p *Point) restart(ctx context.Context, f *fleet, pr *probes) error {
	fired0, missed0, err := pr.totals(ctx, f)
	if err != nil {
		return err
	}
	start := time.Now()
	r := Restart{}
	timeout := 2*time.Minute + time.Duration(p.Jobs/1000)*time.Second
	for _, m := range f.members {
		at := m.Signal(syscall.SIGTERM, 30*time.Second)
		if err := m.start(f.cfg.Binary); err != nil {
			return err
		}
		back, err := f.waitReady(ctx, "", timeout)
		if err != nil {
			return fmt.Errorf("restart %s: %w", m.id, err)
		}
		r.Each = append(r.Each, back.Sub(at))
		f.cfg.Progress.Update("  restart: %s back after %v", m.id, back.Sub(at).Round(time.Millisecond))
	}
	r.Total = time.Since(start)
	r.Max = slices.Max(r.Each)
	if warm, cold := f.standbyLoads(ctx); warm+cold > 0 {
		f.cfg.Progress.Step("  restart: members' loads since they started, with a warm standby: %v from their copies, %v from etcd", warm, cold)
	}
	// Let the fires due at the end be made before counting.
	time.Sleep(2 * time.Second)
	end := time.Now()
	fired1, missed1, err := pr.totals(ctx, f)
	if err != nil {
		return err
	}
	r.Misfires = missed1 - missed0
	r.Fires = fired1 - fired0
	r.Expected = int64(end.Sub(start).Seconds()) * int64(len(pr.ids))
	for i, id := range pr.ids {
		resp, err := f.client.Get(ctx, f.keys().RunPrefix(pr.parts[i], id), clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("restart: probe runs: %w", err)
		}
		for _, kv := range resp.Kvs {
			var run api.Run
			if err := json.Unmarshal(kv.Value, &run); err != nil {
				return err
			}
			if run.ScheduledAt.After(start) && run.ScheduledAt.Before(end) {
				r.LagMax = max(r.LagMax, run.FiredAt.Sub(run.ScheduledAt))
			}
		}
	}
	p.Restart = r
	f.cfg.Progress.Step("  rolling restart of %d members in %v (slowest %v): %d misfires, %d of about %d probe fires, largest lag %v",
		len(f.members), r.Total.Round(time.Millisecond), r.Max.Round(time.Millisecond), r.Misfires, r.Fires, r.Expected, r.LagMax.Round(time.Millisecond))
	return nil
}

// workload gives the first k of the N jobs new run_at times from a moment
// far enough ahead for the writes to end before it — all that moment
// (period 0) or spread evenly over period — and measures their fires; the
// other jobs stay as they are.
func (p *Point) workload(ctx context.Context, f *fleet, k int, period time.Duration, what string) (Workload, error) {
	return p.fires(ctx, f, k, period, 0, what, oneOff)
}

// fires rewrites the first k jobs with doc(i, at), at the i-th of k
// times spread over period from a second far enough ahead for the writes
// to end before it, and watches their runs until every one is durable;
// tail is how long after its time a job may fire (its jitter).
func (p *Point) fires(ctx context.Context, f *fleet, k int, period, tail time.Duration, what string, doc func(i int, at time.Time) jobDoc) (Workload, error) {
	w := Workload{Jobs: k, Period: period}
	// The new run_at must come after the writes end: 1.5 times the
	// time the writes are expected to take, and a margin of 3 s and 50 µs
	// a job (at most 10 s). Rewriting a job is slower than creating it
	// (its owner takes the change in), so the rate is that of a pilot: the
	// first 1 % of the jobs (at least 8 batches) rewritten to a time
	// still far ahead, which the full pass then rewrites again.
	pilot := min(k, max(8*f.cfg.BatchSize, k/100))
	later := time.Now().Add(366 * 24 * time.Hour).Truncate(time.Second)
	pst, err := f.writeJobs(ctx, pilot, "apply", what+": pilot", func(i int) jobDoc { return oneOff(i, later) })
	if err != nil {
		return w, fmt.Errorf("%s: pilot: %w", what, err)
	}
	rate := float64(pilot) / pst.took.Seconds()
	margin := min(10*time.Second, 3*time.Second+time.Duration(k)*50*time.Microsecond)
	ahead := time.Duration(1.5*float64(k)/rate*float64(time.Second)) + margin
	first := time.Now().Add(ahead).Truncate(time.Second).Add(time.Second)
	at := func(i int) time.Time {
		return first.Add(time.Duration(float64(period) * float64(i) / float64(k)))
	}
	watch, err := f.watchRuns(ctx, k)
	if err != nil {
		return w, err
	}
	defer watch.stop()
	st, err := f.writeJobs(ctx, k, "apply", what+": write run_at", func(i int) jobDoc { return doc(i, at(i)) })
	if err != nil {
		return w, fmt.Errorf("%s: %w", what, err)
	}
	w.Method, w.Write = st.method, st.took
	w.Late = time.Now().After(first)
	before, err := f.inUse(ctx)
	if err != nil {
		return w, err
	}
	f.cfg.Progress.Step("  %s: %d jobs written in %v (%s), first due at %s", what, k, st.took.Round(time.Millisecond), st.method, first.Format(time.TimeOnly))
	count := func() (int64, error) {
		resp, err := f.client.Get(ctx, f.keys().AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return resp.Count, nil
	}
	runs0, err := count() // before the first due second: none of them yet
	if err != nil {
		return w, fmt.Errorf("%s: count runs: %w", what, err)
	}
	// CPU is counted from the first due second: before it the fleet idles.
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-time.After(time.Until(first)):
	}
	cpuM0, cpuS0 := f.cpu()
	last := at(k - 1).Add(tail)
	timeout := time.Until(last) + 2*time.Minute + time.Duration(k/2000)*time.Second
	counted, waitErr := watch.wait(ctx, timeout, f.cfg.Progress, what, count, runs0+int64(k))
	if waitErr != nil {
		// Keep what was seen: the lags of the runs that were made.
		w.FireStats = watch.fireStats()
		return w, waitErr
	}
	if !counted.IsZero() {
		w.Counted = counted.Sub(last)
	}
	watch.mu.Lock()
	lastVisible := watch.lastVisible
	watch.mu.Unlock()
	w.FireStats = watch.fireStats()
	cpuM1, cpuS1 := f.cpu()
	w.MemberCPU, w.SelfCPU = (cpuM1-cpuM0)/float64(k), (cpuS1-cpuS0)/float64(k)
	w.Durable = lastVisible.Sub(last)
	w.Rate = float64(k) / lastVisible.Sub(first).Seconds()
	if period == 0 {
		after, err := f.inUse(ctx)
		if err != nil {
			return w, err
		}
		p.Size.RunInUseBytes = float64(after-before) / float64(k)
		if p.Size.RunBytes, err = f.meanBytes(ctx, f.keys().AllRunsPrefix(), jobPrefix); err != nil {
			return w, err
		}
	}
	f.cfg.Progress.Step("  %s: %d runs durable %v after the last was due (%v by counting; %.0f runs/s); lag p50/p99 %v/%v from fired_at, %v/%v from visibility",
		what, w.Runs, w.Durable.Round(time.Millisecond), w.Counted.Round(time.Millisecond), w.Rate, w.LagFired.P50.Round(time.Millisecond), w.LagFired.P99.Round(time.Millisecond),
		w.LagVisible.P50.Round(time.Millisecond), w.LagVisible.P99.Round(time.Millisecond))
	return w, nil
}
