package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// relists counts the log lines of watches that ended and were listed
// again, by what was listed: a mirror's prefix suffix ("members/",
// "owners/") or "specs" for a partition's spec watch.
func relists(logs *observer.ObservedLogs) map[string]int {
	n := map[string]int{}
	for _, e := range logs.FilterMessageSnippet("re-listing after watch ended").All() {
		p, _ := e.ContextMap()["prefix"].(string)
		for _, suffix := range []string{"members/", "owners/"} {
			if strings.HasSuffix(p, suffix) {
				n[suffix]++
			}
		}
	}
	n["specs"] = logs.FilterMessageSnippet("spec watch ended; reloading partition").Len()
	return n
}

// waitLoaded waits until every partition of f has been loaded by the
// member that owns it now, at its current epoch, as the members' logs say.
func waitLoaded(t *testing.T, f *fleettest.Fleet, logs *observer.ObservedLogs, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() bool {
		owners, _, err := f.Owners(context.Background())
		if err != nil {
			return false
		}
		loaded := map[string]bool{}
		for _, e := range logs.FilterMessage("partition loaded").All() {
			c := e.ContextMap()
			loaded[fmt.Sprint(c["member"], "/", c["partition"], "/", c["epoch"])] = true
		}
		for p, o := range owners {
			if o.Member == "" || !loaded[fmt.Sprint(o.Member, "/", p, "/", o.Epoch)] {
				return false
			}
		}
		return true
	})
}

// discovered returns the orchestrator lists a worker's discovery reported,
// latest last.
func discovered(logs *observer.ObservedLogs) [][]string {
	var out [][]string
	for _, e := range logs.FilterMessageSnippet("orchestrators discovered").All() {
		var addrs []string
		list, _ := e.ContextMap()["orchestrators"].([]any)
		for _, a := range list {
			addrs = append(addrs, fmt.Sprint(a))
		}
		out = append(out, addrs)
	}
	return out
}

