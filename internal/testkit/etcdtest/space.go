package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/store"
)

// Fill writes 256 KiB values under prefix (keys prefix+"0", prefix+"1",
// ...) until etcd's database file, as the client's first endpoint reports
// it, is above size bytes, or etcd refuses writes for lack of space; it
// returns whether it was refused. It fails t on any other error, and if
// 1000 values (250 MiB) do not reach size.
func Fill(t testing.TB, c *clientv3.Client, prefix string, size int64) (refused bool) {
	t.Helper()
	blob := strings.Repeat("x", 256<<10)
	for i := 0; i < 1000; i++ {
		st, err := c.Status(context.Background(), c.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		if st.DbSize > size {
			return false
		}
		if _, err := c.Put(context.Background(), fmt.Sprintf("%s%d", prefix, i), blob); err != nil {
			if errors.Is(store.Classify(err), store.ErrNoSpace) {
				return true
			}
			t.Fatal(err)
		}
	}
	t.Fatal("fill: 250 MiB written without reaching the size")
	return false
}

// MakeRoom runs the NOSPACE runbook through the client: it deletes every
// key under prefix (what Fill wrote), compacts to that revision,
// defragments every endpoint and disarms every alarm. It fails t on any
// error.
func MakeRoom(t testing.TB, c *clientv3.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	resp, err := c.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for _, ep := range c.Endpoints() {
		if _, err := c.Defragment(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil { // all alarms
		t.Fatal(err)
	}
}
