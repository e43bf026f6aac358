package dispatch

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// commitWindow is how much of its fenced writes a member keeps in flight
// to etcd, in operations, steered by the round trip of each request
// against a latency target: additive increase, multiplicative decrease,
// as TCP steers its congestion window, with a delay rather than a loss as
// the signal of congestion.
//
// Why: etcd applies the transactions it has committed one after the
// other, and everything that waits for the applied index — linearizable
// reads, and the lease keepalives of a busy server, which confirm its
// leadership with one — waits behind that backlog. A fixed number of
// large requests in flight per member is a few milliseconds of work for a
// fast store and seconds of it for a slow one: enough, under a herd of
// due jobs, for every member to miss its lease renewal and fence itself.
// The window keeps each member's share of the backlog near the target
// whatever the store's speed: a round trip above the target halves the
// window (once per round trip: answers to requests sent before the cut do
// not cut it again), one within it grows the window, doubling it per
// round trip below the threshold of the last cut (slow start) and by one
// transaction per round trip above it. The window grows only on answers
// to requests that had waited for room (the member was limited by the
// window), so a member that writes little keeps a small one and a herd
// starts from there.
//
// Not safe for concurrent use: the committer's mutex guards it.
type commitWindow struct {
	target   time.Duration // a round trip above it halves the window
	min, max float64       // bounds of size, in operations
	size     float64       // operations that may be in flight
	ssthresh float64       // size below which the window doubles per round trip
	cutAt    time.Time     // when size was last halved
}

// newCommitWindow returns a window for target between one transaction's
// operations and most, starting at one full batch.
func newCommitWindow(target time.Duration, most int) *commitWindow {
	w := &commitWindow{target: target, min: maxTxnOps, max: float64(max(maxTxnOps, most))}
	w.size = min(w.max, maxBatchOps)
	w.ssthresh = w.max
	return w
}

// room returns how many operations may still be sent with inFlight in
// flight.
func (w *commitWindow) room(inFlight int) int {
	return max(int(w.size)-inFlight, 0)
}

// answered adjusts the window to the answer, at now, of a request of ops
// operations sent at sent; limited says whether its writes had waited for
// room. It reports whether the window was cut.
func (w *commitWindow) answered(sent, now time.Time, ops int, limited bool) bool {
	if now.Sub(sent) > w.target {
		if !sent.Before(w.cutAt) {
			w.ssthresh = max(w.min, w.size/2)
			w.size = w.ssthresh
			w.cutAt = now
			return true
		}
		return false
	}
	if !limited {
		return false
	}
	if w.size < w.ssthresh {
		w.size += float64(ops)
	} else {
		w.size += maxTxnOps * float64(ops) / w.size
	}
	w.size = min(w.size, w.max)
	return false
}

// countOps returns the operations of ops, those of nested transactions
// included: the weight of a write in the window.
func countOps(ops []clientv3.Op) int {
	n := 0
	for _, op := range ops {
		if op.IsTxn() {
			_, then, els := op.Txn()
			n += 1 + countOps(then) + countOps(els)
			continue
		}
		n++
	}
	return n
}
