package failover_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/bench/failover"
	"github.com/jobfleet/jobfleet/bench/report"
	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTinyFailover runs the whole measurement at the smallest size: one
// member and 8 partitions on a 3-member etcd, one leader kill and one
// crash at a 2 s TTL, and checks the figures are there and plausible and
// that nothing was left without an owner.
func TestTinyFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the jobfleet binary and runs a 3-member etcd")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "jobfleet")
	if err := binarytest.Build(bin); err != nil {
		t.Fatal(err)
	}
	cfg := failover.Config{
		TTLs: []time.Duration{2 * time.Second}, Members: 1, Partitions: 8,
		LeaderKills: 1, EtcdDown: 500 * time.Millisecond, Crashes: 1,
		Kills: 1, KillMembers: 2, KillJobs: 8,
		Timeout: time.Minute, Binary: bin, Dir: filepath.Join(dir, "run"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := failover.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TTLs) != 1 {
		t.Fatalf("got %d TTL results, want 1", len(res.TTLs))
	}
	r := res.TTLs[0]
	if r.LeaderKills != 1 || r.Crashes != 1 {
		t.Fatalf("leader kills %d, crashes %d; want 1 and 1", r.LeaderKills, r.Crashes)
	}
	if r.Election.Max <= 0 {
		t.Errorf("etcd served again after %v; want a measured time", r.Election.Max)
	}
	// A crashed member's partitions wait for its lease: at least the TTL
	// less one renew interval, and well under the settle timeout.
	if min, got := r.TTL*3/4, r.Failover.Max; got < min || got >= cfg.Timeout {
		t.Errorf("failover took %v; want between %v and %v", got, min, cfg.Timeout)
	}
	if r.Unowned != 0 {
		t.Errorf("%d partitions left without an owner", r.Unowned)
	}
	if r.SpuriousKills > r.LeaderKills || r.SpuriousHandoffs > r.SpuriousKills*cfg.Partitions*4 {
		t.Errorf("spurious handoffs %d after %d kills: more than the partitions could make", r.SpuriousHandoffs, r.SpuriousKills)
	}
	if len(res.Kills) != 2 || !res.Kills[0].Detector || res.Kills[1].Detector {
		t.Fatalf("kill results %+v, want one with the detector, then one without", res.Kills)
	}
	for _, k := range res.Kills {
		if k.Kills != 1 || k.Unsettled != "" {
			t.Errorf("detector %v: %d kills measured (%s), want 1", k.Detector, k.Kills, k.Unsettled)
		}
		if k.Owned.Max <= 0 || k.Firing.Max < k.Owned.Max {
			t.Errorf("detector %v: owned again after %v, firing again after %v; want both measured, firing after owning", k.Detector, k.Owned.Max, k.Firing.Max)
		}
		for _, v := range k.Violations {
			t.Errorf("detector %v: %s", k.Detector, v)
		}
		if k.Fires == 0 {
			t.Errorf("detector %v: no fire recorded", k.Detector)
		}
	}
	// Without the detector the partitions wait for the lease: at least
	// its TTL less one renew interval.
	if off, min := res.Kills[1].Owned.Max, res.Kills[1].TTL*3/4; off < min {
		t.Errorf("without the detector the partitions moved %v after the kill, before the lease could expire (%v)", off, min)
	}
	var out bytes.Buffer
	if _, err := report.WriteAll(&out, filepath.Join(dir, "out"), "failover", res, res.Tables()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "failover p50 ms") || !strings.Contains(out.String(), "kill → firing again p50 ms") {
		t.Errorf("table lacks its columns:\n%s", out.String())
	}
	if _, err := res.Charts(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"failover.csv", "failover_time.png", "failover_spurious.png"} {
		if fi, err := os.Stat(filepath.Join(dir, "out", f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}