// TestWatchesAndMirrorsSurviveCompaction cuts every member and a worker
// off from etcd, changes what they watch, compacts etcd's history past
// where they stand and reconnects them, so that each watch resumes from a
// compacted revision. Each must list again and then follow changes made
// after the compaction: the member view (a member joins and leaves), the
// owner table (partitions handed over and back), the partitions' spec
// watches (a job created during the cut fires) and the worker's member
// discovery (it polls the newcomer).
func TestWatchesAndMirrorsSurviveCompaction(t *testing.T) {
	own := etcdtest.New(t) // compacted: not the package's shared server
	// "partition loaded" is logged at debug for an empty partition.
	core, logs := observer.New(zap.DebugLevel)
	f := fleettest.New(t, own, fleettest.Options{Partitions: 4, Scheduler: true, LeaseTTL: 5 * time.Second, Quiet: true, Logs: core})
	f.Join("a")
	f.Join("b")
	f.WaitSettled(15 * time.Second)
	// Every partition must be scheduling, its spec watch open, before the
	// cut: a partition still loading when etcd is compacted fails its
	// load and loads afresh, which never resumes a watch from a compacted
	// revision and so would not test that.
	waitLoaded(t, f, logs, 15*time.Second)
	rcv := newReceiver(t)

	wBridge := etcdtest.NewBridge(t, own.ClientAddr())
	wClient := etcdtest.NewClient(t, wBridge.Endpoints())
	wCore, wLogs := observer.New(zap.InfoLevel)
	disc := etcddiscovery.New(wClient, f.NS)
	disc.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, wCore) }))
	w, err := worker.New(worker.Config{ID: "w", Orchestrators: disc, ServeHTTP: true, Token: f.WorkerToken, Concurrency: 8, PollWait: time.Second,
		RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}, // the receiver
		Logger:     zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, 10*time.Second, func() bool {
		d := discovered(wLogs)
		return len(d) > 0 && len(d[len(d)-1]) == 2
	})

	// Cut off, change, compact past everyone, reconnect.
	bridges := []*netfault.Bridge{f.Member("a").Bridge, f.Member("b").Bridge, wBridge}
	for _, b := range bridges {
		b.Cut()
	}
	jobs := store.NewEtcd(f.Client, f.NS, f.Partitions(), jfapi.DefaultLimits(), nil)
	if _, err := jobs.Create(context.Background(), jfapi.Job{ID: "during-cut", Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}}); err != nil {
		t.Fatal(err)
	}
	// More revisions, so that the compaction is past the revision every
	// watch resumes from (the one after the last event it received).
	for i := range 3 {
		if _, err := f.Client.Put(context.Background(), fmt.Sprintf("%sunwatched/%d", f.NS, i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	compactedAt, err := etcdtest.Compact(context.Background(), f.Client)
	if err != nil {
		t.Fatal(err)
	}
	before := relists(logs)
	for _, b := range bridges {
		b.DropConnections()
		b.Restore()
	}

	// The spec watch listed again: the job created during the cut fires
	// and the worker runs it.
	waitFor(t, 20*time.Second, func() bool {
		for _, e := range rcv.executions() {
			if e.job == "during-cut" {
				return true
			}
		}
		return false
	})
	// A member joins after the compaction: the others' member views see
	// it (they hand it partitions), the worker discovers it.
	f.Join("c")
	f.WaitSettled(20 * time.Second)
	cAddr := strings.TrimPrefix(f.Member("c").URL, "http://")
	waitFor(t, 10*time.Second, func() bool {
		d := discovered(wLogs)
		return len(d[len(d)-1]) == 3 && strings.Contains(strings.Join(d[len(d)-1], " "), cAddr)
	})
	// It leaves: a and b take its partitions back only once their owner
	// tables show its owner keys gone.
	f.Leave("c")
	f.WaitSettled(20 * time.Second)
	waitFor(t, 10*time.Second, func() bool { d := discovered(wLogs); return len(d[len(d)-1]) == 2 })

	after := relists(logs)
	for _, what := range []string{"members/", "owners/"} {
		if after[what]-before[what] < 2 {
			t.Errorf("%d re-lists of %s by members a and b after the compaction at %d, want one each at least", after[what]-before[what], what, compactedAt)
		}
	}
	if after["specs"] == before["specs"] {
		t.Error("no partition's spec watch was listed again after the compaction")
	}
	if n := wLogs.FilterMessageSnippet("re-listing after watch ended").Len(); n == 0 {
		t.Error("the worker's discovery did not list again after the compaction")
	}
}

// get returns the status and the body of GET base+path.
func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func smallEtcd(t *testing.T, quota int64) *etcdtest.Server {
	t.Helper()
	srv, err := etcdtest.StartConfig(etcdserver.Config{Dir: t.TempDir(), QuotaBackendBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestHighWaterRefusesNewWorkWhileFiringContinues fills etcd past the
// high-water mark: creating a job, growing one and triggering one get 507
// naming the size, the quota and the mark, and change nothing; pausing,
// resuming and firing go on; after compaction and defragmentation new
// jobs are accepted again.
func TestHighWaterRefusesNewWorkWhileFiringContinues(t *testing.T) {
	const quota = 16 << 20
	srv := smallEtcd(t, quota)
	f := fleettest.New(t, srv, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true,
		Storage: storage.Config{HighWater: 0.5, CheckInterval: 50 * time.Millisecond}})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := newReceiver(t)
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	createEverySecond(t, f.AdminToken, base, "steady", rcv.srv.URL, nil)

	etcdtest.Fill(t, f.Client, "/junk/", quota/2)
	waitFor(t, 10*time.Second, func() bool {
		var rep storage.Report
		return api(t, f.AdminToken, "GET", base, "/v1/cluster/storage", nil, &rep) == http.StatusOK && rep.AboveHighWater
	})
	var e struct{ Error string }
	code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "new", Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}}, &e)
	if code != http.StatusInsufficientStorage {
		t.Fatalf("create above the mark: %d %q, want 507", code, e.Error)
	}
	for _, want := range []string{"high-water mark of 8.0 MiB", "50%", "16 MiB quota", "MiB,"} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("507 message %q does not name %q", e.Error, want)
		}
	}
	grown := jfapi.Job{Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}, Payload: []byte(`{"more":"data"}`)}
	if code := api(t, f.AdminToken, "PUT", base, "/v1/jobs/steady", grown, nil); code != http.StatusInsufficientStorage {
		t.Errorf("growing replacement above the mark: %d, want 507", code)
	}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/steady/trigger", nil, nil); code != http.StatusInsufficientStorage {
		t.Errorf("trigger above the mark: %d, want 507", code)
	}
	if code := api(t, f.AdminToken, "GET", base, "/v1/jobs/new", nil, nil); code != http.StatusNotFound {
		t.Errorf("the refused job exists: GET %d", code)
	}
	if code, body := get(t, base, "/readyz"); code != http.StatusOK {
		t.Errorf("readyz above the mark: %d %s; the member still fires and should stay ready", code, body)
	}
	// Firing continues.
	n := len(runsOf(t, f.AdminToken, base, "steady"))
	waitFor(t, 10*time.Second, func() bool { return len(runsOf(t, f.AdminToken, base, "steady")) >= n+2 })
	for _, op := range []string{"pause", "resume"} {
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/steady/"+op, nil, nil); code != http.StatusOK {
			t.Errorf("%s above the mark: %d, want 200", op, code)
		}
	}
	var rep storage.Report
	// One job: its spec and, paused and resumed, its pause state.
	if code := api(t, f.AdminToken, "GET", base, "/v1/cluster/storage", nil, &rep); code != http.StatusOK || !rep.AboveHighWater || rep.Quota != quota || rep.Keys.Jobs != 2 {
		t.Errorf("storage report %d %+v", code, rep)
	}
	if h := rep.History; h == nil || h.Member != "m1" || h.Partitions != 4 || h.Runs < 2 || h.Bytes <= 0 {
		t.Errorf("storage report's history %+v: want m1's 4 partitions with the steady job's runs", h)
	}

	etcdtest.MakeRoom(t, f.Client, "/junk/")
	waitFor(t, 10*time.Second, func() bool {
		return api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "new", Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}}, nil) == http.StatusCreated
	})
}

