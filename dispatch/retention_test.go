package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// storedRuns returns job id's stored runs, oldest first, read from etcd.
func (h *harness) storedRuns(id string) []api.Run {
	h.t.Helper()
	runs, err := h.store.Runs(context.Background(), id, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Reverse(runs)
	return runs
}

// waitFor waits (in real time, at most a minute: only a failing test
// waits that long) until cond holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pendingTriggers counts job id's trigger requests not yet fired.
func (h *harness) pendingTriggers(id string) int64 {
	h.t.Helper()
	resp, err := h.client.Get(context.Background(), h.store.Keys().TriggerPrefix(0, id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Count
}

// TestTriggersAreCappedAndTrimmed triggers one job 500 times with no
// worker running: at most the active-run cap of its runs wait, the rest
// are recorded skipped and trimmed to its max_runs; once the waiting runs
// have run, it keeps its newest max_runs runs.
func TestTriggersAreCappedAndTrimmed(t *testing.T) {
	const triggers, maxActive, maxRuns = 500, 50, 20
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.MaxActivePerJob = maxActive }
	h.start("m1")
	h.create(api.Job{ID: "hot", RunAt: ptr(t0.Add(24 * time.Hour)), History: api.HistoryPolicy{MaxRuns: maxRuns}})
	// Rounds of 10 concurrent triggers, each round in its own 16 ms.
	for i := 0; i < triggers; i += 10 {
		errs := make(chan error, 10)
		for range 10 {
			go func() {
				_, err := h.store.Trigger(context.Background(), "hot")
				errs <- err
			}()
		}
		for range 10 {
			if err := <-errs; err != nil {
				t.Fatalf("trigger: %v", err)
			}
		}
		h.advance(store.TriggerSlots * time.Millisecond)
		if st := h.disp.Stats(); st.Waiting > maxActive {
			t.Fatalf("%d runs waiting after %d triggers, cap %d", st.Waiting, i+10, maxActive)
		}
	}
	h.waitFor("every trigger fired", func() bool { return h.pendingTriggers("hot") == 0 })
	h.waitFor("the skipped runs trimmed", func() bool { return len(h.storedRuns("hot")) <= maxActive })
	runs := h.storedRuns("hot")
	pending := 0
	for _, r := range runs {
		if r.Status == api.RunPending {
			pending++
		}
	}
	if pending != maxActive || len(runs) != maxActive {
		t.Fatalf("%d runs stored, %d pending; want only the %d the cap let wait", len(runs), pending, maxActive)
	}
	if st := h.disp.Stats(); st.Waiting != maxActive || st.HistoryRuns != maxActive {
		t.Fatalf("stats %+v: want %d waiting and stored", st, maxActive)
	}

	// A worker runs them: then only the newest maxRuns are kept.
	for done := 0; done < maxActive; {
		for _, a := range h.poll("w1", maxActive-done) {
			if _, err := h.complete(a, "w1", true, ""); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	h.waitFor("the history trimmed to max_runs", func() bool { return len(h.storedRuns("hot")) == maxRuns })
	kept := h.storedRuns("hot")
	for i, r := range kept {
		if r.ID != runs[maxActive-maxRuns+i].ID || r.Status != api.RunSucceeded {
			t.Fatalf("kept run %d = %s (%s), want the newest %d runs, succeeded", i, r.ID, r.Status, maxRuns)
		}
	}
}

// TestHistoryMaxRunsAndMaxAge: a job's skipped runs are trimmed to its
// max_runs while its running run stays; final runs older than its max_age
// are trimmed as time passes, also when nothing else happens.
func TestHistoryMaxRunsAndMaxAge(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "single", Schedule: "@every 1s", ConcurrencyPolicy: api.ConcurrencyForbid, History: api.HistoryPolicy{MaxRuns: 5}})
	h.create(api.Job{ID: "aged", Schedule: "@every 1s", Executor: api.Executor{Type: "aged-handler"}, History: api.HistoryPolicy{MaxAge: api.Duration(5 * time.Second)}})
	h.advance(time.Second)
	held := h.poll("w1", 1)[0] // single's first run, running from now on
	if held.JobID != "single" {
		t.Fatalf("polled %s, want single's run", held.JobID)
	}
	for i := 2; i <= 12; i++ {
		h.advance(time.Second)
		if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: held.RunID, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		h.waitRuns("aged", 1)
		// aged's runs succeed as they come.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w2", Executors: []string{"aged-handler"}, Max: 10, Wait: api.Duration(5 * time.Second)})
		cancel()
		if err != nil || len(resp.Attempts) == 0 {
			t.Fatalf("poll aged at step %d: %+v, %v", i, resp, err)
		}
		for _, a := range resp.Attempts {
			if _, err := h.complete(a, "w2", true, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.waitFor("single trimmed to 5 runs", func() bool { return len(h.storedRuns("single")) == 5 })
	if first := h.storedRuns("single")[0]; first.ID != held.RunID || first.Status != api.RunRunning {
		t.Fatalf("oldest kept run of single = %s (%s), want its running run %s", first.ID, first.Status, held.RunID)
	}
	now := h.clock.Now()
	h.waitFor("aged trimmed to its last 5s", func() bool {
		for _, r := range h.storedRuns("aged") {
			if now.Sub(r.ScheduledAt) > 5*time.Second {
				return false
			}
		}
		return true
	})
	if n := len(h.storedRuns("aged")); n < 4 {
		t.Fatalf("aged keeps %d runs, want those of the last 5s", n)
	}
	// Paused, it fires nothing: only the passing of time trims the rest.
	if _, err := h.store.SetPaused(context.Background(), "aged", true); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the pause applied", func() bool {
		j, err := h.store.Get(context.Background(), "aged")
		return err == nil && j.Paused
	})
	time.Sleep(50 * time.Millisecond) // let the scheduler see the pause
	h.advance(6 * time.Second)
	h.waitFor("aged's runs all past their age", func() bool { return len(h.storedRuns("aged")) == 0 })
}

// largeOutputs runs job "loud" (8 KB of output a run) beside job
// "quiet" (small runs, the first of which dies) for n seconds, one fire of
// each a second, and returns the scheduled times of quiet's runs, oldest
// first.
func (h *harness) largeOutputs(n int) []time.Time {
	h.t.Helper()
	var quiet []time.Time
	for i := 1; i <= n; i++ {
		h.advance(time.Second)
		at := t0.Add(time.Duration(i) * time.Second)
		quiet = append(quiet, at)
		got := map[string]api.AttemptGrant{}
		for len(got) < 2 {
			for _, a := range h.poll("w1", 2) {
				got[a.JobID] = a
			}
		}
		loud := got["loud"]
		if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: loud.RunID, Attempt: loud.Attempt, Success: true, Output: strings.Repeat("x", 8000)}); err != nil {
			h.t.Fatal(err)
		}
		if _, err := h.complete(got["quiet"], "w1", i > 1, "boom"); err != nil {
			h.t.Fatal(err)
		}
	}
	return quiet
}

// TestHistoryBudgetTrimsTheLargestJobFirst: a job with large outputs
// fills the partition's history budget; it is trimmed, its oldest runs
// first, while a neighbour with small runs keeps every one of its runs,
// its dead run and that run's failing-runs index entry: the budget trims
// within the job that exceeds its share.
func TestHistoryBudgetTrimsTheLargestJobFirst(t *testing.T) {
	const budget = 64 << 10
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.HistoryBudget = budget }
	h.start("m1")
	h.create(api.Job{ID: "loud", Schedule: "@every 1s"})
	h.create(api.Job{ID: "quiet", Schedule: "@every 1s", Retry: api.RetryPolicy{MaxAttempts: 1}})
	quiet := h.largeOutputs(30) // loud stores about 250 KB, quiet about 20 KB
	h.waitFor("the history within its budget", func() bool { return h.disp.Stats().HistoryBytes <= budget })
	if st := h.disp.Stats(); st.HistoryBudget != budget {
		t.Fatalf("stats budget %d, want %d", st.HistoryBudget, budget)
	}
	var kept []time.Time
	for _, r := range h.storedRuns("quiet") {
		kept = append(kept, r.ScheduledAt)
	}
	if !slices.Equal(kept, quiet) {
		t.Fatalf("quiet keeps runs of %v, want all %d of them", kept, len(quiet))
	}
	dead := store.RunID("quiet", quiet[0])
	if f, ok := h.failingIndex()[dead]; !ok || f.Status != api.RunDead {
		t.Fatalf("the failing-runs index has %+v for quiet's dead run, want its entry", f)
	}
	loud := h.storedRuns("loud")
	if len(loud) < dispatch.DefaultHistoryFloor || len(loud) > 10 {
		t.Fatalf("loud keeps %d runs, want trimmed to a few, at least its floor of %d", len(loud), dispatch.DefaultHistoryFloor)
	}
	if newest := loud[len(loud)-1].ScheduledAt; !newest.Equal(quiet[len(quiet)-1]) {
		t.Fatalf("loud's newest run kept is of %v, want its last (%v): oldest are trimmed first", newest, quiet[len(quiet)-1])
	}
}

