package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/shard"
)

// committer sends the fenced writes of this member's partitions to etcd
// with at most maxInFlight requests in flight and, with a latency target,
// at most its window's operations (commitWindow). A write that arrives
// while there is no room waits in a queue; when a request returns, the
// queued writes go together in the next ones (shard.CommitBatch), each
// still fenced on its own partition's epoch and applied or refused
// independently of the others. Under a backlog that turns many small
// transactions (a few runs of each of many partitions) into few large
// ones: fewer round trips and raft entries. A partition makes one write at
// a time (its mutex is held across it), so its own writes still apply in
// the order it made them. A write is always sent when nothing is in
// flight, however large.
//
// It starts no goroutine: the writer whose request returns hands its
// in-flight slot, with the next batch, to the goroutine of the batch's
// first write, which sends it.
type committer struct {
	kv          clientv3.KV
	timeout     time.Duration
	maxInFlight int
	clock       clockwork.Clock // nil: the real clock
	metrics     *Metrics        // nil records nothing

	mu          sync.Mutex    // guards the fields below and commitReq.taken
	inFlight    int           // requests
	opsInFlight int           // their operations (countOps)
	window      *commitWindow // nil: no latency target, no bound on operations
	queue       []*commitReq
}

// newCommitter returns a committer of at most maxInFlight requests in
// flight (0: every write on its own, unbatched) and, if target > 0, a
// window of operations steered by target.
func newCommitter(kv clientv3.KV, timeout time.Duration, maxInFlight int, target time.Duration, clock clockwork.Clock, m *Metrics) *committer {
	c := &committer{kv: kv, timeout: timeout, maxInFlight: maxInFlight, clock: clock, metrics: m}
	if target > 0 && maxInFlight > 0 {
		c.window = newCommitWindow(target, maxInFlight*maxBatchOps)
		m.commitWindow(c.window.size)
	}
	return c
}

type commitReq struct {
	txn   shard.FencedTxn
	bytes int // of its keys and values
	cost  int // txnCost of its operations
	ops   int // countOps of its operations
	res   shard.FencedResult
	done  chan struct{}     // closed once res is set
	lead  chan []*commitReq // buffer 1: the batch this request's goroutine is to send
	taken bool              // out of the queue, in a batch
}

// etcd's default limit of operations per transaction level (nested levels
// share it, see shard.CommitBatch), and bounds on a batch's size in
// operations and in bytes of keys and values, which keep requests well
// under etcd's 1.5 MiB. A single write larger than maxBatchBytes goes on
// its own.
const (
	maxTxnOps     = 128
	maxBatchOps   = 512
	maxBatchBytes = 1 << 20
)

// txnCost returns what a transaction with cmps compares and then and els
// operations counts against etcd's limit of operations per transaction
// (--max-txn-ops, 128 by default). etcd checks each level of nested
// transactions against what the levels above leave of the limit, so the
// cost is the transaction's width (the largest of its compares, then and
// else lists) plus the largest cost of a transaction nested in it.
func txnCost(cmps int, then, els []clientv3.Op) int {
	nested := 0
	for _, list := range [][]clientv3.Op{then, els} {
		for _, op := range list {
			if op.IsTxn() {
				c, t, e := op.Txn()
				nested = max(nested, txnCost(len(c), t, e))
			}
		}
	}
	return max(cmps, len(then), len(els)) + nested
}

// txnCostAdding returns txnCost(0, ops and then op, nil), the cost of a
// transaction of ops with op added at its end, without building that
// list: a write that grows op by op checks each before taking it.
func txnCostAdding(ops []clientv3.Op, op clientv3.Op) int {
	nested := txnCost(0, ops, nil) - len(ops)                  // the widest transaction nested in ops
	nested = max(nested, txnCost(0, []clientv3.Op{op}, nil)-1) // or op, if it is one
	return len(ops) + 1 + nested
}

// cmpsBytes returns the bytes of the keys and values cmps compare.
func cmpsBytes(cmps []clientv3.Cmp) int {
	n := 0
	for _, c := range cmps {
		n += len(c.KeyBytes()) + len(c.ValueBytes())
	}
	return n
}

// opsBytes returns the bytes of the keys and values ops write or compare.
func opsBytes(ops []clientv3.Op) int {
	n := 0
	for _, op := range ops {
		if op.IsTxn() {
			cmps, then, els := op.Txn()
			n += cmpsBytes(cmps) + opsBytes(then) + opsBytes(els)
			continue
		}
		n += len(op.KeyBytes()) + len(op.ValueBytes()) + len(op.RangeBytes())
	}
	return n
}

// errNotSent: a write given up while it waited in the committer's queue;
// it never reached etcd, so its outcome is known (not applied).
var errNotSent = errors.New("given up before it was sent")

// commit is commitIf without compares: ops applied as one write fenced
// on own.
func (c *committer) commit(ctx context.Context, own *shard.Ownership, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	return c.commitIf(ctx, own, nil, ops)
}

