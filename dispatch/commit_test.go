package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
)

// countingKV counts the transactions sent to etcd.
type countingKV struct {
	clientv3.KV
	txns atomic.Int64
}

func (k *countingKV) Txn(ctx context.Context) clientv3.Txn {
	k.txns.Add(1)
	return k.KV.Txn(ctx)
}

// TestCommitterBatchesAcrossPartitions has many partitions write at once
// through a committer with one request in flight: every write is applied
// exactly once with the result Ownership.Commit would give, writes queued
// behind the busy request go together in fewer requests, a write of a
// stale epoch is refused alone, and so is a write whose own compares
// (commitIf: odd partitions' writes have some) do not hold.
func TestCommitterBatchesAcrossPartitions(t *testing.T) {
	srv := etcdtest.New(t)
	client := srv.Client(t)
	kv := &countingKV{KV: client}
	ctx := context.Background()
	ns := "/commit-test/"
	const parts, writes = 40, 5
	owns := make([]*shard.Ownership, parts)
	for p := range owns {
		resp, err := client.Put(ctx, shard.OwnerKey(ns, p), "m")
		if err != nil {
			t.Fatal(err)
		}
		epoch := resp.Header.Revision
		if p == 7 {
			epoch-- // a stale owner: all its writes must be refused
		}
		owns[p] = shard.NewOwnership(kv, ns, "m", p, epoch)
	}
	c := &committer{kv: kv, timeout: 5 * time.Second, maxInFlight: 1}
	var wg sync.WaitGroup
	errs := make([]error, parts)
	for p, own := range owns {
		wg.Go(func() {
			for i := range writes { // one write at a time per partition, as the scheduler does
				key := fmt.Sprintf("%sdata/%d/%d", ns, p, i)
				absent := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
				var resp *clientv3.TxnResponse
				var err error
				applied := func() bool { return resp.Responses[0].GetResponseTxn().Succeeded }
				switch {
				case p == 3: // its compare never holds
					resp, err = c.commitIf(ctx, own, []clientv3.Cmp{absent, clientv3.Compare(clientv3.Version(ns+"absent"), ">", 0)}, []clientv3.Op{clientv3.OpPut(key, "v")})
				case p%2 == 1:
					resp, err = c.commitIf(ctx, own, []clientv3.Cmp{absent}, []clientv3.Op{clientv3.OpPut(key, "v")})
					applied = func() bool { return resp.Responses[0].GetResponsePut() != nil }
				default:
					resp, err = c.commit(ctx, own, []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{absent}, []clientv3.Op{clientv3.OpPut(key, "v")}, nil)})
				}
				switch {
				case p == 7 && !errors.Is(err, shard.ErrFenced):
					errs[p] = fmt.Errorf("stale partition %d write %d: err %v, want ErrFenced", p, i, err)
				case p != 7 && err != nil:
					errs[p] = fmt.Errorf("partition %d write %d: %v", p, i, err)
				case p == 3 && resp.Succeeded:
					errs[p] = fmt.Errorf("partition %d write %d: applied although its compare does not hold", p, i)
				case p != 7 && p != 3 && (!resp.Succeeded || resp.Header.Revision == 0 || !applied()):
					errs[p] = fmt.Errorf("partition %d write %d: response %+v, want applied", p, i, resp)
				}
				if errs[p] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	resp, err := client.Get(ctx, ns+"data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Count, int64((parts-2)*writes); got != want {
		t.Errorf("%d keys written, want %d", got, want)
	}
	if n := kv.txns.Load(); n >= parts*writes {
		t.Errorf("%d requests for %d writes: nothing was batched", n, parts*writes)
	} else {
		t.Logf("%d writes in %d requests", parts*writes, n)
	}
	if c.inFlight != 0 || len(c.queue) != 0 {
		t.Errorf("committer left %d in flight, %d queued", c.inFlight, len(c.queue))
	}
}

// TestCommitterQueuedWriteCancelled: a write whose context ends while it
// waits in the queue returns the context's error and is never sent.
func TestCommitterQueuedWriteCancelled(t *testing.T) {
	srv := etcdtest.New(t)
	client := srv.Client(t)
	ctx := context.Background()
	ns := "/commit-cancel/"
	resp, err := client.Put(ctx, shard.OwnerKey(ns, 0), "m")
	if err != nil {
		t.Fatal(err)
	}
	own := shard.NewOwnership(client, ns, "m", 0, resp.Header.Revision)
	c := &committer{kv: client, timeout: 5 * time.Second, maxInFlight: 1}
	c.inFlight = 1 // the only slot is busy
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.commit(cctx, own, []clientv3.Op{clientv3.OpPut(ns+"data", "v")})
		done <- err
	}()
	for {
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || unknownOutcome(err) {
		t.Errorf("err %v, want context.Canceled, known not to have applied", err)
	}
	c.release(0)
	if c.inFlight != 0 || len(c.queue) != 0 {
		t.Errorf("committer left %d in flight, %d queued", c.inFlight, len(c.queue))
	}
	if r, err := client.Get(ctx, ns+"data"); err != nil || len(r.Kvs) != 0 {
		t.Errorf("cancelled write applied: %v %v", r, err)
	}
}

// TestTxnCostMatchesEtcd checks txnCost against etcd's own check of
// operations per transaction: a nested transaction that costs exactly the
// limit is accepted, one more operation is refused.
func TestTxnCostMatchesEtcd(t *testing.T) {
	srv := etcdtest.New(t)
	client := srv.Client(t)
	build := func(outer, inner int) []clientv3.Op {
		var nested []clientv3.Op
		for i := range inner {
			nested = append(nested, clientv3.OpPut(fmt.Sprintf("/cost/n%d", i), "v"))
		}
		ops := []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("/cost/x"), "=", 0)}, nested, nil)}
		for i := range outer - 1 {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/cost/o%d", i), "v"))
		}
		return ops
	}
	for _, tt := range []struct {
		outer, inner int
		ok           bool
	}{
		{100, 28, true},
		{100, 29, false},
		{10, 118, true},
		{10, 119, false},
	} {
		ops := build(tt.outer, tt.inner)
		if got := txnCost(0, ops, nil); got != tt.outer+tt.inner {
			t.Fatalf("txnCost(%d outer, %d nested) = %d, want %d", tt.outer, tt.inner, got, tt.outer+tt.inner)
		}
		_, err := client.Txn(context.Background()).Then(ops...).Commit()
		if (err == nil) != tt.ok {
			t.Fatalf("a transaction of cost %d: err = %v, want accepted %v (limit %d)", tt.outer+tt.inner, err, tt.ok, maxTxnOps)
		}
	}
}

