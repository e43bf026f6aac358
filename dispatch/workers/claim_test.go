package workers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// TestWorkerIDBoundWhileLive: while a registration lives, another
// credential can neither register, deregister nor poll under its ID, is
// told so, and nothing changes in etcd.
func TestWorkerIDBoundWhileLive(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{})
	e.register(r, req("w1", "cred-a"))
	waitListed(t, r, "w1")
	before := e.revision()

	_, err := r.Register(context.Background(), req("w1", "cred-b"))
	if !errors.Is(err, workers.ErrIDTaken) || !strings.Contains(err.Error(), `worker ID held by another credential: "w1" is registered with another credential`) ||
		!strings.Contains(err.Error(), "for 15m0s after it ends") || strings.Contains(err.Error(), "token") {
		t.Fatalf("register under another credential: %v, want ErrIDTaken saying the ID is held, until when", err)
	}
	if err := r.Deregister(context.Background(), api.DeregisterRequest{Worker: "w1", Credential: "cred-b"}); !errors.Is(err, workers.ErrIDTaken) {
		t.Fatalf("deregister under another credential: %v, want ErrIDTaken", err)
	}
	if err := r.CheckID("w1", "cred-b"); !errors.Is(err, workers.ErrIDTaken) {
		t.Fatalf("CheckID for another credential: %v, want ErrIDTaken", err)
	}
	if err := r.CheckID("w1", "cred-a"); err != nil {
		t.Fatalf("CheckID for the ID's credential: %v", err)
	}
	if n := e.writesSince(before); n != 0 {
		t.Fatalf("refused requests wrote %d times, want none", n)
	}
	if w, _, _ := e.stored("w1"); w.Credential != "cred-a" {
		t.Fatalf("registration %+v, want cred-a's", w)
	}
}

// TestLapsedWorkerIDKeptForItsCredential: a worker's registration
// expires (it was cut off); within the grace another credential cannot
// take its ID, and is told until when; the worker comes back under its
// ID. A graceful stop keeps the ID bound too, so that no credential takes
// it while the worker restarts.
func TestLapsedWorkerIDKeptForItsCredential(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{TTL: 2 * time.Second, IDGrace: time.Hour})
	e.register(r, req("w1", "cred-a"))
	claimKey := "workerids/w1"
	e.waitGone("workers/w1") // no refresh: it expires on etcd's clock
	if k := e.keys(); len(k) != 1 || k[0] != claimKey {
		t.Fatalf("keys after the registration expired: %q, want the ID's binding alone", k)
	}

	before := e.revision()
	_, err := r.Register(context.Background(), req("w1", "cred-b"))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if !errors.Is(err, workers.ErrIDTaken) || !strings.Contains(msg, `worker ID held by another credential: "w1" was registered with another credential, whose registration ended less than 1h0m0s ago`) ||
		!strings.Contains(msg, "stays bound to that credential until "+t0.Add(time.Hour).Format("2006-01-02T15")) {
		t.Fatalf("another credential taking the lapsed ID: %v, want ErrIDTaken saying until when", err)
	}
	if err := r.CheckID("w1", "cred-b"); !errors.Is(err, workers.ErrIDTaken) {
		t.Fatalf("a poll of another credential under the lapsed ID: %v, want ErrIDTaken", err)
	}
	if n := e.writesSince(before); n != 0 {
		t.Fatalf("the refusal wrote %d times, want none", n)
	}

	// The worker comes back: a new registration, the same binding.
	e.register(r, req("w1", "cred-a"))
	if w, _, ok := e.stored("w1"); !ok || w.Credential != "cred-a" {
		t.Fatalf("the worker back under its ID: %+v %v", w, ok)
	}

	// It stops gracefully: the registration goes at once, the binding
	// stays.
	if err := r.Deregister(context.Background(), api.DeregisterRequest{Worker: "w1", Credential: "cred-a"}); err != nil {
		t.Fatal(err)
	}
	if k := e.keys(); len(k) != 1 || k[0] != claimKey {
		t.Fatalf("keys after deregistering: %q, want the ID's binding alone", k)
	}
	if _, err := r.Register(context.Background(), req("w1", "cred-b")); !errors.Is(err, workers.ErrIDTaken) {
		t.Fatalf("another credential right after a graceful stop: %v, want ErrIDTaken", err)
	}
}

