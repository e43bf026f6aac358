package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// Job kinds of the workload.
const (
	jobRecurring = "recurring" // every second, answered at once
	jobSlow      = "slow"      // every second, answered after SlowFor
	jobFlaky     = "flaky"     // every second, some attempts fail
	jobOneOff    = "one-off"   // run_at a few seconds ahead
	jobBurst     = "burst"     // created, updated and deleted in bursts
	jobSharded   = "sharded"   // every 2s, a run of ShardItems items: flaky, or slow with params
	jobBroadcast = "broadcast" // every 2s, one item per worker, answered at once
	jobChain     = "chain"     // a chain of jobs after each other, its head every 2s (workload_after.go)
	jobSteps     = "steps"     // every 3s, a run of five steps, one sharded (workload_steps.go)
)

// JobOp is one API call of the workload on a job.
type JobOp struct {
	Job   string    `json:"job"`
	Op    string    `json:"op"` // create, update, delete, pause
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Status is the definite answer, 0 if none came (then Err says why).
	Status int `json:"status"`
	// Ambiguous: a try failed in a way that leaves unknown whether it was
	// applied.
	Ambiguous bool   `json:"ambiguous,omitempty"`
	Err       string `json:"error,omitempty"`
	// Version is the payload version a create or update wrote.
	Version int `json:"version,omitempty"`
}

// JobRecord is what the API accepted for one job, as the workload saw it.
type JobRecord struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Accepted: a create was answered 201 (or 409 after an ambiguous try).
	Accepted bool `json:"accepted"`
	// Uncertain: a create, update or delete has an unknown outcome, so the
	// job's final state is not checked.
	Uncertain bool `json:"uncertain,omitempty"`
	// Deleted: a delete was answered 204.
	Deleted bool `json:"deleted,omitempty"`
	// Version is the payload version of the last accepted write.
	Version int `json:"version"`
	// Schedule of the last accepted write.
	Schedule string `json:"schedule,omitempty"`
	// Misfire is the job's misfire policy (never changed by updates).
	Misfire api.MisfirePolicy `json:"misfire_policy,omitempty"`
	// Paused: the final pause was answered 200.
	Paused bool `json:"paused,omitempty"`
	// Recreated: the job was created again after its deletion.
	Recreated bool `json:"recreated,omitempty"`
	// Limits are the limit keys the job names (never changed by updates).
	Limits []string `json:"limits,omitempty"`
}

// workload creates the jobs and drives the API traffic.
type workload struct {
	f   *fleet
	rec *recorder
	cfg Config
	lg  *zap.Logger

	mu       sync.Mutex // guards the fields below
	rng      *rand.Rand
	ops      []JobOp
	jobs     map[string]*JobRecord
	limits   map[string]api.Limit // the limit keys the API stored, by key
	order    []string             // job IDs in creation order
	onceSeq  int
	burstSeq int
}

func newWorkload(f *fleet, rec *recorder, cfg Config, lg *zap.Logger) *workload {
	return &workload{
		f: f, rec: rec, cfg: cfg, lg: lg,
		rng:    rand.New(rand.NewPCG(uint64(cfg.Seed), 0x776f726b6c6f6164)),
		jobs:   map[string]*JobRecord{},
		limits: map[string]api.Limit{},
	}
}

// retry is every job's retry policy: enough attempts that a run outlives
// any number of lost attempts the nemesis can cause.
var retry = api.RetryPolicy{MaxAttempts: 10, InitialBackoff: api.Duration(100 * time.Millisecond), MaxBackoff: api.Duration(time.Second)}

func (w *workload) spec(id, kind, schedule string, runAt *time.Time, misfire api.MisfirePolicy, version int) api.Job {
	endpoint := endpointFast
	switch kind {
	case jobSlow:
		endpoint = endpointSlow
	case jobFlaky:
		endpoint = endpointFlaky
	}
	payload, _ := json.Marshal(map[string]any{"kind": kind, "v": version})
	j := api.Job{
		Placement:     placementFor(id, kind, w.cfg.Workers),
		ID:            id,
		Schedule:      schedule,
		RunAt:         runAt,
		Executor:      api.Executor{Type: api.ExecutorHTTP, URL: w.rec.URL(endpoint)},
		Payload:       payload,
		Retry:         retry,
		Timeout:       api.Duration(30 * time.Second),
		MisfirePolicy: misfire,
	}
	w.limitJob(&j, kind)
	switch kind {
	case jobSharded:
		// Odd ones fail now and then, item by item; even ones are slow
		// (in flight when a worker is killed) and give each item a
		// parameter, sent as the body instead of the payload.
		j.Shards = &api.Shards{Count: w.cfg.ShardItems, MaxParallel: max(w.cfg.ShardItems-2, 1)}
		j.Executor.URL = w.rec.URL(endpointFlaky)
		if n := len(id); id[n-1]%2 == 0 {
			j.Executor.URL = w.rec.URL(endpointSlow)
			j.Shards = &api.Shards{Params: make([]json.RawMessage, w.cfg.ShardItems)}
			for i := range j.Shards.Params {
				j.Shards.Params[i] = json.RawMessage(fmt.Sprintf(`{"part":%d}`, i))
			}
			j.Payload = nil
		}
	}
	return j
}