// TestHistoryFloorSurvivesALargeOutputNeighbour: with a budget the
// neighbour's floor alone exceeds, a job still keeps its floor (its
// newest three runs) and its newest dead run, with its failing-runs
// index entry; nothing is kept in the index of a run trimmed.
func TestHistoryFloorSurvivesALargeOutputNeighbour(t *testing.T) {
	const budget = 16 << 10 // the least share: loud's floor alone is 24 KB
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.HistoryBudget = budget }
	h.start("m1")
	h.create(api.Job{ID: "loud", Schedule: "@every 1s"})
	h.create(api.Job{ID: "quiet", Schedule: "@every 1s", Retry: api.RetryPolicy{MaxAttempts: 1}})
	quiet := h.largeOutputs(30)
	want := append([]time.Time{quiet[0]}, quiet[len(quiet)-dispatch.DefaultHistoryFloor:]...)
	h.waitFor("quiet trimmed to its floor", func() bool { return len(h.storedRuns("quiet")) <= len(want) })
	var kept []time.Time
	for _, r := range h.storedRuns("quiet") {
		kept = append(kept, r.ScheduledAt)
	}
	if !slices.Equal(kept, want) {
		t.Fatalf("quiet keeps runs of %v, want its dead run and its newest %d: %v", kept, dispatch.DefaultHistoryFloor, want)
	}
	if n := len(h.storedRuns("loud")); n != dispatch.DefaultHistoryFloor {
		t.Fatalf("loud keeps %d runs, want its floor of %d", n, dispatch.DefaultHistoryFloor)
	}
	idx := h.failingIndex()
	if len(idx) != 1 || idx[store.RunID("quiet", quiet[0])].Status != api.RunDead {
		t.Fatalf("failing-runs index %s, want only quiet's dead run", describe(idx))
	}
}

