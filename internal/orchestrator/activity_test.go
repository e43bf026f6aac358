package orchestrator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// startMember runs member id of a fleet of 4 partitions under ns, its
// activity published every 100ms, and waits until it is ready. stop ends
// it and waits; it is called at the end of the test if not before.
func startMember(t *testing.T, etcd *etcdtest.Server, ns, id string) (o *orchestrator.Orchestrator, stop func()) {
	t.Helper()
	o, err := orchestrator.New(etcd.Client(t), orchestrator.Config{
		ID: id, Advertise: "http://" + id + ".invalid", Namespace: ns, Partitions: 4, LeaseTTL: 5 * time.Second,
		ActivityInterval: 100 * time.Millisecond, Logger: zaptest.NewLogger(t).Named(id),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := o.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	return o, stop
}

// TestActivityOfTheFleet: two members, a job firing every second on one
// of them. Each member answers for both: its own minutes taken at the
// request, the other's as published in etcd, so both answers count the
// job's fires whichever member owns it. A member that leaves takes its
// figures with it.
func TestActivityOfTheFleet(t *testing.T) {
	etcd := etcdtest.New(t)
	ns := etcdtest.Namespace(t)
	m1, _ := startMember(t, etcd, ns, "m1")
	m2, stop2 := startMember(t, etcd, ns, "m2")
	jobs, err := m1.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := jobs.Create(ctx, api.Job{ID: "tick", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}}); err != nil {
		t.Fatal(err)
	}
	fires := func(a api.FleetActivity) (total int64, members []string) {
		for _, m := range a.Members {
			members = append(members, m.Member)
			for _, min := range m.Minutes {
				total += min.Fires
			}
		}
		return total, members
	}
	for _, o := range []*orchestrator.Orchestrator{m1, m2} {
		for {
			a, err := o.Activity(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n, members := fires(a)
			if len(members) != 2 || members[0] != "m1" || members[1] != "m2" {
				t.Fatalf("%s lists members %v, want [m1 m2]", a.Member, members)
			}
			if len(a.LagBounds) != 16 {
				t.Fatalf("lag bounds %v", a.LagBounds)
			}
			if n >= 2 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s's answer counts %d fires of the fleet; want 2 or more", a.Member, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop2()
	for {
		a, err := m1.Activity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, members := fires(a); len(members) == 1 && members[0] == "m1" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("m1 still lists m2 after it left")
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := etcd.Client(t).Get(ctx, ns+"activity/m2")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("m2's published activity after it left: %v, %v; want none (gone with its lease)", resp.Kvs, err)
	}
}

// TestLateRunsOfTheFleet: a job whose runs no worker takes is late after
// LateAfter on whichever member owns it, and both members list its runs
// with a reason; Activity leaves them out.
func TestLateRunsOfTheFleet(t *testing.T) {
	etcd := etcdtest.New(t)
	ns := etcdtest.Namespace(t)
	var members []*orchestrator.Orchestrator
	for _, id := range []string{"m1", "m2"} {
		o, _ := startMember(t, etcd, ns, id)
		members = append(members, o)
	}
	jobs, err := members[0].Jobs()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.Now().Add(-time.Second).UTC()
	if _, err := jobs.Create(ctx, api.Job{ID: "stuck", RunAt: &at, Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range members {
		for {
			late, err := o.Late(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(late.Runs) == 1 {
				lr := late.Runs[0]
				if lr.JobID != "stuck" || lr.Status != api.RunPending || lr.Reason == "" || lr.Member == "" || time.Since(lr.Since) < dispatch.LateAfter {
					t.Fatalf("late run %+v", lr)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("late runs %+v; want the stuck job's run", late)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	a, err := members[1].Activity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range a.Members {
		if len(m.Late) > 0 {
			t.Errorf("Activity lists %s's late runs: %+v", m.Member, m.Late)
		}
	}
}
