package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/store"
)

// etcd is shared by the compaction tests of this package only: they
// compact it, which every other package's server must not see.
var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

const interval = 5 * time.Minute

// compactor is one member's Compactor running on a fake clock.
type compactor struct {
	reg *prometheus.Registry
	met *storage.Metrics
}

func startCompactor(t *testing.T, client *clientv3.Client, ns, member string, clock clockwork.Clock) *compactor {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := &compactor{reg: reg, met: storage.NewMetrics(reg)}
	cfg := storage.DefaultConfig(ns, member)
	cfg.Clock = clock
	cfg.Logger = zaptest.NewLogger(t).Named(member)
	cfg.Metrics = c.met
	cp, err := storage.NewCompactor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// compactions returns how many compactions c made successfully.
func (c *compactor) compactions(t *testing.T) int {
	t.Helper()
	return int(metrictest.Value(t, c.reg, "jobfleet_etcd_compactions_total", "result", "ok"))
}

// write makes a few revisions under ns and returns the last one.
func write(t *testing.T, c *clientv3.Client, ns string, n int) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		resp, err := c.Put(context.Background(), fmt.Sprintf("%sx/%d", ns, i), "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// compacted reports whether revision rev of etcd's history is gone.
func compacted(t *testing.T, c *clientv3.Client, rev int64) bool {
	t.Helper()
	_, err := c.Get(context.Background(), "probe", clientv3.WithRev(rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return true
	}
	if err != nil {
		t.Fatalf("get at revision %d: %v", rev, err)
	}
	return false
}

func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d compactors did not finish their round: %v", n, err)
	}
}

// TestOneCompactionPerIntervalAcrossMembers runs two members' compactors
// on one controlled clock: each interval exactly one of them compacts, to
// the revision etcd had one interval earlier, so history younger than an
// interval survives and older history is gone.
func TestOneCompactionPerIntervalAcrossMembers(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	clock := clockwork.NewFakeClock()
	write(t, client, ns, 2) // so that no round compacts to revision 1
	a := startCompactor(t, client, ns, "a", clock)
	b := startCompactor(t, client, ns, "b", clock)
	blockUntil(t, clock, 2) // both observed

	var last int64
	for round := 1; round <= 4; round++ {
		before := write(t, client, ns, 3) // etcd's revision one interval before this round's compaction
		clock.Advance(interval)
		blockUntil(t, clock, 2)
		if got := a.compactions(t) + b.compactions(t); got != round {
			t.Fatalf("round %d: %d compactions in all (a %d, b %d), want one per round", round, got, a.compactions(t), b.compactions(t))
		}
		rec, err := storage.ReadCompaction(context.Background(), client, ns)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Revision <= last || rec.Revision > before {
			t.Fatalf("round %d: compacted to %d, want above the previous %d and at most %d (the revision an interval ago)", round, rec.Revision, last, before)
		}
		if !compacted(t, client, rec.Revision-1) || compacted(t, client, rec.Revision) {
			t.Fatalf("round %d: record says %d, but etcd's history does not start there", round, rec.Revision)
		}
		if rec.Member != "a" && rec.Member != "b" || rec.Interval.Std() != interval {
			t.Errorf("round %d: record %+v", round, rec)
		}
		last = rec.Revision
	}
	// The winner of the last round exports its revision; the other
	// exports the record it saw, one round older.
	got := max(metrictest.Value(t, a.reg, "jobfleet_etcd_compacted_revision"), metrictest.Value(t, b.reg, "jobfleet_etcd_compacted_revision"))
	if int64(got) != last {
		t.Errorf("jobfleet_etcd_compacted_revision = %v, want the record's %d", got, last)
	}
}

// TestCompactorTakesOverFromAStoppedMember: when the member that compacts
// stops, the other claims the next round.
func TestCompactorTakesOverFromAStoppedMember(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	clock := clockwork.NewFakeClock()
	first := startCompactor(t, client, ns, "first", clock)
	blockUntil(t, clock, 1)
	write(t, client, ns, 2)
	clock.Advance(interval)
	blockUntil(t, clock, 1)
	if first.compactions(t) != 1 {
		t.Fatalf("a lone member made %d compactions in its first full interval, want 1", first.compactions(t))
	}

	// A second member joins on its own clock; the first stops (its clock
	// no longer advances).
	clock2 := clockwork.NewFakeClock()
	second := startCompactor(t, client, ns, "second", clock2)
	blockUntil(t, clock2, 1)
	for round := 1; round <= 2; round++ {
		write(t, client, ns, 2)
		clock2.Advance(interval)
		blockUntil(t, clock2, 1)
	}
	if got := second.compactions(t); got != 2 {
		t.Fatalf("the remaining member made %d compactions in 2 intervals, want 2", got)
	}
	rec, err := storage.ReadCompaction(context.Background(), client, ns)
	if err != nil || rec.Member != "second" {
		t.Fatalf("record %+v, %v; want member second", rec, err)
	}
}

func TestCompactionOffDoesNothing(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	cfg := storage.DefaultConfig(ns, "m")
	cfg.CompactionInterval = storage.CompactionOff
	cp, err := storage.NewCompactor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Run(context.Background()); err != nil { // returns at once
		t.Fatal(err)
	}
	if rec, err := storage.ReadCompaction(context.Background(), client, ns); err != nil || rec != (storage.Compaction{}) {
		t.Fatalf("record %+v, %v; want none", rec, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*storage.Config)
		want   string // "" for valid
	}{
		{"defaults", func(*storage.Config) {}, ""},
		{"compaction off", func(c *storage.Config) { c.CompactionInterval = -1 }, ""},
		{"namespace without slash", func(c *storage.Config) { c.Namespace = "/x" }, "namespace"},
		{"no member", func(c *storage.Config) { c.Member = "" }, "member"},
		{"interval too short", func(c *storage.Config) { c.CompactionInterval = time.Millisecond }, "compaction-interval"},
		{"negative quota", func(c *storage.Config) { c.QuotaBytes = -1 }, "etcd-quota-bytes"},
		{"high water above 1", func(c *storage.Config) { c.HighWater = 1.5 }, "storage-high-water"},
		{"high water negative", func(c *storage.Config) { c.HighWater = -0.1 }, "storage-high-water"},
		{"check interval tiny", func(c *storage.Config) { c.CheckInterval = time.Microsecond }, "storage-check-interval"},
		{"negative check interval", func(c *storage.Config) { c.CheckInterval = -time.Second }, "storage-check-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := storage.DefaultConfig("/ns/", "m")
			tt.modify(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error about %q", err, tt.want)
			case tt.want != "" && (!errors.Is(err, storage.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "storage: invalid config: ")):
				t.Fatalf("%v does not wrap storage.ErrInvalidConfig with the package's prefix", err)
			}
		})
	}
}

