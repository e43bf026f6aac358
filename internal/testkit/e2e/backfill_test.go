package e2e_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// TestBackfillRacingFiresRunsEachTimeOnce backfills a job that fires
// every second over a range that holds times before the job existed,
// times it fired, and times of an outage: the member owning its
// partition crashes just before the request, so the times since are
// fired by the next owner, as on-time fires, in the same takeover that
// runs the backfill. Every time of the range ends with one run, executed
// once; the backfill reports created exactly the runs it made, and
// existing the others.
func TestBackfillRacingFiresRunsEachTimeOnce(t *testing.T) {
	t.Parallel()
	// Without the dead member detector, the outage lasts the crashed
	// owner's lease: the detector would move its partition within
	// milliseconds, and the times since the crash would be fired before
	// the backfill is asked.
	f := settledFleet(t, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 3 * time.Second, Quiet: true, NoDeadMemberDetector: true}, "m1", "m2", "m3")

	hook := newRunCounter()
	defer hook.Close()
	stopWorker := runHookWorker(t, f, 8)
	defer stopWorker()

	const id = "race/every-second"
	var created jfapi.Job
	job := jfapi.Job{ID: id, Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: hook.URL}, Retry: jfapi.RetryPolicy{MaxAttempts: 1}}
	if code := api(t, f.AdminToken, "POST", f.URLs()[0], "/v1/jobs", job, &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	waitFor(t, 15*time.Second, func() bool { return len(runsByTime(t, f, id)) >= 3 })

	f.Crash(partitionOwner(t, f, id))
	var survivor string
	for _, m := range f.Live() {
		survivor = f.Member(m).URL
	}
	// A second or so into the outage (before the lease expires): the
	// times since the crash are neither fired nor firing.
	time.Sleep(1200 * time.Millisecond)
	var b jfapi.Backfill
	req := jfapi.BackfillRequest{From: created.CreatedAt.Add(-20 * time.Second).Truncate(time.Second)}
	if code := api(t, f.AdminToken, "POST", survivor, "/v1/jobs/"+url.PathEscape(id)+"/backfill", req, &b); code != http.StatusAccepted {
		t.Fatalf("backfill: %d %+v", code, b)
	}
	if len(b.Pending) < 22 || len(b.Existing) < 3 {
		t.Fatalf("backfill %d pending, %d existing; want at least the 21 times before the job and one of the outage pending, and the 3 it fired existing", len(b.Pending), len(b.Existing))
	}
	requested := b
	waitFor(t, 60*time.Second, func() bool {
		api(t, f.AdminToken, "GET", survivor, "/v1/jobs/"+url.PathEscape(id)+"/backfill", nil, &b)
		return b.Status == jfapi.BackfillDone
	})
	// Every run of the range finishes (one attempt each): succeeded, or
	// dead because its one attempt was lost (a member that fences itself
	// on a loaded machine loses the heartbeats of its attempts; at most
	// once is what that costs, and it is checked below).
	var runs map[int64]jfapi.Run
	waitFor(t, 60*time.Second, func() bool {
		runs = runsByTime(t, f, id)
		for _, at := range append(append([]time.Time{}, b.Created...), b.Existing...) {
			if r, ok := runs[at.UnixMilli()]; !ok || (r.Status != jfapi.RunSucceeded && r.Status != jfapi.RunDead) {
				return false
			}
		}
		return true
	})
	if n := len(b.Created) + len(b.Existing); n < 24 {
		t.Fatalf("the backfill covers %d times, want at least 24", n)
	}
	lost := map[string]bool{} // runs whose one attempt was lost
	check := func(times []time.Time, backfilled bool) {
		for _, at := range times {
			r := runs[at.UnixMilli()]
			if (r.Reason == dispatch.ReasonBackfilled) != backfilled {
				t.Errorf("run %s: reason %q, but the backfill reports it created=%v", r.ID, r.Reason, backfilled)
			}
			if len(r.Attempts) != 1 {
				t.Errorf("run %s has %d attempts, want 1", r.ID, len(r.Attempts))
				continue
			}
			if r.Status == jfapi.RunDead {
				if a := r.Attempts[0]; !strings.HasPrefix(a.Error, "run lease expired") {
					t.Errorf("run %s is dead with %q; want succeeded, or dead only from a lost attempt", r.ID, a.Error)
				}
				t.Logf("run %s: its attempt was lost (%s)", r.ID, r.Attempts[0].Error)
				lost[r.ID] = true
			}
		}
	}
	t.Logf("backfill: %d created, %d existing; %d were pending at the request", len(b.Created), len(b.Existing), len(requested.Pending))
	check(b.Created, true)
	check(b.Existing, false)
	executed := hook.executed()
	for rid, n := range executed {
		if n != 1 {
			t.Errorf("run %s was executed %d times, want once", rid, n)
		}
	}
	for _, r := range runs {
		if executed[r.ID] == 0 && r.Status == jfapi.RunSucceeded {
			t.Errorf("run %s succeeded but was never executed", r.ID)
		}
	}
	if len(lost) > 2 {
		t.Errorf("%d runs lost their attempt; a loaded machine explains one or two, not more", len(lost))
	}
	for _, at := range b.Created {
		if executed[store.RunID(id, at)] != 1 {
			t.Errorf("backfilled run for %v was not executed", at)
		}
	}
}

// runsByTime returns job id's stored runs by scheduled time (Unix ms).
func runsByTime(t *testing.T, f *fleettest.Fleet, id string) map[int64]jfapi.Run {
	t.Helper()
	var rl jfapi.RunList
	for _, m := range f.Live() {
		if code := api(t, f.AdminToken, "GET", f.Member(m).URL, "/v1/jobs/"+url.PathEscape(id)+"/runs?limit=1000", nil, &rl); code == http.StatusOK {
			break
		}
	}
	out := make(map[int64]jfapi.Run, len(rl.Runs))
	for _, r := range rl.Runs {
		out[r.ScheduledAt.UnixMilli()] = r
	}
	return out
}
