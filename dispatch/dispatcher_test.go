package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// t0 is the fake clock's start: a whole second, so @every schedules fire
// at t0+1s, t0+2s, …
var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// harness runs one partition's scheduler (P=1) against real etcd on a fake
// clock, holding the owner key itself so tests can hand the partition over
// between "members".
type harness struct {
	t      *testing.T
	client *clientv3.Client
	ns     string
	clock  *clockwork.FakeClock
	store  *store.Etcd
	lease  clientv3.LeaseID

	disp   *dispatch.Dispatcher
	own    *shard.Ownership
	cancel context.CancelFunc
	done   chan struct{}

	// Set before start: the dispatcher's etcd client (nil: client), and
	// changes to its configuration.
	dispClient *clientv3.Client
	configure  func(*dispatch.Config)
	// next, if set, is the dispatcher the next start runs (made with
	// newDispatcher), instead of a new one.
	next *dispatch.Dispatcher
	// stops are run, and cleared, when the dispatcher stops (what
	// configure started for it).
	stops []func()
	// deliverer is the notifications' deliverer of the running
	// dispatcher, nil without one (withNotify).
	deliverer *notify.Deliverer
}

const runLease = 10 * time.Second

func newHarness(t *testing.T) *harness {
	t.Helper()
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	lr, err := client.Grant(context.Background(), 120)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:      t,
		client: client,
		ns:     ns,
		clock:  clockwork.NewFakeClockAt(t0),
		lease:  lr.ID,
	}
	h.store = store.NewEtcd(client, ns, 1, api.DefaultLimits(), h.clock.Now)
	t.Cleanup(h.stop)
	return h
}

// start makes member own partition 0 with a fresh epoch and runs its
// scheduler.
func (h *harness) start(member string) {
	h.t.Helper()
	key := shard.OwnerKey(h.ns, 0)
	resp, err := h.client.Txn(context.Background()).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, member, clientv3.WithLease(h.lease))).
		Commit()
	if err != nil || !resp.Succeeded {
		h.t.Fatalf("acquire partition 0: %v (succeeded=%v)", err, resp != nil && resp.Succeeded)
	}
	client := h.client
	if h.dispClient != nil {
		client = h.dispClient
	}
	h.own = shard.NewOwnership(client, h.ns, member, 0, resp.Header.Revision)
	d := h.next
	if d == nil {
		d = h.newDispatcher(member)
	}
	h.next = nil
	ctx, cancel := context.WithCancel(context.Background())
	h.disp, h.cancel, h.done = d, cancel, make(chan struct{})
	go func() { defer close(h.done); d.Work(ctx, h.own) }()
	h.waitOwned()
}

// newDispatcher returns the dispatcher of member, configured as start
// configures it.
func (h *harness) newDispatcher(member string) *dispatch.Dispatcher {
	h.t.Helper()
	client := h.client
	if h.dispClient != nil {
		client = h.dispClient
	}
	cfg := dispatch.DefaultConfig(h.ns, 1, member, "http://"+member+".invalid")
	cfg.RunLease = runLease
	cfg.Misfire.Grace = 400 * time.Millisecond
	cfg.Clock = h.clock
	cfg.Logger = zaptest.NewLogger(h.t)
	if h.configure != nil {
		h.configure(&cfg)
	}
	d, err := dispatch.New(client, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// parked waits until the scheduler waits on its timer (it stops the timer
// while it works): a controlled clock's timer computes its expiry from the
// time it is set, so the clock must not move between the scheduler
// computing when to wake up and setting its timer, or the move is lost
// for that wake-up.
func (h *harness) parked() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		h.t.Fatalf("the scheduler did not wait on its timer within 10s: %v", err)
	}
}

// advance moves the controlled clock by d once the scheduler waits on its
// timer (see parked).
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.parked()
	h.clock.Advance(d)
}

