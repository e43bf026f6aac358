package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/store"
)

// recordingSender records every try and fails while fail says so.
type recordingSender struct {
	mu    sync.Mutex
	tries []store.Outbox
	fail  func(n int) bool // try n (from 1) fails
	// refuse makes a failing try a refusal by the destination policy.
	refuse bool
}

func (s *recordingSender) Send(_ context.Context, o store.Outbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries = append(s.tries, o)
	if s.fail != nil && s.fail(len(s.tries)) {
		if s.refuse {
			return fmt.Errorf("%w: destination 127.0.0.1:80 refused: loopback", dispatch.ErrNotificationRefused)
		}
		return errors.New("receiver answered 503")
	}
	return nil
}

func (s *recordingSender) snapshot() []store.Outbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Outbox(nil), s.tries...)
}

// withSender makes the harness's next start deliver notifications
// through s, retrying every second.
func (h *harness) withSender(s notify.Sender) {
	h.withNotify(notify.Config{Sender: s})
}

// withNotify makes the harness's next start deliver notifications with
// a deliverer configured as c (on the harness's clock; its notifications
// retried every second unless c says otherwise), run until the
// dispatcher stops. h.deliverer is that deliverer once started.
func (h *harness) withNotify(c notify.Config) {
	h.configure = func(dc *dispatch.Config) {
		if c.Backoff == (retry.Policy{}) {
			c.Backoff = retry.Policy{Initial: time.Second, Max: time.Second}
		}
		c.Clock = h.clock
		c.Logger = zaptest.NewLogger(h.t).Named("notify")
		d, err := notify.New(c)
		if err != nil {
			h.t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		h.stops = append(h.stops, func() { cancel(); <-done })
		h.deliverer = d
		dc.Notify.Notifier = d
	}
}

// parkedBoth waits until the scheduler and the notifier both wait on
// their timers, with no delivery in flight.
func (h *harness) parkedBoth() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
			h.t.Fatalf("the scheduler and the notifier did not both wait within 10s: %v", err)
		}
		if h.deliverer == nil || h.deliverer.InFlight() == 0 {
			return
		}
		if ctx.Err() != nil {
			h.t.Fatalf("%d notification tries still in flight after 10s", h.deliverer.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
}

// outbox returns the notifications in partition 0's outbox.
func (h *harness) outbox() int {
	h.t.Helper()
	n := 0
	for _, k := range h.outboxKeys() {
		if ok, parsed := h.store.Keys().ParseOutboxKey(0, k); parsed && ok.Index >= 0 {
			n++
		}
	}
	return n
}

// outboxKeys returns every key of partition 0's outbox: notifications and
// the run documents they deliver.
func (h *harness) outboxKeys() []string {
	h.t.Helper()
	resp, err := h.client.Get(context.Background(), h.store.Keys().OutboxPrefix(0), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		h.t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

func waitTries(t *testing.T, s *recordingSender, n int) []store.Outbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.snapshot()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notification tries after 10s, want %d", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) waitOutboxEmpty() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.outboxKeys()) != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("outbox keys left after 10s: %q", h.outboxKeys())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failAttempt takes the run's next attempt and fails it.
func (h *harness) failAttempt(worker string) api.AttemptGrant {
	h.t.Helper()
	a := h.poll(worker, 1)[0]
	if _, err := h.complete(a, worker, false, "exit status 1"); err != nil {
		h.t.Fatal(err)
	}
	return a
}

// TestNotifiesSucceededOnceAfterRetries: a run that fails twice and then
// succeeds notifies its succeeded subscriber once, and its failed
// subscriber once per failed attempt; the outbox is empty afterwards.
func TestNotifiesSucceededOnceAfterRetries(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{}
	h.withSender(s)
	h.start("m1")
	h.create(api.Job{ID: "flaky", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Second)},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunSucceeded}, URL: "https://hooks.example/ok"}, {On: []api.RunStatus{api.RunFailed}, URL: "https://hooks.example/failed"}}})
	h.advance(time.Hour)
	h.failAttempt("w1")
	waitTries(t, s, 1)
	h.parkedBoth()
	h.clock.Advance(2 * time.Second)
	h.failAttempt("w1")
	waitTries(t, s, 2)
	h.parkedBoth()
	h.clock.Advance(2 * time.Second)
	a := h.poll("w1", 1)[0]
	if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete: %+v %v", resp, err)
	}
	got := waitTries(t, s, 3)
	h.waitOutboxEmpty()
	want := []struct {
		url     string
		event   api.RunStatus
		attempt int
	}{{"https://hooks.example/failed", api.RunFailed, 1}, {"https://hooks.example/failed", api.RunFailed, 2}, {"https://hooks.example/ok", api.RunSucceeded, 3}}
	if len(got) != len(want) {
		t.Fatalf("tries %+v, want %d", got, len(want))
	}
	for i, w := range want {
		var r api.Run
		if err := json.Unmarshal(got[i].Run, &r); err != nil {
			t.Fatal(err)
		}
		if got[i].URL != w.url || got[i].Event != w.event || got[i].Attempt != w.attempt || got[i].RunID != a.RunID || r.Status != w.event || len(r.Attempts) != w.attempt {
			t.Errorf("notification %d: %s %s attempt %d of %s (run %s, %d attempts), want %s %s attempt %d", i, got[i].URL, got[i].Event, got[i].Attempt, got[i].RunID, r.Status, len(r.Attempts), w.url, w.event, w.attempt)
		}
	}
	// Nothing more comes.
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	h.parkedBoth()
	if n := len(s.snapshot()); n != 3 {
		t.Fatalf("%d tries after the run ended, want 3", n)
	}
}

