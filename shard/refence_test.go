package shard_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
)

// delayingKV is etcd as a client sees it when a request times out: a held
// transaction is answered with an error at once and reaches etcd only
// when the test delivers it, after whatever the client did meanwhile (a
// proposal stuck behind a leader change, applied later). Other requests
// pass through.
type delayingKV struct {
	clientv3.KV
	mu   sync.Mutex
	hold int                 // transactions still to hold
	held []*delayedTxn       // held, not yet delivered
	gate chan struct{}       // non-nil: the next transaction waits for it to close before it is sent
	sent chan<- struct{}     // told when a gated transaction is waiting
	real func() clientv3.Txn // the underlying KV's Txn
}

func newDelayingKV(kv clientv3.KV) *delayingKV {
	return &delayingKV{KV: kv, real: func() clientv3.Txn { return kv.Txn(context.Background()) }}
}

func (d *delayingKV) Txn(ctx context.Context) clientv3.Txn { return &delayedTxn{d: d, ctx: ctx} }

// holdNext makes the next n transactions fail and wait for deliver.
func (d *delayingKV) holdNext(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold = n
}

// deliver sends the held transactions to etcd, oldest first, and returns
// etcd's answers.
func (d *delayingKV) deliver(t *testing.T) []*clientv3.TxnResponse {
	t.Helper()
	d.mu.Lock()
	held := d.held
	d.held = nil
	d.mu.Unlock()
	var out []*clientv3.TxnResponse
	for _, h := range held {
		resp, err := d.real().If(h.cmps...).Then(h.then...).Else(h.els...).Commit()
		if err != nil {
			t.Fatalf("delivering a held transaction: %v", err)
		}
		out = append(out, resp)
	}
	return out
}

type delayedTxn struct {
	d         *delayingKV
	ctx       context.Context
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
}

func (x *delayedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { x.cmps = append(x.cmps, cs...); return x }
func (x *delayedTxn) Then(ops ...clientv3.Op) clientv3.Txn { x.then = append(x.then, ops...); return x }
func (x *delayedTxn) Else(ops ...clientv3.Op) clientv3.Txn { x.els = append(x.els, ops...); return x }

func (x *delayedTxn) Commit() (*clientv3.TxnResponse, error) {
	d := x.d
	d.mu.Lock()
	gate, sent := d.gate, d.sent
	d.gate, d.sent = nil, nil
	if d.hold > 0 {
		d.hold--
		d.held = append(d.held, x)
		d.mu.Unlock()
		return nil, context.DeadlineExceeded
	}
	d.mu.Unlock()
	if gate != nil {
		sent <- struct{}{}
		<-gate
	}
	return d.real().If(x.cmps...).Then(x.then...).Else(x.els...).Commit()
}

// delayedFleet returns the package's etcd client, a namespace of the
// test's own and a delayingKV over the client.
func delayedFleet(t *testing.T) (*clientv3.Client, string, *delayingKV) {
	c := etcd.Client(t)
	return c, etcdtest.Namespace(t), newDelayingKV(c)
}

// ownedPartition creates partition p's owner key for member m and returns
// its Ownership through kv.
func ownedPartition(t *testing.T, c *clientv3.Client, kv clientv3.KV, ns string, p int) *shard.Ownership {
	t.Helper()
	resp, err := c.Put(context.Background(), shard.OwnerKey(ns, p), "m")
	if err != nil {
		t.Fatal(err)
	}
	return shard.NewOwnership(kv, ns, "m", p, resp.Header.Revision)
}

func exists(t *testing.T, c *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs) > 0
}

// TestWriteOfUnknownOutcomeNeverAppliesAfterTheNextWrite is the fault the
// fault suite found under an etcd leader cut: a fire's write timed out,
// the owner fired again (applied), trimmed the run from history, and then
// etcd applied the first write, creating the run a second time. After a
// write of unknown outcome the ownership's next write re-fences first, so
// the old write, delivered after it, is refused; without a write in
// between the delayed one applies (the model of etcd is real).
func TestWriteOfUnknownOutcomeNeverAppliesAfterTheNextWrite(t *testing.T) {
	ctx := context.Background()
	c, ns, dkv := delayedFleet(t)
	own := ownedPartition(t, c, dkv, ns, 0)
	run := ns + "runs/0/a"
	createRun := []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(run), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(run, "first")}, nil)}

	dkv.holdNext(1)
	if _, err := own.Commit(ctx, nil, createRun, nil); err == nil || errors.Is(err, shard.ErrFenced) {
		t.Fatalf("held write: err %v, want a timeout", err)
	}
	// The owner writes again (it fires the run again, then trims it).
	if _, err := own.Commit(ctx, nil, createRun, nil); err != nil {
		t.Fatalf("second write: %v", err)
	}
	if _, err := own.Commit(ctx, nil, []clientv3.Op{clientv3.OpDelete(run)}, nil); err != nil {
		t.Fatalf("trim: %v", err)
	}
	owner, err := c.Get(ctx, own.Key)
	if err != nil {
		t.Fatal(err)
	}
	if kv := owner.Kvs[0]; kv.ModRevision == kv.CreateRevision || kv.CreateRevision != own.Epoch || string(kv.Value) != "m" {
		t.Errorf("owner key after the writes: create %d mod %d value %q, want re-fenced (mod > create = epoch %d, value kept)", kv.CreateRevision, kv.ModRevision, kv.Value, own.Epoch)
	}
	for _, resp := range dkv.deliver(t) {
		if resp.Succeeded {
			t.Errorf("the delayed write applied after the owner's later writes")
		}
	}
	if exists(t, c, run) {
		t.Errorf("run %s created again by the delayed write", run)
	}

	// The same without a write in between: the delayed write applies.
	other := ownedPartition(t, c, dkv, ns, 1)
	run2 := ns + "runs/1/a"
	dkv.holdNext(1)
	if _, err := other.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(run2, "x")}, nil); err == nil {
		t.Fatal("held write answered")
	}
	if resps := dkv.deliver(t); len(resps) != 1 || !resps[0].Succeeded || !exists(t, c, run2) {
		t.Errorf("control: a delayed write with no write after it did not apply: %+v", resps)
	}
}