// TestFinishedOneOffJobsAreDeleted: a one-off job is deleted with its runs
// delete_after after it finished; one with "never" is kept; one edited
// meanwhile is kept longer (its retention counts from the edit).
func TestFinishedOneOffJobsAreDeleted(t *testing.T) {
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.DeleteAfter = time.Hour }
	h.start("m1")
	h.create(api.Job{ID: "once"})
	h.create(api.Job{ID: "kept", DeleteAfter: api.RetentionNever})
	edited := h.create(api.Job{ID: "edited", DeleteAfter: "1h"})
	for done := 0; done < 3; {
		for _, a := range h.poll("w1", 3) {
			if _, err := h.complete(a, "w1", true, ""); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	finished := func(id string) bool {
		j, err := h.store.Get(context.Background(), id)
		return err == nil && j.State != nil && !j.State.FinishedAt.IsZero()
	}
	for _, id := range []string{"once", "kept", "edited"} {
		h.waitFor(id+" recorded as finished", func() bool { return finished(id) })
	}
	h.advance(50 * time.Minute)
	edited.Payload = []byte(`{"v":2}`)
	if _, _, err := h.store.Put(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the edit seen", func() bool {
		j, err := h.store.Get(context.Background(), "edited")
		return err == nil && string(j.Payload) == `{"v":2}`
	})
	time.Sleep(50 * time.Millisecond) // let the scheduler take the edit in
	h.advance(11 * time.Minute)
	gone := func(id string) bool {
		_, err := h.store.Get(context.Background(), id)
		return errors.Is(err, store.ErrNotFound)
	}
	h.waitFor("once deleted", func() bool { return gone("once") })
	if runs := h.storedRuns("once"); len(runs) != 0 {
		t.Fatalf("the deleted job's runs are left: %+v", runs)
	}
	for _, id := range []string{"kept", "edited"} {
		if gone(id) {
			t.Fatalf("%s was deleted an hour after it finished", id)
		}
	}
	h.advance(50 * time.Minute) // an hour after the edit
	h.waitFor("edited deleted", func() bool { return gone("edited") })
	h.advance(24 * time.Hour)
	time.Sleep(100 * time.Millisecond)
	if gone("kept") || len(h.storedRuns("kept")) != 1 {
		t.Fatal(`the job with delete_after "never" was deleted`)
	}
}

