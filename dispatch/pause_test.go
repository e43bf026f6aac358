package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestFireOfAPausedJobIsRefused holds a fire's write in a stalled etcd
// connection while the job is paused: the pause writes only the job's
// pause key, not its document, and the write, decided before the pause,
// is refused all the same when it arrives. Resumed, the job fires its
// next time and not the ones missed while paused.
func TestFireOfAPausedJobIsRefused(t *testing.T) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	h.configure = func(c *dispatch.Config) { c.RequestTimeout = time.Minute }
	h.start("m1")
	created := h.create(api.Job{ID: "j", Schedule: "@every 1s"})

	bridge.Cut()
	restored := false
	defer func() {
		if !restored {
			bridge.Restore()
		}
	}()
	h.clock.Advance(time.Second) // j@t0+1s is due: its write waits in the bridge
	h.waitFor("the fire's write to start", func() bool { return h.disp.WriterBusy(0) })
	paused, err := h.store.SetPaused(context.Background(), "j", true)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := h.client.Get(context.Background(), h.store.Keys().Spec(0, "j"))
	if err != nil || spec.Kvs[0].ModRevision != created.Revision {
		t.Fatalf("the pause rewrote the job's document (%v)", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wch := h.client.Watch(wctx, h.store.Keys().RunPrefix(0, "j"), clientv3.WithPrefix(), clientv3.WithRev(paused.Revision))
	bridge.Restore()
	restored = true
	h.waitFor("the write answered", func() bool { return !h.disp.WriterBusy(0) })
	h.waitFor("the scheduler sees the pause", func() bool { return h.disp.JobPaused("j") })
	for range 3 {
		h.advance(time.Second) // t0+4s: paused, nothing fires
	}
	h.resume("j")
	h.advance(time.Second) // t0+5s: fires
	want := h.store.Keys().Run(0, "j", t0.Add(5*time.Second))
	for seen := false; !seen; {
		wr := <-wch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut || ev.Kv.Version != 1 {
				continue
			}
			if string(ev.Kv.Key) != want {
				t.Fatalf("run %s created at revision %d, after the pause at revision %d; want only %s, after the resume", ev.Kv.Key, ev.Kv.ModRevision, paused.Revision, want)
			}
			seen = true
		}
	}
}

// TestPausedJobLeavesItsBatchFiring holds one write of two jobs' fires in
// a stalled etcd connection while one of them is paused. The write is
// guarded as a whole, so the pause refuses all of it; the batch is then
// written again job by job: the other job's fire applies, the paused
// one's does not.
func TestPausedJobLeavesItsBatchFiring(t *testing.T) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	h.configure = func(c *dispatch.Config) { c.RequestTimeout = time.Minute }
	h.start("m1")
	h.create(api.Job{ID: "a", Schedule: "@every 1s"})
	h.create(api.Job{ID: "b", Schedule: "@every 1s"})

	bridge.Cut()
	restored := false
	defer func() {
		if !restored {
			bridge.Restore()
		}
	}()
	h.clock.Advance(time.Second) // a and b due at t0+1s: one write, waiting in the bridge
	h.waitFor("the fires' write to start", func() bool { return h.disp.WriterBusy(0) })
	if _, err := h.store.SetPaused(context.Background(), "a", true); err != nil {
		t.Fatal(err)
	}
	bridge.Restore()
	restored = true
	h.waitFor("the write answered", func() bool { return !h.disp.WriterBusy(0) })
	at := t0.Add(time.Second)
	for id, want := range map[string]int64{"a": 0, "b": 1} {
		resp, err := h.client.Get(context.Background(), h.store.Keys().Run(0, id, at), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != want {
			t.Errorf("job %s has %d runs for %s, want %d", id, resp.Count, at.Format(time.RFC3339), want)
		}
	}
}