// TestCommitBatchRefencesSharesOfUnknownOutcome checks the batched path:
// a batch that timed out leaves every share's ownership in doubt, and the
// next batch re-fences each before it is sent.
func TestCommitBatchRefencesSharesOfUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	c, ns, dkv := delayedFleet(t)
	owns := []*shard.Ownership{ownedPartition(t, c, dkv, ns, 0), ownedPartition(t, c, dkv, ns, 1)}
	key := func(p, v string) string { return ns + "data/" + p + "/" + v }
	batch := func(v string) []shard.FencedTxn {
		return []shard.FencedTxn{{Own: owns[0], Then: []clientv3.Op{clientv3.OpPut(key("0", v), v)}}, {Own: owns[1], Then: []clientv3.Op{clientv3.OpPut(key("1", v), v)}}}
	}
	dkv.holdNext(1)
	for i, r := range shard.CommitBatch(ctx, dkv, batch("old")) {
		if r.Err == nil || errors.Is(r.Err, shard.ErrFenced) {
			t.Fatalf("held batch, share %d: err %v, want a timeout", i, r.Err)
		}
	}
	for i, r := range shard.CommitBatch(ctx, dkv, batch("new")) {
		if r.Err != nil {
			t.Fatalf("next batch, share %d: %v", i, r.Err)
		}
	}
	resps := dkv.deliver(t)
	if len(resps) != 1 {
		t.Fatalf("delivered %d requests, want 1", len(resps))
	}
	for i, r := range resps[0].Responses {
		if r.GetResponseTxn().Succeeded {
			t.Errorf("share %d of the delayed batch applied after the next batch", i)
		}
	}
	for _, p := range []string{"0", "1"} {
		if exists(t, c, key(p, "old")) || !exists(t, c, key(p, "new")) {
			t.Errorf("partition %s: old written %v, new written %v; want only new", p, exists(t, c, key(p, "old")), exists(t, c, key(p, "new")))
		}
	}
}

// TestRefenceRefusesWritesInFlightWithoutLosingThePartition checks that a
// write composed before a re-fence and evaluated after it is refused with
// ErrRefenced (not applied, partition still owned), not ErrFenced.
func TestRefenceRefusesWritesInFlightWithoutLosingThePartition(t *testing.T) {
	ctx := context.Background()
	c, ns, dkv := delayedFleet(t)
	own := ownedPartition(t, c, dkv, ns, 0)
	key := ns + "data/inflight"
	gate, sent := make(chan struct{}), make(chan struct{}, 1)
	dkv.mu.Lock()
	dkv.gate, dkv.sent = gate, sent
	dkv.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		_, err := own.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, "x")}, nil)
		errc <- err
	}()
	<-sent // composed and fenced on the old revision, not yet evaluated
	if err := own.Refence(ctx); err != nil {
		t.Fatalf("Refence: %v", err)
	}
	close(gate)
	err := <-errc
	if !errors.Is(err, shard.ErrRefenced) || errors.Is(err, shard.ErrFenced) {
		t.Errorf("write in flight across a re-fence: err %v, want ErrRefenced only", err)
	}
	if exists(t, c, key) {
		t.Errorf("write refused by the re-fence applied")
	}
	if _, err := own.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, "y")}, nil); err != nil {
		t.Errorf("write after the re-fence: %v", err)
	}
}

// TestRefenceWhoseAnswerWasLost checks that a re-fence that timed out but
// applied later is found on the next try (the key moved, same member and
// epoch: adopted), and that a re-fence of a lost ownership is ErrFenced.
func TestRefenceWhoseAnswerWasLost(t *testing.T) {
	ctx := context.Background()
	c, ns, dkv := delayedFleet(t)
	own := ownedPartition(t, c, dkv, ns, 0)
	dkv.holdNext(1)
	if err := own.Refence(ctx); err == nil {
		t.Fatal("held re-fence answered")
	}
	if resps := dkv.deliver(t); len(resps) != 1 || !resps[0].Succeeded {
		t.Fatalf("delivering the held re-fence: %+v", resps)
	}
	// Refence's answer was lost; the write after it re-fences again and
	// finds the key already moved by the same member and epoch.
	key := ns + "data/after"
	if _, err := own.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, "x")}, nil); err != nil {
		t.Fatalf("write after a lost re-fence: %v", err)
	}
	if err := own.Refence(ctx); err != nil {
		t.Fatalf("re-fence after a lost one: %v", err)
	}
	if _, err := own.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, "y")}, nil); err != nil {
		t.Fatalf("write after re-fencing again: %v", err)
	}

	if _, err := c.Delete(ctx, own.Key); err != nil {
		t.Fatal(err)
	}
	if err := own.Refence(ctx); !errors.Is(err, shard.ErrFenced) {
		t.Errorf("re-fence of a deleted owner key: err %v, want ErrFenced", err)
	}
}
