package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/mirror"
)

// OwnersPrefix returns the prefix of the owner keys in namespace ns.
func OwnersPrefix(ns string) string { return ns + "owners/" }

// OwnerKey returns partition p's owner key in namespace ns. Partitions are
// zero-padded so that etcdctl lists them in order.
func OwnerKey(ns string, p int) string { return OwnersPrefix(ns) + ownerSuffix(p) }

// ownerSuffix is partition p's owner key without its prefix.
func ownerSuffix(p int) string { return fmt.Sprintf("%05d", p) }

// parseOwnerKey returns the partition of an owner key with its prefix
// removed.
func parseOwnerKey(suffix string) (int, bool) {
	if suffix == "" || strings.ContainsRune(suffix, '/') {
		return 0, false
	}
	p, err := strconv.Atoi(suffix)
	return p, err == nil && p >= 0
}

// Ownership is this member's hold on one partition, handed to the Work
// function when the partition is acquired. Its methods are safe for
// concurrent use.
type Ownership struct {
	// Partition is the partition number.
	Partition int
	// Epoch is the owner key's create revision: the fencing token. It grows
	// with every new ownership of the partition.
	Epoch int64
	// Key is the owner key.
	Key string
	// Member is this member's ID.
	Member string

	kv      clientv3.KV
	fenced  func(o *Ownership) // reports a refused fenced transaction to the controller
	metrics *Metrics
}

// NewOwnership returns the Ownership of a partition whose owner key was
// created by other means than a Controller (tools, benchmarks, tests of the
// work run under ownership): partition p of namespace ns, held by member
// with the given epoch (the key's create revision). Fencing works the same;
// nobody is told of a refused fence.
func NewOwnership(kv clientv3.KV, ns, member string, p int, epoch int64) *Ownership {
	return &Ownership{Partition: p, Epoch: epoch, Key: OwnerKey(ns, p), Member: member, kv: kv}
}

// Fence returns the comparison every owner write must carry: the owner key
// still has this ownership's epoch.
func (o *Ownership) Fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(o.Key), "=", o.Epoch)
}

// Commit runs a transaction fenced on the ownership's epoch: if the owner
// key still has o.Epoch, it evaluates cmps and applies thenOps if they all
// hold, elseOps otherwise, and returns that inner transaction's response
// (Succeeded tells whether cmps held; Header is the outer transaction's,
// so Header.Revision is the revision of every key the commit wrote). If the owner key is gone or has
// another epoch, nothing is applied and Commit returns ErrFenced; the
// controller is told and stops the partition's work. Other errors are
// etcd's, wrapped.
//
// Mind etcd's limits: at most 128 operations per transaction by default
// (nested ones count) and 1.5 MiB per request.
func (o *Ownership) Commit(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := o.kv.Txn(ctx).
		If(o.Fence()).
		Then(clientv3.OpTxn(cmps, thenOps, elseOps)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("shard: fenced txn on partition %d: %w", o.Partition, err)
	}
	if !resp.Succeeded {
		return nil, o.refused()
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	inner.Header = resp.Header // nested responses carry no header of their own
	return inner, nil
}

// refused counts a refused fence, tells the controller, and returns the
// error Commit returns for it.
func (o *Ownership) refused() error {
	o.metrics.fencingFailure()
	if o.fenced != nil {
		o.fenced(o)
	}
	return fmt.Errorf("%w (partition %d, epoch %d)", ErrFenced, o.Partition, o.Epoch)
}

// OwnerInfo is what etcd records about one partition's owner.
type OwnerInfo struct {
	// Member is the owner's member ID, "" if the partition has no owner.
	Member string
	// Epoch is the owner key's create revision, 0 without an owner.
	Epoch int64
	// Lease is the lease the owner key is bound to.
	Lease int64
}

// Owners is the owner table as etcd records it, kept current by watching
// the owner keys. Run it with Run; its methods are safe for concurrent use.
type Owners struct {
	m  *mirror.Mirror
	ns string
}

// NewOwners returns a watcher of the owner keys of namespace ns. It starts
// nothing.
func NewOwners(client *clientv3.Client, ns string, cfg mirror.Config) (*Owners, error) {
	cfg.Prefix = OwnersPrefix(ns)
	m, err := mirror.New(client, cfg)
	if err != nil {
		return nil, err
	}
	return &Owners{m: m, ns: ns}, nil
}

// Run keeps the table current until ctx is cancelled; it returns nil then.
func (o *Owners) Run(ctx context.Context) error { return o.m.Run(ctx) }

// Table returns the owner of each of the first p partitions, the etcd
// revision the table reflects, and a channel closed when it changes.
func (o *Owners) Table(p int) ([]OwnerInfo, int64, <-chan struct{}) {
	s := o.m.Snapshot()
	return tableOf(s, p), s.Revision, s.Changed()
}

// Owner returns the owner of partition p as etcd records it (as current as
// Table), looking up that one key: O(1) in the partition count, unlike
// Table, which builds the whole table.
func (o *Owners) Owner(p int) OwnerInfo {
	kv, ok := o.m.Snapshot().KVs[ownerSuffix(p)]
	if !ok {
		return OwnerInfo{}
	}
	return OwnerInfo{Member: string(kv.Value), Epoch: kv.CreateRevision, Lease: kv.Lease}
}

// WaitFor blocks until cond holds for the table of p partitions.
func (o *Owners) WaitFor(ctx context.Context, p int, cond func([]OwnerInfo) bool) ([]OwnerInfo, error) {
	s, err := o.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return cond(tableOf(s, p)) })
	return tableOf(s, p), err
}

// ReadOwners reads the owner of each of the first p partitions straight
// from etcd (a linearizable read, unlike Owners.Table, which is only as
// current as this member's watch), with the revision it reflects.
func ReadOwners(ctx context.Context, kv clientv3.KV, ns string, p int) ([]OwnerInfo, int64, error) {
	resp, err := kv.Get(ctx, OwnersPrefix(ns), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("shard: read owners: %w", err)
	}
	t := make([]OwnerInfo, p)
	for _, kv := range resp.Kvs {
		if i, ok := parseOwnerKey(strings.TrimPrefix(string(kv.Key), OwnersPrefix(ns))); ok && i < p {
			t[i] = OwnerInfo{Member: string(kv.Value), Epoch: kv.CreateRevision, Lease: kv.Lease}
		}
	}
	return t, resp.Header.Revision, nil
}

func tableOf(s mirror.Snapshot, p int) []OwnerInfo {
	t := make([]OwnerInfo, p)
	for k, kv := range s.KVs {
		if i, ok := parseOwnerKey(k); ok && i < p {
			t[i] = OwnerInfo{Member: string(kv.Value), Epoch: kv.CreateRevision, Lease: kv.Lease}
		}
	}
	return t
}