// commitIf runs ops fenced on own if cmps hold, as own.Commit(ctx, cmps,
// ops, nil) would (the response's Succeeded says whether they held),
// the request bounded by the committer's timeout from when it is sent:
// the time a write waits in the queue for room is the member's own
// pacing, not etcd's answer, and under a herd it can exceed the timeout
// while every request in flight is answered in time (a write given up
// there would be planned and queued again, at the end of the queue).
// A write still queued when ctx ends is dropped (errNotSent); one already
// sent, alone or in a batch with other partitions' writes, is seen
// through under the committer's own timeout: its caller's context never
// cuts a request in flight.
func (c *committer) commitIf(ctx context.Context, own *shard.Ownership, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if c.maxInFlight <= 0 {
		done := c.sent(0, false)
		resp, err := c.commitNow(ctx, own, cmps, ops)
		done()
		return resp, err
	}
	weight := countOps(ops)
	c.mu.Lock()
	if len(c.queue) == 0 && c.roomLocked(weight) {
		c.inFlight++
		c.opsInFlight += weight
		c.mu.Unlock()
		done := c.sent(weight, false)
		resp, err := c.commitNow(ctx, own, cmps, ops)
		done()
		return resp, err
	}
	r := &commitReq{txn: shard.FencedTxn{Own: own, Cmps: cmps, Then: ops}, bytes: cmpsBytes(cmps) + opsBytes(ops), cost: txnCost(len(cmps), ops, nil),
		ops: weight, done: make(chan struct{}), lead: make(chan []*commitReq, 1)}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case <-r.done:
	case batch := <-r.lead:
		c.send(batch)
	case <-ctx.Done():
		c.mu.Lock()
		if !r.taken {
			c.queue = slices.DeleteFunc(c.queue, func(q *commitReq) bool { return q == r })
			c.mu.Unlock()
			return nil, fmt.Errorf("shard: fenced txn on partition %d: %w: %w", own.Partition, errNotSent, ctx.Err())
		}
		c.mu.Unlock()
		// Already in a batch: others wait on it too; see it through.
		select {
		case <-r.done:
		case batch := <-r.lead:
			c.send(batch)
		}
	}
	return r.res.Resp, r.res.Err
}

// commitNow sends ops fenced on own, if cmps hold, at once, within the committer's
// timeout; if ctx has ended already, it sends nothing (errNotSent). Once
// sent, the request is not cut when ctx ends: a write whose outcome is
// unknown is worse than one answered, and its fence refuses it anyway
// if ownership moved meanwhile. (An attempt recorded by a poll's write
// cut by its partition's release, say, would stay recorded for a worker
// that never got it, and the next owner would count it lost.)
func (c *committer) commitNow(ctx context.Context, own *shard.Ownership, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("shard: fenced txn on partition %d: %w: %w", own.Partition, errNotSent, err)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
	}
	return own.Commit(ctx, cmps, ops, nil)
}

// roomLocked reports whether a request of weight operations may be sent
// now: a slot is free and, with a window, the operations fit in it or
// nothing is in flight.
func (c *committer) roomLocked(weight int) bool {
	if c.inFlight >= c.maxInFlight {
		return false
	}
	return c.window == nil || c.inFlight == 0 || weight <= c.window.room(c.opsInFlight)
}

// send sends a batch taken from the queue in the in-flight slot it was
// given, delivers every result and releases the slot.
func (c *committer) send(batch []*commitReq) {
	weight := 0
	for _, r := range batch {
		weight += r.ops
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	done := c.sent(weight, true)
	if len(batch) == 1 {
		r := batch[0]
		r.res.Resp, r.res.Err = r.txn.Own.Commit(ctx, r.txn.Cmps, r.txn.Then, nil)
	} else {
		txns := make([]shard.FencedTxn, len(batch))
		for i, r := range batch {
			txns[i] = r.txn
		}
		for i, res := range shard.CommitBatch(ctx, c.kv, txns) {
			batch[i].res = res
		}
	}
	cancel()
	for _, r := range batch {
		close(r.done)
	}
	done()
}

// sent is called as a request of weight operations is sent, in a slot
// taken for it; limited says whether its writes had waited in the queue.
// It returns the function to call once the request returned, which
// records its round trip, adjusts the window to it and frees the slot,
// handing it on to the queued writes that now have room.
func (c *committer) sent(weight int, limited bool) func() {
	clock := c.clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	start := clock.Now()
	record := c.metrics.commitSent()
	return func() {
		now := clock.Now()
		record(now.Sub(start).Seconds())
		if c.maxInFlight <= 0 {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inFlight--
		c.opsInFlight -= weight
		if c.window != nil {
			c.window.answered(start, now, weight, limited)
			c.metrics.commitWindow(c.window.size)
		}
		c.dispatchLocked()
	}
}

// release frees a slot of a request of weight operations that was not
// sent through sent (for tests), handing it on as sent's function does.
func (c *committer) release(weight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	c.opsInFlight -= weight
	c.dispatchLocked()
}

// dispatchLocked hands batches of queued writes to their first write's
// goroutine while there is room for them, taking their slots.
func (c *committer) dispatchLocked() {
	for len(c.queue) > 0 && c.roomLocked(c.queue[0].ops) {
		budget := math.MaxInt
		if c.window != nil {
			budget = c.window.room(c.opsInFlight) // takeLocked takes one write at least
		}
		batch := c.takeLocked(budget)
		c.inFlight++
		for _, r := range batch {
			c.opsInFlight += r.ops
		}
		batch[0].lead <- batch // buffered and sent once: never blocks
	}
}

// takeLocked removes the next batch from the queue: as many writes, in
// order, as fit etcd's limits and budget operations (countOps), and at
// least one. With k shares in one request (each a fenced transaction
// holding the write's), the costliest write must fit in what k + 1 leave
// of the limit (see txnCost and shard.CommitBatch).
func (c *committer) takeLocked(budget int) []*commitReq {
	n, costliest, total, bytes, weight := 0, 0, 0, 0, 0
	for _, r := range c.queue {
		w := len(r.txn.Then)
		if n > 0 && ((n+1)+1+max(costliest, r.cost) > maxTxnOps || total+w > maxBatchOps || bytes+r.bytes > maxBatchBytes || weight+r.ops > budget) {
			break
		}
		n, costliest, total, bytes, weight = n+1, max(costliest, r.cost), total+w, bytes+r.bytes, weight+r.ops
	}
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	for _, r := range batch {
		r.taken = true
	}
	return batch
}
