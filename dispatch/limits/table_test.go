package limits_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/limits"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd, goleak.IgnoreCurrent())) }

// startTable runs a table of namespace ns until the test ends.
func startTable(t *testing.T, c *clientv3.Client, ns string) *limits.Table {
	t.Helper()
	tb, err := limits.New(c, ns, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { tb.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return tb
}

func holder(run string) api.LimitHolder {
	return api.LimitHolder{RunID: run, JobID: "j", Item: -1, Attempt: 1, Worker: "w"}
}

// TestConcurrentGrantsConflict: two members that both see one free slot
// prepare a grant each from the same state; etcd applies one of them, and
// the other's compare fails. A member then sees no room until a slot is
// deleted.
func TestConcurrentGrantsConflict(t *testing.T) {
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(c, ns, 4, api.DefaultLimits(), nil)
	ctx := context.Background()
	one := 1
	put, _, err := s.PutLimit(ctx, api.Limit{Key: "db", MaxRunning: &one})
	if err != nil {
		t.Fatal(err)
	}
	a, b := startTable(t, c, ns), startTable(t, c, ns)
	for _, tb := range []*limits.Table{a, b} {
		if err := tb.WaitRevision(ctx, put.Revision); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	ga, _, okA := a.Prepare([]string{"db"}, []api.LimitHolder{holder("r1")}, now)
	gb, _, okB := b.Prepare([]string{"db"}, []api.LimitHolder{holder("r2")}, now)
	if !okA || !okB {
		t.Fatalf("prepare: %v %v, want both to see the free slot", okA, okB)
	}
	won := 0
	var rev int64
	for _, g := range []limits.Grant{ga, gb} {
		resp, err := c.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Succeeded {
			won++
			rev = resp.Header.Revision
		}
	}
	if won != 1 {
		t.Fatalf("%d grants applied, want exactly 1", won)
	}
	if err := a.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if room, by := a.Room([]string{"db"}, 1, now); room != 0 || by != "db" {
		t.Fatalf("room after the grant: %d (%q), want 0 for db", room, by)
	}
	if _, _, ok := a.Prepare([]string{"db"}, []api.LimitHolder{holder("r3")}, now); ok {
		t.Fatal("a grant was prepared with no room")
	}
	if _, st, ok := a.Status("db", now); !ok || st.Running != 1 {
		t.Fatalf("status %+v, want 1 running", st)
	}
	resp, err := c.Delete(ctx, store.Keys{NS: ns}.LimitHeldPrefix(), clientv3.WithPrefix())
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("deleting the holder: %v, %v", resp, err)
	}
	if err := a.WaitRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if room, _ := a.Room([]string{"db"}, 1, now); room != 1 {
		t.Fatalf("room after the slot was freed: %d, want 1", room)
	}
	// A key without a limit bounds nothing; a rate key counts starts.
	if room, _ := a.Room([]string{"other"}, 5, now); room != 5 {
		t.Fatalf("room of a key without a limit: %d, want 5", room)
	}
}

// TestRateWindow: a rate key of 2 per minute has room for two starts, then
// none until the first leaves the window.
func TestRateWindow(t *testing.T) {
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(c, ns, 4, api.DefaultLimits(), nil)
	ctx := context.Background()
	put, _, err := s.PutLimit(ctx, api.Limit{Key: "api", Rate: &api.LimitRate{Count: 2, Per: api.Duration(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	tb := startTable(t, c, ns)
	if err := tb.WaitRevision(ctx, put.Revision); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0, t0.Add(10 * time.Second)} {
		g, _, ok := tb.Prepare([]string{"api"}, []api.LimitHolder{holder(string(rune('a' + i)))}, at)
		if !ok {
			t.Fatalf("start %d refused", i)
		}
		resp, err := c.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit()
		if err != nil || !resp.Succeeded {
			t.Fatalf("start %d: %v %v", i, resp, err)
		}
		tb.Granted(g, resp.Header.Revision)
	}
	for _, tc := range []struct {
		at   time.Time
		room int
	}{
		{t0.Add(30 * time.Second), 0},
		{t0.Add(time.Minute - time.Millisecond), 0},
		{t0.Add(time.Minute), 1},
		{t0.Add(70 * time.Second), 2},
	} {
		if room, _ := tb.Room([]string{"api"}, 5, tc.at); room != tc.room {
			t.Errorf("room at %v: %d, want %d", tc.at.Sub(t0), room, tc.room)
		}
	}
}
