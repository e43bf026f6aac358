package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/standby"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// TestReloadDoesNotTakeAStaleCopy: a member that owns a partition can
// hold a standby copy of it too (the ring moved the partition away and
// made the member its heir while the handoff is pending, or moved it
// back before the handoff). When the partition's spec watch ends (here
// compacted on resuming after a lost connection) the partition is loaded
// again under the same ownership: its epoch is old, so a copy is always
// "caught up" with it, yet the member's own last writes may be past the
// copy's progress. Loading from it would bring back a run the member
// completed as still running (or miss the runs it just fired): the
// reload must read etcd. Without the fix the reload takes the lagging
// copy and the completed run is running again.
func TestReloadDoesNotTakeAStaleCopy(t *testing.T) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	reg := prometheus.NewRegistry()
	h.configure = func(c *dispatch.Config) { c.Metrics = dispatch.NewMetrics(reg) }
	d := h.newDispatcher("m1")

	var mu sync.Mutex
	heirs := standby.Heirs{Of: map[int]bool{}}
	changed := make(chan struct{})
	var gate chan struct{} // while set, the standby's watch waits on it
	met := newStandbyMetrics(t)
	sb, err := d.NewStandby(func() (standby.Heirs, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return heirs, changed
	}, standby.Config{CatchUp: time.Hour, Metrics: met.m})
	if err != nil {
		t.Fatal(err)
	}
	sb.SetWatchHook(func(*clientv3.WatchResponse) {
		mu.Lock()
		g := gate
		mu.Unlock()
		if g != nil {
			<-g
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sb.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	t.Cleanup(func() { // first: let the watch loop see its end
		mu.Lock()
		defer mu.Unlock()
		if gate != nil {
			close(gate)
			gate = nil
		}
	})
	h.next = d
	h.start("m1") // not an heir of partition 0 yet: a load from etcd

	h.create(api.Job{ID: "tick", Schedule: "@every 1s"})
	h.advance(time.Second)
	h.waitRuns("tick", 1)
	a := h.poll("w1", 1)[0]

	// The ring makes m1 the heir of the partition it still owns.
	mu.Lock()
	heirs = standby.Heirs{Of: map[int]bool{0: true}}
	close(changed)
	changed = make(chan struct{})
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !sb.Held(0) {
		if time.Now().After(deadline) {
			t.Fatal("the standby did not read its copy within 10s")
		}
		time.Sleep(time.Millisecond)
	}

	// The copy lags behind the owner's completion of the run.
	mu.Lock()
	gate = make(chan struct{})
	mu.Unlock()
	if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete = %+v, %v", resp, err)
	}

	// The spec watch ends: its resumption is compacted.
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if _, err := etcdtest.Compact(cctx, h.client); err != nil {
		t.Fatal(err)
	}
	bridge.DropConnections()
	deadline = time.Now().Add(10 * time.Second)
	for metrictest.Value(t, reg, "jobfleet_dispatch_load_seconds") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the partition was not loaded again within 10s (warm %v, cold %v)", met.Loads("warm"), met.Loads("cold"))
		}
		time.Sleep(time.Millisecond)
	}
	if st := h.disp.Stats(); st.Running != 0 || st.Waiting != 0 || st.HistoryRuns != 1 {
		t.Fatalf("after the reload: %+v, want the completed run in the history and none active (loads warm %v, cold %v)",
			st, met.Loads("warm"), met.Loads("cold"))
	}
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); err == nil {
		t.Fatal("the owner accepted a heartbeat for an attempt completed before the reload")
	}
	if got := met.Loads("warm"); got != 0 {
		t.Fatalf("loads from the copy %v, want 0: a reload reads etcd", got)
	}
}

// standbyMetrics are a standby's metrics and their registry.
type standbyMetrics struct {
	t   *testing.T
	m   *standby.Metrics
	reg *prometheus.Registry
}

func newStandbyMetrics(t *testing.T) standbyMetrics {
	reg := prometheus.NewRegistry()
	return standbyMetrics{t: t, m: standby.NewMetrics(reg), reg: reg}
}

// Loads returns how many loads were served from a copy (source "warm")
// or from etcd ("cold").
func (m standbyMetrics) Loads(source string) float64 {
	return metrictest.Value(m.t, m.reg, "jobfleet_standby_loads_total", "source", source)
}

// CatchUpTimeouts returns how many acquisitions found their copy behind
// past the catch-up bound.
func (m standbyMetrics) CatchUpTimeouts() float64 {
	return metrictest.Value(m.t, m.reg, "jobfleet_standby_catch_up_timeouts_total")
}
