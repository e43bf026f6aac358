package shard_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
)

// Owners.Owner answers, partition by partition, what the whole table
// says, owned or not.
func TestOwnersOwnerMatchesTable(t *testing.T) {
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	const p = 12
	for i, member := range map[int]string{0: "m1", 3: "m2", 11: "m1"} {
		if _, err := c.Put(context.Background(), shard.OwnerKey(ns, i), member); err != nil {
			t.Fatal(err)
		}
	}
	o, err := shard.NewOwners(c, ns, mirror.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	table, err := o.WaitFor(wctx, p, func(t []shard.OwnerInfo) bool { return t[11].Member != "" })
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		if got := o.Owner(i); got != table[i] {
			t.Errorf("Owner(%d) = %+v, table has %+v", i, got, table[i])
		}
	}
	if got := o.Owner(3); got.Member != "m2" || got.Epoch == 0 {
		t.Errorf("Owner(3) = %+v, want m2 with its epoch", got)
	}
	if got := o.Owner(p + 100); got != (shard.OwnerInfo{}) {
		t.Errorf("Owner of a partition with no key = %+v, want none", got)
	}
}
