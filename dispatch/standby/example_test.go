package standby_test

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch/standby"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// exampleMember is a member whose loads read a partition with one request
// per kind of key, all at the revision of the first, and whose memory of
// a spec is its value as a string. (A dispatcher's reads are paged and
// wait for its load slots; Dispatcher.NewStandby wires them.)
func exampleMember(client *clientv3.Client, ns string) standby.Member[string] {
	k := store.Keys{NS: ns}
	return standby.Member[string]{
		Client: client,
		Keys:   k,
		Read: func(ctx context.Context, p int, fn func(*mvccpb.KeyValue)) (int64, error) {
			var rev int64
			for _, prefix := range []string{k.PartitionJobsPrefix(p), k.StatePrefix(p), k.QueuePrefix(p), k.FailingPrefix(p), k.PartitionRunsPrefix(p)} {
				opts := []clientv3.OpOption{clientv3.WithPrefix()}
				if rev > 0 {
					opts = append(opts, clientv3.WithRev(rev))
				}
				resp, err := client.Get(ctx, prefix, opts...)
				if err != nil {
					return 0, err
				}
				rev = resp.Header.Revision
				for _, kv := range resp.Kvs {
					fn(kv)
				}
			}
			return rev, nil
		},
		Decode: func(kv *mvccpb.KeyValue) *string {
			v := string(kv.Value)
			return &v
		},
	}
}

// A member that is the heir of partition 0 keeps a copy of it. When it
// acquires the partition, with the epoch of its new owner key, it takes
// the copy (once the copy has seen every change up to the epoch) instead
// of reading the partition from etcd.
func Example() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ns := "/example-standby/"
	heirOf0 := func() (standby.Heirs, <-chan struct{}) { return standby.Heirs{Of: map[int]bool{0: true}}, nil }
	s, err := standby.New(exampleMember(client, ns), heirOf0, standby.Config{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for !s.Held(0) {
		time.Sleep(time.Millisecond)
	}

	// The owner writes a job; then it goes, and this member acquires the
	// partition.
	k := store.Keys{NS: ns}
	if _, err := client.Put(ctx, k.Spec(0, "nightly"), `{"id":"nightly"}`); err != nil {
		panic(err)
	}
	owner, err := client.Put(ctx, shard.OwnerKey(ns, 0), "this member")
	if err != nil {
		panic(err)
	}
	snap := s.Take(ctx, 0, owner.Header.Revision)
	for _, kv := range snap.KVs() {
		fmt.Printf("%s: %s\n", kv.Key, *snap.Decoded(kv))
	}
	// Output:
	// /example-standby/jobs/00000/nightly: {"id":"nightly"}
}