func (h *harness) waitOwned() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.disp.Owned()) == 0 {
		if time.Now().After(deadline) {
			h.t.Fatal("partition not loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the scheduler and releases the owner key.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.cancel = nil
	for _, stop := range h.stops {
		stop()
	}
	h.stops = nil
	h.client.Txn(context.Background()).
		If(h.own.Fence()).
		Then(clientv3.OpDelete(h.own.Key)).
		Commit()
}

func (h *harness) create(j api.Job) api.Job {
	h.t.Helper()
	if j.Executor.Type == "" && len(j.Steps) == 0 {
		j.Executor = api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}
	}
	stored, err := h.store.Create(context.Background(), j)
	if err != nil {
		h.t.Fatalf("create job %s: %v", j.ID, err)
	}
	// Wait until the scheduler has taken the job in (it records its
	// state), so the fake clock is not advanced before the job is known.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := h.client.Get(context.Background(), h.store.Keys().State(0, j.ID))
		if err == nil && len(resp.Kvs) == 1 {
			return stored
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s: scheduler did not take it in", j.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firedOnce fails t if two of runs have the same scheduled time.
func firedOnce(t *testing.T, runs []api.Run) {
	t.Helper()
	seen := map[time.Time]bool{}
	for _, r := range runs {
		if seen[r.ScheduledAt] {
			t.Fatalf("scheduled time %v fired twice", r.ScheduledAt)
		}
		seen[r.ScheduledAt] = true
	}
}

// waitRuns waits until job id has n runs and returns them, newest first.
func (h *harness) waitRuns(id string, n int) []api.Run {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := h.store.Runs(context.Background(), id, 1000)
		if err == nil && len(runs) >= n && h.holds(id, runs) {
			return runs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s: %d runs after 10s, want %d (or the owner does not hold those not final yet)", id, len(runs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holds reports whether the dispatcher, if it owns job id's partition,
// holds every run of runs that is not final among those it hands out.
func (h *harness) holds(id string, runs []api.Run) bool {
	if h.disp == nil {
		return true
	}
	for _, r := range runs {
		if !r.Status.Final() && !h.disp.HoldsRun(id, r.ID) {
			return false
		}
	}
	return true
}

// waitRun waits until run id satisfies cond.
func (h *harness) waitRun(runID string, cond func(api.Run) bool) api.Run {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := h.store.GetRun(context.Background(), runID)
		if err == nil && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s: condition not met after 10s (last %+v, %v)", runID, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// poll takes up to max attempts as worker, waiting (in real time, at most
// 10s) for at least one.
func (h *harness) poll(worker string, max int) []api.AttemptGrant {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: max, Wait: api.Duration(api.MaxPollWait)})
	if err != nil {
		h.t.Fatalf("poll: %v", err)
	}
	if len(resp.Attempts) == 0 {
		h.t.Fatal("poll: no attempt within 10s")
	}
	return resp.Attempts
}

func (h *harness) complete(a api.AttemptGrant, worker string, success bool, msg string) (api.CompleteResponse, error) {
	return h.disp.Complete(context.Background(), api.CompleteRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt, Success: success, Error: msg})
}

func TestEverySecondFiresEachTimeOnce(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
	for i := 1; i <= 3; i++ {
		h.advance(time.Second)
		h.waitRuns("tick", i)
	}
	runs := h.waitRuns("tick", 3)
	if len(runs) != 3 {
		t.Fatalf("got %d runs, want 3", len(runs))
	}
	for i, r := range runs {
		want := t0.Add(time.Duration(3-i) * time.Second)
		if !r.ScheduledAt.Equal(want) || r.ID != store.RunID("tick", want) || r.Status != api.RunPending || r.Owner != "m1" || r.Epoch != h.own.Epoch {
			t.Errorf("run %d = %+v, want pending run for %v fired by m1@%d", i, r, want, h.own.Epoch)
		}
	}
	// The job document shows the owner's scheduling state.
	j, err := h.store.Get(context.Background(), "tick")
	if err != nil {
		t.Fatal(err)
	}
	if j.State == nil || j.State.Fired != 3 || !j.State.Next.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("job state = %+v, want 3 fired and next at t0+4s", j.State)
	}
}

func TestAttemptSucceeds(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "job", Schedule: "@every 1m", Payload: []byte(`{"x":1}`)})
	h.advance(time.Minute)
	as := h.poll("w1", 5)
	if len(as) != 1 {
		t.Fatalf("got %d assignments, want 1", len(as))
	}
	a := as[0]
	if a.JobID != "job" || a.Attempt != 1 || string(a.Payload) != `{"x":1}` || a.Owner != "m1" || a.RunLease.Std() != runLease {
		t.Fatalf("assignment = %+v", a)
	}
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunRunning })
	if len(r.Attempts) != 1 || r.Attempts[0].Worker != "w1" {
		t.Fatalf("recorded attempts = %+v, want one by w1 (recorded before hand-out)", r.Attempts)
	}
	resp, err := h.complete(a, "w1", true, "")
	if err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete = %+v, %v; want succeeded", resp, err)
	}
	r = h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunSucceeded })
	if r.Attempts[0].FinishedAt.IsZero() {
		t.Errorf("finished attempt has no finished_at: %+v", r.Attempts[0])
	}
	// A second report of the same attempt is stale.
	if _, err := h.complete(a, "w1", false, "late"); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("second complete: err = %v, want ErrStaleAttempt", err)
	}
}

