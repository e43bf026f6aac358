package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
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

	// gen is the owner key's mod revision every write is fenced on: the
	// epoch when the key was created, a later revision after each Refence.
	gen atomic.Int64
	// doubt is the gen of the last write whose outcome is unknown: while
	// it is gen, the next write re-fences first.
	doubt     atomic.Int64
	refenceMu sync.Mutex // one Refence at a time
}

// NewOwnership returns the Ownership of a partition whose owner key was
// created by other means than a Controller (tools, benchmarks, tests of the
// work run under ownership): partition p of namespace ns, held by member
// with the given epoch (the key's create revision), the key not written
// since its creation. Fencing works the same; nobody is told of a refused
// fence.
func NewOwnership(kv clientv3.KV, ns, member string, p int, epoch int64) *Ownership {
	return newOwnership(kv, ns, member, p, epoch, epoch)
}

// newOwnership returns the Ownership of partition p whose owner key was
// created at epoch and last written at gen.
func newOwnership(kv clientv3.KV, ns, member string, p int, epoch, gen int64) *Ownership {
	o := &Ownership{Partition: p, Epoch: epoch, Key: OwnerKey(ns, p), Member: member, kv: kv}
	o.gen.Store(gen)
	return o
}

// Fence returns the comparison every owner write must carry: the owner key
// is still the version this ownership last wrote (its mod revision is the
// epoch, or the revision of the last Refence). It implies the key has the
// ownership's epoch: a key deleted or created again has another mod
// revision.
func (o *Ownership) Fence() clientv3.Cmp {
	return o.fence(o.gen.Load())
}

func (o *Ownership) fence(gen int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(o.Key), "=", gen)
}

// Commit runs a transaction fenced on the ownership: if the owner key is
// still the version the ownership last wrote (Fence), it evaluates cmps
// and applies thenOps if they all hold, elseOps otherwise, and returns
// that inner transaction's response (Succeeded tells whether cmps held;
// Header is the outer transaction's, so Header.Revision is the revision
// of every key the commit wrote). If the owner key is gone or has another
// epoch, nothing is applied and Commit returns ErrFenced; the controller
// is told and stops the partition's work. If the ownership was re-fenced
// while the transaction was in flight, nothing is applied and Commit
// returns ErrRefenced. Other errors are etcd's, wrapped: the transaction
// may or may not have been applied, and etcd may still apply it later;
// the ownership's next write re-fences first (see Refence), so that it
// cannot apply after that write, and returns Refence's error if that
// fails.
//
// Mind etcd's limits: at most 128 operations per transaction by default
// (nested ones count) and 1.5 MiB per request.
func (o *Ownership) Commit(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := o.settle(ctx); err != nil {
		return nil, err
	}
	gen := o.gen.Load()
	fenced, flat := fencedOps(cmps, thenOps, elseOps)
	resp, err := o.kv.Txn(ctx).If(o.fence(gen)).Then(fenced...).Commit()
	if err != nil {
		o.doubt.Store(gen)
		return nil, fmt.Errorf("shard: fenced txn on partition %d: %w", o.Partition, err)
	}
	if !resp.Succeeded {
		return nil, o.refused(gen)
	}
	return fencedResponse((*etcdserverpb.TxnResponse)(resp), resp.Header, flat), nil
}

// fencedOps returns what a write of cmps, then and els puts under its
// fence: Txn If(cmps) Then(then) Else(els) nested, or, for a write with
// no compares and no else of its own (a batch of fires, the commonest),
// its operations themselves, one level of nesting fewer for etcd to
// decode, check and apply. flat says which.
func fencedOps(cmps []clientv3.Cmp, then, els []clientv3.Op) (ops []clientv3.Op, flat bool) {
	if len(cmps) == 0 && len(els) == 0 {
		return then, true
	}
	return []clientv3.Op{clientv3.OpTxn(cmps, then, els)}, false
}

// fencedResponse returns the response of the write fencedOps put under a
// fence that held, from that fenced level's response: the nested
// transaction's, or for a flat write the level's own operations' (its
// Succeeded true, as a transaction without compares). header is the
// request's, which nested responses do not carry.
func fencedResponse(level *etcdserverpb.TxnResponse, header *etcdserverpb.ResponseHeader, flat bool) *clientv3.TxnResponse {
	if flat {
		return &clientv3.TxnResponse{Header: header, Succeeded: true, Responses: level.Responses}
	}
	inner := (*clientv3.TxnResponse)(level.Responses[0].GetResponseTxn())
	inner.Header = header
	return inner
}

