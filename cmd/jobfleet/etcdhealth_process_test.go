package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestOrchestratorShowsItsEtcdEndpointsHealth: a member given two etcd
// endpoints exports jobfleet_etcd_endpoint_up for each; when one goes
// silent (its connections open, nothing answered) the gauge drops to 0
// while the member keeps serving, and comes back to 1 once it answers.
func TestOrchestratorShowsItsEtcdEndpointsHealth(t *testing.T) {
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	o := startOrchestrator(t, etcdtest.Namespace(t), "m-health", "--etcd-endpoints="+bridge.Endpoints()[0])
	if o.Exited() {
		t.Fatalf("m-health exited at start-up with %v", o.Cmd.ProcessState)
	}
	sample := func(ep string) string { return fmt.Sprintf("jobfleet_etcd_endpoint_up{endpoint=%q}", ep) }
	direct, silent := sample(etcd.Endpoints()[0]), sample(bridge.Endpoints()[0])
	if d, s := metricValue(t, o, direct), metricValue(t, o, silent); d != 1 || s != 1 {
		t.Fatalf("before the cut: %s = %v, %s = %v; want both 1", direct, d, silent, s)
	}
	bridge.Cut()
	defer bridge.Restore()
	poll(t, 15*time.Second, "the silent endpoint shown down", func() (bool, string) {
		v := metricValue(t, o, silent)
		return v == 0, fmt.Sprintf("%s = %v", silent, v)
	})
	if v := metricValue(t, o, direct); v != 1 {
		t.Errorf("with the bridge cut, %s = %v, want 1", direct, v)
	}
	if code, err := getJSON(o.url+"/healthz", nil); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz with one endpoint silent: %d %v", code, err)
	}
	bridge.Restore()
	poll(t, 15*time.Second, "the endpoint shown up again", func() (bool, string) {
		v := metricValue(t, o, silent)
		return v == 1, fmt.Sprintf("%s = %v", silent, v)
	})
}
