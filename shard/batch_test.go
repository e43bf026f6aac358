package shard_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestCommitBatchFencesEachShare checks that the shares of one batched
// request are fenced independently: a share whose epoch is stale is
// refused and writes nothing, the others apply, and each share's own
// comparisons pick its Then or Else as Ownership.Commit would.
func TestCommitBatchFencesEachShare(t *testing.T) {
	ctx := context.Background()
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	owns := make([]*shard.Ownership, 3)
	for p := range owns {
		resp, err := c.Put(ctx, shard.OwnerKey(ns, p), "m")
		if err != nil {
			t.Fatal(err)
		}
		owns[p] = shard.NewOwnership(c, ns, "m", p, resp.Header.Revision)
	}
	stale := shard.NewOwnership(c, ns, "m", 1, owns[1].Epoch-1) // an earlier epoch of partition 1
	key := func(p string) string { return ns + "data/" + p }
	res := shard.CommitBatch(ctx, c, []shard.FencedTxn{
		{Own: owns[0], Then: []clientv3.Op{clientv3.OpPut(key("0"), "a")}},
		{Own: stale, Then: []clientv3.Op{clientv3.OpPut(key("1"), "stale")}},
		{Own: owns[2], Cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key("2")), ">", 0)},
			Then: []clientv3.Op{clientv3.OpPut(key("2"), "then")}, Else: []clientv3.Op{clientv3.OpPut(key("2"), "else")}},
	})
	if len(res) != 3 {
		t.Fatalf("got %d results, want 3", len(res))
	}
	if res[0].Err != nil || !res[0].Resp.Succeeded || res[0].Resp.Header == nil {
		t.Errorf("share 0: %+v, want applied with a header", res[0])
	}
	if !errors.Is(res[1].Err, shard.ErrFenced) {
		t.Errorf("share 1 (stale epoch): err %v, want ErrFenced", res[1].Err)
	}
	if res[2].Err != nil || res[2].Resp.Succeeded {
		t.Errorf("share 2: %+v, want applied through its Else", res[2])
	}
	for k, want := range map[string]string{key("0"): "a", key("1"): "", key("2"): "else"} {
		resp, err := c.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(resp.Kvs) > 0 {
			got = string(resp.Kvs[0].Value)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