func TestRetriesWithBackoffThenDead(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "flaky", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(10 * time.Second), MaxBackoff: api.Duration(time.Minute)}})
	h.advance(time.Hour)
	a := h.poll("w1", 1)[0]
	resp, err := h.complete(a, "w1", false, "boom 1")
	if err != nil || resp.Status != api.RunFailed {
		t.Fatalf("complete 1 = %+v, %v; want failed (retry pending)", resp, err)
	}
	// Not dispatchable before the backoff (at least half of 10s).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	early, _ := h.disp.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1})
	cancel()
	if len(early.Attempts) != 0 {
		t.Fatalf("retry handed out before its backoff: %+v", early.Attempts)
	}
	h.advance(10 * time.Second)
	a2 := h.poll("w2", 1)[0]
	if a2.RunID != a.RunID || a2.Attempt != 2 {
		t.Fatalf("retry = %+v, want attempt 2 of %s", a2, a.RunID)
	}
	if _, err := h.complete(a2, "w2", false, "boom 2"); err != nil {
		t.Fatal(err)
	}
	h.advance(20 * time.Second)
	a3 := h.poll("w1", 1)[0]
	resp, err = h.complete(a3, "w1", false, "boom 3")
	if err != nil || resp.Status != api.RunDead {
		t.Fatalf("complete 3 = %+v, %v; want dead", resp, err)
	}
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunDead })
	if len(r.Attempts) != 3 || r.Attempts[2].Error != "boom 3" || r.Attempts[0].Worker != "w1" || r.Attempts[1].Worker != "w2" {
		t.Fatalf("attempts = %+v", r.Attempts)
	}
}

func TestLostAttemptIsRetriedAndItsLateReportRejected(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "lost", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(time.Second)}})
	h.advance(time.Hour)
	a := h.poll("w-dies", 1)[0]
	// The worker heartbeats once, then dies.
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w-dies", RunID: a.RunID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	h.advance(runLease + time.Second)
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunFailed })
	if got := r.Attempts[0].Error; got == "" {
		t.Fatalf("lost attempt has no error: %+v", r.Attempts[0])
	}
	h.advance(2 * time.Second)
	a2 := h.poll("w-new", 1)[0]
	if a2.Attempt != 2 {
		t.Fatalf("retry attempt = %d, want 2", a2.Attempt)
	}
	// The dead worker's late report and heartbeat are refused.
	if _, err := h.complete(a, "w-dies", true, ""); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("late complete: err = %v, want ErrStaleAttempt", err)
	}
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w-dies", RunID: a.RunID, Attempt: 1}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("late heartbeat: err = %v, want ErrStaleAttempt", err)
	}
	if resp, err := h.complete(a2, "w-new", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete attempt 2 = %+v, %v", resp, err)
	}
	r = h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunSucceeded })
	if len(r.Attempts) != 2 || r.Attempts[1].Worker != "w-new" {
		t.Fatalf("attempts = %+v", r.Attempts)
	}
}

func TestTimeoutEndsAttemptThatKeepsHeartbeating(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "slow", Schedule: "@every 1h", Timeout: api.Duration(30 * time.Second)})
	h.advance(time.Hour)
	a := h.poll("w1", 1)[0]
	for range 5 { // 5×9s = 45s > timeout + lease
		h.advance(9 * time.Second)
		h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: 1})
	}
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunDead })
	if e := r.Attempts[0].Error; e == "" {
		t.Fatalf("timed-out attempt has no error")
	}
}

func TestForbidSkipsAndRecordsFiresWhileRunning(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "single", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyForbid})
	h.advance(10 * time.Second)
	a := h.poll("w1", 1)[0]
	for i := 2; i <= 3; i++ {
		h.advance(10 * time.Second)
		h.waitRuns("single", i)
		if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
	}
	runs := h.waitRuns("single", 3)
	skipped := 0
	for _, r := range runs {
		if r.Status == api.RunSkipped {
			skipped++
			if r.Reason == "" {
				t.Errorf("skipped run %s has no reason", r.ID)
			}
		}
	}
	if skipped != 2 {
		t.Fatalf("runs = %+v, want 2 skipped while the first ran", runs)
	}
	if _, err := h.complete(a, "w1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.advance(10 * time.Second)
	runs = h.waitRuns("single", 4)
	if runs[0].Status != api.RunPending {
		t.Fatalf("after the run finished, the next fire is %s, want pending", runs[0].Status)
	}
}

func TestHandoffNeitherRefiresNorLosesRuns(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
	h.advance(time.Second)
	h.waitRuns("tick", 1)
	h.advance(time.Second)
	h.waitRuns("tick", 2)
	a := h.poll("w1", 1)[0] // in flight across the handoff
	oldEpoch := h.own.Epoch

	h.stop()
	h.start("m2")
	if h.own.Epoch <= oldEpoch {
		t.Fatalf("new epoch %d not above old %d", h.own.Epoch, oldEpoch)
	}
	// The in-flight attempt is adopted: its worker heartbeats and
	// completes at the new owner.
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); err != nil {
		t.Fatalf("heartbeat after handoff: %v", err)
	}
	if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete after handoff = %+v, %v", resp, err)
	}
	h.advance(time.Second)
	runs := h.waitRuns("tick", 3)
	firedOnce(t, runs)
	if len(runs) != 3 {
		t.Fatalf("got %d runs, want 3", len(runs))
	}
	// The stale owner's fence refuses its writes.
	stale := shard.NewOwnership(h.client, h.ns, "m1", 0, oldEpoch)
	if _, err := stale.Commit(context.Background(), nil, []clientv3.Op{clientv3.OpPut(h.ns+"x", "y")}, nil); !errors.Is(err, shard.ErrFenced) {
		t.Fatalf("stale owner's commit: %v, want ErrFenced", err)
	}
}

