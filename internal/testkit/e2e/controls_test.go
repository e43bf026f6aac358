package e2e_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// TestJitterAndMaxFiresSurviveHandoffs: a jittered job with max_fires on
// a fleet of three members, its owner crashed after its second fire and
// its next owner left gracefully after its fourth: every run is for a
// time of the schedule, under that time's run ID, fired no earlier than
// its jittered moment (the offset every member computes alike), each
// time once, following the schedule with none skipped; the count
// carries over the handoffs, so the job fires max_fires times in all, not
// max_fires per owner, and then completes once its runs succeeded. (An
// attempt in flight on the crashed member may run again: executions are
// at least once, runs exactly once.)
func TestJitterAndMaxFiresSurviveHandoffs(t *testing.T) {
	t.Parallel()
	f := settledFleet(t, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 3 * time.Second, Quiet: true}, "m1", "m2", "m3", "m4")

	hook := newRunCounter()
	defer hook.Close()
	stopWorker := runHookWorker(t, f, 4)
	defer stopWorker()

	const id, maxFires = "controls/jittered", 6
	job := jfapi.Job{ID: id, Schedule: "@every 2s", Jitter: jfapi.Duration(1900 * time.Millisecond), MaxFires: maxFires, DeleteAfter: "never",
		Executor: jfapi.Executor{Type: "http", URL: hook.URL}, Retry: jfapi.RetryPolicy{MaxAttempts: 5}}
	var created jfapi.Job
	if code := api(t, f.AdminToken, "POST", f.URLs()[0], "/v1/jobs", job, &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	sched, err := created.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return len(runsByTime(t, f, id)) >= 2 })
	first := partitionOwner(t, f, id)
	f.Crash(first)
	waitFor(t, 30*time.Second, func() bool { return len(runsByTime(t, f, id)) >= 4 })
	second := partitionOwner(t, f, id)
	if second == first {
		t.Fatalf("partition still owned by the crashed %s", first)
	}
	f.Leave(second)

	var got jfapi.Job
	waitFor(t, 60*time.Second, func() bool {
		for _, m := range f.Live() {
			got = jfapi.Job{} // a field the reply leaves out (next, once none) must not keep an earlier page's
			if api(t, f.AdminToken, "GET", f.Member(m).URL, "/v1/jobs/"+url.PathEscape(id), nil, &got) == http.StatusOK {
				return got.Status == jfapi.JobCompleted
			}
		}
		return false
	})
	runs := runsByTime(t, f, id)
	if len(runs) != maxFires || got.State == nil || got.State.ScheduledRuns != maxFires || !got.State.Next.IsZero() {
		t.Fatalf("completed with %d runs, state %+v; want %d runs, scheduled_runs %d, no next time", len(runs), got.State, maxFires, maxFires)
	}
	times := slices.Sorted(func(yield func(int64) bool) {
		for at := range runs {
			if !yield(at) {
				return
			}
		}
	})
	owners, jittered := map[string]bool{}, 0
	for i, ms := range times {
		r := runs[ms]
		at := r.ScheduledAt
		if want := sched.Next(created.CreatedAt); i == 0 && !at.Equal(want) {
			t.Errorf("first run for %v, want the first time after the creation, %v", at, want)
		}
		if i > 0 && !at.Equal(sched.Next(time.UnixMilli(times[i-1]))) {
			t.Errorf("run %d for %v does not follow the run for %v: a time was skipped or invented", i, at, time.UnixMilli(times[i-1]).UTC())
		}
		fire := sched.FireTime(at)
		if r.ID != store.RunID(id, at) || r.FiredAt.Before(fire) {
			t.Errorf("run %s for %v fired at %v by %s: want run ID %s, fired no earlier than its jittered time %v", r.ID, at, r.FiredAt, r.Owner, store.RunID(id, at), fire)
		}
		if fire.After(at) {
			jittered++
		}
		if r.Status != jfapi.RunSucceeded {
			t.Errorf("run %s: %s, want succeeded", r.ID, r.Status)
		}
		owners[r.Owner] = true
	}
	if len(owners) < 2 || jittered == 0 {
		t.Fatalf("runs fired by %v, %d of them jittered: the test tells nothing without a handoff and a jitter", owners, jittered)
	}
	executed := hook.executed()
	for rid := range executed {
		if _, ok := runs[runTime(t, rid)]; !ok {
			t.Errorf("run %s executed, but the job has no such run", rid)
		}
	}
	if len(executed) != maxFires {
		t.Errorf("%d runs executed, want %d", len(executed), maxFires)
	}
}

// runTime returns the scheduled time (Unix ms) of run ID rid.
func runTime(t *testing.T, rid string) int64 {
	t.Helper()
	_, at, err := store.ParseRunID(rid)
	if err != nil {
		t.Fatalf("run ID %q: %v", rid, err)
	}
	return at.UnixMilli()
}
