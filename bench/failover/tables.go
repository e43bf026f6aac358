package failover

import (
	"fmt"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's tables: the TTL grid and the process kills.
func (r *Result) Tables() []*report.Table {
	var out []*report.Table
	if len(r.TTLs) > 0 {
		out = append(out, r.ttlTable())
	}
	if len(r.Kills) > 0 {
		out = append(out, r.killTable())
	}
	return out
}

// killTable is the process kills with and without the detector.
func (r *Result) killTable() *report.Table {
	c := r.Config
	t := &report.Table{
		Name: "failover_kills",
		Title: fmt.Sprintf("SIGKILL of one of %d orchestrator processes at the default lease TTL, P=%d, %d jobs firing every second, 3-member etcd (fsync %v): with the dead member detector and without",
			c.KillMembers, c.Partitions, c.KillJobs, c.Fsync),
		Columns: []string{"detector", "lease TTL", "kills", "kill → owned p50 ms", "p99 ms", "max ms", "kill → firing again p50 ms", "p99 ms", "max ms", "fires", "duplicate or unfenced fires, two owners", "stopped early"},
	}
	for _, k := range r.Kills {
		det := "off"
		if k.Detector {
			det = "on"
		}
		t.Add(det, k.TTL.String(), k.Kills, bench.Ms(k.Owned.P50), bench.Ms(k.Owned.P99), bench.Ms(k.Owned.Max),
			bench.Ms(k.Firing.P50), bench.Ms(k.Firing.P99), bench.Ms(k.Firing.Max), k.Fires, len(k.Violations), k.Unsettled)
	}
	t.Notes = []string{
		"kill → owned: from the SIGKILL until every partition the killed member owned is owned by a live member (owner keys read every 5 ms)",
		"kill → firing again: from the SIGKILL until every job of those partitions, triggered through a survivor right after the kill, has fired under its new owner (its run created, as a watch sees it)",
		"detector on: the survivors hold a connection open to each member's address (whose end brings a probe forward) and probe it every 200 ms without one, 2 s with; two refusals 50 ms apart revoke the dead member's lease. Off: its partitions wait for the lease to expire",
		"duplicate or unfenced fires, two owners: the fault suite's checks over the recorded history of the whole measurement; must be 0",
	}
	if len(r.Kills) == 2 && r.Kills[0].Owned.P99 > 0 && r.Kills[1].Owned.P99 > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("ratios measured in this run, off ÷ on: kill → owned p99 %.1f×, kill → firing again p99 %.1f×",
			float64(r.Kills[1].Owned.P99)/float64(r.Kills[0].Owned.P99), float64(r.Kills[1].Firing.P99)/float64(r.Kills[0].Firing.P99)))
	}
	for _, k := range r.Kills {
		for _, v := range k.Violations {
			t.Notes = append(t.Notes, "VIOLATION: "+v)
		}
	}
	return t
}

// ttlTable is the grid of lease TTLs.
func (r *Result) ttlTable() *report.Table {
	c := r.Config
	t := &report.Table{
		Name: "failover",
		Title: fmt.Sprintf("Failover and spurious handoffs per lease TTL: %d members, P=%d, 3-member etcd (fsync %v); %d leader kills (%v down) under %d busy processes, %d crashes per TTL",
			c.Members, c.Partitions, c.Fsync, c.LeaderKills, c.EtcdDown, c.Stress, c.Crashes),
		Columns: []string{"lease TTL", "renew deadline", "leader kills", "writes again p50 ms", "writes again max ms", "spurious handoffs", "kills with any", "members re-registered", "spurious gap max ms", "crashes", "failover p50 ms", "failover max ms", "unowned at the end", "stopped early"},
	}
	for _, x := range r.TTLs {
		t.Add(x.TTL.String(), x.RenewDeadline.String(), x.LeaderKills, bench.Ms(x.Election.P50), bench.Ms(x.Election.Max),
			x.SpuriousHandoffs, x.SpuriousKills, x.Fences, bench.Ms(x.SpuriousGap.Max), x.Crashes, bench.Ms(x.Failover.P50), bench.Ms(x.Failover.Max), x.Unowned, x.Unsettled)
	}
	t.Notes = []string{
		"writes again: from the leader's SIGKILL until a write through every running etcd member succeeds",
		"spurious handoffs: owner keys deleted and created again during the leader kills, when no partition had to move; members re-registered: members that fenced themselves (no keepalive within the renew deadline) or lost their lease",
		"stopped early: the fleet did not settle within the timeout after that step (members fencing themselves over and over), so the rest of that TTL was not measured",
		"failover: from the crash (member cut off from etcd and stopped) until every partition is owned by the survivors' ring target; it includes the lease's expiry and the 200 ms rebalance debounce",
	}
	return t
}

// Charts draws, per TTL, the crash failover time next to the longest
// write outage of the etcd elections and the renew deadline
// (failover_time.png), and the spurious handoffs (failover_spurious.png).
func (r *Result) Charts(dir string) ([]string, error) {
	if len(r.TTLs) == 0 {
		return nil, nil
	}
	var cats []string
	p50 := report.Series{Name: "crash failover p50"}
	worst := report.Series{Name: "crash failover max"}
	election := report.Series{Name: "etcd election: writes again, max"}
	deadline := report.Series{Name: "renew deadline (members fence after)"}
	handoffs := report.Series{Name: "partitions handed over for nothing"}
	for _, x := range r.TTLs {
		cats = append(cats, x.TTL.String())
		p50.Y = append(p50.Y, x.Failover.P50.Seconds())
		worst.Y = append(worst.Y, x.Failover.Max.Seconds())
		election.Y = append(election.Y, x.Election.Max.Seconds())
		deadline.Y = append(deadline.Y, x.RenewDeadline.Seconds())
		handoffs.Y = append(handoffs.Y, float64(x.SpuriousHandoffs))
	}
	c := r.Config
	times := report.Chart{
		Title:  fmt.Sprintf("Crash failover and etcd elections per lease TTL (%d members, P=%d)", c.Members, c.Partitions),
		XLabel: "lease TTL", YLabel: "seconds",
		Bars: true, Categories: cats,
		Series: []report.Series{p50, worst, election, deadline},
	}
	spurious := report.Chart{
		Title:  fmt.Sprintf("Spurious handoffs in %d etcd leader kills per lease TTL", c.LeaderKills),
		XLabel: "lease TTL", YLabel: "count",
		Bars: true, Categories: cats,
		Series: []report.Series{handoffs},
	}
	var files []string
	for _, ch := range []struct {
		c    report.Chart
		name string
	}{{times, "failover_time.png"}, {spurious, "failover_spurious.png"}} {
		f, err := ch.c.WritePNG(dir, ch.name)
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}
