package dispatch

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// This file checks the partition's job index (the timer heap and the sets
// the loop looks at) against a brute-force scan of every job, as the loop
// did before it had an index, over random sequences of what happens to a
// partition: jobs created, replaced, paused, resumed, deleted and
// triggered, fires written (some refused by their guards), runs ending,
// one-off jobs finishing and deleted, and the clock moving. Everything
// runs in memory: etcd's answers are made up (fakeResponse) so that the
// real planning and applying code runs.

var indexT0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// memPartition returns a loaded, empty partition 0 of 1 with no etcd.
func memPartition(clock clockwork.Clock) *partition {
	cfg := DefaultConfig("/t/", 1, "m1", "127.0.0.1:1")
	cfg.Clock = clock
	cfg.Logger = zap.NewNop()
	cfg.MaxActivePerJob = 3
	cfg.DeleteAfter = 5 * time.Second
	d := &Dispatcher{cfg: cfg, keys: store.Keys{NS: cfg.Namespace}, lg: cfg.Logger, parts: map[int]*partition{}}
	pt := &partition{
		d: d, own: &shard.Ownership{Partition: 0, Epoch: 7, Member: "m1"}, p: 0, lg: cfg.Logger,
		nudge: make(chan struct{}, 1), jobs: map[string]*jobEntry{}, active: map[string]*activeRun{},
		triggers: map[string]triggerReq{}, cancelled: map[chainKey]cancelledAttempt{}, takeBacks: map[chainKey]undelivered{},
		unread: map[string]api.Run{},
	}
	pt.idx = newJobIndex(pt)
	pt.hist = newHistory(pt.retentionLocked)
	return pt
}

// fakeResponse makes up etcd's answer to a transaction of ops: every
// nested transaction succeeds unless fail says otherwise (then its else
// branch runs).
func fakeResponse(ops []clientv3.Op, rev int64, fail func() bool) *clientv3.TxnResponse {
	return &clientv3.TxnResponse{Header: &pb.ResponseHeader{Revision: rev}, Succeeded: true, Responses: fakeResponses(ops, fail)}
}

func fakeResponses(ops []clientv3.Op, fail func() bool) []*pb.ResponseOp {
	out := make([]*pb.ResponseOp, len(ops))
	for i, op := range ops {
		switch {
		case op.IsTxn():
			_, then, els := op.Txn()
			ok := !fail()
			branch := then
			if !ok {
				branch = els
			}
			out[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Succeeded: ok, Responses: fakeResponses(branch, fail)}}}
		case op.IsDelete():
			out[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{}}}
		case op.IsPut():
			out[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{}}}
		default:
			out[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}}
		}
	}
	return out
}