// TestDeleteJobOpKeepsAConcurrentEdit: the deletion of a finished job
// applies only to the version of the spec it was decided on and only while
// no trigger request is pending.
func TestDeleteJobOpKeepsAConcurrentEdit(t *testing.T) {
	h := newHarness(t)
	k := h.store.Keys()
	j, err := h.store.Create(context.Background(), api.Job{ID: "x", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}})
	if err != nil {
		t.Fatal(err)
	}
	stale := j.Revision
	j2, _, err := h.store.Put(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(rev int64) bool {
		resp, err := h.client.Txn(context.Background()).Then(k.DeleteJobOp(0, "x", rev, 0)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Responses[0].GetResponseTxn().Succeeded
	}
	if apply(stale) {
		t.Fatal("deleted the job at a stale revision: the edit was lost")
	}
	if _, err := h.store.Trigger(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if apply(j2.Revision) {
		t.Fatal("deleted the job with a trigger pending: the trigger was lost")
	}
	if _, err := h.client.Delete(context.Background(), k.TriggerPrefix(0, "x"), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if !apply(j2.Revision) {
		t.Fatal("the current version was not deleted")
	}
	if _, err := h.store.Get(context.Background(), "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the deletion: %v", err)
	}
}

// TestFireOfAChangedJobIsRefused holds a fire's write in a stalled etcd
// connection while the job is deleted and created again: when the write
// arrives it is refused (it was decided from the earlier job), so the new
// job has no run for a time before its creation. Found by the chaos suite
// (a burst of deletes and re-creates while partitions moved).
func TestFireOfAChangedJobIsRefused(t *testing.T) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	h.configure = func(c *dispatch.Config) { c.RequestTimeout = time.Minute }
	h.start("m1")
	h.create(api.Job{ID: "j", Schedule: "@every 1s"})

	bridge.Cut()
	restored := false
	defer func() {
		if !restored {
			bridge.Restore()
		}
	}()
	// j@t0+1s is due: its write waits in the bridge. The scheduler may be
	// held in the bridge already (taking the job in), so the clock moves
	// without waiting for it to park.
	h.clock.Advance(time.Second)
	h.waitFor("the fire's write to start", func() bool { return h.disp.WriterBusy(0) })
	if err := h.store.Delete(context.Background(), "j"); err != nil {
		t.Fatal(err)
	}
	again, err := h.store.Create(context.Background(), api.Job{ID: "j", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}})
	if err != nil {
		t.Fatal(err)
	}
	// Every run written from the new job's creation on, in etcd's history.
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wch := h.client.Watch(wctx, h.store.Keys().RunPrefix(0, "j"), clientv3.WithPrefix(), clientv3.WithRev(again.Revision))
	bridge.Restore()
	restored = true
	h.waitFor("the write answered", func() bool { return !h.disp.WriterBusy(0) })
	h.advance(time.Second)
	next := h.store.Keys().Run(0, "j", t0.Add(2*time.Second))
	for seen := false; !seen; {
		wr := <-wch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			_, at, _ := h.store.Keys().ParseRunKey(0, string(ev.Kv.Key))
			if ev.Type == clientv3.EventTypePut && ev.Kv.Version == 1 && !at.After(again.CreatedAt) {
				t.Fatalf("run %s created at revision %d, after the job was created again (revision %d), for a time before its creation", ev.Kv.Key, ev.Kv.ModRevision, again.Revision)
			}
			seen = seen || string(ev.Kv.Key) == next
		}
	}
}

