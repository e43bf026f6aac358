package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// failingIndex returns the failing-runs index as stored, by run ID.
func (h *harness) failingIndex() map[string]api.FailingRun {
	h.t.Helper()
	resp, err := h.client.Get(context.Background(), h.store.Keys().AllFailingPrefix(), clientv3.WithPrefix())
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]api.FailingRun{}
	for _, kv := range resp.Kvs {
		var f api.FailingRun
		if err := json.Unmarshal(kv.Value, &f); err != nil {
			h.t.Fatalf("entry %s: %v", kv.Key, err)
		}
		id, at, ok := h.store.Keys().ParseFailingKey(0, string(kv.Key))
		if !ok || f.RunID != store.RunID(id, at) || f.JobID != id {
			h.t.Fatalf("entry %s = %+v: key and run disagree", kv.Key, f)
		}
		out[f.RunID] = f
	}
	return out
}

// describe lists the index as "run:status:attempt:error", sorted.
func describe(idx map[string]api.FailingRun) string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(idx)) {
		f := idx[id]
		out = append(out, fmt.Sprintf("%s:%s:%d:%s", id, f.Status, f.Attempt, f.Error))
	}
	return strings.Join(out, " ")
}

// storedBytes is what the history accounts as stored: the run documents'
// bytes and the failing-runs entries' keys and values.
func (h *harness) storedBytes() int64 {
	h.t.Helper()
	var n int64
	for _, prefix := range []string{h.store.Keys().AllRunsPrefix(), h.store.Keys().AllFailingPrefix()} {
		resp, err := h.client.Get(context.Background(), prefix, clientv3.WithPrefix())
		if err != nil {
			h.t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			n += int64(len(kv.Value))
			if prefix == h.store.Keys().AllFailingPrefix() {
				n += int64(len(kv.Key))
			}
		}
	}
	return n
}

