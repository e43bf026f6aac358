package notify_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an outbox held in memory (the dispatcher's is etcd).
type memStore struct {
	mu   sync.Mutex
	keys map[string][]byte
	// deliveries are the records kept, by job; writes counts the Delete
	// calls that recorded some.
	deliveries map[string][]api.NotificationDelivery
	writes     int
}

func newMemStore() *memStore {
	return &memStore{keys: map[string][]byte{}, deliveries: map[string][]api.NotificationDelivery{}}
}

func (s *memStore) Body(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.keys[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", notify.ErrGone, key)
	}
	return b, nil
}

func (s *memStore) Delete(_ context.Context, keys []string, ds []api.NotificationDelivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.keys, k)
	}
	if len(ds) > 0 {
		s.writes++
	}
	for _, d := range ds {
		s.deliveries[d.JobID] = api.MergeDeliveries(s.deliveries[d.JobID], []api.NotificationDelivery{d})
	}
	return nil
}

// recorded returns job's kept delivery records and how many writes
// recorded any.
func (s *memStore) recorded(job string) ([]api.NotificationDelivery, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries[job]), s.writes
}

func (s *memStore) put(key string, val []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = val
}

func (s *memStore) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.keys))
}

// entries stores n notifications of job to url, each with a run
// document of its own, created at t, and returns them.
func entries(st *memStore, job, url string, n int, t time.Time) []notify.Entry {
	var out []notify.Entry
	for i := range n {
		body := fmt.Sprintf("%s/%d/run", job, i)
		st.put(body, []byte(fmt.Sprintf(`{"job_id":%q,"n":%d}`, job, i)))
		key := fmt.Sprintf("%s/%d/0", job, i)
		st.put(key, nil)
		out = append(out, notify.Entry{Key: key, Body: body, Outbox: store.Outbox{JobID: job, RunID: fmt.Sprintf("%s@%d", job, i), Event: api.RunDead, URL: url, CreatedAt: t.Add(time.Duration(i) * time.Millisecond)}})
	}
	return out
}

// gateSender records the order of tries and lets each return only when
// told.
type gateSender struct {
	mu    sync.Mutex
	order []string
	tried chan string
	free  chan struct{}
}

func (s *gateSender) Send(ctx context.Context, o store.Outbox) error {
	s.mu.Lock()
	s.order = append(s.order, o.RunID)
	s.mu.Unlock()
	s.tried <- o.RunID
	select {
	case <-s.free:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestJobsTakeTurns: one destination, one try at a time; a job with a
// backlog of ten does not make a job added after it wait for the ten:
// the jobs take turns.
func TestJobsTakeTurns(t *testing.T) {
	s := &gateSender{tried: make(chan string), free: make(chan struct{})}
	d, err := notify.New(notify.Config{Sender: s, PerDestination: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	st := newMemStore()
	ob := d.Open(ctx, 0, st)
	defer ob.Close()
	t0 := time.Now()
	ob.Add(entries(st, "backlog", "https://hooks.example/a", 10, t0)...)
	if got := <-s.tried; got != "backlog@0" {
		t.Fatalf("first try %s, want backlog@0", got)
	}
	ob.Add(entries(st, "late", "https://hooks.example/b", 1, t0.Add(time.Hour))...)
	s.free <- struct{}{}
	if got := <-s.tried; got != "late@0" {
		t.Fatalf("second try %s, want late@0 (its turn), not the backlog's next", got)
	}
	for range 9 {
		s.free <- struct{}{}
		<-s.tried
	}
	s.free <- struct{}{}
	for len(st.list()) > 0 { // the deletions follow the deliveries
		time.Sleep(time.Millisecond)
	}
}

// Example: a member's deliverer, the outbox of one partition, and a
// notification written by the partition's owner (here into memory).
func Example() {
	d, err := notify.New(notify.Config{Sender: printSender{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()

	st := newMemStore()
	ob := d.Open(ctx, 0, st)
	st.put("nightly/run", []byte(`{"status":"dead"}`))
	st.put("nightly/0", nil)
	ob.Add(notify.Entry{Key: "nightly/0", Body: "nightly/run", Outbox: store.Outbox{
		RunID: "nightly@2026-06-01T02:00:00.000Z", JobID: "nightly", Event: api.RunDead, Attempt: 3,
		URL: "https://alerts.example/jobfleet", CreatedAt: time.Now(),
	}})
	for len(st.list()) > 0 { // delivered, then deleted
		time.Sleep(time.Millisecond)
	}
	ob.Close()
	cancel()
	<-done
	// Output: POST https://alerts.example/jobfleet dead of nightly@2026-06-01T02:00:00.000Z: {"status":"dead"}
}

type printSender struct{}

func (printSender) Send(_ context.Context, o store.Outbox) error {
	fmt.Printf("POST %s %s of %s: %s\n", o.URL, o.Event, o.RunID, o.Run)
	return nil
}
