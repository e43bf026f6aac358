package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/store"
)

// httpSender POSTs notifications over loopback, as the orchestrator's
// sender does (without its destination policy).
type httpSender struct{ client *http.Client }

func newHTTPSender(t *testing.T) httpSender {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return httpSender{client: &http.Client{Transport: tr}}
}

func (s httpSender) Send(ctx context.Context, o store.Outbox) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(o.Run))
	if err != nil {
		return err
	}
	req.Header.Set("Jobfleet-Run-Id", o.RunID)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return errors.New("answered " + resp.Status)
	}
	return nil
}

// tarpit accepts connections and never answers: it holds each until its
// client closes it.
type tarpit struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]bool
	held     int // connections open
	released int // connections the client closed
}

func newTarpit(t *testing.T) *tarpit {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln, conns: map[net.Conn]bool{}}
	tp.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.mu.Lock()
			tp.conns[c] = true
			tp.held++
			tp.mu.Unlock()
			tp.wg.Go(func() {
				_, _ = io.Copy(io.Discard, c) // until the client gives up
				tp.mu.Lock()
				delete(tp.conns, c)
				tp.held--
				tp.released++
				tp.mu.Unlock()
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		tp.mu.Lock()
		for c := range tp.conns {
			c.Close()
		}
		tp.mu.Unlock()
		tp.wg.Wait()
	})
	return tp
}

func (tp *tarpit) url(path string) string { return "http://" + tp.ln.Addr().String() + path }

func (tp *tarpit) state() (held, released int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.held, tp.released
}

