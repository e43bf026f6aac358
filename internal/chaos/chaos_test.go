package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// binDir holds the jobfleet binary the runs start, built once by the
// first run (jobfleetBinary).
var (
	binDir    string
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func TestMain(m *testing.M) {
	leakOpts := goleak.IgnoreCurrent()
	code := func() int {
		dir, err := os.MkdirTemp("", "jobfleet-chaos-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir = dir
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(leakOpts); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// jobfleetBinary returns the jobfleet binary, building it on first use.
func jobfleetBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binary = filepath.Join(binDir, "jobfleet")
		buildErr = binarytest.Build(binary)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// envOr returns the value of environment variable name parsed by parse,
// or def if it is unset.
func envOr[T any](t *testing.T, name string, def T, parse func(string) (T, error)) T {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return x
}

// runChaos runs the harness with cfg and fails the test if the checker
// finds anything. A failed run's logs and report are kept in a directory
// the test names.
func runChaos(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	var out bytes.Buffer
	if rep != nil {
		rep.WriteFaults(&out)
		out.WriteString("\n")
		rep.WriteTable(&out)
		t.Logf("seed %d:\n%s", cfg.Seed, out.String())
	}
	if err != nil || !rep.OK() {
		kept := keep(t, cfg.Dir, cfg.Seed)
		if err != nil {
			t.Fatalf("chaos run (seed %d) failed: %v; logs in %s", cfg.Seed, err, kept)
		}
		t.Fatalf("chaos run (seed %d): the checker found violations (see above); logs and report in %s; replay with JOBFLEET_CHAOS_SEED=%d", cfg.Seed, kept, cfg.Seed)
	}
	return rep
}

// keep copies a run's directory, without etcd's data, out of the test's
// temporary directory and returns where to.
func keep(t *testing.T, dir string, seed int64) string {
	dst := filepath.Join(os.TempDir(), fmt.Sprintf("jobfleet-chaos-failed-%d-%s", seed, time.Now().Format("20060102-150405")))
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "data" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Logf("keeping the run's files: %v", err)
	}
	return dst
}

func shortConfig(t *testing.T, d time.Duration) Config {
	seed := envOr(t, "JOBFLEET_CHAOS_SEED", 1, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
	cfg := DefaultConfig(jobfleetBinary(t), t.TempDir(), seed, envOr(t, "JOBFLEET_CHAOS_DURATION", d, time.ParseDuration))
	cfg.Orchestrators, cfg.Workers, cfg.WorkerConcurrency = 3, 2, 12
	cfg.RecurringJobs, cfg.OneOffEvery = 8, time.Second
	cfg.Gap = 2 * time.Second
	return cfg
}

// TestChaosSingleEtcd is the short seeded run of `go test ./...`: a
// single-member etcd, 3 orchestrators and 2 workers, every fault that
// applies to them once (killed, restarted, paused, drained orchestrators, a worker
// killed mid-attempt, a full etcd restart, a burst of job writes while
// partitions move, a clock offset). JOBFLEET_CHAOS_SEED and
// JOBFLEET_CHAOS_DURATION replay or lengthen it.
func TestChaosSingleEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes a minute or more")
	}
	cfg := shortConfig(t, 30*time.Second)
	cfg.EtcdMembers = 1
	cfg.Faults = []Kind{OrchestratorKill, OrchestratorRestart, OrchestratorPause, OrchestratorDrain, WorkerKill, EtcdRestart, JobBurst, ClockOffset}
	rep := runChaos(t, cfg)
	for _, k := range cfg.Faults {
		if rep.FaultCounts[k] == 0 {
			t.Errorf("no %s injected; want each kind at least once", k)
		}
	}
	if a := rep.Global.After; a.UpstreamRuns == 0 || a.Fired == 0 {
		t.Errorf("after: %+v; want the chain's runs to have fired the jobs after them", a)
	}
	if s := rep.Global.Steps; s.Runs == 0 || s.Executions == 0 {
		t.Errorf("steps: %+v; want runs of steps executed and checked", s)
	}
}

// TestChaosEtcdCluster runs the fleet on a 3-member etcd whose leader the
// nemesis kills, between kills of orchestrators and workers.
func TestChaosEtcdCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes a minute or more")
	}
	cfg := shortConfig(t, 10*time.Second)
	cfg.EtcdMembers = 3
	cfg.Faults = []Kind{EtcdLeaderKill, OrchestratorKill, WorkerKill}
	rep := runChaos(t, cfg)
	if rep.FaultCounts[EtcdLeaderKill] == 0 {
		t.Errorf("no etcd leader killed")
	}
}

// TestChaosHosts is the short seeded run of the faults that need hosts:
// every process on a host of its own (a network namespace), a 3-member
// etcd, 3 orchestrators and 2 workers, and each network fault and a clock
// offset injected at least once. It needs root and network namespaces,
// and skips where they cannot be made (CI runs as root).
// JOBFLEET_CHAOS_SEED and JOBFLEET_CHAOS_DURATION replay or lengthen it.
func TestChaosHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes a minute or more")
	}
	if why := namespacesUsable(); why != "" {
		t.Skipf("no hosts here: %s", why)
	}
	cfg := shortConfig(t, 10*time.Second)
	cfg.Hosts = true
	cfg.EtcdMembers = 3
	cfg.Gap = HostsGap
	cfg.Faults = append([]Kind{ClockOffset}, NetworkKinds...)
	rep := runChaos(t, cfg)
	for _, k := range cfg.Faults {
		if rep.FaultCounts[k] == 0 {
			t.Errorf("no %s injected; want each kind at least once", k)
		}
	}
}
