package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch/standby"
)

// heir starts member's dispatcher with a standby following partition 0,
// to be the next start's (h.next), and waits until it holds its copy.
// hook, if not nil, sees every response of the standby's watch first.
func (h *harness) heir(member string, hook func(*clientv3.WatchResponse)) standbyMetrics {
	h.t.Helper()
	return h.heirWithin(member, hook, time.Hour) // the fake clock never reaches it
}

// heirWithin is heir with a catch-up bound of catchUp on the fake clock.
func (h *harness) heirWithin(member string, hook func(*clientv3.WatchResponse), catchUp time.Duration) standbyMetrics {
	h.t.Helper()
	d := h.newDispatcher(member)
	met := newStandbyMetrics(h.t)
	sb, err := d.NewStandby(func() (standby.Heirs, <-chan struct{}) { return standby.Heirs{Of: map[int]bool{0: true}}, nil },
		standby.Config{CatchUp: catchUp, Metrics: met.m})
	if err != nil {
		h.t.Fatal(err)
	}
	if hook != nil {
		sb.SetWatchHook(hook)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sb.Run(ctx) })
	h.t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !sb.Held(0) {
		if time.Now().After(deadline) {
			h.t.Fatal("the standby did not read its copy within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	h.next = d
	return met
}

// watchGate holds back a standby's watch: its hook, given as the
// standby's watch hook, waits while the gate is held.
type watchGate struct {
	mu   sync.Mutex
	gate chan struct{}
}

func (w *watchGate) hook(*clientv3.WatchResponse) {
	w.mu.Lock()
	g := w.gate
	w.mu.Unlock()
	if g != nil {
		<-g
	}
}

// hold makes the watch wait from its next response until the returned
// channel is closed.
func (w *watchGate) hold() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gate = make(chan struct{})
	return w.gate
}

// TestWarmTakeoverWaitsForItsCopy: the owner completes an attempt and
// fires again right before it goes; the heir takes the partition over
// from its standby copy. When the copy's watch lags behind those last
// writes at the acquisition, the heir waits for it: in both cases it
// serves the partition as a load from etcd would (the completed run is
// final, the new one waiting, the history counts both), warm, and fires
// every time once. Without the wait, a lagging copy has the completed
// run still running and the last fire missing.
func TestWarmTakeoverWaitsForItsCopy(t *testing.T) {
	for _, lag := range []bool{false, true} {
		name := "current"
		if lag {
			name = "lagging"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.start("m1")
			var gate watchGate
			met := h.heir("m2", gate.hook)
			h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
			h.advance(time.Second)
			h.waitRuns("tick", 1)
			a := h.poll("w1", 1)[0]
			if lag {
				g := gate.hold()
				time.AfterFunc(300*time.Millisecond, func() { close(g) })
			}
			if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
				t.Fatalf("complete = %+v, %v", resp, err)
			}
			h.advance(time.Second)
			h.waitRuns("tick", 2)
			h.stop()
			h.start("m2")

			if got := met.Loads("warm"); got != 1 {
				t.Fatalf("loads from the copy %v, want 1 (cold: %v)", got, met.Loads("cold"))
			}
			if st := h.disp.Stats(); st.HistoryRuns != 2 || st.Waiting != 1 || st.Running != 0 {
				t.Fatalf("after the takeover: %+v, want 2 runs in the history, 1 waiting, none running", st)
			}
			if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); err == nil {
				t.Fatal("the heir accepted a heartbeat for an attempt completed before the takeover")
			}
			h.advance(time.Second)
			firedOnce(t, h.waitRuns("tick", 3))
		})
	}
}

// TestFailedStandbyWatchFallsBackToEtcd: a standby whose watch fails
// (here a response reporting a compaction) drops its copies; a takeover
// meanwhile reads the partition from etcd, and is right.
func TestFailedStandbyWatchFallsBackToEtcd(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	var mu sync.Mutex
	compacted := false
	met := h.heir("m2", func(wr *clientv3.WatchResponse) {
		mu.Lock()
		defer mu.Unlock()
		if compacted {
			wr.CompactRevision = 1
			wr.Canceled = true
		}
	})
	h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
	mu.Lock()
	compacted = true
	mu.Unlock()
	h.advance(time.Second)
	h.waitRuns("tick", 1)
	h.stop()
	h.start("m2")
	if warm, cold := met.Loads("warm"), met.Loads("cold"); warm != 0 || cold != 1 {
		t.Fatalf("loads warm %v, cold %v; want 0 and 1", warm, cold)
	}
	if st := h.disp.Stats(); st.HistoryRuns != 1 || st.Waiting != 1 {
		t.Fatalf("after the takeover: %+v, want 1 run waiting", st)
	}
	h.advance(time.Second)
	if runs := h.waitRuns("tick", 2); len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
}

// TestStandbyCopyTooLateFallsBackToEtcd: an heir whose copy cannot catch
// up with the acquisition (its watch held back) waits for the catch-up
// bound, then reads the partition from etcd; the wait counts as a
// timeout and the load as cold, not warm, and every time fires once.
func TestStandbyCopyTooLateFallsBackToEtcd(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	var gate watchGate
	met := h.heirWithin("m2", gate.hook, 2*time.Second)
	h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
	h.advance(time.Second)
	h.waitRuns("tick", 1)
	defer close(gate.hold()) // the watch loop must end with the test
	h.stop()

	// The clock moves, a step at a time, until the heir gave up on its
	// copy and loaded the partition.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				h.clock.Advance(100 * time.Millisecond)
			}
		}
	})
	h.start("m2")
	close(stop)
	wg.Wait()

	if warm, cold, late := met.Loads("warm"), met.Loads("cold"), met.CatchUpTimeouts(); warm != 0 || cold != 1 || late != 1 {
		t.Fatalf("loads warm %v, cold %v, catch-up timeouts %v; want 0, 1 and 1", warm, cold, late)
	}
	firedOnce(t, h.waitRuns("tick", 2))
}