// smallEtcd starts an etcd of its own with a space quota of quota bytes.
func smallEtcd(t *testing.T, quota int64) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv, err := etcdtest.StartConfig(etcdserver.Config{Dir: t.TempDir(), QuotaBackendBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, srv.Client(t)
}

// TestMonitorHighWaterAndNoSpace walks a monitor through the states of a
// small etcd: below the mark, above it (Admit refuses, naming size, quota
// and mark; writes go on), NOSPACE (everything refused), and back after
// the runbook, logging each transition once.
func TestMonitorHighWaterAndNoSpace(t *testing.T) {
	const quota = 8 << 20
	_, client := smallEtcd(t, quota)
	ns := "/m/"
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	cfg := storage.DefaultConfig(ns, "m")
	cfg.HighWater = 0.5
	cfg.Clock = clockwork.NewFakeClock()
	cfg.Logger = zap.New(core)
	cfg.Metrics = storage.NewMetrics(reg)
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	st := m.Check(ctx)
	if st.Err != nil || st.Quota != quota || st.QuotaSource != storage.QuotaFromEtcd || st.HighWaterBytes != quota/2 {
		t.Fatalf("first check: %+v; want etcd's quota %d with the mark at half", st, quota)
	}
	if st.AboveHighWater || st.NoSpace || m.Admit() != nil || m.WritesRefused() != nil {
		t.Fatalf("fresh etcd (%d bytes): %+v, admit %v", st.DBSize, st, m.Admit())
	}

	etcdtest.Fill(t, client, ns+"fill/", quota/2)
	for range 2 { // the second check logs nothing new
		st = m.Check(ctx)
	}
	err = m.Admit()
	if !st.AboveHighWater || !errors.Is(err, store.ErrHighWater) || m.WritesRefused() != nil {
		t.Fatalf("above the mark: state %+v, admit %v, refused %v", st, err, m.WritesRefused())
	}
	for _, want := range []string{"high-water mark of 4.0 MiB", "50%", "8.0 MiB quota"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("admit error %q does not name %q", err, want)
		}
	}
	if got := logs.FilterMessageSnippet("above the high-water mark").Len(); got != 1 {
		t.Errorf("%d log lines on entering the high-water mark, want 1", got)
	}
	if got := metrictest.Value(t, reg, "jobfleet_storage_high_water"); got != 1 {
		t.Errorf("jobfleet_storage_high_water = %v, want 1", got)
	}

	if !etcdtest.Fill(t, client, ns+"fill/", quota*2) {
		t.Fatal("etcd did not refuse writes past its quota")
	}
	st = m.Check(ctx)
	if !st.NoSpace || len(st.Alarms) == 0 || st.Alarms[0].Alarm != "NOSPACE" {
		t.Fatalf("after NOSPACE: %+v", st)
	}
	if err := m.WritesRefused(); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("WritesRefused = %v, want ErrNoSpace", err)
	}
	if err := m.Admit(); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("Admit = %v, want ErrNoSpace", err)
	}

	etcdtest.MakeRoom(t, client, ns+"fill/")
	st = m.Check(ctx)
	if st.NoSpace || st.AboveHighWater || m.Admit() != nil {
		t.Fatalf("after the runbook: %+v, admit %v", st, m.Admit())
	}
	for msg, want := range map[string]int{"NOSPACE alarm is raised": 1, "NOSPACE alarm is cleared": 1, "below the high-water mark again": 1} {
		if got := logs.FilterMessageSnippet(msg).Len(); got != want {
			t.Errorf("%d log lines %q, want %d", got, msg, want)
		}
	}
	if got := metrictest.Value(t, reg, "jobfleet_etcd_nospace_alarm"); got != 0 {
		t.Errorf("jobfleet_etcd_nospace_alarm = %v after recovery, want 0", got)
	}
}

