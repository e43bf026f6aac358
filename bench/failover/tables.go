package failover

import (
	"fmt"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's table.
func (r *Result) Tables() []*report.Table {
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
	return []*report.Table{t}
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
