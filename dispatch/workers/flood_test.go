package workers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// floodEnv is a registry over an etcd of its own with a small space
// quota, guarded by a real space monitor, as a member runs them.
type floodEnv struct {
	*env
	space *storage.Monitor
}

func newFloodEnv(t *testing.T, quota int64) *floodEnv {
	t.Helper()
	srv, err := etcdtest.StartConfig(etcdserver.Config{Dir: t.TempDir(), QuotaBackendBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e := &env{t: t, client: srv.Client(t), ns: "/flood/", clock: clockwork.NewFakeClockAt(t0)}
	sc := storage.DefaultConfig(e.ns, "m1")
	sc.Clock, sc.Logger = e.clock, zaptest.NewLogger(t)
	space, err := storage.NewMonitor(e.client, sc)
	if err != nil {
		t.Fatal(err)
	}
	space.Check(context.Background())
	return &floodEnv{env: e, space: space}
}

// usage returns etcd's revision and the bytes its database uses.
func (e *floodEnv) usage() (rev, inUse int64) {
	e.t.Helper()
	st, err := e.client.Status(context.Background(), e.client.Endpoints()[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Header.Revision, st.DbSizeInUse
}

// floodResult counts a flood's answers.
type floodResult struct {
	ok, limited, refused, other int
	firstOther                  error
}

func (f *floodResult) count(err error) {
	var rate *workers.RateError
	switch {
	case err == nil:
		f.ok++
	case errors.As(err, &rate):
		if rate.RetryAfter <= 0 {
			f.other++
			f.firstOther = fmt.Errorf("a rate refusal without a time to retry: %w", err)
			return
		}
		f.limited++
	case errors.Is(err, store.ErrNoSpace), errors.Is(err, store.ErrHighWater):
		f.refused++
	default:
		f.other++
		if f.firstOther == nil {
			f.firstOther = err
		}
	}
}

// flood sends, for steps of 100ms of the fake clock, what a hostile
// worker credential scoped to billing/ sends: one worker ID that keeps the
// largest registration the protocol allows and toggles Active at every
// call, and ten that send a new one of the largest registrations at every
// call, Active toggled too.
func (e *floodEnv) flood(r *workers.Registry, round string, steps int) (changes, toggles floodResult) {
	e.t.Helper()
	ctx := context.Background()
	for s := range steps {
		e.clock.Advance(100 * time.Millisecond)
		rq := largest("billing-toggle", "billing-worker", "t")
		rq.Prefix, rq.Active = "billing/", s%2
		_, err := r.Register(ctx, rq)
		toggles.count(err)
		for i := range 10 {
			rq := largest(fmt.Sprintf("billing-w%d", i), "billing-worker", fmt.Sprintf("%s%d", round, s))
			rq.Prefix, rq.Active = "billing/", s%2
			_, err := r.Register(ctx, rq)
			changes.count(err)
		}
	}
	return changes, toggles
}

// TestScopedWorkerFloodIsBounded: a prefix-scoped worker credential
// flooding POST /v1/worker/register for 10s (of the fake clock) with the
// largest registrations, changing them and toggling Active at every
// call, writes what its write rate allows and no more; once etcd is full
// no call that needs a write gets an answer other than a refusal, and the
// registrations that change nothing stay alive.
func TestScopedWorkerFloodIsBounded(t *testing.T) {
	e := newFloodEnv(t, 16<<20)
	// A TTL long enough that no registration expires (a delete, a
	// revision) while the test fills etcd.
	r := e.registry("m1", workers.Config{Space: e.space, TTL: time.Minute})
	rev0, size0 := e.usage()

	changes, toggles := e.flood(r, "a", 100)
	rev1, size1 := e.usage()
	t.Logf("healthy store, 10s: changes %+v, toggles %+v; %d revisions, %d bytes in use more", changes, toggles, rev1-rev0, size1-size0)
	if changes.other+toggles.other > 0 || toggles.limited+toggles.refused > 0 {
		t.Fatalf("unexpected answers: changes %+v, toggles %+v (%v, %v)", changes, toggles, changes.firstOther, toggles.firstOther)
	}
	// The write budget: a burst of 64 KiB and 10 KiB a second, each of
	// these registrations costing 7. The toggler writes once (its
	// creation): Active alone waits for the update interval.
	budget := (workers.DefaultWriteBurst + 10*int(workers.DefaultWriteRate)) / 7
	if writes := int(rev1 - rev0); writes > budget || writes < budget-2 {
		t.Errorf("%d revisions written in 10s, want about the budget of %d", writes, budget)
	}
	if changes.ok > budget || changes.limited < 900 {
		t.Errorf("changes: %+v, want at most %d accepted and the rest refused for the rate", changes, budget)
	}
	// Each write of about 6.5 KiB takes a few pages of etcd's database
	// (the measured growth is near 12 KiB a write); without the bounds the
	// same flood stores some 7 MiB.
	if grown := size1 - size0; grown > int64(budget)*32<<10 {
		t.Errorf("etcd's database grew by %d bytes, want at most 32 KiB per write allowed (%d)", grown, int64(budget)*32<<10)
	}

	// etcd fills up (another tenant); the space guard sees it.
	if !etcdtest.Fill(t, e.client, "/other-tenant/", 64<<20) {
		t.Fatal("etcd did not refuse writes past its quota")
	}
	if st := e.space.Check(context.Background()); !st.NoSpace {
		t.Fatalf("space after the fill: %+v, want NOSPACE", st)
	}
	e.clock.Advance(time.Minute) // a full write budget again
	rev2, _ := e.usage()
	changes, toggles = e.flood(r, "b", 20)
	t.Logf("full store: changes %+v, toggles %+v", changes, toggles)
	if changes.ok != 0 || changes.refused == 0 || changes.other > 0 {
		t.Errorf("changes while etcd is full: %+v (%v), want every one refused (507) or limited (429), none accepted", changes, changes.firstOther)
	}
	if toggles.ok != 20 {
		t.Errorf("refreshes changing only Active while etcd is full: %+v (%v), want all accepted (they need no write)", toggles, toggles.firstOther)
	}
	_, err := r.Register(context.Background(), req("billing-new", "billing-worker"))
	if !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("a new registration while etcd is full: %v, want ErrNoSpace", err)
	}
	if rev3, _ := e.usage(); rev3 != rev2 {
		t.Errorf("revision moved from %d to %d while etcd is full", rev2, rev3)
	}
	if _, _, ok := e.stored("billing-toggle"); !ok {
		t.Error("the registration refreshed without changes expired while etcd was full")
	}

	// Without the guard, etcd's own refusal is what the worker is told.
	bare := e.registry("m2", workers.Config{TTL: time.Minute})
	rq := largest("billing-w0", "billing-worker", "c")
	rq.Prefix = "billing/"
	if _, err := bare.Register(context.Background(), rq); !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("a change refused by etcd itself: %v, want ErrNoSpace", err)
	}

	// The runbook frees space: changes are stored again.
	etcdtest.MakeRoom(t, e.client, "/other-tenant/")
	e.space.Check(context.Background())
	if _, err := r.Register(context.Background(), rq); err != nil {
		t.Errorf("a change once space is freed: %v", err)
	}
}

// TestRateLimits: beyond its request rate a credential's registrations
// are refused with a time to retry, whatever they are; beyond its write
// rate a new or changed registration is refused, while refreshes that
// change nothing go on and an Active sample is skipped; other credentials
// are not affected.
func TestRateLimits(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{RequestRate: 1, RequestBurst: 3})
	ctx := context.Background()
	for range 3 {
		e.register(r, req("w1", "cred-a"))
	}
	_, err := r.Register(ctx, req("w1", "cred-a"))
	var rate *workers.RateError
	if !errors.As(err, &rate) || rate.What != "requests" || rate.RetryAfter != time.Second {
		t.Fatalf("a fourth request at once: %v, want a request rate refusal, retry in 1s", err)
	}
	if err := r.Deregister(ctx, api.DeregisterRequest{Worker: "w1", Credential: "cred-a"}); !errors.Is(err, workers.ErrRateLimited) {
		t.Fatalf("a deregistration beyond the rate: %v, want ErrRateLimited", err)
	}
	e.register(r, req("x1", "cred-b"))
	e.clock.Advance(time.Second)
	e.register(r, req("w1", "cred-a"))

	// Writes: eight new IDs take the burst.
	r = e.registry("m2", workers.Config{RequestRate: -1, WriteRate: 1, WriteBurst: 8, UpdateInterval: time.Second})
	for i := range 8 {
		e.register(r, req(fmt.Sprintf("n%d", i), "cred-c"))
	}
	_, err = r.Register(ctx, req("n8", "cred-c"))
	if !errors.As(err, &rate) || rate.What != "writes" || rate.RetryAfter != time.Second {
		t.Fatalf("a ninth new registration: %v, want a write rate refusal, retry in 1s", err)
	}
	e.register(r, req("x2", "cred-d"))
	changed := req("n0", "cred-c")
	changed.Executors = []string{"http", "resize"}
	if _, err := r.Register(ctx, changed); !errors.Is(err, workers.ErrRateLimited) {
		t.Fatalf("a change beyond the write rate: %v, want ErrRateLimited", err)
	}
	before := e.revision()
	e.register(r, req("n0", "cred-c")) // unchanged: no write needed
	e.clock.Advance(time.Second)       // one token back, and the sample is due
	busy := req("n1", "cred-c")
	busy.Active = 2
	e.register(r, busy) // takes the token
	busy.Worker = "n2"
	e.register(r, busy) // none left: skipped
	if w, _, _ := e.stored("n1"); w.Active != 2 {
		t.Errorf("n1's sample with a token: active %d, want 2", w.Active)
	}
	if w, _, _ := e.stored("n2"); w.Active != 0 {
		t.Errorf("n2's sample without a token: active %d, want 0 (skipped)", w.Active)
	}
	if n := e.writesSince(before); n != 1 {
		t.Errorf("%d writes, want one: the sample with a token", n)
	}
}