// TestNoteWriteErrorStopsWritesAtOnce: a write refused for lack of space
// stops writes before the next scheduled check, and the check it triggers
// keeps the state while the alarm is raised.
func TestNoteWriteErrorStopsWritesAtOnce(t *testing.T) {
	_, client := smallEtcd(t, 4<<20)
	ns := "/n/"
	clock := clockwork.NewFakeClock()
	cfg := storage.DefaultConfig(ns, "m")
	cfg.Clock = clock
	cfg.Logger = zaptest.NewLogger(t)
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	blockUntil(t, clock, 1) // first check done

	m.NoteWriteError(errors.New("some other failure"))
	if m.WritesRefused() != nil {
		t.Fatal("a failure other than NOSPACE stopped writes")
	}
	if !etcdtest.Fill(t, client, ns+"fill/", 1<<30) {
		t.Fatal("etcd did not refuse writes past its quota")
	}
	m.NoteWriteError(fmt.Errorf("fire: %w", store.ErrNoSpace))
	if !errors.Is(m.WritesRefused(), store.ErrNoSpace) {
		t.Fatal("a write refused for lack of space did not stop writes at once")
	}
	// The triggered check (no clock advance) sees the alarm and keeps it.
	deadline := time.Now().Add(10 * time.Second)
	for m.State().CheckedAt.IsZero() || len(m.State().Alarms) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no check after the note: %+v", m.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !m.State().NoSpace {
		t.Fatal("the check cleared NOSPACE while the alarm is raised")
	}
}

