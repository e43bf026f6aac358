package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// waitDeliveries waits until job id's stored delivery records satisfy
// cond.
func (h *harness) waitDeliveries(id string, cond func([]api.NotificationDelivery) bool) []api.NotificationDelivery {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := h.store.Deliveries(context.Background(), id)
		if err == nil && cond(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s: deliveries %+v (%v) after 10s", id, ds, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeliveriesAreStoredWithTheJob: a notification whose receiver fails
// twice is recorded in etcd as retrying, then delivered at its third try
// with the last error; the records go with the job when it is deleted.
func TestDeliveriesAreStoredWithTheJob(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{fail: func(n int) bool { return n <= 2 }}
	h.withSender(s)
	h.start("m1")
	h.create(api.Job{ID: "told", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead}, URL: "https://hooks.example/dead?key=hidden"}}})
	h.advance(time.Hour)
	a := h.failAttempt("w1")
	waitTries(t, s, 1)
	h.waitDeliveries("told", func(ds []api.NotificationDelivery) bool {
		return len(ds) == 1 && ds[0].Result == api.DeliveryRetrying && ds[0].Tries == 1
	})
	for try := 2; try <= 3; try++ {
		h.parkedBoth()
		h.clock.Advance(2 * time.Second)
		waitTries(t, s, try)
	}
	h.waitOutboxEmpty()
	ds := h.waitDeliveries("told", func(ds []api.NotificationDelivery) bool { return len(ds) == 1 && ds[0].Result == api.DeliveryDelivered })
	if d := ds[0]; d.RunID != a.RunID || d.Event != api.RunDead || d.Tries != 3 || !strings.Contains(d.LastError, "503") || strings.Contains(d.URL, "hidden") {
		t.Fatalf("record %+v: want the dead event of %s delivered at try 3, the last 503 kept, the URL without its query", d, a.RunID)
	}
	if err := h.store.Delete(context.Background(), "told"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // the owner deletes the job's data once the watch tells it
		resp, err := h.client.Get(context.Background(), h.store.Keys().Deliveries(0, "told"), clientv3.WithCountOnly())
		if err == nil && resp.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries key 10s after the job's deletion: %v %v, want none", resp, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
