package dispatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestCommitWindowSteps follows the window through a slow start, a cut,
// answers to requests sent before the cut, and the additive increase
// after it.
func TestCommitWindowSteps(t *testing.T) {
	const target = 100 * time.Millisecond
	w := newCommitWindow(target, 8*maxBatchOps)
	t0 := time.Unix(1000, 0)
	fast, slow := t0.Add(target/2), t0.Add(2*target)
	if got, want := w.size, float64(maxBatchOps); got != want {
		t.Fatalf("initial window %v, want %v", got, want)
	}
	// Not limited: no growth.
	w.answered(t0, fast, 100, false)
	if got, want := w.size, float64(maxBatchOps); got != want {
		t.Fatalf("after an answer that had not waited: window %v, want %v", got, want)
	}
	// Slow start: each answered operation adds one, up to the most.
	w.answered(t0, fast, 512, true)
	if got, want := w.size, float64(2*maxBatchOps); got != want {
		t.Fatalf("slow start: window %v, want %v", got, want)
	}
	for range 20 {
		w.answered(t0, fast, 512, true)
	}
	if got, want := w.size, float64(8*maxBatchOps); got != want {
		t.Fatalf("slow start: window %v, want the most %v", got, want)
	}
	// A slow answer halves it; slow answers to requests sent before
	// the cut do not cut it again.
	if !w.answered(t0, slow, 512, true) {
		t.Fatal("a slow answer did not cut the window")
	}
	if got, want := w.size, float64(4*maxBatchOps); got != want {
		t.Fatalf("after a slow answer: window %v, want %v", got, want)
	}
	if w.answered(t0.Add(target/2), slow, 512, true) {
		t.Fatal("a slow answer to a request sent before the cut cut the window again")
	}
	if !w.answered(slow, slow.Add(2*target), 512, true) {
		t.Fatal("a slow answer to a request sent after the cut did not cut the window")
	}
	if got, want := w.size, float64(2*maxBatchOps); got != want {
		t.Fatalf("after a second cut: window %v, want %v", got, want)
	}
	// Above the threshold of the last cut, a window's worth of answers
	// adds about one transaction.
	before := w.size
	for range 4 {
		w.answered(t0, fast, 256, true)
	}
	if grown := w.size - before; grown < maxTxnOps*0.8 || grown > maxTxnOps {
		t.Fatalf("a window's worth of answers grew the window by %v, want about %d", grown, maxTxnOps)
	}
	// Never below one transaction.
	for i := range 20 {
		at := slow.Add(time.Duration(10+i) * 10 * target)
		w.answered(at, at.Add(2*target), 1, true)
	}
	if got, want := w.size, float64(maxTxnOps); got != want {
		t.Fatalf("after many cuts: window %v, want the least %v", got, want)
	}
}

// slowKV is an etcd KV whose transactions take delay on clock (which
// they advance) and which records the most operations in flight at once.
type slowKV struct {
	clientv3.KV
	clock *clockwork.FakeClock
	delay atomic.Int64 // time.Duration each commit takes on clock

	mu       sync.Mutex
	inFlight int // operations
	most     int
}

func (k *slowKV) Txn(ctx context.Context) clientv3.Txn {
	return &slowTxn{Txn: k.KV.Txn(ctx), kv: k}
}

func (k *slowKV) peak() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.most
	k.most = 0
	return m
}

type slowTxn struct {
	clientv3.Txn
	kv  *slowKV
	ops int
}

func (t *slowTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *slowTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	t.ops += leafOps(ops)
	return t
}
func (t *slowTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *slowTxn) Commit() (*clientv3.TxnResponse, error) {
	k := t.kv
	k.mu.Lock()
	k.inFlight += t.ops
	k.most = max(k.most, k.inFlight)
	k.mu.Unlock()
	resp, err := t.Txn.Commit()
	k.clock.Advance(time.Duration(k.delay.Load()))
	k.mu.Lock()
	k.inFlight -= t.ops
	k.mu.Unlock()
	return resp, err
}

// leafOps counts the operations of ops that are not transactions: the
// writes themselves, whatever fenced transactions wrap them.
func leafOps(ops []clientv3.Op) int {
	n := 0
	for _, op := range ops {
		if op.IsTxn() {
			_, then, els := op.Txn()
			n += leafOps(then) + leafOps(els)
			continue
		}
		n++
	}
	return n
}

// TestCommitterWindowFollowsTheStore has many partitions write through a
// committer while every request takes longer than the latency target,
// then while every request is fast: the operations in flight shrink to
// the least window and grow back, and every write applies once.
func TestCommitterWindowFollowsTheStore(t *testing.T) {
	srv := etcdtest.New(t)
	client := srv.Client(t)
	clock := clockwork.NewFakeClock()
	kv := &slowKV{KV: client, clock: clock}
	ctx := context.Background()
	ns := "/commit-window/"
	const parts, writes, width = 100, 4, 10 // a write is width puts
	owns := make([]*shard.Ownership, parts)
	for p := range owns {
		resp, err := client.Put(ctx, shard.OwnerKey(ns, p), "m")
		if err != nil {
			t.Fatal(err)
		}
		owns[p] = shard.NewOwnership(kv, ns, "m", p, resp.Header.Revision)
	}
	const target = 100 * time.Millisecond
	c := newCommitter(kv, 5*time.Second, 8, target, clock, nil)
	round := func(r int) {
		var wg sync.WaitGroup
		errs := make(chan error, parts)
		for p, own := range owns {
			wg.Go(func() {
				for i := range writes {
					ops := make([]clientv3.Op, width)
					for j := range ops {
						ops[j] = clientv3.OpPut(fmt.Sprintf("%sdata/%d/%d/%d/%d", ns, r, p, i, j), "v")
					}
					if _, err := c.commit(ctx, own, ops); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	kv.delay.Store(int64(2 * target))
	round(0)
	kv.peak()
	round(1)
	if most := kv.peak(); most > maxTxnOps {
		t.Errorf("every answer slower than the target: %d operations in flight, want at most the least window %d", most, maxTxnOps)
	}
	if c.window.size != maxTxnOps {
		t.Errorf("every answer slower than the target: window %v, want %d", c.window.size, maxTxnOps)
	}
	kv.delay.Store(0)
	round(2)
	round(3)
	if most := kv.peak(); most <= maxBatchOps {
		t.Errorf("every answer fast: at most %d operations in flight, want the window grown past its start %d", most, maxBatchOps)
	}
	resp, err := client.Get(ctx, ns+"data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Count, int64(4*parts*writes*width); got != want {
		t.Errorf("%d keys written, want %d", got, want)
	}
	if c.inFlight != 0 || c.opsInFlight != 0 || len(c.queue) != 0 {
		t.Errorf("committer left %d requests (%d operations) in flight, %d queued", c.inFlight, c.opsInFlight, len(c.queue))
	}
}