// TestWorkerIDFreeAfterTheGrace: once the grace after a registration's end
// has passed, another credential may register the ID; the worker that had
// it is then refused with an error saying the ID is held by another
// credential, not that its credential is wrong.
func TestWorkerIDFreeAfterTheGrace(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{TTL: 2 * time.Second, IDGrace: time.Second})
	e.register(r, req("w1", "cred-a"))
	e.waitGone("workers/w1")
	e.waitGone("workerids/w1")

	e.register(r, req("w1", "cred-b"))
	waitListed(t, r, "w1")
	_, err := r.Register(context.Background(), req("w1", "cred-a"))
	if !errors.Is(err, workers.ErrIDTaken) || !strings.Contains(err.Error(), `"w1" is registered with another credential`) ||
		!strings.Contains(err.Error(), "give this worker another ID") {
		t.Fatalf("the former holder: %v, want ErrIDTaken saying another credential holds the ID", err)
	}
	if err := r.CheckID("w1", "cred-a"); !errors.Is(err, workers.ErrIDTaken) {
		t.Fatalf("a poll of the former holder: %v, want ErrIDTaken", err)
	}
}

// TestTwoCredentialsRaceForAnID: two credentials registering a new ID at
// once through two members: one gets it, the other is told it is held.
func TestTwoCredentialsRaceForAnID(t *testing.T) {
	e := newEnv(t)
	m1, m2 := e.registry("m1", workers.Config{}), e.registry("m2", workers.Config{})
	for i := range 20 {
		id := "w" + string(rune('a'+i))
		errs := make(chan error, 2)
		go func() { _, err := m1.Register(context.Background(), req(id, "cred-a")); errs <- err }()
		go func() { _, err := m2.Register(context.Background(), req(id, "cred-b")); errs <- err }()
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), workers.ErrIDTaken) {
			t.Fatalf("%s: %v and %v, want one registered and one ErrIDTaken", id, e1, e2)
		}
		w, _, _ := e.stored(id)
		resp, err := e.client.Get(context.Background(), e.ns+"workerids/"+id)
		if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"credential":"`+w.Credential+`"`) {
			t.Fatalf("%s: registered by %s, binding %v (%v)", id, w.Credential, resp.Kvs, err)
		}
	}
}

// TestRegistrationsPerCredentialAreBounded: a credential cannot register
// more live worker IDs than the limit, nor hold more than four times as
// many IDs (live, or within their grace), while its registered workers
// still refresh and other credentials register.
func TestRegistrationsPerCredentialAreBounded(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{MaxPerCredential: 2})
	e.register(r, req("w1", "cred-a"))
	e.register(r, req("w2", "cred-a"))
	waitListed(t, r, "w1", "w2")
	if _, err := r.Register(context.Background(), req("w3", "cred-a")); !errors.Is(err, workers.ErrTooManyWorkers) || !strings.Contains(err.Error(), "2 live workers") {
		t.Fatalf("a third live worker of cred-a: %v, want ErrTooManyWorkers", err)
	}
	e.register(r, req("w1", "cred-a")) // a refresh
	e.register(r, req("x1", "cred-b"))

}

// TestWorkerIDsHeldPerCredentialAreBounded: the IDs of stopped workers
// stay bound for the grace, and a credential holds at most four times
// MaxPerCredential of them: beyond, a new ID is refused, while an ID it
// holds registers again.
func TestWorkerIDsHeldPerCredentialAreBounded(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{MaxPerCredential: 1})
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		e.register(r, req(id, "cred-a"))
		waitHeld(t, r, id)
		if err := r.Deregister(context.Background(), api.DeregisterRequest{Worker: id, Credential: "cred-a"}); err != nil {
			t.Fatal(err)
		}
		waitListed(t, r)
	}
	_, err := r.Register(context.Background(), req("w5", "cred-a"))
	if !errors.Is(err, workers.ErrTooManyWorkers) || !strings.Contains(err.Error(), "holds 4 worker IDs") {
		t.Fatalf("a fifth ID: %v, want ErrTooManyWorkers", err)
	}
	e.register(r, req("w2", "cred-a"))
	e.register(r, req("x1", "cred-b"))
}

// waitHeld waits until r's copy binds worker id to a credential.
func waitHeld(t *testing.T, r *workers.Registry, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.CheckID(id, "nobody") == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the registry does not show %s bound", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