func TestMisfirePoliciesOnTakeover(t *testing.T) {
	tests := []struct {
		policy api.MisfirePolicy
		want   int // runs after a 10.5s outage of a per-second job that fired once before
	}{
		// With a 400ms grace no time in the outage is on time at the
		// takeover: run_once fires the latest, skip none, run_all all ten.
		{api.MisfireRunOnce, 2},
		{api.MisfireSkip, 1},
		{api.MisfireRunAll, 11},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			h := newHarness(t)
			h.start("m1")
			h.create(api.Job{ID: "m", Schedule: "@every 1s", MisfirePolicy: tt.policy})
			h.advance(time.Second)
			h.waitRuns("m", 1)
			h.stop()                                               // the partition has no owner for 10s
			h.clock.Advance(10*time.Second + 500*time.Millisecond) // no scheduler runs
			h.start("m2")
			h.waitRuns("m", tt.want)
			// Let the new owner settle and make sure nothing more fires.
			h.poll("w", 1)
			runs, _ := h.store.Runs(context.Background(), "m", 1000)
			if len(runs) != tt.want {
				t.Fatalf("got %d runs, want %d", len(runs), tt.want)
			}
		})
	}
}

func TestTriggerFiresOnceAndIsConsumed(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "manual", RunAt: ptr(t0.Add(24 * time.Hour))})
	runID, err := h.store.Trigger(context.Background(), "manual")
	if err != nil {
		t.Fatal(err)
	}
	r := h.waitRun(runID, func(api.Run) bool { return true })
	if r.Status != api.RunPending {
		t.Fatalf("triggered run = %+v", r)
	}
	resp, err := h.client.Get(context.Background(), h.store.Keys().TriggerPrefix(0, "manual"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("trigger requests left: %d (%v)", resp.Count, err)
	}
	if _, err := h.store.Trigger(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("trigger of a missing job: %v, want ErrNotFound", err)
	}
}

func TestDeletedJobStopsAndItsDataGoes(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "gone", Schedule: "@every 1s"})
	h.advance(time.Second)
	h.waitRuns("gone", 1)
	if err := h.store.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := h.client.Get(context.Background(), h.ns, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); k != shard.OwnerKey(h.ns, 0) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys left after delete: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.advance(time.Second)
	if runs, _ := h.store.Runs(context.Background(), "gone", 10); len(runs) != 0 {
		t.Fatalf("deleted job fired: %+v", runs)
	}
}

