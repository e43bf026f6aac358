package notify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/store"
)

// failingSender fails the first fail tries of each run's notification,
// then delivers; refuse makes its failures refusals.
type failingSender struct {
	mu     sync.Mutex
	fail   int
	refuse bool
	tries  map[string]int
}

func (s *failingSender) Send(_ context.Context, o store.Outbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[o.RunID]++
	if s.tries[o.RunID] > s.fail {
		return nil
	}
	if s.refuse {
		return fmt.Errorf("%w: destination 127.0.0.1:80 refused", notify.ErrRefused)
	}
	return fmt.Errorf("answered 503 Service Unavailable (try %d)", s.tries[o.RunID])
}

// runDeliverer runs a deliverer of cfg until the test ends.
func runDeliverer(t *testing.T, cfg notify.Config) *notify.Deliverer {
	t.Helper()
	d, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// waitRecorded waits until job's records satisfy cond.
func waitRecorded(t *testing.T, st *memStore, job string, cond func([]api.NotificationDelivery) bool) ([]api.NotificationDelivery, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, writes := st.recorded(job)
		if cond(got) {
			return got, writes
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: records %+v after 10s", job, got)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeliveriesAreRecordedCoalesced: a notification that fails four
// times and is then delivered is recorded with its tries and the last
// error; its failures are recorded once (the first), not at every try,
// and the outcome with the deletion: two writes in all.
func TestDeliveriesAreRecordedCoalesced(t *testing.T) {
	s := &failingSender{fail: 4, tries: map[string]int{}}
	d := runDeliverer(t, notify.Config{Sender: s, Backoff: retry.Policy{Initial: time.Millisecond, Max: time.Millisecond}, BreakerFailures: -1})
	st := newMemStore()
	ob := d.Open(context.Background(), 0, st)
	defer ob.Close()
	es := entries(st, "flaky", "https://hooks.example/x?token=secret", 1, time.Now())
	ob.Add(es...)
	got, writes := waitRecorded(t, st, "flaky", func(ds []api.NotificationDelivery) bool {
		return len(ds) == 1 && ds[0].Result == api.DeliveryDelivered
	})
	r := got[0]
	if r.Tries != 5 || r.RunID != es[0].Outbox.RunID || r.Event != api.RunDead || !strings.Contains(r.LastError, "503") || strings.Contains(r.URL, "secret") {
		t.Errorf("record %+v: want delivered at try 5 of %s with the last 503, the URL without its query", r, es[0].Outbox.RunID)
	}
	if writes != 2 {
		t.Errorf("%d writes recorded deliveries, want 2 (the first failure, then the outcome with the deletion)", writes)
	}
}

// TestGivenUpAndDroppedAreRecorded: a refused notification is recorded
// given up with the refusal; notifications dropped for the job's bound
// are recorded dropped.
func TestGivenUpAndDroppedAreRecorded(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		s := &failingSender{fail: 1 << 30, refuse: true, tries: map[string]int{}}
		d := runDeliverer(t, notify.Config{Sender: s})
		st := newMemStore()
		ob := d.Open(context.Background(), 0, st)
		defer ob.Close()
		ob.Add(entries(st, "refused", "http://127.0.0.1/hook", 1, time.Now())...)
		got, _ := waitRecorded(t, st, "refused", func(ds []api.NotificationDelivery) bool { return len(ds) == 1 })
		if r := got[0]; r.Result != api.DeliveryGivenUp || r.Tries != 1 || !strings.Contains(r.LastError, "refused") {
			t.Errorf("record %+v: want given up after 1 try, saying refused", r)
		}
	})
	t.Run("dropped", func(t *testing.T) {
		s := &gateSender{tried: make(chan string, 16), free: make(chan struct{})}
		d := runDeliverer(t, notify.Config{Sender: s, MaxPendingPerJob: 2, PerJob: 1})
		st := newMemStore()
		ob := d.Open(context.Background(), 0, st)
		defer ob.Close()
		es := entries(st, "busy", "https://hooks.example/a", 4, time.Now())
		ob.Add(es...)
		got, _ := waitRecorded(t, st, "busy", func(ds []api.NotificationDelivery) bool { return len(ds) == 2 })
		for _, r := range got {
			if r.Result != api.DeliveryDropped || !strings.Contains(r.LastError, "more than 2") {
				t.Errorf("record %+v: want dropped for the bound of 2", r)
			}
		}
		close(s.free)
	})
}

// TestMergeDeliveries: a record replaces the one of the same
// notification; at most MaxDeliveries are kept, the newest.
func TestMergeDeliveries(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	rec := func(i int, result string) api.NotificationDelivery {
		return api.NotificationDelivery{JobID: "j", RunID: fmt.Sprintf("j@%d", i), Event: api.RunDead, URL: "https://h/x", CreatedAt: t0.Add(time.Duration(i) * time.Minute), Result: result}
	}
	var kept []api.NotificationDelivery
	for i := range api.MaxDeliveries + 5 {
		kept = api.MergeDeliveries(kept, []api.NotificationDelivery{rec(i, api.DeliveryRetrying)})
	}
	kept = api.MergeDeliveries(kept, []api.NotificationDelivery{rec(api.MaxDeliveries+4, api.DeliveryDelivered)})
	if len(kept) != api.MaxDeliveries {
		t.Fatalf("%d kept, want %d", len(kept), api.MaxDeliveries)
	}
	if kept[0].RunID != fmt.Sprintf("j@%d", api.MaxDeliveries+4) || kept[0].Result != api.DeliveryDelivered {
		t.Errorf("newest %+v, want j@%d delivered (replaced, not added)", kept[0], api.MaxDeliveries+4)
	}
	if last := kept[len(kept)-1]; last.RunID != "j@5" {
		t.Errorf("oldest kept %s, want j@5", last.RunID)
	}
}
