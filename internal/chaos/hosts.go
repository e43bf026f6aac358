package chaos

import "fmt"

// The hosts of a run with Config.Hosts, by name, and their numbers (host
// n has address 10.213.0.n).
const (
	// hostCtl is the harness's own host: its etcd and API clients dial
	// from it. No fault ever cuts it off: it observes, like a Jepsen
	// control node.
	hostCtl = "ctl"
	// hostRecorder is the recorder's host: the service the jobs call.
	// Network faults cut the fleet's hosts from each other, not from it.
	hostRecorder = "recorder"
)

// hostPlan returns every host of cfg with its number: ctl 1, recorder 2,
// etcd-i 10+i, orch-i 20+i, worker-i 30+i.
func hostPlan(cfg Config) map[string]byte {
	hosts := map[string]byte{hostCtl: 1, hostRecorder: 2}
	for i := 1; i <= cfg.EtcdMembers; i++ {
		hosts[fmt.Sprintf("etcd-%d", i)] = byte(10 + i)
	}
	for i := 1; i <= cfg.Orchestrators; i++ {
		hosts[fmt.Sprintf("orch-%d", i)] = byte(20 + i)
	}
	for i := 1; i <= cfg.Workers; i++ {
		hosts[fmt.Sprintf("worker-%d", i)] = byte(30 + i)
	}
	return hosts
}