// settle re-fences the ownership if a write fenced on its current gen
// had an unknown outcome.
func (o *Ownership) settle(ctx context.Context) error {
	if o.doubt.Load() != o.gen.Load() {
		return nil
	}
	return o.refence(ctx, true)
}

// Refence makes every transaction this ownership sent before it, and did
// not see applied, unable to apply ever after: it rewrites the owner key
// (same value, same lease), so that its mod revision moves past the one
// those transactions compare, and fences later writes on the new one.
// Commit and CommitBatch call it before the next write after one whose
// outcome is unknown (a timeout, a lost connection): etcd may apply such a
// write later, after the writes that followed it, and a fenced write's own
// comparisons (a run created only if absent, say) no longer hold it back
// if what it compares has changed in between (the run's deletion by a
// history trim).
// This is Temporal's renewal of a shard's range ID on an uncertain write,
// with the owner key's revision as the range.
//
// Writes in flight while it runs are refused with ErrRefenced. It returns
// nil once the key is rewritten (or found rewritten by an earlier Refence
// whose answer was lost), ErrFenced if the ownership is lost (the
// controller is told), and etcd's error otherwise: the ownership is then
// in doubt, and Refence must be called again before the next write. Safe
// for concurrent use; calls run one at a time.
func (o *Ownership) Refence(ctx context.Context) error { return o.refence(ctx, false) }

// refence is Refence; inDoubt says to do nothing unless a write fenced on
// the current gen is still in doubt once the lock is taken (another
// writer may have re-fenced meanwhile).
func (o *Ownership) refence(ctx context.Context, inDoubt bool) error {
	o.refenceMu.Lock()
	defer o.refenceMu.Unlock()
	gen := o.gen.Load()
	if inDoubt && o.doubt.Load() != gen {
		return nil
	}
	resp, err := o.kv.Txn(ctx).
		If(o.fence(gen)).
		Then(clientv3.OpPut(o.Key, "", clientv3.WithIgnoreValue(), clientv3.WithIgnoreLease())).
		Else(clientv3.OpGet(o.Key)).
		Commit()
	if err != nil {
		o.doubt.Store(gen) // it may apply later: the next write re-fences again
		return fmt.Errorf("shard: re-fencing partition %d: %w", o.Partition, err)
	}
	if resp.Succeeded {
		o.gen.Store(resp.Header.Revision)
		o.metrics.refenced()
		return nil
	}
	// The key moved: an earlier Refence applied after its answer was lost,
	// or the ownership is gone. Writes sent before either are dead.
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && kvs[0].CreateRevision == o.Epoch && string(kvs[0].Value) == o.Member {
		o.gen.Store(kvs[0].ModRevision)
		o.metrics.refenced()
		return nil
	}
	return o.refused(gen)
}

// refused returns the error of a fence refused to a transaction sent
// fenced on gen: ErrRefenced if the ownership was re-fenced since (the
// partition is still owned), ErrFenced otherwise, counted and told to the
// controller.
func (o *Ownership) refused(gen int64) error {
	if o.gen.Load() != gen {
		return fmt.Errorf("%w (partition %d, epoch %d)", ErrRefenced, o.Partition, o.Epoch)
	}
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
	// Revision is the owner key's mod revision: Epoch, or the revision of
	// the owner's last re-fence (Ownership.Refence).
	Revision int64
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
	return ownerInfo(kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease)
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
			t[i] = OwnerInfoOf(kv)
		}
	}
	return t, resp.Header.Revision, nil
}

func tableOf(s mirror.Snapshot, p int) []OwnerInfo {
	t := make([]OwnerInfo, p)
	for k, kv := range s.KVs {
		if i, ok := parseOwnerKey(k); ok && i < p {
			t[i] = ownerInfo(kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease)
		}
	}
	return t
}

// OwnerInfoOf returns what owner key kv records (kv as etcd returns it:
// from a read or a watch event).
func OwnerInfoOf(kv *mvccpb.KeyValue) OwnerInfo {
	return ownerInfo(kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease)
}

// IsRefence reports whether next, a write of an owner key seen while prev
// held it, is prev's owner re-fencing its key (Ownership.Refence): the
// same member and epoch. Any other write of an existing owner key is a
// second owner. History checkers use it.
func IsRefence(prev, next OwnerInfo) bool {
	return next.Member == prev.Member && next.Epoch == prev.Epoch
}

// ownerInfo is what an owner key records: the member, its create and mod
// revisions, its lease.
func ownerInfo(member []byte, created, modified, lease int64) OwnerInfo {
	return OwnerInfo{Member: string(member), Epoch: created, Lease: lease, Revision: modified}
}
