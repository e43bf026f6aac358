package shard_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestStrayOwnerKeyOfOwnLeaseIsDeleted: an acquire that times out on the
// client can still commit, creating an owner key under the member's lease
// after the ring has moved the partition to another member. The member
// neither runs that partition nor is given it, so unless it deletes the
// key, the partition has an owner that runs nothing and its target waits
// for the key until the member's lease ends. Here m1's key replaces m2's
// for one of m2's partitions, as such a late commit would look: m1 must
// delete it, and m2 own the partition again.
func TestStrayOwnerKeyOfOwnLeaseIsDeleted(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{LeaseTTL: steadyTTL})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	from := revision(t, f)
	ctx := context.Background()
	table, _, err := f.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	part := -1
	for p, o := range table {
		if o.Member == "m2" {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatal("m2 owns no partition")
	}
	m1, ok := f.Member("m1").Orch.Members().Get("m1")
	if !ok || m1.LeaseID == 0 {
		t.Fatal("m1 not in its own view")
	}
	// etcd takes no delete and put of one key in one transaction: delete
	// m2's key, then create m1's if m2 has not taken it back meanwhile.
	key := shard.OwnerKey(f.NS, part)
	var resp *clientv3.TxnResponse
	for try := 0; ; try++ {
		if _, err := f.Client.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		resp, err = f.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "m1", clientv3.WithLease(clientv3.LeaseID(m1.LeaseID)))).
			Commit()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Succeeded {
			break
		}
		if try == 10 {
			t.Fatalf("m2 took partition %d back before m1's key could be written, 10 times", part)
		}
	}
	stray := resp.Header.Revision
	f.WaitSettled(15 * time.Second)
	after, _, err := f.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o := after[part]; o.Member != "m2" || o.Epoch <= stray {
		t.Errorf("partition %d: owner %s at epoch %d, want m2 after the stray key (revision %d)", part, o.Member, o.Epoch, stray)
	}
	// m2's Work lost its key from outside, so it may briefly overlap
	// nothing; every write must still be fenced.
	checkFleet(t, f, from, true)
}