// scanDue is the brute-force choice of the jobs a tick plans: every job,
// by ID, that is not stale and either is due by its own schedule or has
// trigger requests.
func scanDue(pt *partition, now time.Time, triggered map[string][]triggerReq) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(pt.jobs)) {
		e := pt.jobs[id]
		if e.stale {
			continue
		}
		due := !e.spec.Paused && e.sched.err == nil &&
			!(plannedLocked(e) && (e.state().Next.IsZero() || now.Before(e.state().Next)))
		if due || len(triggered[id]) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// scanActiveOf returns job id's active runs by scanning them all.
func scanActiveOf(pt *partition, id string) []string {
	var ids []string
	for rid, ar := range pt.active {
		if ar.run.JobID == id {
			ids = append(ids, rid)
		}
	}
	slices.Sort(ids)
	return ids
}

// scanFinished is finishedLocked by brute force.
func scanFinished(pt *partition, e *jobEntry, pending map[string]bool) bool {
	return e.spec.IsOneOff() && plannedLocked(e) && !e.stale && e.state().Next.IsZero() &&
		len(scanActiveOf(pt, e.spec.ID)) == 0 && !pending[e.spec.ID]
}

// scanNextEvent is the loop's next wake-up by brute force.
func scanNextEvent(pt *partition, now time.Time) (next time.Time, dispatchable bool) {
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, ar := range pt.active {
		switch {
		case ar.run.Status == api.RunRunning:
			earlier(ar.leaseUntil)
			if j := pt.jobs[ar.run.JobID]; j != nil && len(ar.run.Attempts) > 0 {
				earlier(ar.run.Attempts[len(ar.run.Attempts)-1].StartedAt.Add(j.spec.Timeout.Std() + pt.d.cfg.RunLease))
			}
		case now.Before(ar.notBefore):
			earlier(ar.notBefore)
		default:
			dispatchable = true
		}
	}
	pending := pt.pendingTriggersLocked()
	for _, e := range pt.jobs {
		if e.stale {
			continue
		}
		if !e.spec.Paused && e.sched.err == nil {
			earlier(e.state().Next)
		}
		if !scanFinished(pt, e, pending) {
			continue
		}
		if e.state().FinishedAt.IsZero() {
			earlier(now)
		} else if due, ok := pt.deletionDueLocked(e); ok {
			earlier(due)
		}
	}
	if t := scanNextExpiry(pt); !t.IsZero() {
		earlier(t.Add(time.Millisecond))
	}
	return next, dispatchable
}

// scanNextExpiry returns when the oldest final run of some job passes its
// max age, or the failing-runs entry of a dead run its window, by brute
// force.
func scanNextExpiry(pt *partition) time.Time {
	var next time.Time
	for id, jh := range pt.hist.jobs {
		r := pt.retentionLocked(id)
		if len(jh.final) == 0 || r.maxAge <= 0 {
			continue
		}
		if t := jh.final[0].time().Add(r.maxAge); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, it := range pt.hist.dead.items { // failing-runs entries of dead runs
		if t := it.at.Add(api.FailingWindow); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// scanFinish is the brute-force choice of deleteFinished: the job IDs it
// stamps finished and those it deletes.
func scanFinish(pt *partition, now time.Time) (stamps, doomed []string) {
	pending := pt.pendingTriggersLocked()
	for _, id := range slices.Sorted(maps.Keys(pt.jobs)) {
		if len(stamps)+len(doomed) >= trimLimit {
			break
		}
		e := pt.jobs[id]
		if !scanFinished(pt, e, pending) {
			continue
		}
		if e.state().FinishedAt.IsZero() {
			stamps = append(stamps, id)
		} else if due, ok := pt.deletionDueLocked(e); ok && !now.Before(due) {
			doomed = append(doomed, id)
		}
	}
	return stamps, doomed
}

func triggersByJob(pt *partition) map[string][]triggerReq {
	byJob := map[string][]triggerReq{}
	for _, t := range pt.triggers {
		if pt.jobs[t.id] != nil {
			byJob[t.id] = append(byJob[t.id], t)
		}
	}
	return byJob
}

// scanPlanTrim is history.planTrim's count and age rules by brute force:
// every job with runs, by ID.
func scanPlanTrim(pt *partition, now time.Time, limit int) []trim {
	var out []trim
	h := pt.hist
	for _, id := range slices.Sorted(maps.Keys(h.jobs)) {
		jh, r := h.jobs[id], pt.retentionLocked(id)
		runs := jh.runs
		for i := 0; i < len(jh.final) && len(out) < limit; i++ {
			fr := jh.final[i]
			var reason string
			switch {
			case runs > r.maxRuns:
				reason = trimMaxRuns
			case r.maxAge > 0 && now.Sub(fr.time()) > r.maxAge:
				reason = trimMaxAge
			}
			if reason == "" {
				break
			}
			out = append(out, trim{job: id, at: fr.time(), reason: reason})
			runs--
		}
	}
	return out
}

// checkIndex compares the index's answers with the scans'.
func checkIndex(t *rapid.T, pt *partition, now time.Time) {
	budget := int64(1 << 40) // the count and age rules only
	if got, want := pt.hist.planTrim(now, budget, trimLimit, nil, nil), scanPlanTrim(pt, now, trimLimit); !slices.Equal(got, want) {
		t.Fatalf("at %v the history trims %v, a scan of every job %v", now.Sub(indexT0), got, want)
	}
	for id := range pt.jobs {
		if got, want := pt.activeOfLocked(id), scanActiveOf(pt, id); !slices.Equal(got, want) {
			t.Fatalf("active runs of %s: got %v, want %v", id, got, want)
		}
	}
	for i, it := range pt.idx.fires.items {
		if e := pt.jobs[it.key]; e == nil || int(e.firePos) != i+1 {
			t.Fatalf("the index of fire times holds %s at %d, which its entry %+v does not say", it.key, i, e)
		}
	}
	for id, e := range pt.jobs {
		if e.firePos > 0 && (int(e.firePos) > len(pt.idx.fires.items) || pt.idx.fires.items[e.firePos-1].key != id) {
			t.Fatalf("job %s says it is at %d in the index of fire times, which does not hold it there", id, e.firePos-1)
		}
	}
	for id := range pt.idx.active {
		if len(scanActiveOf(pt, id)) == 0 {
			t.Fatalf("index lists active runs of %s, which has none", id)
		}
	}
	byJob := triggersByJob(pt)
	if got, want := pt.dueJobsLocked(now, byJob), scanDue(pt, now, byJob); !slices.Equal(got, want) {
		t.Fatalf("at %v the index plans %v, a scan of every job %v", now.Sub(indexT0), got, want)
	}
	got, gotDisp := pt.nextEventLocked(now)
	want, wantDisp := scanNextEvent(pt, now)
	// The index may wake the loop earlier than the scan would, for a
	// finished one-off job it cannot delete yet, never later, and never
	// at once for nothing.
	if gotDisp != wantDisp || (!got.Equal(want) && (got.IsZero() || (!want.IsZero() && got.After(want)) || !got.After(now))) {
		t.Fatalf("at %v: next event %v (dispatchable %v), scan says %v (%v)", now.Sub(indexT0), got.Sub(indexT0), gotDisp, want.Sub(indexT0), wantDisp)
	}
}

func TestJobIndexAgreesWithScan(t *testing.T) {
	var fired, stale, stamped, deleted int // over all cases: the test must reach every path
	defer func() {
		t.Logf("runs created %d, jobs gone stale %d, one-off jobs stamped finished %d and deleted %d", fired, stale, stamped, deleted)
		if fired == 0 || stale == 0 || stamped == 0 || deleted == 0 {
			t.Errorf("the random sequences missed a path")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		clock := clockwork.NewFakeClockAt(indexT0)
		pt := memPartition(clock)
		rev := int64(100)
		ids := []string{"a", "b", "c", "d", "e", "f"}
		failRate := rapid.IntRange(0, 30).Draw(t, "failPercent")
		fail := func() bool { return rapid.IntRange(0, 99).Draw(t, "fail") < failRate }
		pick := func(label string) string { return rapid.SampledFrom(ids).Draw(t, label) }

		// rapid's Repeat makes sequences too short for a one-off job to
		// fire, finish and outlive its retention: the steps are drawn here.
		actions := map[string]func(*rapid.T){
			"put job": func(t *rapid.T) {
				id := pick("id")
				now := clock.Now()
				j := api.Job{ID: id, Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}, CreatedAt: indexT0, UpdatedAt: now}
				switch rapid.IntRange(0, 3).Draw(t, "kind") {
				case 0:
					j.Schedule = fmt.Sprintf("@every %ds", rapid.IntRange(1, 40).Draw(t, "every"))
				case 1:
					j.Schedule = "*/2 * * * *"
				case 2:
					at := now.Add(time.Duration(rapid.IntRange(-60, 120).Draw(t, "runAt")) * time.Second)
					j.RunAt = &at
				}
				j.Paused = rapid.Bool().Draw(t, "paused")
				j.ConcurrencyPolicy = rapid.SampledFrom([]api.ConcurrencyPolicy{"", api.ConcurrencyForbid, api.ConcurrencyReplace}).Draw(t, "concurrency")
				j.MisfirePolicy = rapid.SampledFrom([]api.MisfirePolicy{"", api.MisfireSkip, api.MisfireRunAll}).Draw(t, "misfire")
				if j.IsOneOff() && rapid.Bool().Draw(t, "keepForever") {
					j.DeleteAfter = api.RetentionNever
				}
				if rapid.Bool().Draw(t, "ownHistory") {
					j.History.MaxRuns = rapid.IntRange(1, 5).Draw(t, "maxRuns")
					j.History.MaxAge = api.Duration(time.Duration(rapid.IntRange(1, 120).Draw(t, "maxAge")) * time.Second)
				}
				if rapid.Bool().Draw(t, "recreated") {
					j.CreatedAt = now
				}
				j.Normalize()
				if err := j.Validate(api.DefaultLimits()); err != nil {
					t.Fatalf("invalid job in the test: %v", err)
				}
				val, err := json.Marshal(j)
				if err != nil {
					t.Fatal(err)
				}
				rev++
				pt.apply(t.Context(), []*clientv3.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(pt.d.keys.Spec(0, id)), Value: val, ModRevision: rev}}})
			},
			"trigger": func(t *rapid.T) {
				id := pick("id")
				rev++
				key := pt.d.keys.Trigger(0, id, clock.Now())
				pt.apply(t.Context(), []*clientv3.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("{}"), ModRevision: rev}}})
			},
			"delete job": func(t *rapid.T) {
				pt.mu.Lock()
				pt.forgetJobLocked(pick("id"))
				pt.mu.Unlock()
			},
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(0, 60_000).Draw(t, "ms")) * time.Millisecond)
			},
			"fire": func(t *rapid.T) {
				now := clock.Now()
				pt.mu.Lock()
				defer pt.mu.Unlock()
				var batches []*fireBatch
				for q := pt.dueLocked(now); ; {
					b := pt.nextBatchLocked(q, now)
					if b == nil {
						break
					}
					batches = append(batches, b)
				}
				if len(batches) > 0 {
					pt.addTrimsLocked(batches, now)
				}
				for _, b := range batches {
					rev++
					if b.cmps != nil && fail() {
						// A job changed: the guard as a whole is refused,
						// and the batch sent again job by job (commitFires).
						b.perJob = true
						b.build(pt)
					}
					pt.appliedLocked(b, fakeResponse(b.ops, rev, fail), now)
					for _, jp := range b.jobs {
						fired += len(jp.created)
						if e := pt.jobs[jp.id]; e != nil && e.stale {
							stale++
						}
					}
				}
			},
			"run ends": func(t *rapid.T) {
				pt.mu.Lock()
				defer pt.mu.Unlock()
				if len(pt.active) == 0 {
					return
				}
				rid := rapid.SampledFrom(slices.Sorted(maps.Keys(pt.active))).Draw(t, "run")
				ar := pt.active[rid]
				r := ar.run
				r.Status = rapid.SampledFrom([]api.RunStatus{api.RunSucceeded, api.RunDead, api.RunFailed}).Draw(t, "status")
				rev++
				pt.updatedLocked(ar, runWrite{run: r, size: 200, at: clock.Now()}, rev, clock.Now().Add(time.Second))
			},
			"finish": func(t *rapid.T) {
				now := clock.Now()
				pt.mu.Lock()
				defer pt.mu.Unlock()
				wantStamps, wantDoomed := scanFinish(pt, now)
				fp := pt.planFinishLocked(now)
				var gotStamps, gotDoomed []string
				for _, s := range fp.stamps {
					gotStamps = append(gotStamps, s.id)
				}
				for _, d := range fp.doomed {
					gotDoomed = append(gotDoomed, d.e.spec.ID)
				}
				if !slices.Equal(gotStamps, wantStamps) || !slices.Equal(gotDoomed, wantDoomed) {
					t.Fatalf("finish: index stamps %v and deletes %v; a scan %v and %v", gotStamps, gotDoomed, wantStamps, wantDoomed)
				}
				if len(fp.ops) > 0 {
					rev++
					before := len(pt.jobs)
					pt.finishAppliedLocked(fp, fakeResponse(fp.ops, rev, fail))
					stamped += len(fp.stamps)
					deleted += before - len(pt.jobs)
				}
			},
		}
		names := slices.Sorted(maps.Keys(actions))
		for range 300 {
			actions[rapid.SampledFrom(names).Draw(t, "action")](t)
			pt.mu.Lock()
			checkIndex(t, pt, clock.Now())
			pt.mu.Unlock()
		}
	})
}

