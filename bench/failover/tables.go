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

// Charts draws nothing: the table says it all.
func (r *Result) Charts(string) ([]string, error) { return nil, nil }