// TestTarpitDoesNotDelayAnotherJobsNotification: two jobs notify a
// destination that accepts and never answers (8 notify entries each, and
// a try may wait an hour); another job's notification, to another
// destination, arrives while the tarpit still holds every connection it
// was given: it waited for none of them. The run document is stored once
// for a status, whatever the number of its notifications.
func TestTarpitDoesNotDelayAnotherJobsNotification(t *testing.T) {
	tp := newTarpit(t) // before the harness: its cleanup runs after the dispatcher stopped
	arrived := make(chan string, 10)
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("Jobfleet-Run-Id")
	}))
	t.Cleanup(victim.Close)

	h := newHarness(t)
	h.withNotify(notify.Config{Sender: newHTTPSender(t), SendTimeout: time.Hour})
	h.start("m1")
	noisy := func(id string) api.Job {
		j := api.Job{ID: id, Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1}}
		for i := range api.MaxNotifications {
			j.Notify = append(j.Notify, api.Notification{On: []api.RunStatus{api.RunDead}, URL: tp.url(fmt.Sprintf("/%s/%d", id, i))})
		}
		return j
	}
	// Named to come first in key order, where one notifier per partition
	// tried them one at a time.
	h.create(noisy("a-noisy"))
	h.create(noisy("b-noisy"))
	h.create(api.Job{ID: "victim", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead}, URL: victim.URL + "/hook"}}})
	h.advance(time.Hour)
	grants := map[string]dispatchGrant{}
	for len(grants) < 3 {
		for _, a := range h.poll("w1", 3) {
			grants[a.JobID] = dispatchGrant{a}
		}
	}
	for _, id := range []string{"a-noisy", "b-noisy"} {
		if _, err := h.complete(grants[id].AttemptGrant, "w1", false, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	// The tarpit fills its share: as many tries as one destination may
	// have in flight.
	h.waitFor("the tarpit holding a destination's share of tries", func() bool {
		held, _ := tp.state()
		return held == notify.DefaultPerDestination
	})
	if _, err := h.complete(grants["victim"].AttemptGrant, "w1", false, "boom"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-arrived:
		if want := grants["victim"].RunID; got != want {
			t.Fatalf("the victim's receiver got run %s, want %s", got, want)
		}
	case <-time.After(time.Minute): // only a failing test waits that long
		t.Fatal("the victim's notification did not arrive within a minute")
	}
	held, released := tp.state()
	if held != notify.DefaultPerDestination || released != 0 {
		t.Fatalf("when the victim's notification arrived the tarpit held %d connections and had %d released, want %d held and none released",
			held, released, notify.DefaultPerDestination)
	}
	// One run document per status: 16 notifications, 2 documents (and the
	// victim's, once delivered, gone with its notification).
	h.waitFor("the victim's notification deleted", func() bool {
		for _, k := range h.outboxKeys() {
			if strings.Contains(k, "/victim/") {
				return false
			}
		}
		return true
	})
	var docs, notes int
	for _, k := range h.outboxKeys() {
		if ok, parsed := h.store.Keys().ParseOutboxKey(0, k); parsed && ok.Index < 0 {
			docs++
		} else if parsed {
			notes++
		}
	}
	if docs != 2 || notes != 2*api.MaxNotifications {
		t.Fatalf("outbox holds %d run documents and %d notifications, want 2 and %d", docs, notes, 2*api.MaxNotifications)
	}
}

// dispatchGrant names an attempt grant in a map.
type dispatchGrant struct{ api.AttemptGrant }

// hostSender fails every try to the hosts down says are down, and
// records the tries per host.
type hostSender struct {
	mu    sync.Mutex
	down  map[string]bool
	tries map[string]int
}

func newHostSender(down ...string) *hostSender {
	s := &hostSender{down: map[string]bool{}, tries: map[string]int{}}
	for _, h := range down {
		s.down[h] = true
	}
	return s
}

func (s *hostSender) Send(_ context.Context, o store.Outbox) error {
	host := strings.SplitN(strings.TrimPrefix(o.URL, "https://"), "/", 2)[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[host]++
	if s.down[host] {
		return errors.New("connection refused")
	}
	return nil
}

func (s *hostSender) count(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[host]
}

func (s *hostSender) setDown(host string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[host] = down
}

// TestDeadDestinationCircuitOpens: a destination that fails every try
// has its circuit opened after a few failures: its notifications are not
// tried again, although their own backoff has passed, until the circuit's
// backoff has, and then by one probe at a time; another destination's
// notification is delivered meanwhile. Once the destination answers, the
// probe closes the circuit and the rest are delivered.
func TestDeadDestinationCircuitOpens(t *testing.T) {
	h := newHarness(t)
	s := newHostSender("down.example")
	reg := prometheus.NewRegistry()
	h.withNotify(notify.Config{Sender: s, BreakerFailures: 3, BreakerBackoff: retry.Policy{Initial: 10 * time.Second, Max: 10 * time.Second}, Metrics: notify.NewMetrics(reg)})
	h.start("m1")
	dead := api.Job{ID: "to-down", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1}}
	for i := range api.MaxNotifications {
		dead.Notify = append(dead.Notify, api.Notification{On: []api.RunStatus{api.RunDead}, URL: fmt.Sprintf("https://down.example/%d", i)})
	}
	h.create(dead)
	h.create(api.Job{ID: "to-up", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead}, URL: "https://up.example/hook"}}})
	h.advance(time.Hour)
	grants := map[string]dispatchGrant{}
	for len(grants) < 2 {
		for _, a := range h.poll("w1", 2) {
			grants[a.JobID] = dispatchGrant{a}
		}
	}
	if _, err := h.complete(grants["to-down"].AttemptGrant, "w1", false, "boom"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the circuit open", func() bool { return metrictest.Value(t, reg, "jobfleet_notification_circuits_open") == 1 })
	h.parkedBoth()
	// The failures that opened it, and at most the tries in flight then
	// (one job has at most two).
	opened := s.count("down.example")
	if opened < 3 || opened > 3+notify.DefaultPerJob-1 {
		t.Fatalf("%d tries before the circuit opened, want 3 to %d", opened, 3+notify.DefaultPerJob-1)
	}
	if _, err := h.complete(grants["to-up"].AttemptGrant, "w1", false, "boom"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the other destination's notification", func() bool { return s.count("up.example") == 1 })
	h.parkedBoth()
	h.clock.Advance(2 * time.Second) // the notifications' own backoff (1s ±50%), not the circuit's (10s ±50%)
	h.parkedBoth()
	if n := s.count("down.example"); n != opened {
		t.Fatalf("%d tries while the circuit is open, want none beyond the %d that opened it", n-opened, opened)
	}
	h.clock.Advance(20 * time.Second) // past the circuit's backoff: one probe, which fails
	h.waitFor("the probe", func() bool { return s.count("down.example") == opened+1 })
	h.parkedBoth()
	h.clock.Advance(2 * time.Second)
	h.parkedBoth()
	if n := s.count("down.example"); n != opened+1 {
		t.Fatalf("%d tries after the probe failed, want none (the circuit is open again)", n-opened-1)
	}
	if got := metrictest.Value(t, reg, "jobfleet_notification_circuits_open"); got != 1 {
		t.Fatalf("circuits open %v, want 1", got)
	}
	s.setDown("down.example", false)
	h.clock.Advance(20 * time.Second)
	h.waitOutboxEmpty()
	if got := metrictest.Value(t, reg, "jobfleet_notifications_total", "result", "delivered"); got != api.MaxNotifications+1 {
		t.Fatalf("%v notifications delivered, want %d", got, api.MaxNotifications+1)
	}
	h.waitFor("the circuit closed", func() bool { return metrictest.Value(t, reg, "jobfleet_notification_circuits_open") == 0 })
}

// TestPendingNotificationsPerJobAreBounded: a job whose notifications
// pile up (its receiver is down) keeps the newest of them within its
// bound; the oldest are dropped, deleted from etcd with their run
// documents, and counted.
func TestPendingNotificationsPerJobAreBounded(t *testing.T) {
	h := newHarness(t)
	s := newHostSender("down.example")
	reg := prometheus.NewRegistry()
	h.withNotify(notify.Config{Sender: s, MaxPendingPerJob: 3, Metrics: notify.NewMetrics(reg)})
	h.start("m1")
	h.create(api.Job{ID: "chatty", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 6, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Second)},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunFailed}, URL: "https://down.example/hook"}}})
	h.advance(time.Hour)
	for i := range 5 {
		if i > 0 {
			h.parkedBoth()
			h.clock.Advance(2 * time.Second) // the run's retry backoff
		}
		h.failAttempt("w1")
	}
	h.waitFor("two notifications dropped", func() bool {
		return metrictest.Value(t, reg, "jobfleet_notifications_total", "result", "dropped") == 2
	})
	h.waitFor("the dropped ones deleted", func() bool { return len(h.outboxKeys()) == 6 })
	var attempts []int
	for _, k := range h.outboxKeys() {
		ok, parsed := h.store.Keys().ParseOutboxKey(0, k)
		if !parsed {
			t.Fatalf("unexpected outbox key %s", k)
		}
		if ok.Index >= 0 {
			attempts = append(attempts, ok.Attempt)
		}
	}
	if fmt.Sprint(attempts) != "[3 4 5]" {
		t.Fatalf("notifications kept of attempts %v, want the newest three [3 4 5]", attempts)
	}
	if n := h.deliverer.Pending(); n != 3 {
		t.Fatalf("deliverer holds %d notifications, want 3", n)
	}
}