// TestNotifiesDeadOnceAndRetriesAFailingReceiver: a dead run notifies its
// dead subscriber once, through a receiver that fails twice first: it is
// tried again with backoff until it answers.
func TestNotifiesDeadOnceAndRetriesAFailingReceiver(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{fail: func(n int) bool { return n <= 2 }}
	h.withSender(s)
	h.start("m1")
	h.create(api.Job{ID: "doomed", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Second)},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead, api.RunSucceeded}, URL: "https://hooks.example/dead"}}})
	h.advance(time.Hour)
	h.failAttempt("w1")
	h.parked()
	h.clock.Advance(2 * time.Second)
	a := h.failAttempt("w1")
	waitTries(t, s, 1) // fails
	for try := 2; try <= 3; try++ {
		h.parkedBoth()
		h.clock.Advance(2 * time.Second) // the backoff, 1s with jitter
		waitTries(t, s, try)
	}
	h.waitOutboxEmpty()
	got := s.snapshot()
	for _, o := range got {
		if o.Event != api.RunDead || o.RunID != a.RunID || o.Attempt != 2 {
			t.Fatalf("try %+v, want the dead event of %s", o, a.RunID)
		}
	}
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	h.parkedBoth()
	if n := len(s.snapshot()); n != 3 {
		t.Fatalf("%d tries, want 3 (two failed, one delivered)", n)
	}
}

// TestRefusedNotificationIsGivenUpAtOnce: a notification whose
// destination the policy refuses is tried once and given up, not retried
// with backoff until the max age: no later try could succeed.
func TestRefusedNotificationIsGivenUpAtOnce(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{fail: func(int) bool { return true }, refuse: true}
	h.withSender(s)
	h.start("m1")
	h.create(api.Job{ID: "to-loopback", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead}, URL: "http://127.0.0.1/hook"}}})
	h.advance(time.Hour)
	h.failAttempt("w1")
	waitTries(t, s, 1)
	h.waitOutboxEmpty()
	for range 3 {
		h.parkedBoth()
		h.clock.Advance(time.Minute)
	}
	h.parkedBoth()
	if n := len(s.snapshot()); n != 1 {
		t.Fatalf("%d tries of a refused notification, want 1", n)
	}
}

// TestNotificationSurvivesHandoff: the owner records a notification but
// cannot deliver it (its receiver fails) before it hands the partition
// over; the next owner delivers it from the outbox.
func TestNotificationSurvivesHandoff(t *testing.T) {
	h := newHarness(t)
	down := &recordingSender{fail: func(int) bool { return true }}
	h.withSender(down)
	h.start("m1")
	h.create(api.Job{ID: "handed", Schedule: "@every 1h", Notify: []api.Notification{{On: []api.RunStatus{api.RunSucceeded}, URL: "https://hooks.example/x"}}})
	h.advance(time.Hour)
	a := h.poll("w1", 1)[0]
	if _, err := h.complete(a, "w1", true, ""); err != nil {
		t.Fatal(err)
	}
	waitTries(t, down, 1)
	if n := h.outbox(); n != 1 {
		t.Fatalf("outbox holds %d notifications, want 1", n)
	}
	h.stop()

	up := &recordingSender{}
	h.withSender(up)
	h.start("m2")
	got := waitTries(t, up, 1)
	h.waitOutboxEmpty()
	if got[0].RunID != a.RunID || got[0].Event != api.RunSucceeded {
		t.Fatalf("delivered %+v, want the succeeded event of %s", got[0], a.RunID)
	}
}
