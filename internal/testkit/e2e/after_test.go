package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	clientv3 "go.etcd.io/etcd/client/v3"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// afterFleet is a fleet of members with workers and a receiver that
// fails the executions whose body says so.
type afterFleet struct {
	f   *fleettest.Fleet
	rcv *receiver
}

func newAfterFleet(t *testing.T, members int) *afterFleet {
	t.Helper()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	for i := range members {
		f.Join(fmt.Sprintf("m%d", i+1))
	}
	f.WaitSettled(15 * time.Second)
	rcv := newReceiver(t)
	rcv.fail = func(e execution) int {
		if strings.Contains(e.body, `"fail":true`) {
			return http.StatusInternalServerError
		}
		return 0
	}
	startWorkers(t, 2, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	return &afterFleet{f: f, rcv: rcv}
}

// ownerOf returns the member that owns job id's partition.
func (af *afterFleet) ownerOf(t *testing.T, id string) string {
	t.Helper()
	p := shard.Partition(id, af.f.Partitions())
	owner := ""
	waitFor(t, 15*time.Second, func() bool {
		owners, _, err := af.f.Owners(context.Background())
		if err != nil {
			return false
		}
		owner = owners[p].Member
		return owner != ""
	})
	return owner
}

// idOwnedBy returns the first ID of the form prefix-N whose partition
// member owns (or, with other, does not own).
func (af *afterFleet) idOwnedBy(t *testing.T, prefix, member string, other bool) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if (af.ownerOf(t, id) == member) != other {
			return id
		}
	}
	t.Fatalf("no ID of %s owned as asked", prefix)
	return ""
}

// save creates job j and waits until every member's dependency index has
// its edges.
func (af *afterFleet) save(t *testing.T, j jfapi.Job) {
	t.Helper()
	var stored jfapi.Job
	if code := api(t, af.f.AdminToken, "POST", af.f.URLs()[0], "/v1/jobs", j, &stored); code != http.StatusCreated {
		t.Fatalf("create %s: %d", j.ID, code)
	}
	if len(j.After) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range af.f.Live() {
		d, err := af.f.Member(id).Orch.Dispatcher()
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WaitDependencies(ctx, stored.Revision); err != nil {
			t.Fatalf("member %s did not read the dependencies of %s: %v", id, j.ID, err)
		}
	}
}

// trigger fires job id with payload and returns the run's ID.
func (af *afterFleet) trigger(t *testing.T, id string, payload string) string {
	t.Helper()
	var tr jfapi.Triggered
	body := map[string]any{"payload": jsonRaw(payload)}
	if code := api(t, af.f.AdminToken, "POST", af.f.URLs()[0], "/v1/jobs/"+url.PathEscape(id)+"/trigger", body, &tr); code != http.StatusAccepted {
		t.Fatalf("trigger %s: %d", id, code)
	}
	return tr.RunID
}

type jsonRaw string

func (r jsonRaw) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// finalRuns waits until job id has n runs, all final, and returns them by
// ID.
func (af *afterFleet) finalRuns(t *testing.T, id string, n int) map[string]jfapi.Run {
	t.Helper()
	var out map[string]jfapi.Run
	deadline := time.Now().Add(60 * time.Second)
	for {
		out = map[string]jfapi.Run{}
		open := 0
		for _, r := range runsOf(t, af.f.AdminToken, af.f.URLs()[0], id) {
			if !r.Status.Final() {
				open++
			}
			out[r.ID] = r
		}
		if open == 0 && len(out) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %d runs, %d of them not final, after a minute; want %d final", id, len(out), open, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(out) != n {
		t.Fatalf("job %s has %d runs, want %d: %v", id, len(out), n, out)
	}
	return out
}

