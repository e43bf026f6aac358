package dispatch

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// loadPage is how many specs, states or queue entries load reads per
// request: a partition of any size is read in requests of bounded size,
// all at the revision of the first. A variable for tests.
var loadPage int64 = 1000

// rangePages calls fn for every key under prefix, in key order, read in
// pages of at most page keys at revision rev, or, if rev is 0, at the
// revision of the first page, which it returns.
//
// Only a read at revision 0 must be linearizable (it fixes what the load
// sees as the partition's present). A read at a given revision returns
// the same keys from any etcd member that has applied that revision, so
// those are serializable: etcd answers them without confirming its
// leadership and waiting to apply what it committed, which under a
// backlog of writes is the wait a lease keepalive shares. A member that
// has not applied rev yet refuses with ErrFutureRev, and the page is read
// again linearizably.
func (pt *partition) rangePages(ctx context.Context, prefix string, rev int64, page int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	rev, err := pt.d.rangePages(ctx, prefix, rev, page, fn)
	if err != nil {
		return 0, fmt.Errorf("load partition %d: %w", pt.p, err)
	}
	return rev, nil
}

// rangePages is partition.rangePages for any prefix (standby copies read
// with it too); its errors are etcd's.
func (d *Dispatcher) rangePages(ctx context.Context, prefix string, rev int64, page int64, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
		var resp *clientv3.GetResponse
		var err error
		if rev > 0 {
			resp, err = d.client.Get(rctx, from, append(opts, clientv3.WithSerializable())...)
		}
		if rev == 0 || errors.Is(err, rpctypes.ErrFutureRev) {
			resp, err = d.client.Get(rctx, from, opts...)
		}
		cancel()
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			fn(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// loadRunsPage is how many run documents load reads per request: at most
// a few MiB even if every document is at its budget.
var loadRunsPage int64 = 64
