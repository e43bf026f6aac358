package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/dispatch/standby"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// TestStandbyCopyIsARead runs random histories of one partition — jobs
// created, changed, paused, deleted and created again, triggered, their
// states, runs, queue and failing-runs entries written and removed, keys
// of another partition written alongside — while a standby follows it,
// part of each history before the copy's first read is in and part
// during it, then takes the copy for an epoch after the history. The copy
// must be the partition's keys as a read of etcd returns them at the
// copy's revision (values and revisions), and the memory a load builds
// from it must be the memory a load from etcd at that revision builds.
func TestStandbyCopyIsARead(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	var n atomic.Int64
	const parts = 2
	var pool []string // jobs of partition 0
	for i := 0; len(pool) < 4; i++ {
		if id := fmt.Sprintf("job-%d", i); shard.Partition(id, parts) == 0 {
			pool = append(pool, id)
		}
	}
	other := "job-x"
	for i := 0; shard.Partition(other, parts) != 1; i++ {
		other = fmt.Sprintf("job-x%d", i)
	}
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ns := fmt.Sprintf("/standby-prop-%d/", n.Add(1))
		clock := clockwork.NewFakeClockAt(standbyT0)
		st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), clock.Now)
		k := st.Keys()
		cfg := DefaultConfig(ns, parts, "heir", "http://heir.invalid")
		cfg.Clock = clock
		cfg.Logger = zap.NewNop()
		d, err := New(client, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		s, err := d.NewStandby(func() (standby.Heirs, <-chan struct{}) { return standby.Heirs{Of: map[int]bool{0: true}}, nil }, standby.Config{CatchUp: time.Hour})
		if err != nil {
			rt.Fatal(err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()

		must := func(err error) {
			if err != nil {
				rt.Fatal(err)
			}
		}
		at := func(i int) time.Time { return standbyT0.Add(time.Duration(i) * time.Minute) }
		run := func(id string, i int, status api.RunStatus) api.Run {
			return api.Run{ID: store.RunID(id, at(i)), JobID: id, ScheduledAt: at(i), FiredAt: at(i), Status: status, Owner: "old", Epoch: 1}
		}
		ops := rapid.SliceOfN(rapid.IntRange(0, 11), 1, 40).Draw(rt, "ops")
		started := rapid.IntRange(0, len(ops)).Draw(rt, "standby starts after op")
		for i, op := range ops {
			if i == started {
				wg.Go(func() { s.Run(ctx) })
			}
			id := rapid.SampledFrom(pool).Draw(rt, "job")
			t := rapid.IntRange(0, 3).Draw(rt, "time")
			switch op {
			case 0, 1: // created or changed
				j := api.Job{ID: id, Schedule: rapid.SampledFrom([]string{"@every 1m", "@every 2m", "0 * * * *"}).Draw(rt, "schedule"),
					Paused: op == 1, Executor: api.Executor{Type: "noop"}}
				_, _, err := st.Put(ctx, j)
				must(err)
			case 2:
				_ = st.Delete(ctx, id) // absent: nothing
			case 3:
				_, _ = st.Trigger(ctx, id)
			case 4:
				op, err := k.PutStateOp(0, id, api.JobState{Last: at(t), SpecRevision: int64(t)})
				must(err)
				_, err = client.Do(ctx, op)
				must(err)
			case 5, 6: // a run, active or final
				status := api.RunPending
				if op == 6 {
					status = rapid.SampledFrom([]api.RunStatus{api.RunSucceeded, api.RunDead, api.RunFailed, api.RunRunning}).Draw(rt, "status")
				}
				r := run(id, t, status)
				val, err := store.EncodeRun(r)
				must(err)
				_, err = client.Txn(ctx).Then(clientv3.OpPut(k.Run(0, id, at(t)), string(val))).Commit()
				must(err)
				if !status.Final() {
					_, err = client.Put(ctx, k.Queue(0, id, at(t)), "")
					must(err)
				}
			case 7: // its queue entry goes
				_, err := client.Delete(ctx, k.Queue(0, id, at(t)))
				must(err)
			case 8: // a failing-runs entry
				r := run(id, t, rapid.SampledFrom([]api.RunStatus{api.RunFailed, api.RunDead}).Draw(rt, "failing"))
				ops, err := k.FailingOps(api.RunPending, r, at(t))
				must(err)
				_, err = client.Txn(ctx).Then(ops...).Commit()
				must(err)
			case 9:
				_, err := client.Txn(ctx).Then(k.DeleteRunOp(0, id, at(t))).Commit()
				must(err)
			case 10: // another partition's keys
				_, _, err := st.Put(ctx, api.Job{ID: other, Schedule: "@every 1m", Executor: api.Executor{Type: "noop"}})
				must(err)
				_, err = client.Put(ctx, k.Queue(1, other, at(t)), "")
				must(err)
			case 11: // the copy's first read is in
				if i >= started {
					waitHeld(rt, s, 0)
				}
			}
		}
		if started == len(ops) {
			wg.Go(func() { s.Run(ctx) })
		}
		waitHeld(rt, s, 0)
		resp, err := client.Put(ctx, shard.OwnerKey(ns, 0), "heir")
		must(err)
		epoch := resp.Header.Revision
		tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
		defer tcancel()
		snap := s.Take(tctx, 0, epoch)
		if snap == nil {
			rt.Fatal("no copy to take")
		}
		if snap.Rev() < epoch {
			rt.Fatalf("copy at revision %d, before the epoch %d", snap.Rev(), epoch)
		}

		// The copy is a read at its revision.
		var want []*mvccpb.KeyValue
		for _, prefix := range []string{k.FailingPrefix(0), k.PartitionJobsPrefix(0), k.QueuePrefix(0), k.PartitionRunsPrefix(0), k.StatePrefix(0)} {
			r, err := client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(snap.Rev()))
			must(err)
			want = append(want, r.Kvs...)
		}
		slices.SortFunc(want, func(a, b *mvccpb.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
		decoded := map[string]bool{} // specs the copy holds decoded, without their value
		for _, kv := range snap.KVs() {
			if snap.Decoded(kv) != nil {
				decoded[string(kv.Key)] = true
			}
		}
		if got, want := kvsText(snap.KVs(), decoded), kvsText(want, decoded); got != want {
			rt.Fatalf("copy at revision %d:\n%s\nread at that revision:\n%s", snap.Rev(), got, want)
		}

		// A load builds the same memory from it as from etcd.
		warm, cold := loadedFrom(d, epoch, snap.Scan, snap.Decoded), loadedFrom(d, epoch, func(ctx context.Context, prefix string, rev, page int64, fn func(*mvccpb.KeyValue)) (int64, error) {
			if rev == 0 {
				rev = snap.Rev()
			}
			return d.rangePages(ctx, prefix, rev, page, fn)
		}, nil)
		if warm != cold {
			rt.Fatalf("memory built from the copy:\n%s\nfrom etcd:\n%s", warm, cold)
		}
	})
}

// standbyT0 is the tests' fake clock start.
var standbyT0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// waitHeld waits until s holds partition p's copy, read.
func waitHeld(t interface{ Fatal(...any) }, s *Standby, p int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.Held(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby did not read its copy within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// kvsText lists kvs, without the values of the keys in decoded.
func kvsText(kvs []*mvccpb.KeyValue, decoded map[string]bool) string {
	var b strings.Builder
	for _, kv := range kvs {
		val := string(kv.Value)
		if decoded[string(kv.Key)] {
			val = "(decoded)"
		}
		fmt.Fprintf(&b, "%s create=%d mod=%d version=%d %q\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, val)
	}
	return b.String()
}

// unownedPartition is partition 0 of d under an ownership that is not
// the owner key's (epoch plus a million).
func unownedPartition(d *Dispatcher, epoch int64) *partition {
	pt := &partition{
		d: d, p: 0, lg: zap.NewNop(), nudge: make(chan struct{}, 1), ctx: context.Background(),
		own:    shard.NewOwnership(d.client, d.cfg.Namespace, "heir", 0, epoch+1_000_000),
		unread: map[string]api.Run{},
	}
	pt.idx = newJobIndex(pt)
	return pt
}

// loadedFrom loads partition 0 from src into a partition of d whose
// ownership is not the owner key's (its cleanup writes are refused, so
// that every load sees the same keys) and describes the memory built.
func loadedFrom(d *Dispatcher, epoch int64, src loadSource, decoded func(*mvccpb.KeyValue) *jobEntry) string {
	pt := unownedPartition(d, epoch)
	rev, err := pt.loadFrom(context.Background(), src, decoded)
	if err != nil {
		return "load: " + err.Error()
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d\n", rev)
	for _, id := range slices.Sorted(maps.Keys(pt.jobs)) {
		e := pt.jobs[id]
		spec := e.spec
		spec.ctl, spec.specShape = nil, nil // pointers: their fields, not their addresses
		ctl, _ := json.Marshal(e.spec.controls())
		fmt.Fprintf(&b, "job %s spec=%+v shape=%+v controls=%s work=%q sched=%+v err=%v state=%+v dirty=%v\n", id, spec, *e.spec.specShape, ctl, e.work, e.sched.Schedule, e.sched.err, e.state(), e.dirty)
	}
	for _, id := range slices.Sorted(maps.Keys(pt.active)) {
		a := pt.active[id]
		fmt.Fprintf(&b, "active %s run=%+v mod=%d size=%d\n", id, a.run, a.modRev, a.size)
	}
	for _, key := range slices.Sorted(maps.Keys(pt.triggers)) {
		fmt.Fprintf(&b, "trigger %s %+v\n", key, pt.triggers[key])
	}
	h := pt.hist
	fmt.Fprintf(&b, "history runs=%d bytes=%d dead=%v\n", h.runs, h.bytes, h.deadBytes)
	for _, id := range slices.Sorted(maps.Keys(h.jobs)) {
		fmt.Fprintf(&b, "history %s %+v\n", id, *h.jobs[id])
	}
	return b.String()
}

// BenchmarkLoadFromCopy times building a partition of 1 000 jobs (spec
// and state each) from a standby copy and from etcd: the work a warm
// takeover saves is the difference.
func BenchmarkLoadFromCopy(b *testing.B) {
	client := etcdtest.New(b).Client(b)
	ctx := context.Background()
	ns := "/standby-bench/"
	st := store.NewEtcd(client, ns, 1, api.DefaultLimits(), nil)
	k := st.Keys()
	for i := range 1000 {
		id := fmt.Sprintf("job-%04d", i)
		j, err := st.Create(ctx, api.Job{ID: id, Schedule: "@every 1m", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}})
		if err != nil {
			b.Fatal(err)
		}
		last := j.CreatedAt.Add(time.Minute)
		op, err := k.PutStateOp(0, id, api.JobState{Last: last, Next: last.Add(time.Minute), SpecRevision: j.Revision, Fired: 10})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := client.Do(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig(ns, 1, "heir", "http://heir.invalid")
	cfg.Logger = zap.NewNop()
	d, err := New(client, cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.NewStandby(func() (standby.Heirs, <-chan struct{}) { return standby.Heirs{Of: map[int]bool{0: true}}, nil }, standby.Config{CatchUp: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(sctx) })
	waitHeld(b, s, 0)
	resp, err := client.Put(ctx, shard.OwnerKey(ns, 0), "heir")
	if err != nil {
		b.Fatal(err)
	}
	snap := s.Take(ctx, 0, resp.Header.Revision)
	stop()
	wg.Wait()
	if snap == nil {
		b.Fatal("no copy to take")
	}
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			if _, err := unownedPartition(d, 1).loadFrom(ctx, snap.Scan, snap.Decoded); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("etcd", func(b *testing.B) {
		for b.Loop() {
			if _, err := unownedPartition(d, 1).loadFrom(ctx, d.rangePages, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