// placementFor returns the placement of job id of kind (the same for
// every write of it): its selector (selectorFor), and broadcast for a
// broadcast job; nil for neither.
func placementFor(id, kind string, workers int) *api.PlacementPolicy {
	p := &api.PlacementPolicy{Selector: selectorFor(id, workers), Broadcast: kind == jobBroadcast}
	if p.Selector == "" && !p.Broadcast {
		return nil
	}
	return p
}

// selectorFor returns the placement selector of job id (the same for
// every write of it): some jobs run on pool a's workers, some on pool
// b's, some on either through a set and an exclusion, one on a label
// every worker has; the first broadcast job on pool a's workers (every
// worker of a run with one), and a sharded job's items on pool b's; the
// others, and every burst job, on any worker.
func selectorFor(id string, workers int) string {
	b := "b"
	if workers < 2 {
		b = "a" // one worker: pool a alone
	}
	switch id {
	case "rec-01", "flaky-1", "slow-1", "broadcast-1":
		return "pool=a"
	case "rec-02", "flaky-2", "sharded-2":
		return "pool=" + b
	case "rec/ü 03":
		return "pool in (a,b),!spot"
	case "rec-05":
		return "host"
	}
	var n int
	if _, err := fmt.Sscanf(id, "once-%d", &n); err == nil && n%3 == 0 {
		return "pool notin (spot),pool=" + b + ",host"
	}
	return ""
}

// createBase creates the every-second jobs.
func (w *workload) createBase(ctx context.Context) error {
	misfires := []api.MisfirePolicy{"", api.MisfireRunAll, api.MisfireSkip, ""}
	var specs []api.Job
	for i := range w.cfg.RecurringJobs {
		id := fmt.Sprintf("rec-%02d", i+1)
		if i == 2 {
			id = "rec/ü 03" // an ID that needs escaping in keys and URLs
		}
		specs = append(specs, w.spec(id, jobRecurring, "@every 1s", nil, misfires[i%len(misfires)], 1))
	}
	for i := range w.cfg.SlowJobs {
		specs = append(specs, w.spec(fmt.Sprintf("slow-%d", i+1), jobSlow, "@every 1s", nil, "", 1))
	}
	for i := range w.cfg.FlakyJobs {
		specs = append(specs, w.spec(fmt.Sprintf("flaky-%d", i+1), jobFlaky, "@every 1s", nil, api.MisfirePolicy(misfires[(i+1)%len(misfires)]), 1))
	}
	for i := range w.cfg.ShardedJobs {
		specs = append(specs, w.spec(fmt.Sprintf("sharded-%d", i+1), jobSharded, "@every 2s", nil, "", 1))
	}
	for i := range w.cfg.BroadcastJobs {
		specs = append(specs, w.spec(fmt.Sprintf("broadcast-%d", i+1), jobBroadcast, "@every 2s", nil, "", 1))
	}
	for i := range w.cfg.StepJobs {
		specs = append(specs, w.stepSpec(fmt.Sprintf("steps-%d", i+1)))
	}
	if err := w.createChain(ctx); err != nil {
		return err
	}
	if err := w.createLimits(ctx); err != nil {
		return err
	}
	specs = append(specs, w.limitedSpecs()...)
	for _, j := range specs {
		kind := jobRecurring
		switch {
		case limitedKind(j.ID) != "":
			kind = limitedKind(j.ID)
		case len(j.ID) > 4 && j.ID[:4] == "slow":
			kind = jobSlow
		case len(j.ID) > 5 && j.ID[:5] == "flaky":
			kind = jobFlaky
		case j.Shards != nil:
			kind = jobSharded
		case j.Broadcasts():
			kind = jobBroadcast
		case len(j.Steps) > 0:
			kind = jobSteps // not a recurring job: an update must not make it one
		}
		if !w.create(ctx, j, kind) {
			return fmt.Errorf("creating base job %q failed", j.ID)
		}
	}
	return nil
}