// pendingHandovers counts the hand-over keys of job id in etcd.
func (af *afterFleet) pendingHandovers(t *testing.T, id string) int64 {
	t.Helper()
	k := store.Keys{NS: af.f.NS}
	resp, err := af.f.Client.Get(context.Background(), k.AfterPrefix(shard.Partition(id, af.f.Partitions()), id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// checkCaused asserts that down's runs are one per upstream run of ups
// (by ID) and that each names it in caused_by.
func checkCaused(t *testing.T, down map[string]jfapi.Run, ups map[string]jfapi.Run, upJob string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range down {
		c := r.CausedBy
		if c == nil || c.Job != upJob {
			t.Fatalf("run %s: caused_by %+v, want a run of %s", r.ID, c, upJob)
		}
		u, ok := ups[c.Run]
		if !ok || u.Status != c.Status {
			t.Fatalf("run %s: caused_by %+v names no upstream run that ended so (%+v)", r.ID, c, u)
		}
		if seen[c.Run] {
			t.Fatalf("upstream run %s fired %s twice", c.Run, r.JobID)
		}
		seen[c.Run] = true
	}
	if len(seen) != len(ups) {
		t.Fatalf("%d of %d upstream runs fired the downstream job", len(seen), len(ups))
	}
}

// TestAfterFiresOncePerUpstreamRunAcrossMembers: an upstream job and two
// jobs after it, their partitions owned by different members; one runs
// after the upstream runs that succeed, the other after those that end
// dead. Every upstream run fires exactly the job whose states list its
// end, once, with caused_by naming it; nothing else fires them.
func TestAfterFiresOncePerUpstreamRunAcrossMembers(t *testing.T) {
	af := newAfterFleet(t, 2)
	up := af.idOwnedBy(t, "team/extract", "m1", false)
	okID := af.idOwnedBy(t, "team/load", "m1", true)
	deadID := af.idOwnedBy(t, "team/alert", "m1", true)
	hook := af.rcv.srv.URL
	af.save(t, jfapi.Job{ID: okID, Executor: jfapi.Executor{Type: "http", URL: hook}, After: []jfapi.Dependency{{Job: up}}})
	af.save(t, jfapi.Job{ID: deadID, Executor: jfapi.Executor{Type: "http", URL: hook},
		After: []jfapi.Dependency{{Job: up, On: []jfapi.RunStatus{jfapi.RunDead}}}})
	af.save(t, jfapi.Job{ID: up, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Executor: jfapi.Executor{Type: "http", URL: hook}})

	const n = 6
	for i := range n {
		af.trigger(t, up, fmt.Sprintf(`{"i":%d,"fail":%v}`, i, i%3 == 0))
	}
	ups := af.finalRuns(t, up, n)
	succeeded, dead := map[string]jfapi.Run{}, map[string]jfapi.Run{}
	for id, r := range ups {
		switch r.Status {
		case jfapi.RunSucceeded:
			succeeded[id] = r
		case jfapi.RunDead:
			dead[id] = r
		default:
			t.Fatalf("upstream run %s ended %s", id, r.Status)
		}
	}
	if len(succeeded) != 4 || len(dead) != 2 {
		t.Fatalf("upstream runs: %d succeeded, %d dead; want 4 and 2", len(succeeded), len(dead))
	}
	downOK := af.finalRuns(t, okID, len(succeeded))
	downDead := af.finalRuns(t, deadID, len(dead))
	waitFor(t, 10*time.Second, func() bool { return af.pendingHandovers(t, okID)+af.pendingHandovers(t, deadID) == 0 })
	checkCaused(t, downOK, succeeded, up)
	checkCaused(t, downDead, dead, up)
	// Nothing more comes: the hand-overs are consumed and the counts hold.
	if got := len(af.finalRuns(t, okID, len(succeeded))); got != len(succeeded) {
		t.Fatalf("%s has %d runs, want %d", okID, got, len(succeeded))
	}

	// Saving: a credential may name only upstream jobs it may read; a
	// cycle is refused naming it.
	team := af.f.Token(jfapi.RoleOperator, "team/")
	other := jfapi.Job{ID: "team/x", Executor: jfapi.Executor{Type: "http", URL: hook}, After: []jfapi.Dependency{{Job: "billing/extract"}}}
	if code := api(t, team, "POST", af.f.URLs()[0], "/v1/jobs", other, nil); code != http.StatusForbidden {
		t.Fatalf("a team's job after another team's: %d, want 403", code)
	}
	cyc := jfapi.Job{ID: up, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Executor: jfapi.Executor{Type: "http", URL: hook}, After: []jfapi.Dependency{{Job: okID}}}
	var e struct{ Error string }
	if code := api(t, team, "PUT", af.f.URLs()[0], "/v1/jobs/"+url.PathEscape(up), cyc, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "after: cycle "+up+" -> "+okID+" -> "+up) {
		t.Fatalf("a cycle: %d %q, want 400 naming it", code, e.Error)
	}

	// A deleted job drops its pending hand-overs: paused, it holds one;
	// deleted, it is gone.
	if code := api(t, af.f.AdminToken, "POST", af.f.URLs()[0], "/v1/jobs/"+url.PathEscape(okID)+"/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	af.trigger(t, up, `{"i":99}`)
	waitFor(t, 30*time.Second, func() bool { return af.pendingHandovers(t, okID) == 1 })
	if code := api(t, af.f.AdminToken, "DELETE", af.f.URLs()[0], "/v1/jobs/"+url.PathEscape(okID), nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if n := af.pendingHandovers(t, okID); n != 0 {
		t.Fatalf("%d hand-overs of a deleted job remain", n)
	}

	// describe's downstream list.
	var deps jfapi.Dependents
	if code := api(t, af.f.AdminToken, "GET", af.f.URLs()[1], "/v1/jobs/"+url.PathEscape(up)+"/dependents", nil, &deps); code != http.StatusOK || len(deps.Dependents) != 1 || deps.Dependents[0].Job != deadID {
		t.Fatalf("dependents of %s: %d %+v, want %s (the other one deleted)", up, code, deps, deadID)
	}
}

// TestAfterExactlyOnceAcrossCrashes: hand-overs pending for a paused job
// (held until it is resumed) survive the crash of its partition's owner
// and fire once each when the job is resumed on the next owner; and the
// owner of the upstream job crashes while its runs are in flight: every
// upstream run that ends still fires the job after it exactly once.
func TestAfterExactlyOnceAcrossCrashes(t *testing.T) {
	t.Parallel()
	af := newAfterFleet(t, 3)
	f := af.f
	hook := af.rcv.srv.URL
	up := af.idOwnedBy(t, "team/up", "m1", false)
	held := af.idOwnedBy(t, "team/held", "m2", false)
	live := af.idOwnedBy(t, "team/live", "m1", true)
	both := []jfapi.RunStatus{jfapi.RunSucceeded, jfapi.RunDead}
	af.save(t, jfapi.Job{ID: held, Paused: true, Executor: jfapi.Executor{Type: "http", URL: hook}, After: []jfapi.Dependency{{Job: up, On: both}}})
	af.save(t, jfapi.Job{ID: live, Executor: jfapi.Executor{Type: "http", URL: hook}, After: []jfapi.Dependency{{Job: up, On: both}}})
	af.save(t, jfapi.Job{ID: up, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Executor: jfapi.Executor{Type: "http", URL: hook},
		Retry: jfapi.RetryPolicy{MaxAttempts: 5, InitialBackoff: jfapi.Duration(10 * time.Millisecond)}})

	// Upstream runs, and a crash of their owner while they run.
	const n = 8
	for i := range n {
		af.trigger(t, up, fmt.Sprintf(`{"i":%d}`, i))
		if i == n/2 {
			f.Crash("m1")
		}
	}
	ups := af.finalRuns(t, up, n)
	af.finalRuns(t, live, n)
	waitFor(t, 30*time.Second, func() bool { return af.pendingHandovers(t, held) == n })
	if runs := runsOf(t, f.AdminToken, f.URLs()[0], held); len(runs) != 0 {
		t.Fatalf("paused job %s has %d runs, want none while paused", held, len(runs))
	}

	// The held job's owner crashes with its hand-overs pending; the job
	// is resumed on the member that takes its partition.
	f.Crash("m2")
	f.WaitSettled(30 * time.Second)
	if code := api(t, f.AdminToken, "POST", f.Member("m3").URL, "/v1/jobs/"+url.PathEscape(held)+"/resume", nil, nil); code != http.StatusOK {
		t.Fatalf("resume %s: %d", held, code)
	}
	downHeld := af.finalRuns(t, held, n)
	waitFor(t, 10*time.Second, func() bool { return af.pendingHandovers(t, held)+af.pendingHandovers(t, live) == 0 })
	checkCaused(t, downHeld, ups, up)
	checkCaused(t, af.finalRuns(t, live, n), ups, up)
}
