package shard

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PartitionsKey returns the key holding the cluster's partition count in
// namespace ns.
func PartitionsKey(ns string) string { return ns + "cluster/partitions" }

// EnsurePartitions returns the cluster's partition count, creating the
// cluster with want partitions if it does not exist yet (want 0 means
// DefaultPartitions). If the cluster exists with a different count and want
// is not 0, it returns ErrPartitionMismatch: P is fixed for a cluster's
// life, since it decides which partition every job lives in.
func EnsurePartitions(ctx context.Context, kv clientv3.KV, ns string, want int) (int, error) {
	create := want
	if create == 0 {
		create = DefaultPartitions
	}
	if create < 1 || create > MaxPartitions {
		return 0, fmt.Errorf("%w: partitions %d outside 1..%d", ErrInvalidConfig, create, MaxPartitions)
	}
	key := PartitionsKey(ns)
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(create))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("shard: read partition count: %w", err)
	}
	if resp.Succeeded {
		return create, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return 0, fmt.Errorf("shard: partition count key %s vanished; retry", key)
	}
	have, err := strconv.Atoi(string(kvs[0].Value))
	if err != nil || have < 1 || have > MaxPartitions {
		return 0, fmt.Errorf("shard: partition count key %s holds %q, not a partition count", key, kvs[0].Value)
	}
	if want != 0 && want != have {
		return 0, fmt.Errorf("%w: the cluster in namespace %q was created with %d partitions, this member was started with --partitions=%d; start it with --partitions=%d or without the flag", ErrPartitionMismatch, ns, have, want, have)
	}
	return have, nil
}
