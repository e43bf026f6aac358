package etcdhealth_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/etcdhealth"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// keepAliveFloor is the shortest time after which gRPC's keepalive closes
// a silent connection (its minimum ping interval): without the watcher,
// the client would not leave a silent endpoint before it.
const keepAliveFloor = 10 * time.Second

// TestWatcherLeavesASilentEndpointAndComesBack: of two endpoints of one
// server, one (through a bridge) stops answering without closing its
// connections, as a member across a network partition does. The watcher
// must take it out of the client's endpoints well before the connection's
// keepalive would, so that requests stop timing out; once it answers
// again it must be given back. The client has no keepalive of its own
// here, so leaving the endpoint is the watcher's doing alone.
func TestWatcherLeavesASilentEndpointAndComesBack(t *testing.T) {
	silent := etcdtest.NewBridge(t, etcd.ClientAddr())
	eps := append(silent.Endpoints(), etcd.Endpoints()...)
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := etcdhealth.New(c, etcdhealth.Config{Endpoints: eps, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := c.Get(ctx, "probe")
		return err
	}
	etcdtest.AwaitBridgeUsed(t, c, silent) // both connections ready and used before the cut
	if got := w.InUse(); !slices.Equal(got, eps) {
		t.Fatalf("in use before the cut: %v, want %v", got, eps)
	}

	silent.Cut()
	start := time.Now()
	for slices.Contains(w.InUse(), silent.Endpoints()[0]) {
		if time.Since(start) > keepAliveFloor {
			t.Fatalf("%v after the cut, the silent endpoint is still in use", keepAliveFloor)
		}
		time.Sleep(20 * time.Millisecond)
	}
	left := time.Since(start)
	// Every request now goes to the endpoint that answers.
	for i := range 20 {
		if err := get(2 * time.Second); err != nil {
			t.Fatalf("get %d after the silent endpoint was left (%v after the cut): %v", i, left, err)
		}
	}
	if got := w.InUse(); !slices.Equal(got, etcd.Endpoints()) {
		t.Errorf("in use after the cut: %v, want %v", got, etcd.Endpoints())
	}
	checkUp(t, w, map[string]float64{silent.Endpoints()[0]: 0, etcd.Endpoints()[0]: 1})

	silent.Restore()
	start = time.Now()
	for !slices.Equal(w.InUse(), eps) {
		if time.Since(start) > keepAliveFloor {
			t.Fatalf("%v after the bridge was restored, in use: %v, want %v", keepAliveFloor, w.InUse(), eps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkUp(t, w, map[string]float64{silent.Endpoints()[0]: 1, etcd.Endpoints()[0]: 1})
	t.Logf("silent endpoint left %v after the cut, given back %v after the restore", left.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
}

// checkUp checks the watcher's jobfleet_etcd_endpoint_up against want,
// by endpoint.
func checkUp(t *testing.T, w *etcdhealth.Watcher, want map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "jobfleet_etcd_endpoint_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("jobfleet_etcd_endpoint_up = %v, want %v", got, want)
	}
}

// TestWatcherKeepsEveryEndpointWhenAllFail: when no endpoint answers (the
// whole cluster down, or this member cut from all of it), the client
// keeps them all: there is nothing better to send requests to, and the
// first to answer again gets them at once.
func TestWatcherKeepsEveryEndpointWhenAllFail(t *testing.T) {
	a, b := etcdtest.NewBridge(t, etcd.ClientAddr()), etcdtest.NewBridge(t, etcd.ClientAddr())
	eps := append(a.Endpoints(), b.Endpoints()...)
	c, err := clientv3.New(clientv3.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := etcdhealth.New(c, etcdhealth.Config{Endpoints: eps, Interval: 100 * time.Millisecond, Timeout: 200 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	a.Cut()
	start := time.Now()
	for slices.Contains(w.InUse(), a.Endpoints()[0]) {
		if time.Since(start) > keepAliveFloor {
			t.Fatalf("%v after a's cut, a still in use", keepAliveFloor)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Cut()
	defer a.Restore()
	defer b.Restore()
	start = time.Now()
	for !slices.Equal(w.InUse(), eps) {
		if time.Since(start) > keepAliveFloor {
			t.Fatalf("%v after both were cut, in use: %v, want both", keepAliveFloor, w.InUse())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAnEndpointListedTwiceIsOneEndpoint: an endpoint given twice is
// probed and shown once; shown twice, the same series twice would make
// the member's whole /metrics fail to gather.
func TestAnEndpointListedTwiceIsOneEndpoint(t *testing.T) {
	w, err := etcdhealth.New(nil, etcdhealth.Config{Endpoints: []string{"http://etcd-0:2379", "http://etcd-1:2379", "http://etcd-0:2379"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.InUse(), []string{"http://etcd-0:2379", "http://etcd-1:2379"}; !slices.Equal(got, want) {
		t.Errorf("in use: %v, want %v", got, want)
	}
	checkUp(t, w, map[string]float64{"http://etcd-0:2379": 1, "http://etcd-1:2379": 1})
}

// TestNewRefusesNegativeSettings: bad settings are refused, not taken as
// defaults.
func TestNewRefusesNegativeSettings(t *testing.T) {
	for _, cfg := range []etcdhealth.Config{{Interval: -1}, {Timeout: -1}, {Failures: -1}} {
		if _, err := etcdhealth.New(nil, cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}
