package orchestrator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/membership"
)

// deadlineKV records the time each transaction's context gives it.
type deadlineKV struct {
	clientv3.KV
	mu      sync.Mutex
	armed   bool
	longest time.Duration
}

func (k *deadlineKV) Txn(ctx context.Context) clientv3.Txn {
	if dl, ok := ctx.Deadline(); ok {
		k.mu.Lock()
		if k.armed {
			k.longest = max(k.longest, time.Until(dl))
		}
		k.mu.Unlock()
	}
	return k.KV.Txn(ctx)
}

// TestSchedulerRequestsEndBeforeTheRenewDeadline: a scheduler's write that
// etcd never answers (a proposal lost in a leader change) must give up
// within the session's renew deadline, and be retried, rather than hold the
// partition (its fires, and the workers' heartbeats and reports) for the
// dispatcher's default 5s, as long as the misfire grace. Found by the chaos
// suite (internal/chaos): after an etcd leader kill, on-time fires became
// misfires and running attempts were declared lost, although the members'
// leases were renewed within a second.
func TestSchedulerRequestsEndBeforeTheRenewDeadline(t *testing.T) {
	etcd := etcdtest.New(t)
	client := etcd.Client(t)
	kv := &deadlineKV{KV: client.KV}
	client.KV = kv
	const ttl = 5 * time.Second
	o, err := orchestrator.New(client, orchestrator.Config{
		ID: "m1", Advertise: "http://m1.invalid", Namespace: etcdtest.Namespace(t), Partitions: 1, LeaseTTL: ttl,
		Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := o.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	jobs, err := o.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	kv.armed = true
	kv.mu.Unlock()
	if _, err := jobs.Create(wctx, api.Job{ID: "tick", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}}); err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	kv.longest = 0 // the API's own request, bounded by the caller
	kv.mu.Unlock()
	for {
		runs, err := jobs.Runs(wctx, "tick", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if limit := membership.DefaultSessionConfig(ttl).RenewDeadline; kv.longest > limit {
		t.Errorf("scheduler transactions may take %v, want at most the renew deadline %v", kv.longest.Round(time.Millisecond), limit)
	}
}
