package rebalance

import (
	"fmt"
	"slices"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
	"github.com/jobfleet/jobfleet/shard"
)

// Result is a whole rebalance run.
type Result struct {
	Rings *RingResult `json:"rings"`
	Gaps  *GapResult  `json:"gaps,omitempty"`
}

// printedN are the member counts the printed per-n table shows (the CSV
// has them all).
var printedN = []int{1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 48, 63}

// Tables returns the run's tables.
func (r *Result) Tables() []*report.Table {
	var ts []*report.Table
	rc := r.Rings.Config
	settings := &report.Table{
		Name:    "rebalance_settings",
		Title:   fmt.Sprintf("Ring settings, P=%d, n = 1..%d members: partitions moved / ideal P/(n+1), and max/avg load", rc.Partitions, rc.MaxMembers),
		Columns: []string{"ring", "replication factor", "load bound", "shipped", "join mean", "join max", "leave mean", "leave max", "max/avg load (worst)", "update ms (mean)", fmt.Sprintf("update ms (%d)", rc.MaxMembers), fmt.Sprintf("fresh ms (%d)", rc.MaxMembers)},
	}
	for _, s := range r.Rings.Settings {
		mark := ""
		if s.Shipped {
			mark = "yes"
		}
		version := s.Setting.Version
		if version == 0 {
			version = shard.RingVersion
		}
		settings.Add(fmt.Sprintf("v%d", version), s.Setting.ReplicationFactor, s.Setting.Load, mark, s.JoinMean, s.JoinMax, s.LeaveMean, s.LeaveMax, s.MaxOverAvg,
			bench.Ms(s.Update), bench.Ms(s.UpdateLast), bench.Ms(s.Fresh))
	}
	settings.Notes = []string{
		"join: n → n+1 members; leave: a random one of n+1 leaves (mean of samples); 1.00 is the ideal of a balanced assignment (below it: the newcomer got less than an average share)",
		"ring v1: the consistent library's own bounded loads (shipped before ring version 2); v2: the library's ring without a bound, then the bound as a stable matching (shard.Ring)",
		fmt.Sprintf("update ms: CPU time of one join's ring update through shard.Assigner, mean over 1 → 2 … %d → %d and for the last join alone; fresh ms: CPU time of shard.NewRing for %d members (a member starting)", rc.MaxMembers-1, rc.MaxMembers, rc.MaxMembers),
	}
	ts = append(ts, settings)

	shipped := shard.DefaultRingConfig(rc.Partitions)
	per := &report.Table{
		Name:    "rebalance_shipped",
		Title:   fmt.Sprintf("Shipped ring (RF %d, load %.2f), P=%d, per member count", shipped.ReplicationFactor, shipped.Load, rc.Partitions),
		Columns: []string{"n → n+1", "ideal P/(n+1)", "join moved", "join/ideal", "leave moved", "leave/ideal", "max/avg load"},
	}
	all := &report.Table{
		Name:     "rebalance_points",
		Columns:  []string{"replication factor", "load bound", "n", "ideal", "join moved", "leave moved", "max/avg load"},
		FileOnly: true,
	}
	for _, p := range r.Rings.Points {
		all.Add(p.Setting.ReplicationFactor, p.Setting.Load, p.N, p.Ideal, p.JoinMoved, p.LeaveMoved, p.MaxOverAvg)
		if p.Setting.ReplicationFactor == shipped.ReplicationFactor && p.Setting.Load == shipped.Load && slices.Contains(printedN, p.N) {
			per.Add(fmt.Sprintf("%d → %d", p.N, p.N+1), p.Ideal, p.JoinMoved, float64(p.JoinMoved)/p.Ideal, p.LeaveMoved, p.LeaveMoved/p.Ideal, p.MaxOverAvg)
		}
	}
	if len(per.Rows) > 0 {
		ts = append(ts, per)
	}
	ts = append(ts, all)

	if r.Gaps != nil {
		gc := r.Gaps.Config
		g := &report.Table{
			Name:    "rebalance_gaps",
			Title:   fmt.Sprintf("Ownership gaps on real etcd: P=%d, %d members (+1 joining, leaving or crashing), lease TTL %v", gc.Partitions, gc.Members, gc.LeaseTTL),
			Columns: []string{"event", "reps", "moved/rep", "gap p50 ms", "gap p99 ms", "gap max ms", "to new owner p50 ms", "to new owner p99 ms", "to new owner max ms", "settle p50 ms", "settle p99 ms"},
		}
		for _, s := range r.Gaps.Stats {
			g.Add(s.Event, s.Reps, s.Moved, bench.Ms(s.Gap.P50), bench.Ms(s.Gap.P99), bench.Ms(s.Gap.Max),
				bench.Ms(s.Unowned.P50), bench.Ms(s.Unowned.P99), bench.Ms(s.Unowned.Max), bench.Ms(s.Settle.P50), bench.Ms(s.Settle.P99))
		}
		g.Notes = []string{
			"gap: owner key deleted (released, or expired with a crashed member's lease) → created by the new owner, per moved partition",
			"to new owner: event (join or leave started, crash) → partition owned by its new owner; for a crash it includes waiting for the lease to expire",
			"settle: event → every partition owned by its ring target, per repetition",
		}
		ts = append(ts, g)
	}
	return ts
}