// TestNoSpaceStopsFiringAndFleetRecovers fills a small etcd until it
// raises its NOSPACE alarm: the members stop firing (nothing is written;
// one log line each), /readyz says why. After the runbook (delete,
// compact, defragment, disarm) the fleet recovers on its own: ready again,
// every job accepted before is still there and fires again, the missed
// times handled by each job's misfire policy.
func TestNoSpaceStopsFiringAndFleetRecovers(t *testing.T) {
	srv := smallEtcd(t, 16<<20)
	core, logs := observer.New(zap.InfoLevel)
	f := fleettest.New(t, srv, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, Logs: core,
		Storage: storage.Config{CheckInterval: 200 * time.Millisecond}})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := newReceiver(t)
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	policies := map[string]jfapi.MisfirePolicy{"once": jfapi.MisfireRunOnce, "skip": jfapi.MisfireSkip, "all": jfapi.MisfireRunAll}
	for id, p := range policies {
		createEverySecond(t, f.AdminToken, f.URLs()[len(id)%2], id, rcv.srv.URL, func(j *jfapi.Job) { j.MisfirePolicy = p })
	}
	for id := range policies {
		waitFor(t, 10*time.Second, func() bool { return len(runsOf(t, f.AdminToken, base, id)) >= 2 })
	}

	if !etcdtest.Fill(t, f.Client, "/junk/", 1<<40) {
		t.Fatal("etcd did not refuse writes past its quota")
	}
	outage := time.Now()
	for _, u := range f.URLs() {
		waitFor(t, 10*time.Second, func() bool {
			code, body := get(t, u, "/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "NOSPACE")
		})
	}
	// Firing has stopped: no member tries to write any more. The outage
	// lasts well past the members' misfire grace (2×TTL+2s = 6s: shorter
	// delays count as on time), so that the misfire policies decide its
	// fires.
	const grace = 6 * time.Second
	// Only writes refused for space count: on a loaded machine members
	// also lose their leases now and then, and the writes their fencing
	// cancels are logged as failed too.
	noSpace := func(msg string) int {
		return logs.FilterMessageSnippet(msg).Filter(func(e observer.LoggedEntry) bool {
			err, _ := e.ContextMap()["error"].(string)
			return strings.Contains(err, "space exceeded")
		}).Len()
	}
	failedWrites := func() int {
		n := 0
		for _, msg := range []string{"recording fires failed", "recording run failed", "recording attempts failed", "firing trigger failed"} {
			n += noSpace(msg)
		}
		return n
	}
	failed := failedWrites()
	time.Sleep(time.Until(outage.Add(grace + 4*time.Second)))
	if got := failedWrites(); got != failed {
		t.Errorf("%d more failed writes logged after the members saw the alarm: they keep trying", got-failed)
	}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "refused", Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}}, nil); code != http.StatusInsufficientStorage {
		t.Errorf("create under NOSPACE: %d, want 507", code)
	}
	if got := logs.FilterMessageSnippet("NOSPACE alarm is raised").Len(); got != 2 {
		t.Errorf("%d log lines on the alarm, want one per member", got)
	}
	if got := noSpace("recording fires failed"); got > f.Partitions() {
		t.Errorf("%d failed fire writes logged during the outage, want at most one per partition (no retry storm)", got)
	}

	etcdtest.MakeRoom(t, f.Client, "/junk/")
	recovered := time.Now()
	for _, u := range f.URLs() {
		waitFor(t, 20*time.Second, func() bool { code, _ := get(t, u, "/readyz"); return code == http.StatusOK })
	}
	for id := range policies {
		waitFor(t, 20*time.Second, func() bool {
			runs := runsOf(t, f.AdminToken, base, id)
			return len(runs) > 0 && runs[0].ScheduledAt.After(recovered.Add(time.Second))
		})
	}
	// The times missed (late by more than the grace at the recovery) went
	// through each job's misfire policy.
	for id, p := range policies {
		var during int
		for _, r := range runsOf(t, f.AdminToken, base, id) {
			if r.ScheduledAt.After(outage.Add(time.Second)) && r.ScheduledAt.Before(recovered.Add(-grace-time.Second)) {
				during++
			}
		}
		switch {
		case p == jfapi.MisfireSkip && during != 0:
			t.Errorf("job %s (skip): %d runs scheduled during the outage, want none", id, during)
		case p == jfapi.MisfireRunOnce && during > 1:
			t.Errorf("job %s (run_once): %d runs scheduled during the outage, want at most one", id, during)
		case p == jfapi.MisfireRunAll:
			runs := runsOf(t, f.AdminToken, base, id)
			for i := 1; i < len(runs); i++ {
				if gap := runs[i-1].ScheduledAt.Sub(runs[i].ScheduledAt); gap != time.Second {
					t.Errorf("job %s (run_all): runs %s and %s are %v apart, want every second fired", id, runs[i].ID, runs[i-1].ID, gap)
				}
			}
		}
	}
	if logs.FilterMessageSnippet("misfire handled").Len() == 0 {
		t.Error("no misfire was handled after the outage")
	}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "after", Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: rcv.srv.URL}}, nil); code != http.StatusCreated {
		t.Errorf("create after recovery: %d, want 201", code)
	}
	var list struct{ Jobs []jfapi.Job }
	api(t, f.AdminToken, "GET", base, "/v1/jobs", nil, &list)
	if len(list.Jobs) != len(policies)+1 {
		t.Errorf("%d jobs after recovery, want the %d accepted before and the new one", len(list.Jobs), len(policies))
	}
}

// TestFleetCompactsEtcd runs a fleet with a one-second compaction
// interval: its members keep etcd's history at about one interval, the
// compaction record advancing each round, while jobs fire on.
func TestFleetCompactsEtcd(t *testing.T) {
	own := etcdtest.New(t)
	f := fleettest.New(t, own, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true,
		Storage: storage.Config{CompactionInterval: time.Second}})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	rcv := newReceiver(t)
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	createEverySecond(t, f.AdminToken, f.URLs()[0], "j", rcv.srv.URL, nil)

	var first storage.Compaction
	waitFor(t, 20*time.Second, func() bool {
		rec, err := storage.ReadCompaction(context.Background(), f.Client, f.NS)
		first = rec
		return err == nil && rec.Revision > 0
	})
	waitFor(t, 20*time.Second, func() bool {
		rec, err := storage.ReadCompaction(context.Background(), f.Client, f.NS)
		return err == nil && rec.Revision > first.Revision
	})
	if _, err := f.Client.Get(context.Background(), "probe", clientv3.WithRev(first.Revision-1)); err == nil {
		t.Errorf("revision %d is still readable after the fleet compacted to %d", first.Revision-1, first.Revision)
	}
	var rep storage.Report
	if code := api(t, f.AdminToken, "GET", f.URLs()[1], "/v1/cluster/storage", nil, &rep); code != http.StatusOK || rep.CompactedRevision < first.Revision || rep.Compaction == nil {
		t.Errorf("storage report %d: compacted %d, record %+v; want at least %d", code, rep.CompactedRevision, rep.Compaction, first.Revision)
	}
	n := len(runsOf(t, f.AdminToken, f.URLs()[0], "j"))
	waitFor(t, 10*time.Second, func() bool { return len(runsOf(t, f.AdminToken, f.URLs()[0], "j")) >= n+2 })
}
