package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestEtcdClientLeavesASilentMember: one of two endpoints stops answering
// without closing its connection, as a partitioned member does. The
// members' etcd client must stop sending it requests (here within the
// keepalive time and timeout), instead of having every other request time
// out for as long as the partition lasts. Found by the fault suite: an
// orchestrator on the majority side of a partition lost its lease again
// and again, each keepalive that went to the cut-off member timing out.
func TestEtcdClientLeavesASilentMember(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a keepalive timeout (about 15s)")
	}
	silent := etcdtest.NewBridge(t, etcd.ClientAddr())
	opts := etcdOptions{endpoints: append(silent.Endpoints(), etcd.Endpoints()...)}
	c, err := opts.client(zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := c.Get(ctx, "probe")
		return err
	}
	etcdtest.AwaitBridgeUsed(t, c, silent) // both connections up and used before the cut
	silent.Cut()
	defer silent.Restore()
	start := time.Now()
	limit := etcdKeepAliveTime + etcdKeepAliveTimeout + 8*time.Second
	failures, run := 0, 0
	for run < 20 {
		if time.Since(start) > limit {
			t.Fatalf("%v after one of two etcd endpoints went silent, requests still time out (%d so far)", limit, failures)
		}
		if err := get(300 * time.Millisecond); err != nil {
			failures++
			run = 0
			continue
		}
		run++
	}
	if failures == 0 {
		t.Errorf("no request went to the silent endpoint: the test proves nothing")
	}
	t.Logf("requests avoided the silent endpoint %v after the cut, %d timed out before", time.Since(start).Round(100*time.Millisecond), failures)
}

// TestClockOffsetFlagIsHidden: the fault suite's clock offset flag works
// but is not shown to users.
func TestClockOffsetFlagIsHidden(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"orchestrator", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "clock-offset") {
		t.Errorf("orchestrator --help shows the clock offset flag:\n%s", out.String())
	}
	cmd, _, err := newRootCmd().Find([]string{"orchestrator"})
	if err != nil {
		t.Fatal(err)
	}
	if f := cmd.Flags().Lookup("test-clock-offset-file"); f == nil || !f.Hidden {
		t.Errorf("flag test-clock-offset-file: %+v, want a hidden flag", f)
	}
}