// cuttingKV ends its caller's context as each transaction is sent, as a
// partition's release does to a write in flight.
type cuttingKV struct {
	clientv3.KV
	cut context.CancelFunc
}

func (k *cuttingKV) Txn(ctx context.Context) clientv3.Txn {
	return cuttingTxn{Txn: k.KV.Txn(ctx), cut: k.cut}
}

type cuttingTxn struct {
	clientv3.Txn
	cut context.CancelFunc
}

func (t cuttingTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return cuttingTxn{Txn: t.Txn.If(cs...), cut: t.cut}
}

func (t cuttingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return cuttingTxn{Txn: t.Txn.Then(ops...), cut: t.cut}
}

func (t cuttingTxn) Commit() (*clientv3.TxnResponse, error) {
	t.cut()
	return t.Txn.Commit()
}

// TestCommitterSeesASentWriteThrough: a write sent at once (no batching,
// or room in the window) is not cut when its caller's context ends while
// it is in flight: it applies and is answered, so that no write's outcome
// is left unknown by a release; one whose context ended before it was
// sent is not sent, known not to have applied.
func TestCommitterSeesASentWriteThrough(t *testing.T) {
	srv := etcdtest.New(t)
	client := srv.Client(t)
	ctx := context.Background()
	for _, maxInFlight := range []int{0, 1} {
		ns := fmt.Sprintf("/commit-cut-%d/", maxInFlight)
		resp, err := client.Put(ctx, shard.OwnerKey(ns, 0), "m")
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		own := shard.NewOwnership(&cuttingKV{KV: client, cut: cancel}, ns, "m", 0, resp.Header.Revision)
		c := &committer{kv: client, timeout: 5 * time.Second, maxInFlight: maxInFlight}
		if _, err := c.commit(cctx, own, []clientv3.Op{clientv3.OpPut(ns+"data", "v")}); err != nil {
			t.Fatalf("max in flight %d: a write cut in flight failed: %v", maxInFlight, err)
		}
		if cctx.Err() == nil {
			t.Fatal("the caller's context was not ended: the test tests nothing")
		}
		if r, err := client.Get(ctx, ns+"data"); err != nil || len(r.Kvs) != 1 {
			t.Fatalf("max in flight %d: the write did not apply: %v %v", maxInFlight, r, err)
		}
		_, err = c.commit(cctx, own, []clientv3.Op{clientv3.OpPut(ns+"late", "v")})
		if !errors.Is(err, errNotSent) || unknownOutcome(err) {
			t.Errorf("max in flight %d: a write after its context ended: %v, want errNotSent", maxInFlight, err)
		}
		if r, err := client.Get(ctx, ns+"late"); err != nil || len(r.Kvs) != 0 {
			t.Errorf("max in flight %d: a write whose context had ended applied: %v %v", maxInFlight, r, err)
		}
		if c.inFlight != 0 {
			t.Errorf("committer left %d in flight", c.inFlight)
		}
	}
}

// TestTxnCostAddingIsTxnCostOfTheLongerList: over random lists of puts
// and nested transactions (up to three levels, with compares and else
// branches), the cost of a list with one more operation is what txnCost
// gives for the list built with it.
func TestTxnCostAddingIsTxnCostOfTheLongerList(t *testing.T) {
	var opOf func(rt *rapid.T, depth int, label string) clientv3.Op
	listOf := func(rt *rapid.T, depth int, label string) []clientv3.Op {
		ops := make([]clientv3.Op, rapid.IntRange(0, 6).Draw(rt, label+"/n"))
		for i := range ops {
			ops[i] = opOf(rt, depth, fmt.Sprintf("%s/%d", label, i))
		}
		return ops
	}
	opOf = func(rt *rapid.T, depth int, label string) clientv3.Op {
		if depth == 0 || rapid.Bool().Draw(rt, label+"/put") {
			return clientv3.OpPut("/k", "v")
		}
		cmps := make([]clientv3.Cmp, rapid.IntRange(0, 8).Draw(rt, label+"/cmps"))
		for i := range cmps {
			cmps[i] = clientv3.Compare(clientv3.CreateRevision("/k"), "=", 0)
		}
		return clientv3.OpTxn(cmps, listOf(rt, depth-1, label+"/then"), listOf(rt, depth-1, label+"/else"))
	}
	rapid.Check(t, func(rt *rapid.T) {
		ops := listOf(rt, 3, "ops")
		op := opOf(rt, 3, "op")
		want := txnCost(0, append(slices.Clone(ops), op), nil)
		if got := txnCostAdding(ops, op); got != want {
			rt.Fatalf("txnCostAdding = %d, txnCost of the longer list %d", got, want)
		}
	})
}
