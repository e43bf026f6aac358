package limits_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestQueueEntries: the waiting entries stored under limits/queue are in
// the table by key and by partition, and gone once deleted; an unreadable
// one is not.
func TestQueueEntries(t *testing.T) {
	c := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	keys := store.Keys{NS: ns}
	tb := startTable(t, c, ns)
	ctx := context.Background()
	if _, err := c.Put(ctx, keys.LimitQueue("billing/db", 3), `{"member":"m1","priority":9,"since":"2026-12-02T10:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, keys.LimitQueue("billing/db", 4), `not json`); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Put(ctx, keys.LimitQueue("other", 3), `{"member":"m2","priority":1,"since":"2026-12-02T10:00:01Z"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.WaitRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	q := tb.Queue("billing/db")
	if len(q) != 1 || q[0].Partition != 3 || q[0].Member != "m1" || q[0].Priority != 9 || !q[0].Since.Equal(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("Queue(billing/db) = %+v, want partition 3's entry of m1, priority 9", q)
	}
	in, ok := tb.QueuedIn(3)
	if !ok || len(in) != 2 || in["other"].Member != "m2" || in["billing/db"].Key != "billing/db" {
		t.Fatalf("QueuedIn(3) = %+v, %v; want both keys' entries", in, ok)
	}
	del, err := c.Delete(ctx, keys.LimitQueue("billing/db", 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.WaitRevision(ctx, del.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if q := tb.Queue("billing/db"); len(q) != 0 {
		t.Fatalf("after the delete: %+v, want none", q)
	}
}