// record appends op to the log.
func (w *workload) record(op JobOp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
}

func opOf(id, op string, start time.Time, res apiResult, version int) JobOp {
	o := JobOp{Job: id, Op: op, Start: start, End: time.Now(), Status: res.Status, Ambiguous: res.Ambiguous, Version: version}
	if res.Err != nil {
		o.Err = res.Err.Error()
		o.Status = 0
	}
	return o
}

// create creates job j and reports whether the API accepted it.
func (w *workload) create(ctx context.Context, j api.Job, kind string) bool {
	version := payloadVersion(j.Payload)
	w.mu.Lock()
	rec := &JobRecord{ID: j.ID, Kind: kind, Schedule: j.Schedule, Misfire: j.MisfirePolicy, Limits: j.Limits}
	if w.jobs[j.ID] == nil {
		w.order = append(w.order, j.ID)
	} else {
		rec.Recreated = true
	}
	w.jobs[j.ID] = rec
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	res := w.f.api(cctx, http.MethodPost, "/v1/jobs", j)
	w.record(opOf(j.ID, "create", start, res, version))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case res.Err == nil && res.Status == http.StatusCreated,
		res.Err == nil && res.Status == http.StatusConflict && res.Ambiguous:
		rec.Accepted, rec.Version = true, version
		return true
	case res.Err == nil:
		w.lg.Error("job create refused", zap.String("job_id", j.ID), zap.Int("status", res.Status), zap.ByteString("body", res.Body))
		return false
	default:
		rec.Uncertain = true
		w.lg.Warn("job create outcome unknown", zap.String("job_id", j.ID), zap.Error(res.Err))
		return false
	}
}

func payloadVersion(p json.RawMessage) int {
	var v struct{ V int }
	_ = json.Unmarshal(p, &v)
	return v.V
}

// update replaces job id's spec with a new payload version and the given
// schedule.
func (w *workload) update(ctx context.Context, id, schedule string) {
	w.mu.Lock()
	rec := w.jobs[id]
	if rec == nil || !rec.Accepted || rec.Deleted || rec.Uncertain {
		w.mu.Unlock()
		return
	}
	version := rec.Version + 1
	kind, misfire := rec.Kind, rec.Misfire
	w.mu.Unlock()
	j := w.spec(id, kind, schedule, nil, misfire, version)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	res := w.f.api(cctx, http.MethodPut, "/v1/jobs/"+url.PathEscape(id), j)
	w.record(opOf(id, "update", start, res, version))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case res.Err == nil && res.Status == http.StatusOK:
		rec.Version, rec.Schedule = version, schedule
	case res.Err == nil:
		w.lg.Error("job update refused", zap.String("job_id", id), zap.Int("status", res.Status), zap.ByteString("body", res.Body))
	default:
		rec.Uncertain = true
	}
}

// delete deletes job id and reports whether the API accepted it.
func (w *workload) delete(ctx context.Context, id string) bool {
	w.mu.Lock()
	rec := w.jobs[id]
	if rec == nil || !rec.Accepted || rec.Deleted || rec.Uncertain {
		w.mu.Unlock()
		return false
	}
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	res := w.f.api(cctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil)
	w.record(opOf(id, "delete", start, res, 0))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case res.Err == nil && res.Status == http.StatusNoContent,
		res.Err == nil && res.Status == http.StatusNotFound && res.Ambiguous:
		rec.Deleted = true
		return true
	case res.Err == nil:
		w.lg.Error("job delete refused", zap.String("job_id", id), zap.Int("status", res.Status), zap.ByteString("body", res.Body))
	default:
		rec.Uncertain = true
	}
	return false
}

// runOneOffs creates a one-off job every OneOffEvery, to run 1 to 6
// seconds later, and now and then updates a recurring job's payload
// (schedule unchanged), until ctx ends.
func (w *workload) runOneOffs(ctx context.Context) {
	if w.cfg.OneOffEvery <= 0 {
		return
	}
	t := time.NewTicker(w.cfg.OneOffEvery)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		w.onceSeq++
		id := fmt.Sprintf("once-%05d", w.onceSeq)
		ahead := time.Second + time.Duration(w.rng.Int64N(int64(5*time.Second)))
		w.mu.Unlock()
		at := time.Now().Add(ahead).Truncate(time.Millisecond).UTC()
		w.create(ctx, w.spec(id, jobOneOff, "", &at, "", 1), jobOneOff)
		if n%7 == 0 {
			if id := w.randomJob(jobRecurring); id != "" {
				w.mu.Lock()
				schedule := w.jobs[id].Schedule
				w.mu.Unlock()
				w.update(ctx, id, schedule)
			}
		}
	}
}

