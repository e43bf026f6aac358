package rebalance_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/rebalance"
	"github.com/jobfleet/jobfleet/bench/report"
)

func TestAnalyzeRings(t *testing.T) {
	cfg := rebalance.RingConfig{
		Partitions:   128,
		MaxMembers:   10,
		Settings:     []rebalance.Setting{{ReplicationFactor: 100, Load: 1.25}, {ReplicationFactor: 20, Load: 1.5}, {ReplicationFactor: 50, Load: 1.25, Version: 1}},
		LeaveSamples: 2,
		Seed:         1,
	}
	res, err := rebalance.AnalyzeRings(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Points), len(cfg.Settings)*(cfg.MaxMembers-1); got != want {
		t.Fatalf("got %d points, want %d", got, want)
	}
	for _, p := range res.Points {
		// The newcomer gets some partitions (bounded loads cap the
		// largest share, not the smallest, so it may get fewer than the
		// average), and no change moves more than all of them.
		if p.JoinMoved < 1 || p.JoinMoved > cfg.Partitions {
			t.Errorf("%v n=%d: join moved %d, ideal %.1f", p.Setting, p.N, p.JoinMoved, p.Ideal)
		}
		// The load bound holds up to the ceiling of the average.
		bound := math.Max(p.Setting.Load, math.Ceil(p.Ideal)/p.Ideal)
		if p.MaxOverAvg > bound+1e-9 {
			t.Errorf("%v n=%d: max/avg %.3f above the bound %.3f", p.Setting, p.N, p.MaxOverAvg, bound)
		}
	}
	if !res.Settings[0].Shipped || res.Settings[1].Shipped || res.Settings[2].Shipped {
		t.Errorf("shipped marks %v, %v, %v; want the first only", res.Settings[0].Shipped, res.Settings[1].Shipped, res.Settings[2].Shipped)
	}
	for _, s := range res.Settings {
		// Both are timed, and a fresh ring of the most members costs
		// more CPU than updating the previous one by a member.
		if s.Update <= 0 || s.UpdateLast <= 0 || s.Fresh <= 0 {
			t.Errorf("%v: update %v, last %v, fresh %v; want all measured", s.Setting, s.Update, s.UpdateLast, s.Fresh)
		}
	}
}

// TestTinyGaps runs the measured part at tiny sizes: one join, one leave
// and one crash on a 16-partition fleet with the minimum TTL, and checks
// that every moved partition got an owner again and the files are written.
func TestTinyGaps(t *testing.T) {
	etcd, err := bench.StartEtcd(false)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gc := rebalance.GapConfig{Partitions: 16, Members: 1, JoinLeaveReps: 1, CrashReps: 1, LeaseTTL: 2 * time.Second, Timeout: 30 * time.Second}
	gaps, err := rebalance.Gaps(ctx, etcd.Endpoints(), etcd.ClientAddr(), gc)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps.Stats) != 3 {
		t.Fatalf("got stats for %d events, want 3", len(gaps.Stats))
	}
	for _, s := range gaps.Stats {
		if s.Reps != 1 || s.Moved < 1 || s.Gap.Count != int(s.Moved) {
			t.Errorf("%s: %d reps, %.0f moved, %d gaps; want 1 rep, some moved, a gap each", s.Event, s.Reps, s.Moved, s.Gap.Count)
		}
		if s.Event == rebalance.Crash && s.Unowned.Max < time.Second {
			t.Errorf("crash: partitions owned again %v after the crash, before the 2s lease could expire", s.Unowned.Max)
		}
	}

	rings, err := rebalance.AnalyzeRings(rebalance.RingConfig{Partitions: 16, MaxMembers: 4, Settings: []rebalance.Setting{{ReplicationFactor: 50, Load: 1.25}}, LeaveSamples: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &rebalance.Result{Rings: rings, Gaps: gaps}
	dir := t.TempDir()
	if _, err := report.WriteAll(ioDiscard{}, dir, "rebalance", res, res.Tables()); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Charts(dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rebalance_settings.csv", "rebalance_points.csv", "rebalance_gaps.csv", "rebalance.json", "rebalance_movement.png", "rebalance_load.png", "rebalance_gaps.png"} {
		if fi, err := os.Stat(filepath.Join(dir, want)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", want, err)
		}
	}
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }
