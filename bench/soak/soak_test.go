package soak_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
	"github.com/jobfleet/jobfleet/bench/soak"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTinySoak runs a few seconds at 20 fires/s with a one-second
// compaction interval and checks the run's structure: it fired at about
// the rate, the fleet compacted, the history and the sizing figures were
// recorded, and the files were written.
func TestTinySoak(t *testing.T) {
	etcd, err := bench.StartEtcdQuota(false, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	cfg := soak.Config{Duration: 4 * time.Second, FiresPerSecond: 20, Members: 2, Partitions: 8, CompactionInterval: time.Second,
		SampleInterval: 250 * time.Millisecond, Pollers: 1, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := soak.Run(ctx, etcd.Endpoints(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	last := res.Samples[len(res.Samples)-1]
	if last.Elapsed < cfg.Duration || last.Fires < int64(cfg.FiresPerSecond) || last.Runs == 0 {
		t.Errorf("last sample %+v: want the whole duration, fires and runs kept", last)
	}
	if last.Compacted == 0 || last.Compacted >= last.Revision {
		t.Errorf("compacted revision %d of %d: the fleet did not compact", last.Compacted, last.Revision)
	}
	if res.Quota != 64<<20 {
		t.Errorf("quota %d, want etcd's 64 MiB", res.Quota)
	}
	z := res.Sizing
	// etcd's in-use growth per job (JobInUseBytes) is not checked: pages
	// freed by the fleet's compactions are reused, so at this size it
	// can be zero.
	if z.JobBytes <= 0 || z.RunBytes <= 0 || z.MemberBytes <= 0 {
		t.Errorf("sizing %+v: want every logical figure measured", z)
	}
	if z.Measured && (z.RevisionBytes <= 0 || z.FireBytes <= 0 || z.RevisionsPerFire <= 0) {
		t.Errorf("sizing %+v: per-revision figures measured but not positive", z)
	}

	if d := res.Defrag; d.Before == 0 || d.After == 0 || d.After > d.Before || d.Took <= 0 {
		t.Errorf("defragmentation %+v: want sizes before and after, not growing, and its time", d)
	}

	dir := t.TempDir()
	if _, err := report.WriteAll(io.Discard, dir, "soak", res, res.Tables()); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Charts(dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"soak_summary.csv", "soak_sizing.csv", "soak_samples.csv", "soak.json", "soak_size.png", "soak_kept.png"} {
		if fi, err := os.Stat(filepath.Join(dir, want)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", want, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := soak.DefaultConfig()
	configtest.Rejects(t, ok, map[string]func(*soak.Config){
		"no duration":       func(c *soak.Config) { c.Duration = 0 },
		"no fires":          func(c *soak.Config) { c.FiresPerSecond = 0 },
		"no members":        func(c *soak.Config) { c.Members = 0 },
		"tiny compaction":   func(c *soak.Config) { c.CompactionInterval = time.Millisecond },
		"no pollers":        func(c *soak.Config) { c.Pollers = 0 },
		"too many fires/s":  func(c *soak.Config) { c.FiresPerSecond = 1_000_000 },
		"partitions beyond": func(c *soak.Config) { c.Partitions = 1 << 20 },
	})
}
