package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestClusterStorageCommand runs `jobfleet cluster storage` against the
// API of a member whose report comes from the real etcd.
func TestClusterStorageCommand(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	jobs := store.NewEtcd(client, ns, 4, store.DefaultLimits(), nil)
	for _, id := range []string{"a", "b"} {
		if _, err := jobs.Create(context.Background(), store.Job{ID: id, Schedule: "@hourly", Executor: store.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := storage.DefaultConfig(ns, "m1")
	cfg.QuotaBytes = 1 << 30
	mon, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := auth.NewCache(client, auth.CacheConfig{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cache.Run(ctx) }()
	defer func() { cancel(); <-done }()
	viewer, rev := authtest.Create(t, client, ns, auth.CreateRequest{Role: auth.RoleViewer})
	if err := cache.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(apiMember{}, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t), Storage: mon.Report, Auth: cache}))
	defer srv.Close()
	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs(append([]string{"cluster", "storage", "--server", srv.URL, "--token", viewer.Secret}, args...))
		root.SetOut(&out)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("cluster storage %v: %v", args, err)
		}
		return out.String()
	}

	out := run()                                   // the namespace holds the two jobs and the viewer's credential
	flat := strings.Join(strings.Fields(out), " ") // columns are aligned with spaces
	for _, want := range []string{"DATABASE", "QUOTA 1.0 GiB (from --etcd-quota-bytes)", "HIGH WATER 819 MiB (80% of the quota), below", "REVISION",
		"COMPACTED not yet (the fleet compacts every 5m", "KEYS 2 jobs (with pending triggers), 0 runs (0 active), 3 in all", "ALARMS none", "ENDPOINT", etcd.Endpoints()[0]} {
		if !strings.Contains(flat, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var r storage.Report
	if err := json.Unmarshal([]byte(run("-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Quota != 1<<30 || r.QuotaSource != storage.QuotaFromFlag || r.DBSize == 0 || r.Keys.Jobs != 2 || r.Revision == 0 || len(r.Endpoints) != 1 {
		t.Errorf("-o json: %+v", r)
	}
}