func TestNotOwnerAndBadRequests(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	// A run ID whose partition is owned here but does not exist: stale.
	_, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1})
	if !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("unknown run: %v, want ErrStaleAttempt", err)
	}
	for _, req := range []api.CompleteRequest{
		{Worker: "", RunID: store.RunID("x", t0), Attempt: 1},
		{Worker: "w", RunID: "not-a-run-id", Attempt: 1},
		{Worker: "w", RunID: store.RunID("x", t0), Attempt: 0},
	} {
		if _, err := h.disp.Complete(context.Background(), req); !errors.Is(err, dispatch.ErrBadRequest) {
			t.Errorf("complete %+v: %v, want ErrBadRequest", req, err)
		}
	}
	// Control characters: none in worker IDs, only newline and tab in
	// errors and outputs (they are printed by clients).
	for _, tt := range []struct {
		req   api.CompleteRequest
		field string
	}{
		{api.CompleteRequest{Worker: "w\x1b]0;pwned\x07", RunID: store.RunID("x", t0), Attempt: 1}, "worker: control character U+001B"},
		{api.CompleteRequest{Worker: "w\u009b", RunID: store.RunID("x", t0), Attempt: 1}, "worker: control character U+009B"},
		{api.CompleteRequest{Worker: "w\u3164", RunID: store.RunID("x", t0), Attempt: 1}, "worker: invisible character U+3164"},
		{api.CompleteRequest{Worker: "w\u200b", RunID: store.RunID("x", t0), Attempt: 1}, "worker: invisible format character U+200B"},
		{api.CompleteRequest{Worker: "\uff57", RunID: store.RunID("x", t0), Attempt: 1}, `worker: "ｗ" holds compatibility characters`},
		{api.CompleteRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1, Error: "boom \x1b[2J"}, "error: control character U+001B"},
		{api.CompleteRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1, Output: "line\r\n"}, "output: control character U+000D"},
		{api.CompleteRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1, Output: "bad \xff"}, "output: not valid UTF-8"},
	} {
		_, err := h.disp.Complete(context.Background(), tt.req)
		if !errors.Is(err, dispatch.ErrBadRequest) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("complete %+q: %v, want ErrBadRequest naming %q", []string{tt.req.Worker, tt.req.Error, tt.req.Output}, err, tt.field)
		}
	}
	if _, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w\x1b", Executors: []string{"http"}, Max: 1}); !errors.Is(err, dispatch.ErrBadRequest) || !strings.Contains(err.Error(), "worker: control character") {
		t.Errorf("poll with ESC in the worker ID: %v, want ErrBadRequest", err)
	}
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w\n", RunID: store.RunID("x", t0), Attempt: 1}); !errors.Is(err, dispatch.ErrBadRequest) {
		t.Errorf("heartbeat with a newline in the worker ID: %v, want ErrBadRequest", err)
	}
	// Newlines and tabs are fine: the report reaches the (stale) attempt.
	if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1,
		Error: "line 1\n\tline 2", Output: "a\tb\n"}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Errorf("complete with newline and tab: %v, want it accepted as a request (ErrStaleAttempt: no such attempt)", err)
	}
	h.stop()
	_, err = h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w", RunID: store.RunID("x", t0), Attempt: 1})
	var notOwner *dispatch.NotOwnerError
	if !errors.As(err, &notOwner) {
		t.Fatalf("after release: %v, want *NotOwnerError", err)
	}
}

func ptr[T any](v T) *T { return &v }

// givenUpCtx is a poll context whose worker has gone away by the time the
// attempts are ready: Err reports cancellation, Done never fires.
type givenUpCtx struct{ context.Context }

func (givenUpCtx) Err() error { return context.Canceled }

func TestAttemptsOfAnAbandonedPollAreTakenBack(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "job", Schedule: "@every 1m"})
	h.advance(time.Minute)
	runs := h.waitRuns("job", 1)
	// Stored is not yet dispatchable: a poll before the owner took the
	// run into memory would find nothing to hand out (or take back).
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })
	resp, err := h.disp.Poll(givenUpCtx{context.Background()}, api.PollRequest{Worker: "gone", Executors: []string{"http"}, Max: 1})
	if err != nil || len(resp.Attempts) != 0 {
		t.Fatalf("abandoned poll = %+v, %v; want no attempts", resp, err)
	}
	r := h.waitRun(runs[0].ID, func(r api.Run) bool { return r.Status == api.RunPending })
	if len(r.Attempts) != 0 {
		t.Fatalf("taken-back run still has attempts: %+v", r.Attempts)
	}
	// Written three times: fired, handed out, taken back.
	kv, err := h.client.Get(context.Background(), h.store.Keys().Run(0, "job", runs[0].ScheduledAt))
	if err != nil || len(kv.Kvs) != 1 || kv.Kvs[0].Version != 3 {
		t.Fatalf("run key versions: %+v, %v; want 3 writes (fire, hand-out, take-back)", kv.Kvs, err)
	}
	a := h.poll("w1", 1)[0]
	if a.Attempt != 1 {
		t.Fatalf("next hand-out is attempt %d, want 1", a.Attempt)
	}
}