// TestTriggerBacklogIsFiredInSeveralWrites: 200 trigger requests made
// while the partition had no owner are all fired once an owner takes it,
// in writes of bounded size (one write for all would exceed etcd's
// operations per transaction).
func TestTriggerBacklogIsFiredInSeveralWrites(t *testing.T) {
	const backlog = 200
	h := newHarness(t)
	if _, err := h.store.Create(context.Background(), api.Job{ID: "queued", RunAt: ptr(t0.Add(24 * time.Hour)),
		Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}}); err != nil {
		t.Fatal(err)
	}
	for i := range backlog {
		if _, err := h.store.Trigger(context.Background(), "queued"); err != nil {
			t.Fatalf("trigger %d: %v", i, err)
		}
		if i%store.TriggerSlots == store.TriggerSlots-1 {
			h.clock.Advance(store.TriggerSlots * time.Millisecond) // no scheduler runs yet
		}
	}
	h.start("m1")
	h.waitFor("every trigger fired", func() bool { return h.pendingTriggers("queued") == 0 })
	j, err := h.store.Get(context.Background(), "queued")
	if err != nil {
		t.Fatal(err)
	}
	if j.State == nil || j.State.Fired+j.State.Skipped != backlog {
		t.Fatalf("state %+v: want %d triggers accounted", j.State, backlog)
	}
}

// quotaGate is a SpaceGate of an etcd that takes writes and has quota
// bytes of space.
type quotaGate struct{ quota int64 }

func (quotaGate) WritesRefused() error { return nil }
func (quotaGate) NoteWriteError(error) {}
func (g quotaGate) Quota() int64       { return g.quota }

// TestHistoryBudgetIsAtMostHalfTheQuota: with the default history budget
// (1 GiB) and an etcd of a small quota, the budget the scheduler keeps is
// half the quota, and a job with large outputs is trimmed to it: run
// history alone cannot fill etcd whatever the budget says.
func TestHistoryBudgetIsAtMostHalfTheQuota(t *testing.T) {
	const quota = 128 << 10
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.Space = quotaGate{quota: quota} }
	h.start("m1")
	h.create(api.Job{ID: "loud", Schedule: "@every 1s"})
	h.create(api.Job{ID: "quiet", Schedule: "@every 1s", Retry: api.RetryPolicy{MaxAttempts: 1}})
	h.largeOutputs(30) // loud stores about 250 KB
	if st := h.disp.Stats(); st.HistoryBudget != quota/2 {
		t.Fatalf("stats budget %d, want half the quota, %d", st.HistoryBudget, quota/2)
	}
	h.waitFor("the history within half the quota", func() bool { return h.disp.Stats().HistoryBytes <= quota/2 })
	if loud := h.storedRuns("loud"); len(loud) < dispatch.DefaultHistoryFloor || len(loud) > 10 {
		t.Fatalf("loud keeps %d runs, want trimmed to a few, at least its floor of %d", len(loud), dispatch.DefaultHistoryFloor)
	}
}
