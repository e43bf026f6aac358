package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestReadsAnswerWhileAWriteWaitsForEtcd holds a write of the partition in
// etcd (the scheduler's connection is stalled behind a bridge while a
// completion is being recorded) and checks that a heartbeat and a metrics
// scrape still answer, from memory, while the write is held.
func TestReadsAnswerWhileAWriteWaitsForEtcd(t *testing.T) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	reg := prometheus.NewRegistry()
	h.configure = func(c *dispatch.Config) {
		c.RequestTimeout = time.Minute // the held write must not time out during the test
		c.Metrics = dispatch.NewMetrics(reg)
	}
	h.start("m1")
	h.create(api.Job{ID: "a", Schedule: "@every 1m"})
	h.create(api.Job{ID: "b", Schedule: "@every 1m"})
	h.advance(time.Minute)
	h.waitRuns("a", 1)
	h.waitRuns("b", 1)
	as := h.poll("w1", 2)
	for len(as) < 2 {
		as = append(as, h.poll("w1", 2-len(as))...)
	}

	bridge.Cut()
	restored := false
	defer func() {
		if !restored {
			bridge.Restore()
		}
	}()
	completed := make(chan error, 1)
	go func() {
		_, err := h.complete(as[0], "w1", true, "")
		completed <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !h.disp.WriterBusy(0) {
		if time.Now().After(deadline) {
			t.Fatal("the completion's write did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}

	hb := make(chan error, 1)
	go func() {
		_, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: as[1].RunID, Attempt: as[1].Attempt})
		hb <- err
	}()
	select {
	case err := <-hb:
		if err != nil {
			t.Fatalf("heartbeat while a write is held: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("heartbeat waited for the write held in etcd")
	}
	scraped := make(chan []*dto.MetricFamily, 1)
	go func() {
		mfs, _ := reg.Gather()
		scraped <- mfs
	}()
	select {
	case mfs := <-scraped:
		if got := gauge(mfs, "jobfleet_runs_running"); got != 2 {
			t.Fatalf("jobfleet_runs_running = %v while the completion is unrecorded, want 2", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("metrics scrape waited for the write held in etcd")
	}
	if !h.disp.WriterBusy(0) {
		t.Fatal("the write finished before the reads were checked; the test proved nothing")
	}
	select {
	case err := <-completed:
		t.Fatalf("completion returned while etcd was cut off: %v", err)
	default:
	}

	bridge.Restore()
	restored = true
	if err := <-completed; err != nil {
		t.Fatalf("completion after the connection came back: %v", err)
	}
	h.waitRun(as[0].RunID, func(r api.Run) bool { return r.Status == api.RunSucceeded })
}

// gauge returns the value of the unlabelled gauge name in mfs, or -1.
func gauge(mfs []*dto.MetricFamily, name string) float64 {
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	return -1
}
