package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// TestClusterStorageCommand runs `jobfleet cluster storage` against the
// API of a member whose report comes from the real etcd.
func TestClusterStorageCommand(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	jobs := store.NewEtcd(client, ns, 4, api.DefaultLimits(), nil)
	for _, id := range []string{"a", "b"} {
		if _, err := jobs.Create(context.Background(), api.Job{ID: id, Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := storage.DefaultConfig(ns, "m1")
	cfg.QuotaBytes = 1 << 30
	mon, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cache := authtest.RunCache(t, client, auth.CacheConfig{Namespace: ns})
	viewer, rev := authtest.Create(t, client, ns, api.CreateRequest{Role: api.RoleViewer})
	if err := cache.WaitRevision(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(admintest.Member{StorageReport: mon.Report, Auth: cache}, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)}))
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
		"COMPACTED not yet (the fleet compacts every 5m", "KEYS 2 jobs (with pending triggers), 0 runs (0 active, 0 failing), 3 in all", "ALARMS none", "ENDPOINT", etcd.Endpoints()[0]} {
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

// tableMember serves a fixed partition table.
type tableMember struct {
	admintest.Member
	table api.PartitionTable
}

func (m tableMember) Partitions() (api.PartitionTable, error) { return m.table, nil }

// TestClusterPartitionsAll checks the per-partition view of `cluster
// partitions --all` (every partition with its owner, epoch and target) and
// that the summary alone lists no partition.
func TestClusterPartitionsAll(t *testing.T) {
	table := api.PartitionTable{Partitions: 3, Revision: 42, Rows: []api.PartitionRow{
		{Partition: 0, Owner: "m1", Epoch: 7, Target: "m1"},
		{Partition: 1, Owner: "", Epoch: 0, Target: "m2"},
		{Partition: 2, Owner: "m1", Epoch: 9, Target: "m2"},
	}}
	srv := httptest.NewServer(admin.Handler(tableMember{table: table}, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t), Insecure: true}))
	defer srv.Close()
	run := func(args ...string) []string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs(append([]string{"cluster", "partitions", "--server", srv.URL}, args...))
		root.SetOut(&out)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("cluster partitions %v: %v", args, err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return lines
	}
	summary := []string{"MEMBER OWNED TARGET", "m1 2 1", "m2 0 2", "3 partitions, 1 without owner, 1 not yet on their target (revision 42)"}
	if got := run(); strings.Join(got, "\n") != strings.Join(summary, "\n") {
		t.Errorf("summary:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(summary, "\n"))
	}
	all := append([]string{"PARTITION OWNER EPOCH TARGET", "0 m1 7 m1", "1 - 0 m2", "2 m1 9 m2", ""}, summary...)
	for _, flag := range []string{"--all", "-a"} {
		if got := run(flag); strings.Join(got, "\n") != strings.Join(all, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", flag, strings.Join(got, "\n"), strings.Join(all, "\n"))
		}
	}
}

// workersProtocol serves a fixed worker registry.
type workersProtocol struct {
	workers []api.Worker
}

func (p workersProtocol) Register(context.Context, api.RegisterRequest) (api.RegisterResponse, error) {
	return api.RegisterResponse{}, nil
}
func (p workersProtocol) Deregister(context.Context, api.DeregisterRequest) error { return nil }
func (p workersProtocol) Workers() ([]api.Worker, error)                          { return p.workers, nil }
func (p workersProtocol) WhyPending(string, string, string, string) string        { return "" }

// TestClusterWorkersCommand checks the table and JSON of `cluster
// workers`, including a scoped credential's prefix, an escaped ID, the
// labels, and --selector.
func TestClusterWorkersCommand(t *testing.T) {
	now := time.Now().UTC()
	ws := []api.Worker{
		{ID: "w1", Credential: "dev-worker", Executors: []string{"http", "shell"}, Labels: map[string]string{"pool": "gpu", "region": "eu-west"}, Concurrency: 8, Active: 3, RegisteredAt: now.Add(-time.Hour), LastContact: now.Add(-2 * time.Second), Orchestrator: "orch-1"},
		{ID: "evil\x1b[2J", Credential: "billing-w", Prefix: "billing/", Executors: []string{"http"}, Concurrency: 1, RegisteredAt: now, LastContact: now, Orchestrator: "orch-2"},
	}
	srv := httptest.NewServer(admin.Handler(admintest.Member{Registry: workersProtocol{workers: ws}}, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t), Insecure: true}))
	defer srv.Close()
	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs(append([]string{"cluster", "workers", "--server", srv.URL}, args...))
		root.SetOut(&out)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("cluster workers %v: %v", args, err)
		}
		return out.String()
	}
	out := run()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	if len(lines) != 4 || lines[0] != "ID EXECUTORS LABELS ACTIVE CREDENTIAL REGISTERED UPDATED ORCHESTRATOR" ||
		!strings.HasPrefix(lines[1], "w1 http,shell pool=gpu,region=eu-west 3/8 dev-worker ") || !strings.HasSuffix(lines[1], " 2s ago orch-1") ||
		!strings.HasPrefix(lines[2], `evil\x1b[2J http - 0/1 billing-w (billing/*) `) || lines[3] != "2 workers" {
		t.Fatalf("table:\n%s", out)
	}
	if sel := run("--selector", "pool=gpu,region in (eu-west)"); !strings.Contains(sel, "w1 ") || strings.Contains(sel, "evil") || !strings.Contains(sel, "1 workers") {
		t.Fatalf("--selector pool=gpu:\n%s", sel)
	}
	if sel := run("--selector", "!pool"); strings.Contains(sel, "w1 ") || !strings.Contains(sel, "evil") {
		t.Fatalf("--selector !pool:\n%s", sel)
	}
	root := newRootCmd()
	root.SetArgs([]string{"cluster", "workers", "--server", srv.URL, "--selector", "pool in gpu"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "selector:") {
		t.Fatalf("--selector 'pool in gpu' = %v, want the server's refusal naming the selector", err)
	}
	if strings.Contains(out, "\x1b") {
		t.Fatalf("the table carries an escape character: %q", out)
	}
	var l api.WorkerList
	if err := json.Unmarshal([]byte(run("-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Workers) != 2 || l.Workers[0].ID != "w1" || l.Workers[1].Prefix != "billing/" || l.Workers[0].Active != 3 {
		t.Fatalf("-o json: %+v", l)
	}
}

// placementCluster answers every placement with its job's hash and
// partition computed as the fleet does, owned by m1.
type placementCluster struct{ partitions int }

func (c placementCluster) Placement(_ context.Context, id string) (api.Placement, error) {
	return api.Placement{Job: id, Hash: fmt.Sprintf("%016x", shard.Hash(id)), Partitions: c.partitions, Partition: shard.Partition(id, c.partitions),
		Owner: "m1", Target: "m2", Epoch: 7, Reason: "handoff in progress from m1 to m2"}, nil
}

func (placementCluster) Overview() (api.Overview, error) { return api.Overview{}, nil }

func (placementCluster) Activity(context.Context) (api.FleetActivity, error) {
	return api.FleetActivity{}, nil
}

func (placementCluster) Late(context.Context) (api.LateRuns, error) { return api.LateRuns{}, nil }

func (placementCluster) PartitionState() (api.PartitionStreamSnapshot, <-chan struct{}, error) {
	return api.PartitionStreamSnapshot{}, nil, admin.ErrNotStarted
}

func TestClusterWhere(t *testing.T) {
	srv := httptest.NewServer(admin.Handler(tableMember{Member: admintest.Member{Cluster: placementCluster{partitions: 64}}}, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t), Insecure: true}))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs(append([]string{"cluster", "where", "--server", srv.URL}, args...))
		root.SetOut(&out)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	const id = "billing/invoice 7"
	out, err := run(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"JOB  " + id, "EXISTS  no", "HASH  " + fmt.Sprintf("%016x", shard.Hash(id)),
		fmt.Sprintf("PARTITION  %d of 64", shard.Partition(id, 64)), "TARGET  m2", "OWNER  m1", "EPOCH  7", "OWNER SINCE  -", "REASON  handoff in progress from m1 to m2",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(id, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var pl api.Placement
	if err := json.Unmarshal([]byte(out), &pl); err != nil || pl.Job != id || pl.Partition != shard.Partition(id, 64) {
		t.Errorf("-o json: %v, %+v", err, pl)
	}
	out, err = run(id, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "job: billing/invoice 7\n") || !strings.Contains(out, fmt.Sprintf("partition: %d\n", shard.Partition(id, 64))) {
		t.Errorf("-o yaml: got\n%s", out)
	}
	if _, err := run(" bad id"); err == nil || !strings.Contains(err.Error(), "job") {
		t.Errorf("an invalid ID: %v, want an error naming job", err)
	}
	if _, err := run(); err == nil {
		t.Error("no ID: no error")
	}
}