// checkAccounted checks that the owner's history accounts exactly the
// bytes stored. The owner applies a write to its memory after etcd
// acknowledges it, so a test that has just seen the write in etcd may
// read the accounting before it follows: checkAccounted waits (up to 10 s)
// for the two to agree, and fails if they never do.
func (h *harness) checkAccounted(when string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, want := h.disp.Stats().HistoryBytes, h.storedBytes()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Errorf("%s: history accounts %d bytes, %d stored (runs and failing-runs entries)", when, got, want)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIndex waits until the index, described, is want.
func (h *harness) waitIndex(want string) map[string]api.FailingRun {
	h.t.Helper()
	var got map[string]api.FailingRun
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = h.failingIndex()
		if describe(got) == want {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("failing-runs index = %q, want %q", describe(got), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFailingIndexFollowsRunStatus drives runs through the dispatcher and
// checks after every step that the index holds exactly the failed and
// dead runs, with their status, attempt, time and error; that trimmed
// runs, day-old dead runs and deleted jobs take their entries with them;
// and that an owner that loads the partition knows the entries it must
// age out.
func TestFailingIndexFollowsRunStatus(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	retry := api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(10 * time.Second), MaxBackoff: api.Duration(10 * time.Second)}
	h.create(api.Job{ID: "flaky", Schedule: "@every 1h", Retry: retry})
	h.advance(time.Hour)
	run := store.RunID("flaky", t0.Add(time.Hour))

	// Attempt 1 fails: failed, with its error cut to its first bytes.
	long := strings.Repeat("é", api.FailingErrorBytes) // 2 bytes each
	a := h.poll("w1", 1)[0]
	h.waitIndex("")
	failedAt := h.clock.Now()
	if _, err := h.complete(a, "w1", false, long); err != nil {
		t.Fatal(err)
	}
	idx := h.waitIndex(fmt.Sprintf("%s:failed:1:%s", run, long[:api.FailingErrorBytes]))
	h.checkAccounted("a failed run")
	if f := idx[run]; !f.At.Equal(failedAt) {
		t.Errorf("entry at %v, want %v (when the attempt failed)", f.At, failedAt)
	}
	// The retry starts: the run is running, not failing.
	h.advance(10 * time.Second)
	a = h.poll("w1", 1)[0]
	h.waitIndex("")
	if _, err := h.complete(a, "w1", false, "boom 2"); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(run + ":failed:2:boom 2")
	h.advance(10 * time.Second)
	a = h.poll("w1", 1)[0]
	if _, err := h.complete(a, "w1", false, "boom 3"); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(run + ":dead:3:boom 3")
	h.checkAccounted("a dead run")

	// A run that fails, then succeeds, leaves no entry.
	h.create(api.Job{ID: "recovers", Schedule: "@every 1h", Retry: retry, Executor: api.Executor{Type: "other"}})
	h.advance(time.Hour)
	h.waitRuns("recovers", 1)
	rec := store.RunID("recovers", t0.Add(2*time.Hour))
	a = h.pollFor("w2", "other")
	if _, err := h.complete(a, "w2", false, "flap"); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(fmt.Sprintf("%s:dead:3:boom 3 %s:failed:1:flap", run, rec))
	h.advance(10 * time.Second)
	a = h.pollFor("w2", "other")
	if _, err := h.complete(a, "w2", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(run + ":dead:3:boom 3")

	// A job that keeps one run: its dead run's entry goes with the run
	// when the next run trims it.
	h.create(api.Job{ID: "brief", Schedule: "@every 1h", History: api.HistoryPolicy{MaxRuns: 1}, Executor: api.Executor{Type: "brief"}})
	h.advance(time.Hour)
	h.waitRuns("brief", 1)
	first := store.RunID("brief", t0.Add(3*time.Hour))
	a = h.pollFor("w3", "brief")
	if _, err := h.complete(a, "w3", false, "no"); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(fmt.Sprintf("%s:dead:1:no %s:dead:3:boom 3", first, run))
	h.advance(time.Hour)
	h.waitFor("brief's first run trimmed", func() bool {
		runs := h.storedRuns("brief")
		return len(runs) == 1 && runs[0].ID != first
	})
	h.waitIndex(run + ":dead:3:boom 3")
	second := store.RunID("brief", t0.Add(4*time.Hour))
	a = h.pollFor("w3", "brief")
	if _, err := h.complete(a, "w3", false, "no again"); err != nil {
		t.Fatal(err)
	}
	h.waitIndex(fmt.Sprintf("%s:dead:1:no again %s:dead:3:boom 3", second, run))

	// Another owner loads the partition; a day after each run died, its
	// entry goes (the runs stay, for their history retention).
	h.checkAccounted("before the handoff")
	h.stop()
	h.start("m2")
	h.checkAccounted("after the handoff")
	h.pause("flaky", "recovers", "brief")
	diedFlaky := idx[run].At.Add(20 * time.Second) // its third attempt
	h.advance(diedFlaky.Add(api.FailingWindow).Sub(h.clock.Now()) + time.Second)
	h.waitIndex(second + ":dead:1:no again")
	h.checkAccounted("an entry aged out")
	if r, err := h.store.GetRun(context.Background(), run); err != nil || r.Status != api.RunDead {
		t.Fatalf("flaky's dead run = %+v, %v; want it kept", r, err)
	}
	h.advance(4 * time.Hour)
	h.waitIndex("")

	// Deleting a job deletes its entries with its runs.
	h.resume("brief")
	h.advance(time.Hour)
	h.waitRuns("brief", 1)
	a = h.pollFor("w3", "brief")
	if _, err := h.complete(a, "w3", false, "last"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("brief's entry", func() bool { return len(h.failingIndex()) == 1 })
	for _, id := range []string{"flaky", "recovers", "brief"} {
		if err := h.store.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	h.waitFor("every run deleted", func() bool {
		resp, err := h.client.Get(context.Background(), h.store.Keys().AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	h.waitIndex("")
}

// TestFailingIndexOfAReplacedRun: a run ended by concurrency_policy
// replace is dead, and indexed with the reason.
func TestFailingIndexOfAReplacedRun(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "rep", Schedule: "@every 1m", ConcurrencyPolicy: api.ConcurrencyReplace})
	h.advance(time.Minute)
	h.waitRuns("rep", 1)
	h.advance(time.Minute)
	idx := h.waitIndexLen(1)
	f := idx[store.RunID("rep", t0.Add(time.Minute))]
	if f.Status != api.RunDead || f.Attempt != 0 || !strings.HasPrefix(f.Error, "replaced by run ") {
		t.Fatalf("entry = %+v, want dead without attempt, with the reason", f)
	}
}

// TestStaleOwnerCannotWriteTheFailingIndex: an owner whose epoch has
// passed cannot record a failure, so neither the run nor the index
// changes; the next owner's write of the same failure does both.
func TestStaleOwnerCannotWriteTheFailingIndex(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "j", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1}})
	h.advance(time.Hour)
	a := h.poll("w1", 1)[0]

	// Another member takes the partition behind m1's back (m1's
	// dispatcher keeps running on its old epoch).
	key := shard.OwnerKey(h.ns, 0)
	if _, err := h.client.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Put(context.Background(), key, "m2", clientv3.WithLease(h.lease)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.complete(a, "w1", false, "boom"); err == nil {
		t.Fatal("a stale owner recorded a failure")
	}
	if idx := h.failingIndex(); len(idx) != 0 {
		t.Fatalf("stale owner wrote the index: %s", describe(idx))
	}
	if r, err := h.store.GetRun(context.Background(), a.RunID); err != nil || r.Status != api.RunRunning {
		t.Fatalf("run = %+v, %v; want it still running", r, err)
	}
	// A stale owner cannot delete an entry either.
	stale := shard.NewOwnership(h.client, h.ns, "m1", 0, h.own.Epoch)
	entry := h.store.Keys().Failing(0, "j", t0.Add(time.Hour))
	if _, err := h.client.Put(context.Background(), entry, `{}`); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Commit(context.Background(), nil, []clientv3.Op{clientv3.OpDelete(entry)}, nil); !errors.Is(err, shard.ErrFenced) {
		t.Fatalf("stale delete: %v, want ErrFenced", err)
	}
	if g, err := h.client.Get(context.Background(), entry); err != nil || len(g.Kvs) != 1 {
		t.Fatalf("entry after a stale delete: %v, %v; want it kept", g, err)
	}
}

// pollFor takes one attempt of executor type ex as worker.
func (h *harness) pollFor(worker, ex string) api.AttemptGrant {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{ex}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
	if err != nil || len(resp.Attempts) != 1 {
		h.t.Fatalf("poll %s: %+v, %v", ex, resp, err)
	}
	return resp.Attempts[0]
}

// pause pauses jobs and waits until the scheduler has seen it.
func (h *harness) pause(ids ...string) { h.setPaused(true, ids...) }

// resume resumes jobs and waits until the scheduler has seen it.
func (h *harness) resume(ids ...string) { h.setPaused(false, ids...) }

func (h *harness) setPaused(paused bool, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		if _, err := h.store.SetPaused(context.Background(), id, paused); err != nil {
			h.t.Fatal(err)
		}
	}
	h.waitFor("the scheduler sees the change", func() bool {
		for _, id := range ids {
			if h.disp.JobPaused(id) != paused {
				return false
			}
		}
		return true
	})
}

// waitIndexLen waits until the index holds n entries.
func (h *harness) waitIndexLen(n int) map[string]api.FailingRun {
	h.t.Helper()
	var idx map[string]api.FailingRun
	h.waitFor(fmt.Sprintf("%d failing-runs entries", n), func() bool {
		idx = h.failingIndex()
		return len(idx) == n
	})
	return idx
}
