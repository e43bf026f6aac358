package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// The workload's limit keys (docs/ownership.md, "Limit keys"), created
// through the API before the jobs naming them.
const (
	// limitRunning lets at most limitRunningMax attempts of its jobs run
	// at once: the LimitedJobs, due together every 2s (more often, a
	// stall of the fleet on a loaded machine leaves a backlog on the key
	// that takes minutes to drain), and the first rate job.
	limitRunning    = "chaos-db"
	limitRunningMax = 2
	// limitRate lets at most limitRateCount of its jobs' attempts start
	// in any window of limitRatePer: the RateJobs, due together every 4s
	// (one more than the count).
	limitRate      = "chaos-partner-api"
	limitRateCount = 3
	limitRatePer   = 2 * time.Second
)

// Job kinds of jobs naming limit keys.
const (
	jobLimited = "limited" // every 2s under limitRunning, answered after briefFor (the last: every 6s, slow)
	jobRated   = "rated"   // every 4s under limitRate, answered at once
)

// workloadLimits returns the limit keys the workload creates.
func workloadLimits() []api.Limit {
	n := limitRunningMax
	return []api.Limit{
		{Key: limitRunning, MaxRunning: &n},
		{Key: limitRate, Rate: &api.LimitRate{Count: limitRateCount, Per: api.Duration(limitRatePer)}},
	}
}

// limitedKind returns the kind of a base job named id if it names limit
// keys, "" if it does not.
func limitedKind(id string) string {
	switch {
	case strings.HasPrefix(id, "lim-"):
		return jobLimited
	case strings.HasPrefix(id, "rate-"):
		return jobRated
	}
	return ""
}

// limitedSpecs returns the specs of the base jobs that name limit keys.
func (w *workload) limitedSpecs() []api.Job {
	var out []api.Job
	for i := range w.cfg.LimitedJobs {
		sched := "@every 2s"
		if i == w.cfg.LimitedJobs-1 {
			sched = "@every 6s" // the slow one
		}
		out = append(out, w.spec(fmt.Sprintf("lim-%d", i+1), jobLimited, sched, nil, "", 1))
	}
	for i := range w.cfg.RateJobs {
		out = append(out, w.spec(fmt.Sprintf("rate-%d", i+1), jobRated, "@every 4s", nil, "", 1))
	}
	return out
}

// limitPriorities are the priorities of the limited jobs, by their
// number: the keys' grants are ordered by them (and their aging), which
// must never admit more than a key allows.
var limitPriorities = []int{9, 1, 5, 0}

// limitJob sets the limit keys, priority and executor of job j of kind
// jobLimited or jobRated (the same for every write of it).
func (w *workload) limitJob(j *api.Job, kind string) {
	var n int
	if _, err := fmt.Sscanf(j.ID[strings.LastIndexByte(j.ID, '-')+1:], "%d", &n); err == nil {
		p := limitPriorities[n%len(limitPriorities)]
		j.Priority = &p
	}
	switch kind {
	case jobLimited:
		j.Limits = []string{limitRunning}
		j.Executor.URL = w.rec.URL(endpointBrief)
		if j.ID == fmt.Sprintf("lim-%d", w.cfg.LimitedJobs) {
			// In flight for a while, so that a killed or cut off
			// worker may hold one of the two slots.
			j.Executor.URL = w.rec.URL(endpointSlow)
		}
	case jobRated:
		j.Limits = []string{limitRate}
		if j.ID == "rate-1" {
			j.Limits = []string{limitRate, limitRunning} // one grant under two keys
		}
	}
}

// createLimits creates the workload's limit keys through the API (PUT
// /v1/limits/{key}), and records the limits the API stored.
func (w *workload) createLimits(ctx context.Context) error {
	if w.cfg.LimitedJobs+w.cfg.RateJobs == 0 {
		return nil
	}
	for _, l := range workloadLimits() {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res := w.f.api(cctx, http.MethodPut, "/v1/limits/"+url.PathEscape(l.Key), l)
		cancel()
		if res.Err != nil || (res.Status != http.StatusCreated && res.Status != http.StatusOK) {
			return fmt.Errorf("creating limit key %q: %d %v: %s", l.Key, res.Status, res.Err, res.Body)
		}
		var stored api.Limit
		if err := json.Unmarshal(res.Body, &stored); err != nil {
			return fmt.Errorf("creating limit key %q: %w", l.Key, err)
		}
		w.mu.Lock()
		w.limits[stored.Key] = stored
		w.mu.Unlock()
		w.lg.Info("limit key created", zap.String("key", stored.Key), zap.ByteString("limit", res.Body))
	}
	return nil
}

// limitSpec returns the limit keys the API stored and the keys each job
// the API accepted (or may have) names, for the checker; nil if the
// workload has none.
func (w *workload) limitSpec() *LimitSpec {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.limits) == 0 {
		return nil
	}
	s := &LimitSpec{Limits: maps.Clone(w.limits), JobLimits: map[string][]string{}}
	for id, r := range w.jobs {
		if len(r.Limits) > 0 && (r.Accepted || r.Uncertain) {
			s.JobLimits[id] = slices.Clone(r.Limits)
		}
	}
	return s
}

// heldSlots returns the slots of limit keys held in namespace ns, by key,
// once none is held or quiet has passed (the bound of invariant 2: a
// slot is free again within a run lease or a registration TTL of its
// attempt's end), whichever comes first.
func heldSlots(ctx context.Context, client *clientv3.Client, ns string, quiet time.Duration) (map[string][]api.LimitHolder, error) {
	keys := store.Keys{NS: ns}
	var held map[string][]api.LimitHolder
	var err error
	waitFor(ctx, quiet, 200*time.Millisecond, func() (bool, string) {
		held, err = readHeld(ctx, client, keys)
		return err == nil && len(held) == 0, ""
	})
	return held, err
}

func readHeld(ctx context.Context, client *clientv3.Client, keys store.Keys) (map[string][]api.LimitHolder, error) {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := client.Get(gctx, keys.LimitHeldPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the slots held: %w", err)
	}
	out := map[string][]api.LimitHolder{}
	for _, kv := range resp.Kvs {
		key, ok := store.ParseLimitHeld(strings.TrimPrefix(string(kv.Key), keys.LimitHeldPrefix()))
		if !ok {
			key = string(kv.Key)
		}
		var h api.LimitHolder
		if err := json.Unmarshal(kv.Value, &h); err != nil {
			h = api.LimitHolder{RunID: string(kv.Key), Item: noItem}
		}
		out[key] = append(out[key], h)
	}
	return out, nil
}