// TestFullDatabaseIsReportedNotLost fills a dedicated etcd past its space
// quota: creating a job fails with store.ErrNoSpace (nothing stored), and
// the scheduler's failing writes show in Health, which /readyz reports.
func TestFullDatabaseIsReportedNotLost(t *testing.T) {
	full, err := etcdtest.StartConfig(etcdserver.Config{Dir: t.TempDir(), QuotaBackendBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(full.Close)
	client := full.Client(t)
	ns := etcdtest.Namespace(t)
	clock := clockwork.NewFakeClockAt(t0)
	st := store.NewEtcd(client, ns, 1, api.DefaultLimits(), clock.Now)
	if _, err := st.Create(context.Background(), api.Job{ID: "before", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}); err != nil {
		t.Fatal(err)
	}
	lr, err := client.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Put(context.Background(), shard.OwnerKey(ns, 0), "m1", clientv3.WithLease(lr.ID))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dispatch.DefaultConfig(ns, 1, "m1", "http://m1.invalid")
	cfg.Clock = clock
	cfg.Logger = zaptest.NewLogger(t)
	d, err := dispatch.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Work(ctx, shard.NewOwnership(client, ns, "m1", 0, resp.Header.Revision)) }()
	defer func() { cancel(); <-done }()

	// Fill the database until etcd raises its NOSPACE alarm.
	blob := strings.Repeat("x", 256<<10)
	for i := 0; ; i++ {
		if _, err := client.Put(context.Background(), fmt.Sprintf("%sfill/%d", ns, i), blob); err != nil {
			break
		}
		if i > 100 {
			t.Fatal("etcd accepted 25 MiB past a 1 MiB quota")
		}
	}
	_, err = st.Create(context.Background(), api.Job{ID: "after", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}})
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("create on a full database: %v, want ErrNoSpace", err)
	}
	if _, err := st.Get(context.Background(), "after"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rejected job is readable: %v", err)
	}
	clock.Advance(time.Second) // "before" is due: its fire cannot be written
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(d.Health(), store.ErrNoSpace) {
		if time.Now().After(deadline) {
			t.Fatalf("Health() = %v, want ErrNoSpace", d.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gate is a SpaceGate a test opens and closes; it counts how often the
// scheduler consulted it.
type gate struct {
	refused atomic.Bool
	asked   atomic.Int64
	noted   atomic.Int64
}

func (g *gate) WritesRefused() error {
	g.asked.Add(1)
	if g.refused.Load() {
		return fmt.Errorf("%w: test", store.ErrNoSpace)
	}
	return nil
}

func (g *gate) Quota() int64 { return 0 } // unknown: the budget as configured

func (g *gate) NoteWriteError(err error) {
	if errors.Is(err, store.ErrNoSpace) {
		g.noted.Add(1)
	}
}

// TestClosedSpaceGateDefersCompletions: a worker's report that arrives
// while the space gate says etcd refuses writes is answered with an error
// wrapping store.ErrNoSpace (the worker reports again) and writes nothing,
// instead of trying a write etcd would refuse at every report; once the
// gate opens, the same report is recorded.
func TestClosedSpaceGateDefersCompletions(t *testing.T) {
	h := newHarness(t)
	g := &gate{}
	h.configure = func(c *dispatch.Config) { c.Space = g }
	h.start("m1")
	h.create(api.Job{ID: "job", Schedule: "@every 1m"})
	h.advance(time.Minute)
	a := h.poll("w1", 1)[0]
	h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunRunning })

	g.refused.Store(true)
	resp, err := h.client.Get(context.Background(), "rev-probe")
	if err != nil {
		t.Fatal(err)
	}
	before := resp.Header.Revision
	for range 3 {
		if _, err := h.complete(a, "w1", true, ""); !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("complete with the gate closed: %v, want an error wrapping store.ErrNoSpace", err)
		}
	}
	if resp, err = h.client.Get(context.Background(), "rev-probe"); err != nil || resp.Header.Revision != before {
		t.Fatalf("etcd's revision moved from %d to %d with the gate closed (%v): the report was written", before, resp.Header.Revision, err)
	}

	g.refused.Store(false)
	if got, err := h.complete(a, "w1", true, ""); err != nil || got.Status != api.RunSucceeded {
		t.Fatalf("complete with the gate open: %+v, %v; want succeeded", got, err)
	}
	h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunSucceeded })
}

