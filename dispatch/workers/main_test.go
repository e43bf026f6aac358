package workers_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// t0 is the fake clocks' start.
var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// env is one test's registries over one etcd namespace, on a fake clock
// (the rate limits and the samples' interval; leases run on etcd's).
type env struct {
	t      *testing.T
	client *clientv3.Client
	ns     string
	clock  *clockwork.FakeClock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, client: etcd.Client(t), ns: etcdtest.Namespace(t), clock: clockwork.NewFakeClockAt(t0)}
}

// registry returns a running registry of member, configured by cfg
// (namespace, member, clock and logger filled in), stopped when the test
// ends.
func (e *env) registry(member string, cfg workers.Config) *workers.Registry {
	e.t.Helper()
	cfg.Namespace, cfg.Member, cfg.Clock, cfg.Logger = e.ns, member, e.clock, zaptest.NewLogger(e.t)
	r, err := workers.New(e.client, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return r
}

// req is a small valid registration of worker by credential.
func req(worker, credential string) api.RegisterRequest {
	return api.RegisterRequest{Worker: worker, Credential: credential, Executors: []string{"http"}, Concurrency: 4}
}

func (e *env) register(r *workers.Registry, rq api.RegisterRequest) {
	e.t.Helper()
	if _, err := r.Register(context.Background(), rq); err != nil {
		e.t.Fatalf("register %s as %s: %v", rq.Worker, rq.Credential, err)
	}
}

// revision returns etcd's current revision.
func (e *env) revision() int64 {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), "revision-probe")
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

// writesSince returns the writes (puts and deletes) under the test's
// namespace after etcd revision rev, as etcd's history records them:
// other tests' leases expiring in the same etcd do not count. It writes a
// marker key after them (a revision of its own, not counted) and reads
// the namespace's history up to it.
func (e *env) writesSince(rev int64) int {
	e.t.Helper()
	marker := e.ns + "~writes-marker"
	if _, err := e.client.Put(context.Background(), marker, ""); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for wr := range e.client.Watch(ctx, e.ns, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) == marker {
				return n
			}
			n++
		}
	}
	e.t.Fatal("the marker did not come through the watch")
	return 0
}

// stored returns worker id's registration in etcd, and its key's
// revisions; ok false if absent.
func (e *env) stored(id string) (w api.Worker, kv *storedKV, ok bool) {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), store.Keys{NS: e.ns}.Worker(id))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return api.Worker{}, nil, false
	}
	k := resp.Kvs[0]
	if err := json.Unmarshal(k.Value, &w); err != nil {
		e.t.Fatal(err)
	}
	return w, &storedKV{create: k.CreateRevision, mod: k.ModRevision, lease: clientv3.LeaseID(k.Lease), size: len(k.Value)}, true
}

type storedKV struct {
	create, mod int64
	lease       clientv3.LeaseID
	size        int
}

// keys returns the keys under the registry's prefixes (registrations and
// bindings).
func (e *env) keys() []string {
	e.t.Helper()
	var out []string
	for _, p := range []string{"workers/", "workerids/"} {
		resp, err := e.client.Get(context.Background(), e.ns+p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			e.t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			out = append(out, strings.TrimPrefix(string(kv.Key), e.ns))
		}
	}
	return out
}

// waitGone waits until key (under the namespace) is absent, on etcd's
// watch: a lease's expiry is etcd's to decide.
func (e *env) waitGone(key string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := e.client.Get(ctx, e.ns+key)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return
	}
	for wr := range e.client.Watch(ctx, e.ns+key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	e.t.Fatalf("%s still there after a minute", key)
}

// waitListed waits until r's copy lists exactly the workers ids.
func waitListed(t *testing.T, r *workers.Registry, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := r.Workers()
		var got []string
		for _, w := range ws {
			got = append(got, w.ID)
		}
		if err == nil && strings.Join(got, ",") == strings.Join(ids, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry lists %q (%v), want %q", got, err, ids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