// TestDeletingAJobRemovesItsNotifications: the pending notifications of
// a deleted job (its receiver down) are deleted with its data and never
// tried again.
func TestDeletingAJobRemovesItsNotifications(t *testing.T) {
	h := newHarness(t)
	s := newHostSender("down.example")
	h.withNotify(notify.Config{Sender: s})
	h.start("m1")
	h.create(api.Job{ID: "doomed", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 1},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunDead}, URL: "https://down.example/a"}, {On: []api.RunStatus{api.RunDead}, URL: "https://down.example/b"}}})
	h.create(api.Job{ID: "doomed2", Schedule: "@every 1h"}) // shares the prefix, keeps nothing pending
	h.advance(time.Hour)
	for _, a := range h.poll("w1", 2) {
		if a.JobID == "doomed" {
			if _, err := h.complete(a, "w1", false, "boom"); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.waitFor("both notifications tried", func() bool { return s.count("down.example") >= 2 })
	if n := h.outbox(); n != 2 {
		t.Fatalf("outbox holds %d notifications, want 2", n)
	}
	if err := h.store.Delete(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	h.waitOutboxEmpty()
	h.waitFor("the deliverer forgetting them", func() bool { return h.deliverer.Pending() == 0 })
	h.parkedBoth()
	tried := s.count("down.example")
	for range 3 {
		h.clock.Advance(time.Minute)
		h.parkedBoth()
	}
	if n := s.count("down.example"); n != tried {
		t.Fatalf("%d tries of a deleted job's notifications, want none", n-tried)
	}
}

// TestOutboxReadAtTakeover: a new owner delivers what it finds in the
// outbox, a notification of an earlier version (the run document in the
// notification itself) included, and deletes what no notification needs:
// a run document without notifications, a notification of a job that is
// gone.
func TestOutboxReadAtTakeover(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "known", Schedule: "@every 1h"})
	h.stop()

	k := h.store.Keys()
	at := t0.Add(time.Hour)
	put := func(key string, v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.client.Put(context.Background(), key, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	run := api.Run{ID: store.RunID("known", at), JobID: "known", ScheduledAt: at, Status: api.RunDead}
	note := func(id string) store.Outbox {
		return store.Outbox{RunID: store.RunID(id, at), JobID: id, Event: api.RunDead, Attempt: 1, URL: "https://up.example/" + id, CreatedAt: t0}
	}
	put(k.OutboxRun(0, "known", at, api.RunDead, 1), run)
	put(k.Outbox(0, "known", at, api.RunDead, 1, 0), note("known"))
	legacy := note("known")
	legacy.Attempt, legacy.Run = 2, json.RawMessage(`{"status":"dead"}`)
	legacyKey := k.OutboxPrefix(0) + store.RunID("known", at) + "/dead-2-0"
	put(legacyKey, legacy)
	put(k.Outbox(0, "gone", at, api.RunDead, 1, 0), note("gone"))
	put(k.OutboxRun(0, "gone", at, api.RunDead, 1), run)
	put(k.OutboxRun(0, "known", at, api.RunSucceeded, 1), run) // no notification needs it

	s := &recordingSender{}
	h.withSender(s)
	h.start("m2")
	got := waitTries(t, s, 2)
	h.waitOutboxEmpty()
	bodies := map[int]string{}
	for _, o := range got {
		if o.JobID != "known" {
			t.Fatalf("delivered %+v, want only job known's", o)
		}
		bodies[o.Attempt] = string(o.Run)
	}
	var r api.Run
	if err := json.Unmarshal([]byte(bodies[1]), &r); err != nil || r.ID != run.ID {
		t.Fatalf("notification of attempt 1 delivered %q, want its stored run document", bodies[1])
	}
	if bodies[2] != `{"status":"dead"}` {
		t.Fatalf("earlier version's notification delivered %q, want the document it holds", bodies[2])
	}
	h.parkedBoth()
	if n := len(s.snapshot()); n != 2 {
		t.Fatalf("%d tries, want 2", n)
	}
}

// heldSender holds every try until the test releases it, then fails it
// (a destination that times out).
type heldSender struct {
	started chan string
	release chan struct{}
}

func (s *heldSender) Send(ctx context.Context, o store.Outbox) error {
	s.started <- o.URL
	select {
	case <-s.release:
		return errors.New("context deadline exceeded (a tarpit)")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestDroppedNotificationsStillOpenTheCircuit: a job makes more
// notifications to a dead destination than its bound of pending ones, so
// that the notification being tried is dropped (for newer ones) while its
// try is in flight. The try's failure still counts for the destination:
// its circuit opens (after one failure here), and nothing more is sent
// there until its back-off passes. One try at a time (PerJob 1), so which
// try fails when is the test's to say.
func TestDroppedNotificationsStillOpenTheCircuit(t *testing.T) {
	h := newHarness(t)
	s := &heldSender{started: make(chan string, 64), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	h.withNotify(notify.Config{Sender: s, MaxPendingPerJob: 2, PerJob: 1, BreakerFailures: 1,
		BreakerBackoff: retry.Policy{Initial: time.Hour, Max: time.Hour}, Metrics: notify.NewMetrics(reg)})
	h.start("m1")
	job := api.Job{ID: "chatty", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Second)}}
	for i := range api.MaxNotifications {
		job.Notify = append(job.Notify, api.Notification{On: []api.RunStatus{api.RunFailed, api.RunDead}, URL: fmt.Sprintf("https://tarpit.example/%d", i)})
	}
	h.create(job)
	h.advance(time.Hour)
	h.failAttempt("w1") // 8 notifications: the 2 newest kept, one tried
	<-s.started
	h.parked()
	h.clock.Advance(2 * time.Second) // the run's retry backoff
	h.failAttempt("w1")              // 8 more: the one in flight and the one waiting are dropped
	h.waitFor("the tried notification dropped", func() bool {
		return metrictest.Value(t, reg, "jobfleet_notifications_total", "result", "dropped") == 2*api.MaxNotifications-2
	})
	if got := metrictest.Value(t, reg, "jobfleet_notification_circuits_open"); got != 0 {
		t.Fatalf("%v circuits open before the try failed, want 0", got)
	}
	s.release <- struct{}{}
	h.waitFor("the circuit open", func() bool { return metrictest.Value(t, reg, "jobfleet_notification_circuits_open") == 1 })
	if got := metrictest.Value(t, reg, "jobfleet_notifications_total", "result", "failed"); got != 1 {
		t.Fatalf("%v failed tries counted, want 1 (the one dropped while in flight)", got)
	}
	h.parkedBoth()
	if n := len(s.started); n != 0 {
		t.Fatalf("%d tries started after the circuit opened, want none until its back-off passes", n)
	}
}