// TestClosedSpaceGateStopsFiringUntilOpen: while the space gate says etcd
// refuses writes, the scheduler neither fires nor hands out attempts nor
// writes anything; once it opens, the missed times go through the job's
// misfire policy (run_once: one run for the outage) and firing goes on.
func TestClosedSpaceGateStopsFiringUntilOpen(t *testing.T) {
	h := newHarness(t)
	g := &gate{}
	h.configure = func(c *dispatch.Config) { c.Space = g }
	h.start("m1")
	h.create(api.Job{ID: "g", Schedule: "@every 1s", MisfirePolicy: api.MisfireRunOnce})
	runs := func() []api.Run {
		rs, err := h.store.Runs(context.Background(), "g", 1000)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// advance moves the clock a second at a time (the gate is looked at
	// again every second) until cond holds once the scheduler is done
	// with the move.
	advance := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; ; i++ {
			h.parked()
			if cond() {
				return
			}
			if i == 30 {
				t.Fatalf("%s: not within 30 seconds of the controlled clock", what)
			}
			h.advance(time.Second)
		}
	}
	advance("the first fire", func() bool { return len(runs()) >= 1 })

	g.refused.Store(true)
	resp, err := h.client.Get(context.Background(), "rev-probe")
	if err != nil {
		t.Fatal(err)
	}
	before := resp.Header.Revision
	closedAt, asked := h.clock.Now(), g.asked.Load()
	advance("five seconds with the gate closed, the scheduler looking at it", func() bool {
		return h.clock.Since(closedAt) >= 5*time.Second && g.asked.Load() >= asked+3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	polled, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w", Executors: []string{"http"}, Max: 1, Wait: api.Duration(100 * time.Millisecond)})
	cancel()
	if err != nil || len(polled.Attempts) != 0 {
		t.Fatalf("poll with the gate closed: %v, %v; want no attempt (a run is pending)", polled.Attempts, err)
	}
	// Keys of this test's namespace written since (the etcd is shared by
	// the package's tests: its revision moves with theirs).
	if resp, err = h.client.Get(context.Background(), h.ns, clientv3.WithPrefix(), clientv3.WithMinModRev(before+1), clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 0 {
		var keys []string
		if resp != nil {
			for _, kv := range resp.Kvs {
				keys = append(keys, string(kv.Key))
			}
		}
		t.Fatalf("keys written with the gate closed (%v): %v; the scheduler wrote", err, keys)
	}
	if n := len(runs()); n != 1 {
		t.Fatalf("%d runs with the gate closed, want still 1", n)
	}

	g.refused.Store(false)
	openedAt := h.clock.Now()
	advance("a fire after the gate opened", func() bool { return len(runs()) >= 2 })
	// run_once: the times missed while the gate was closed (late by more
	// than the 400ms grace when it opened) make one run at most; the
	// others are recorded as skipped in the job's state.
	missedRuns := 0
	for _, r := range runs() {
		if r.ScheduledAt.After(closedAt) && r.ScheduledAt.Before(openedAt.Add(-time.Second)) {
			missedRuns++
		}
	}
	if missedRuns > 1 {
		t.Errorf("%d runs for times missed while the gate was closed, want at most one (run_once)", missedRuns)
	}
	j, err := h.store.Get(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if j.State == nil || j.State.Skipped < 3 {
		t.Errorf("job state %+v: want the missed times recorded as skipped", j.State)
	}
	n := len(runs())
	advance("firing going on", func() bool { return len(runs()) > n })
}

// TestAbandonedWriteKeepsMemberHealthy checks that a write cut short
// because the partition's work ended (a release during a rebalance) is
// not taken for a failing etcd: Health stays nil, so the member's /readyz
// does not stay 503 until some later write succeeds (seen when a member
// kept only partitions without jobs after a rebalance).
func TestAbandonedWriteKeepsMemberHealthy(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	if err := h.disp.CommitAbandoned(0); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned write: %v, want context.Canceled", err)
	}
	if err := h.disp.Health(); err != nil {
		t.Errorf("Health() = %v after a write abandoned with its partition, want nil", err)
	}
}

// TestTimeZoneAcrossDST fires a 01:30 New York job across the 2026 fall-back
// transition with a controlled clock: 01:30 happens twice that night (EDT,
// then EST) and robfig/cron fires both; the next day once, an hour later in
// UTC.
func TestTimeZoneAcrossDST(t *testing.T) {
	h := newHarness(t)
	h.clock = clockwork.NewFakeClockAt(time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC))
	h.store = store.NewEtcd(h.client, h.ns, 1, api.DefaultLimits(), h.clock.Now)
	h.start("m1")
	// run_all: every scheduled time in a jump of the clock fires, so a
	// second 01:30 on the fall-back night would show up as a run.
	h.create(api.Job{ID: "ny", Schedule: "30 1 * * *", Timezone: "America/New_York", MisfirePolicy: api.MisfireRunAll})
	h.advance(time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC).Sub(h.clock.Now())) // 01:30 EDT
	h.waitRuns("ny", 1)
	h.advance(time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC).Sub(h.clock.Now())) // past 01:30 EST (not a fire), to the next day's 01:30 EST
	runs := h.waitRuns("ny", 2)
	var got []time.Time
	for _, r := range runs {
		got = append(got, r.ScheduledAt.UTC())
	}
	want := []time.Time{
		time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC), // 01:30 EST, newest first
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), // 01:30 EDT, once on the fall-back night
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("fires: got %v, want %v", got, want)
	}
}

// TestConcurrentTriggersEachGetARunOrAreRefused: triggers in the same
// millisecond (the fake clock does not move) each get a run of their own,
// in one transaction each, until the store.TriggerSlots milliseconds a
// trigger may take are all taken; the others are refused with
// ErrTooManyTriggers and leave nothing behind.
func TestConcurrentTriggersEachGetARunOrAreRefused(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "trg", RunAt: ptr(t0.Add(24 * time.Hour))})
	const n = store.TriggerSlots + 4
	ids := make(chan string, n)
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := h.store.Trigger(context.Background(), "trg")
			switch {
			case errors.Is(err, store.ErrTooManyTriggers):
				refused.Add(1)
			case err != nil:
				t.Error(err)
			default:
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("two triggers got run ID %s", id)
		}
		seen[id] = true
	}
	if len(seen) != store.TriggerSlots || refused.Load() != n-store.TriggerSlots {
		t.Fatalf("%d triggers accepted, %d refused; want %d and %d", len(seen), refused.Load(), store.TriggerSlots, n-store.TriggerSlots)
	}
	runs := h.waitRuns("trg", store.TriggerSlots)
	if len(runs) != store.TriggerSlots {
		t.Fatalf("got %d runs for %d accepted triggers", len(runs), store.TriggerSlots)
	}
	for _, r := range runs {
		if !seen[r.ID] {
			t.Errorf("run %s was not promised to any trigger", r.ID)
		}
	}
	// A moment later the job can be triggered again.
	h.advance(time.Second)
	if _, err := h.store.Trigger(context.Background(), "trg"); err != nil {
		t.Fatalf("trigger a second later: %v", err)
	}
}