// Charts draws movement and load per member count, and the gaps.
func (r *Result) Charts(dir string) ([]string, error) {
	var files []string
	rc := r.Rings.Config
	shipped := shard.DefaultRingConfig(rc.Partitions)
	move := report.Chart{
		Title:  fmt.Sprintf("Partitions moved / ideal P/(n+1), P=%d", rc.Partitions),
		XLabel: "members before the join (n)", YLabel: "moved / ideal",
		HLines: []report.Series{{Name: "ideal", Y: []float64{1}}},
	}
	load := report.Chart{
		Title:  fmt.Sprintf("Largest load / average load, P=%d", rc.Partitions),
		XLabel: "members", YLabel: "max / avg",
	}
	// One replication factor keeps the chart readable: the shipped one if
	// it was measured, else the first measured.
	chartRF := 0
	for _, s := range r.Rings.Settings {
		if s.Setting.ReplicationFactor == shipped.ReplicationFactor || chartRF == 0 {
			chartRF = s.Setting.ReplicationFactor
		}
	}
	for _, s := range r.Rings.Settings {
		legacy := s.Setting.Version != 0 && s.Setting.Version != shard.RingVersion
		if s.Setting.ReplicationFactor != chartRF && !legacy {
			continue // the load bound matters most; one RF keeps the chart readable
		}
		join := report.Series{Name: fmt.Sprintf("join, load %.2f", s.Setting.Load)}
		ld := report.Series{Name: fmt.Sprintf("load bound %.2f", s.Setting.Load)}
		if legacy {
			join.Name = fmt.Sprintf("join, ring v%d (RF %d, load %.2f)", s.Setting.Version, s.Setting.ReplicationFactor, s.Setting.Load)
			ld.Name = fmt.Sprintf("ring v%d (RF %d, load %.2f)", s.Setting.Version, s.Setting.ReplicationFactor, s.Setting.Load)
		}
		for _, p := range r.Rings.Points {
			if p.Setting == s.Setting {
				join.X, join.Y = append(join.X, float64(p.N)), append(join.Y, float64(p.JoinMoved)/p.Ideal)
				ld.X, ld.Y = append(ld.X, float64(p.N+1)), append(ld.Y, p.MaxOverAvg)
			}
		}
		move.Series = append(move.Series, join)
		load.Series = append(load.Series, ld)
		if s.Shipped {
			leave := report.Series{Name: fmt.Sprintf("leave, load %.2f", s.Setting.Load)}
			for _, p := range r.Rings.Points {
				if p.Setting == s.Setting {
					leave.X, leave.Y = append(leave.X, float64(p.N)), append(leave.Y, p.LeaveMoved/p.Ideal)
				}
			}
			move.Series = append(move.Series, leave)
		}
	}
	for _, c := range []struct {
		ch   report.Chart
		name string
	}{{move, "rebalance_movement.png"}, {load, "rebalance_load.png"}} {
		if len(c.ch.Series) == 0 {
			continue
		}
		p, err := c.ch.WritePNG(dir, c.name)
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	if r.Gaps != nil && len(r.Gaps.Stats) > 0 {
		ch := report.Chart{
			Title:  fmt.Sprintf("Ownership gap per moved partition (lease TTL %v)", r.Gaps.Config.LeaseTTL),
			YLabel: "ms", Bars: true,
		}
		p50 := report.Series{Name: "gap p50"}
		p99 := report.Series{Name: "gap p99"}
		for _, s := range r.Gaps.Stats {
			ch.Categories = append(ch.Categories, s.Event)
			p50.Y = append(p50.Y, bench.Ms(s.Gap.P50))
			p99.Y = append(p99.Y, bench.Ms(s.Gap.P99))
		}
		ch.Series = []report.Series{p50, p99}
		p, err := ch.WritePNG(dir, "rebalance_gaps.png")
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	return files, nil
}
