package shard

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// FencedTxn is one ownership's share of a CommitBatch: what
// Own.Commit(ctx, Cmps, Then, Else) would run.
type FencedTxn struct {
	Own  *Ownership
	Cmps []clientv3.Cmp
	Then []clientv3.Op
	Else []clientv3.Op
}

// FencedResult is the outcome of one share of a CommitBatch, as
// Ownership.Commit would have returned it.
type FencedResult struct {
	Resp *clientv3.TxnResponse
	Err  error
}

// CommitBatch runs the fenced transactions of several ownerships (of
// different partitions) in one etcd request, through kv:
//
//	Txn Then(
//	    Txn If(mod_revision(owners/p1) == gen1) Then(Txn If(cmps1) Then(then1) Else(else1)),
//	    Txn If(mod_revision(owners/p2) == gen2) Then(then2),  // a share without cmps or else
//	    …)
//
// Each share is applied only if its own fence holds, independently of the
// others, exactly as its Ownership.Commit would be; a refused fence is
// reported to its controller and counted the same way, and that share's
// result is ErrFenced (ErrRefenced if its ownership was re-fenced while the
// request was in flight). The request is one round trip and one raft entry
// instead of one per share. If the request itself fails (timeout, etcd
// unavailable), every share gets that error; as with any failed request,
// it may or may not have been applied, and each share's ownership
// re-fences before its next write (see Ownership.Refence), here or in
// Commit. A share whose ownership cannot re-fence is not sent and gets
// Refence's error.
//
// The shares must touch disjoint keys (etcd refuses a transaction that
// writes a key twice); partitions' keys are. Mind etcd's limit of 128
// operations per transaction level, which nesting shares: with k shares,
// each share's Then and Else may hold at most 125 − k operations, and
// nested transactions among them at most 125 − k − len(Then) each.
func CommitBatch(ctx context.Context, kv clientv3.KV, txns []FencedTxn) []FencedResult {
	res := make([]FencedResult, len(txns))
	ops := make([]clientv3.Op, len(txns))
	gens := make([]int64, len(txns))
	flat := make([]bool, len(txns))
	for i, t := range txns {
		if err := t.Own.settle(ctx); err != nil {
			// Its share cannot be sent fenced on a settled ownership: an
			// empty share in its place keeps the request's shape.
			res[i].Err = err
			ops[i] = clientv3.OpTxn(nil, nil, nil)
			continue
		}
		gens[i] = t.Own.gen.Load()
		var fenced []clientv3.Op
		fenced, flat[i] = fencedOps(t.Cmps, t.Then, t.Else)
		ops[i] = clientv3.OpTxn([]clientv3.Cmp{t.Own.fence(gens[i])}, fenced, nil)
	}
	if !slices.ContainsFunc(res, func(r FencedResult) bool { return r.Err == nil }) {
		return res // nothing left to send
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		for i, t := range txns {
			if res[i].Err == nil {
				t.Own.doubt.Store(gens[i])
				res[i].Err = fmt.Errorf("shard: fenced txn on partition %d: %w", t.Own.Partition, err)
			}
		}
		return res
	}
	for i, t := range txns {
		if res[i].Err != nil {
			continue
		}
		fenced := resp.Responses[i].GetResponseTxn()
		if !fenced.Succeeded {
			res[i].Err = t.Own.refused(gens[i])
			continue
		}
		res[i].Resp = fencedResponse(fenced, resp.Header, flat[i])
	}
	return res
}