// TestReplaceCancelsTheRunningAttempt: a trigger of a "replace" job while
// its earlier run is running ends that run, records the attempt as
// cancelled, answers the attempt's next heartbeat with Cancel, and
// acknowledges the worker's report of the cancelled attempt without
// recording it over the cancellation.
func TestReplaceCancelsTheRunningAttempt(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "r", RunAt: ptr(t0.Add(24 * time.Hour)), ConcurrencyPolicy: api.ConcurrencyReplace})
	first, err := h.store.Trigger(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	a := h.poll("w1", 1)[0]
	if a.RunID != first {
		t.Fatalf("handed out %s, want the triggered run %s", a.RunID, first)
	}
	h.advance(time.Second)
	second, err := h.store.Trigger(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	old := h.waitRun(first, func(r api.Run) bool { return r.Status == api.RunDead })
	if !strings.Contains(old.Reason, second) || !strings.Contains(old.Reason, "cancelled") {
		t.Errorf("replaced run's reason = %q, want it to name %s and the cancellation", old.Reason, second)
	}
	if at := old.Attempts[0]; at.FinishedAt.IsZero() || !strings.Contains(at.Error, "cancelled") {
		t.Errorf("replaced run's attempt = %+v, want it finished as cancelled", at)
	}
	// The owner applies its write to memory just after etcd has it: until
	// then a heartbeat still extends the lease.
	deadline := time.Now().Add(10 * time.Second)
	for {
		hb, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt})
		if err != nil {
			t.Fatalf("heartbeat of the replaced attempt: %v; want Cancel", err)
		}
		if hb.Cancel {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat of the replaced attempt = %+v; want Cancel", hb)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Another worker's heartbeat for the same attempt is not told anything.
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w2", RunID: a.RunID, Attempt: a.Attempt}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("heartbeat of another worker: %v, want ErrStaleAttempt", err)
	}
	resp, err := h.complete(a, "w1", false, "cancelled by the orchestrator")
	if err != nil || resp.Status != api.RunDead {
		t.Fatalf("report of the cancelled attempt = %+v, %v; want acknowledged as dead", resp, err)
	}
	if after := h.waitRun(first, func(api.Run) bool { return true }); after.Attempts[0].Error != old.Attempts[0].Error {
		t.Errorf("the report was recorded over the cancellation: %+v", after.Attempts[0])
	}
	// Reported: its heartbeats and reports are stale from now on.
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("heartbeat after the report: %v, want ErrStaleAttempt", err)
	}
	b := h.poll("w2", 1)[0]
	if b.RunID != second {
		t.Fatalf("next hand-out %s, want the replacing run %s", b.RunID, second)
	}
}

// A new owner reads the partition in pages at one revision: with pages of
// two keys, every job, its state and its in-flight attempts are taken in,
// and nothing fires twice.
func TestHandoffLoadsThePartitionInPages(t *testing.T) {
	t.Cleanup(dispatch.SetLoadPages(2))
	h := newHarness(t)
	h.start("m1")
	ids := []string{"p1", "p2", "p3", "p4", "p5"}
	for _, id := range ids {
		h.create(api.Job{ID: id, Schedule: "@every 1s"})
	}
	for i := 1; i <= 2; i++ {
		h.advance(time.Second)
		for _, id := range ids {
			h.waitRuns(id, i)
		}
	}
	inFlight := h.poll("w1", 3)
	for len(inFlight) < 3 {
		inFlight = append(inFlight, h.poll("w1", 3-len(inFlight))...)
	}

	h.stop()
	h.start("m2")
	for _, a := range inFlight {
		if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); err != nil {
			t.Fatalf("heartbeat of %s after a paged load: %v", a.RunID, err)
		}
	}
	h.advance(time.Second)
	for _, id := range ids {
		runs := h.waitRuns(id, 3)
		seen := map[time.Time]bool{}
		for _, r := range runs {
			if seen[r.ScheduledAt] {
				t.Fatalf("job %s: %v fired twice", id, r.ScheduledAt)
			}
			seen[r.ScheduledAt] = true
		}
		if len(runs) != 3 {
			t.Fatalf("job %s: %d runs after the handoff, want 3", id, len(runs))
		}
	}
}
