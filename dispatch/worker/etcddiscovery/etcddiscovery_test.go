package etcddiscovery_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/membership"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd, etcdtest.KeepAliveLeaks()...))
}

// recv returns the next value of ch, failing the test after a minute.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func putMember(t *testing.T, ctx context.Context, ns string, m api.Member) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Client(t).Put(ctx, membership.Key(ns, m.ID), string(b)); err != nil {
		t.Fatalf("put member: %v", err)
	}
}

// TestWatch: the members' addresses are reported at once (none), then on
// every change, normalized; Watch returns nil when its context ends.
func TestWatch(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	d := etcddiscovery.New(client, ns)
	d.Logger = zaptest.NewLogger(t)
	updates := make(chan []string, 100)
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(addrs []string) { updates <- addrs }) }()
	waitUpdate := func(want ...string) {
		t.Helper()
		for {
			got := recv(t, updates, "an update")
			if slices.Equal(got, want) {
				return
			}
		}
	}
	waitUpdate()
	putMember(t, ctx, ns, api.Member{ID: "a", Addr: "http://a.example:8080/"})
	waitUpdate("http://a.example:8080")
	putMember(t, ctx, ns, api.Member{ID: "b", Addr: "http://b.example:8080"})
	waitUpdate("http://a.example:8080", "http://b.example:8080")
	if _, err := client.Delete(ctx, membership.Key(ns, "a")); err != nil {
		t.Fatal(err)
	}
	waitUpdate("http://b.example:8080")
	cancel()
	if err := recv(t, done, "Watch to return"); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	for _, ns := range []string{"", "/jobfleet"} {
		if err := etcddiscovery.New(etcd.Client(t), ns).Validate(); err == nil {
			t.Errorf("namespace %q: Validate() = nil, want an error", ns)
		}
	}
	if err := etcddiscovery.New(etcd.Client(t), "/jobfleet/").Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	// The worker's Config checks its Discovery.
	cfg := worker.DefaultConfig()
	cfg.ID = "w"
	cfg.Orchestrators = etcddiscovery.New(nil, "/jobfleet/")
	if err := cfg.Validate(); err == nil {
		t.Error("worker config with an etcd discovery without client: Validate() = nil, want an error")
	}
}

// TestEtcdEndpoints: the discovery names the client's endpoints, which
// the worker refuses to "http" jobs.
func TestEtcdEndpoints(t *testing.T) {
	c := etcd.Client(t)
	var d worker.Discovery = etcddiscovery.New(c, "/jobfleet/")
	e, ok := d.(worker.EtcdEndpointer)
	if !ok {
		t.Fatal("Members is not a worker.EtcdEndpointer")
	}
	if got := e.EtcdEndpoints(); !slices.Equal(got, c.Endpoints()) || len(got) == 0 {
		t.Errorf("EtcdEndpoints() = %q, want %q", got, c.Endpoints())
	}
}