// TestTimerHeapOrder checks the heap against a sorted list under random
// sets and removals.
func TestTimerHeapOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newTimerHeap()
		want := map[string]time.Time{}
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				at := indexT0.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "s")) * time.Second)
				h.set(k, at)
				want[k] = at
			},
			"remove": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				h.remove(k)
				delete(want, k)
			},
			"": func(t *rapid.T) {
				if h.len() != len(want) {
					t.Fatalf("len %d, want %d", h.len(), len(want))
				}
				now := indexT0.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "now")) * time.Second)
				var got, due []string
				var after, first time.Time
				for k, at := range want {
					if !at.After(now) {
						due = append(due, k)
					} else if after.IsZero() || at.Before(after) {
						after = at
					}
					if first.IsZero() || at.Before(first) {
						first = at
					}
				}
				gotAfter := h.due(now, func(k string, _ time.Time) { got = append(got, k) })
				slices.Sort(got)
				slices.Sort(due)
				if !slices.Equal(got, due) || !gotAfter.Equal(after) {
					t.Fatalf("due at %v: %v then %v; want %v then %v", now, got, gotAfter, due, after)
				}
				if m, ok := h.min(); ok != (len(want) > 0) || !m.Equal(first) {
					t.Fatalf("min %v %v, want %v", m, ok, first)
				}
			},
		})
	})
}