// randomJob returns a random live job of kind, "" if none.
func (w *workload) randomJob(kind string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, id := range w.order {
		r := w.jobs[id]
		if r.Kind == kind && r.Accepted && !r.Deleted && !r.Uncertain {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[w.rng.IntN(len(ids))]
}

// burst makes ops job writes spread over d: creates of burst jobs (every
// 1s or every 2s, random misfire policy), updates that switch their
// schedule, and deletes. It returns how many writes it made.
func (w *workload) burst(ctx context.Context, d time.Duration, ops int) int {
	pause := d / time.Duration(ops)
	misfires := []api.MisfirePolicy{"", api.MisfireRunAll, api.MisfireSkip}
	schedules := []string{"@every 1s", "@every 2s"}
	for range ops {
		w.mu.Lock()
		live := 0
		for _, id := range w.order {
			if r := w.jobs[id]; r.Kind == jobBurst && r.Accepted && !r.Deleted {
				live++
			}
		}
		choice := w.rng.IntN(10)
		w.mu.Unlock()
		switch {
		case live < 5 || (choice < 4 && live < 30):
			w.mu.Lock()
			w.burstSeq++
			id := fmt.Sprintf("burst-%04d", w.burstSeq)
			sched := schedules[w.rng.IntN(2)]
			mf := misfires[w.rng.IntN(3)]
			w.mu.Unlock()
			w.create(ctx, w.spec(id, jobBurst, sched, nil, mf, 1), jobBurst)
		case choice < 8:
			if id := w.randomJob(jobBurst); id != "" {
				w.mu.Lock()
				sched := schedules[0]
				if w.jobs[id].Schedule == sched {
					sched = schedules[1]
				}
				w.mu.Unlock()
				w.update(ctx, id, sched)
			}
		case choice < 9:
			if id := w.randomJob(jobBurst); id != "" {
				w.delete(ctx, id)
			}
		default:
			// Delete a job and create it again under the same ID: the
			// new job must start afresh, nothing of the old one's
			// scheduling state or runs carried over.
			if id := w.randomJob(jobBurst); id != "" {
				w.mu.Lock()
				sched, mf := w.jobs[id].Schedule, w.jobs[id].Misfire
				w.mu.Unlock()
				if w.delete(ctx, id) {
					w.create(ctx, w.spec(id, jobBurst, sched, nil, mf, 1), jobBurst)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ops
		case <-time.After(pause):
		}
	}
	return ops
}

// pauseAll pauses every live recurring job, so that the checker has an end
// to each one's schedule.
func (w *workload) pauseAll(ctx context.Context) {
	w.mu.Lock()
	var ids []string
	for _, id := range w.order {
		r := w.jobs[id]
		if r.Kind != jobOneOff && r.Accepted && !r.Deleted {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			start := time.Now()
			res := w.f.api(cctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/pause", nil)
			w.record(opOf(id, "pause", start, res, 0))
			w.mu.Lock()
			defer w.mu.Unlock()
			if res.Err == nil && res.Status == http.StatusOK {
				w.jobs[id].Paused = true
			} else {
				w.lg.Warn("pausing a job failed", zap.String("job_id", id), zap.Int("status", res.Status), zap.Error(res.Err))
			}
		})
	}
	wg.Wait()
}

// results returns the job records and the op log.
func (w *workload) results() (map[string]JobRecord, []JobOp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	jobs := map[string]JobRecord{}
	for id, r := range w.jobs {
		jobs[id] = *r
	}
	return jobs, slices.Clone(w.ops)
}

// listJobs reads every job through the API.
func (w *workload) listJobs(ctx context.Context) (map[string]api.Job, error) {
	out := map[string]api.Job{}
	cursor := ""
	for {
		path := "/v1/jobs?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res := w.f.api(cctx, http.MethodGet, path, nil)
		cancel()
		if res.Err != nil || res.Status != http.StatusOK {
			return nil, fmt.Errorf("list jobs: %d %v", res.Status, res.Err)
		}
		var page struct {
			Jobs       []api.Job `json:"jobs"`
			NextCursor string    `json:"next_cursor"`
		}
		if err := json.Unmarshal(res.Body, &page); err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range page.Jobs {
			out[j.ID] = j
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