// TestSmallRoomIsWarnedOnce: a quota whose room above the high-water mark
// is smaller than MinRoomBytes is logged once, however many checks; a
// room of MinRoomBytes is not.
func TestSmallRoomIsWarnedOnce(t *testing.T) {
	const quota = 64 << 20
	_, client := smallEtcd(t, quota)
	for _, tt := range []struct {
		highWater float64
		warnings  int
	}{
		{0.8, 1}, // 12.8 MiB of room
		{1 - float64(storage.MinRoomBytes)/quota, 0}, // exactly MinRoomBytes
	} {
		core, logs := observer.New(zap.WarnLevel)
		cfg := storage.DefaultConfig("/room/", "m")
		cfg.HighWater = tt.highWater
		cfg.Logger = zap.New(core)
		m, err := storage.NewMonitor(client, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if st := m.Check(context.Background()); st.Err != nil {
				t.Fatal(st.Err)
			}
		}
		if n := logs.FilterMessageSnippet("smaller than one step").Len(); n != tt.warnings {
			t.Errorf("high water %.3f of %d MiB: %d warnings about the room, want %d", tt.highWater, quota>>20, n, tt.warnings)
		}
	}
}

func TestQuotaFromFlagAndEtcd(t *testing.T) {
	const quota = 64 << 20
	_, client := smallEtcd(t, quota)
	for _, tt := range []struct {
		flag   int64
		want   int64
		source string
	}{
		{0, quota, storage.QuotaFromEtcd},
		{quota / 2, quota / 2, storage.QuotaFromFlag},
		{quota * 2, quota, storage.QuotaFromEtcd}, // the smaller counts
	} {
		cfg := storage.DefaultConfig("/q/", "m")
		cfg.QuotaBytes = tt.flag
		m, err := storage.NewMonitor(client, cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := m.Check(context.Background())
		if st.Quota != tt.want || st.QuotaSource != tt.source {
			t.Errorf("flag %d: quota %d from %s, want %d from %s", tt.flag, st.Quota, st.QuotaSource, tt.want, tt.source)
		}
	}
}

func TestReportCountsKeysAndCompaction(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	keys := store.Keys{NS: ns}
	ctx := context.Background()
	for i := range 3 {
		at := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
		for _, k := range []string{keys.Run(0, "j", at), keys.Spec(i, fmt.Sprint("j", i))} {
			if _, err := client.Put(ctx, k, "{}"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := client.Put(ctx, keys.Queue(0, "j", time.Unix(0, 0)), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, keys.Failing(0, "j", time.Unix(0, 0)), "{}"); err != nil {
		t.Fatal(err)
	}
	m, err := storage.NewMonitor(client, storage.DefaultConfig(ns, "m"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := storage.Counts{Jobs: 3, Runs: 3, ActiveRuns: 1, FailingRuns: 1, Total: 8}
	if r.Keys != want {
		t.Errorf("counts %+v, want %+v", r.Keys, want)
	}
	if r.Compaction != nil || r.CompactedRevision != 0 || r.History != nil {
		t.Errorf("report before any compaction: %+v", r)
	}
	if r.DBSize == 0 || r.Quota == 0 || r.Revision == 0 || len(r.Endpoints) != 1 || r.Alarms == nil {
		t.Errorf("report %+v", r)
	}
}

// TestStoreGuardRefusesGrowthOnly: a store with a guard that refuses asks
// it before creates, growing replacements and triggers, and refuses them
// changing nothing; deletes, pauses and shrinking replacements go through.
func TestStoreGuardRefusesGrowthOnly(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	open := store.NewEtcd(client, ns, 4, api.DefaultLimits(), nil)
	full := errors.New("full")
	refused := fmt.Errorf("%w: %w", store.ErrHighWater, full)
	guarded := open.WithGuard(func() error { return refused })
	ctx := context.Background()
	job := api.Job{ID: "j", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}, Payload: []byte(`{"a":"0123456789"}`)}
	if _, err := open.Create(ctx, job); err != nil {
		t.Fatal(err)
	}

	if _, err := guarded.Create(ctx, api.Job{ID: "k", Schedule: "@hourly", Executor: job.Executor}); !errors.Is(err, store.ErrHighWater) {
		t.Errorf("create: %v, want the guard's error", err)
	}
	bigger := job
	bigger.Payload = []byte(`{"a":"0123456789","b":"more"}`)
	if _, _, err := guarded.Put(ctx, bigger); !errors.Is(err, store.ErrHighWater) {
		t.Errorf("growing put: %v, want the guard's error", err)
	}
	if _, err := guarded.Trigger(ctx, "j"); !errors.Is(err, store.ErrHighWater) {
		t.Errorf("trigger: %v, want the guard's error", err)
	}
	if resp, err := client.Get(ctx, ns, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("refused writes changed the store: %d keys, %v", resp.Count, err)
	}

	smaller := job
	smaller.Payload = []byte(`{}`)
	if _, _, err := guarded.Put(ctx, smaller); err != nil {
		t.Errorf("shrinking put: %v", err)
	}
	if _, err := guarded.SetPaused(ctx, "j", true); err != nil {
		t.Errorf("pause: %v", err)
	}
	if err := guarded.Delete(ctx, "j"); err != nil {
		t.Errorf("delete: %v", err)
	}
}

// TestMonitorReportsNoUserinfo checks that endpoints written with a user
// name and password appear in the report, which every viewer reads,
// without them: neither as the endpoint nor inside an error.
func TestMonitorReportsNoUserinfo(t *testing.T) {
	srv, _ := smallEtcd(t, 4<<20)
	check := func(endpoint string) storage.State {
		t.Helper()
		client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		cfg := storage.DefaultConfig("/u/", "m")
		cfg.Clock = clockwork.NewFakeClock()
		cfg.RequestTimeout = 2 * time.Second
		m, err := storage.NewMonitor(client, cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := m.Check(context.Background())
		doc, err := json.Marshal(storage.Report{Endpoints: st.Endpoints})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(doc), "hunter2") || (st.Err != nil && strings.Contains(st.Err.Error(), "hunter2")) {
			t.Errorf("report %s, error %v: the user information is shown", doc, st.Err)
		}
		return st
	}
	st := check(strings.Replace(srv.Endpoints()[0], "http://", "http://root:hunter2@", 1))
	if st.Err != nil || len(st.Endpoints) != 1 || st.Endpoints[0].Endpoint != srv.Endpoints()[0] {
		t.Errorf("state %+v, want the endpoint %s without user information", st, srv.Endpoints()[0])
	}
	if st := check("http://root:hunter2@127.0.0.1:1"); st.Err == nil || !strings.Contains(st.Err.Error(), "http://127.0.0.1:1") {
		t.Errorf("unreachable endpoint: %v, want an error naming it without user information", st.Err)
	}
}

// TestCompactsWhenHistoryGrows rewrites one key with large values, well
// within one compaction interval: once the history written since the
// last round passes the compaction size, as noted by the API
// (NoteWritten) or as the monitor sees the database in use grow (Check),
// the member compacts without waiting for the interval, each time to a
// revision at least MinCompactionGap old (the clock moves by that much
// after the writes), past the round before.
func TestCompactsWhenHistoryGrows(t *testing.T) {
	_, client := smallEtcd(t, 64<<20)
	ns := "/h/"
	clock := clockwork.NewFakeClock()
	reg := prometheus.NewRegistry()
	cfg := storage.DefaultConfig(ns, "m")
	cfg.Clock = clock
	cfg.Logger = zaptest.NewLogger(t)
	cfg.Metrics = storage.NewMetrics(reg)
	cfg.CompactionBytes = 1 << 20
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := storage.NewCompactor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp.CompactOnHistory(m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	m.Check(ctx)
	blockUntil(t, clock, 1) // the first round observed

	blob := strings.Repeat("x", 300<<10)
	rewrite := func() int64 {
		var rev int64
		for range 4 {
			resp, err := client.Put(ctx, ns+"big", blob)
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	compactions := func() int { return int(metrictest.Value(t, reg, "jobfleet_etcd_compactions_total", "result", "ok")) }

	var prev int64
	for round, note := range []bool{true, false, true} {
		last := rewrite()
		if note {
			m.NoteWritten(4 * 300 << 10)
		} else {
			m.Check(ctx) // the database in use grew by the history
		}
		clock.Advance(storage.MinCompactionGap) // the round waits out the gap
		waitFor(t, func() bool { return compactions() == round+1 })
		blockUntil(t, clock, 1)
		rec, err := storage.ReadCompaction(ctx, client, ns)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Revision <= prev || rec.Revision > last {
			t.Fatalf("round %d compacted to %d; want past the round before (%d) and at most %d, the revision a gap before it", round, rec.Revision, prev, last)
		}
		if rec.Revision > 1 && !compacted(t, client, rec.Revision-1) {
			t.Fatalf("round %d: revision %d is still readable", round, rec.Revision-1)
		}
		prev = rec.Revision
	}
	if got := metrictest.Value(t, reg, "jobfleet_etcd_history_compactions_total"); got != 3 {
		t.Errorf("jobfleet_etcd_history_compactions_total = %v, want 3", got)
	}
	// Below the size, nothing is due before the interval.
	m.NoteWritten(1 << 10)
	clock.Advance(storage.MinCompactionGap)
	blockUntil(t, clock, 1)
	if got := compactions(); got != 3 {
		t.Errorf("%d compactions after a small write, want still 3", got)
	}
}

// waitFor waits up to 10s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMonitorChecksEveryEndpointItWasMadeWith: the client may be set to
// fewer endpoints later (the orchestrator's endpoint health watcher
// leaves silent ones); the monitor still checks, and shows, every
// endpoint the client was made with, so that an operator sees the one
// left too.
func TestMonitorChecksEveryEndpointItWasMadeWith(t *testing.T) {
	left := etcdtest.NewBridge(t, etcd.ClientAddr())
	eps := append(etcd.Endpoints(), left.Endpoints()...)
	client := etcdtest.NewClient(t, eps)
	cfg := storage.DefaultConfig("/eps/", "m")
	cfg.Logger = zaptest.NewLogger(t)
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.SetEndpoints(etcd.Endpoints()...)
	before := left.Replied()
	st := m.Check(context.Background())
	if st.Err != nil || len(st.Endpoints) != 2 || st.Endpoints[1].Endpoint != eps[1] || st.Endpoints[1].Error != "" || st.Endpoints[1].DBSize == 0 {
		t.Fatalf("check: %+v, want both of %v answering", st, eps)
	}
	if left.Replied() == before {
		t.Errorf("the endpoint left by the client was not asked: %+v", st.Endpoints)
	}
}

// TestMonitorCheckAnswersWithAnEndpointHanging: one of two endpoints
// takes requests and never answers (a member cut off without its
// connections closing). The check still answers within its timeout, from
// the other endpoint, with the silent one's error beside it: the
// statuses and the alarms each have a share of the timeout, and the
// alarms are asked again when the client sent the first request to the
// silent endpoint.
func TestMonitorCheckAnswersWithAnEndpointHanging(t *testing.T) {
	silent := etcdtest.NewBridge(t, etcd.ClientAddr())
	eps := append(etcd.Endpoints(), silent.Endpoints()...)
	client := etcdtest.NewClient(t, eps)
	etcdtest.AwaitBridgeUsed(t, client, silent)
	cfg := storage.DefaultConfig("/hang/", "m")
	cfg.Logger = zaptest.NewLogger(t)
	cfg.RequestTimeout = 2 * time.Second
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	silent.CutReplies()
	for i := range 4 { // the client's requests take turns over both endpoints
		st := m.Check(context.Background())
		if st.Err != nil || len(st.Endpoints) != 2 || st.Endpoints[0].DBSize == 0 || st.Endpoints[1].Error == "" || st.DBSize == 0 {
			t.Fatalf("check %d with %s silent: %+v (error %v), want the other's figures and the silent one's error", i, eps[1], st, st.Err)
		}
	}
}
