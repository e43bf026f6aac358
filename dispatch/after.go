package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// This file has job-to-job dependencies ("after"; docs/ownership.md has
// the protocol). The upstream run's owner writes a hand-over key into the
// downstream job's partition (store.Keys.Handover) in the fenced write
// that records the run's final status, one per downstream job whose
// entry lists that status, as the dependency index (DependencyCache)
// says. The downstream partition's owner takes hand-overs in as trigger
// requests of its job (load, and the spec watch, which sees them under
// the job's key) and fires each once: its run is created only if absent
// and only while the hand-over key exists, which the same write deletes.

// DependencySource is what the scheduler reads of the dependency index
// (DependencyCache provides it): the jobs that run after job up, each
// with the states that fire it.
type DependencySource interface {
	Downstream(up string) []api.Dependency
}

// DependencyCache holds the dependency index (store.Keys.DepsPrefix),
// kept current by a watch of its prefix (internal/mirror: list, then
// watch, listing again after compaction or a lost connection), so that
// an upstream run's owner finds the jobs to hand its end over to in
// memory. Safe for concurrent use.
type DependencyCache struct {
	m    *mirror.Mirror
	keys store.Keys
	lg   *zap.Logger

	mu   sync.Mutex                  // guards rev and down
	rev  int64                       // the mirror revision down was built from
	down map[string][]api.Dependency // by upstream job ID, sorted by downstream job ID
}

// NewDependencyCache returns a cache of the dependency index of
// namespace ns. It starts nothing: Run keeps it current. A nil logger
// logs nothing.
func NewDependencyCache(client *clientv3.Client, ns string, lg *zap.Logger) (*DependencyCache, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	k := store.Keys{NS: ns}
	m, err := mirror.New(client, mirror.Config{Prefix: k.DepsPrefix(), Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("dispatch: dependencies: %w", err)
	}
	return &DependencyCache{m: m, keys: k, lg: lg}, nil
}

// Run keeps the cache current until ctx is cancelled, then returns nil.
func (c *DependencyCache) Run(ctx context.Context) error { return c.m.Run(ctx) }

// Downstream returns the jobs that run after job up as of the latest
// snapshot, sorted by ID; none before the first list completed. The
// slice must not be modified.
func (c *DependencyCache) Downstream(up string) []api.Dependency {
	snap := c.m.Snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap.Revision != c.rev {
		down := map[string][]api.Dependency{}
		for key, kv := range snap.KVs {
			u, d, ok := c.keys.ParseDep(c.keys.DepsPrefix() + key)
			if !ok {
				continue
			}
			var e store.DepEdge
			if err := json.Unmarshal(kv.Value, &e); err != nil {
				c.lg.Warn("ignoring a corrupt dependency", zap.String("key", key), zap.Error(err))
				continue
			}
			down[u] = append(down[u], api.Dependency{Job: d, On: e.On})
		}
		for _, ds := range down {
			sort.Slice(ds, func(i, j int) bool { return ds[i].Job < ds[j].Job })
		}
		c.rev, c.down = snap.Revision, down
	}
	return c.down[up]
}

// WaitRevision blocks until the cache reflects etcd revision rev, or
// returns ctx's error.
func (c *DependencyCache) WaitRevision(ctx context.Context, rev int64) error {
	_, err := c.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return s.Revision >= rev })
	return err
}

// handoverOps returns the writes that hand run r's end over to the jobs
// that run after its job on r's status: one hand-over key each, in its
// downstream job's partition. r has just become final; the caller writes
// them with r's status, in the same compare-and-swap.
func (pt *partition) handoverOps(r api.Run, now time.Time) []clientv3.Op {
	src := pt.d.cfg.Dependencies
	if src == nil || !r.Status.Final() {
		return nil
	}
	var ops []clientv3.Op
	for _, d := range src.Downstream(r.JobID) {
		if !d.Fires(r.Status) {
			continue
		}
		h := store.Handover{Cause: api.RunCause{Job: r.JobID, Run: r.ID, Status: r.Status}, At: r.ScheduledAt, CreatedAt: now.UTC()}
		b, err := json.Marshal(h)
		if err != nil {
			continue
		}
		p := shard.Partition(d.Job, pt.d.cfg.Partitions)
		ops = append(ops, clientv3.OpPut(pt.d.keys.Handover(p, d.Job, r.ID), string(b)))
	}
	if len(ops) > 0 {
		pt.lg.Debug("run end handed over", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.Int("downstream", len(ops)))
	}
	return ops
}

// handoverOf returns the hand-over stored as kv, of job key jk, as a
// trigger request of its job; ok is false for a value that does not
// decode (it is dropped, as a trigger of a job that is gone).
func (pt *partition) handoverOf(jk store.JobKey, kv *mvccpb.KeyValue) (triggerReq, bool) {
	var h store.Handover
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.Cause.Run != jk.UpRun || h.At.IsZero() {
		pt.lg.Warn("hand-over does not decode; dropping it", zap.ByteString("key", kv.Key), zap.Error(err))
		return triggerReq{id: jk.JobID, key: string(kv.Key), cause: &api.RunCause{}}, false
	}
	c := h.Cause
	return triggerReq{id: jk.JobID, at: h.At.UTC().Truncate(time.Millisecond), key: string(kv.Key), cause: &c}, true
}

// takeHandover adds kv, a key of the partition's jobs read by a load, to
// triggers if it is a hand-over, and reports whether it was.
func (pt *partition) takeHandover(kv *mvccpb.KeyValue, triggers *[]triggerReq) bool {
	jk, ok := pt.d.keys.ParseJobKey(pt.p, string(kv.Key))
	if !ok || jk.Kind != store.KeyHandover {
		return false
	}
	t, _ := pt.handoverOf(jk, kv)
	*triggers = append(*triggers, t)
	return true
}

// applyHandoverLocked applies a watch event of a hand-over key of job
// key jk: a put is queued for the next tick, a deletion (by this owner
// once fired, or with its job) forgotten.
func (pt *partition) applyHandoverLocked(jk store.JobKey, ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	if ev.Type != mvccpb.PUT {
		delete(pt.triggers, key)
		return
	}
	if _, held := pt.triggers[key]; held {
		return // known already (its time may have moved on: handoverTimeLocked)
	}
	t, _ := pt.handoverOf(jk, ev.Kv)
	pt.triggers[key] = t
	if e := pt.jobs[jk.JobID]; e != nil {
		e.stale = false
		pt.indexLocked(jk.JobID)
	}
}

// handoverDue reports what to do now with hand-over t of job e: fire it
// (fire), keep it for later (e is paused: hand-overs wait until it is
// resumed), or drop it (neither: e's after no longer fires on that
// upstream job and status, or the hand-over did not decode).
func handoverDue(e *jobEntry, t triggerReq) (fire, keep bool) {
	if t.cause.Run == "" {
		return false, false
	}
	if _, ok := api.AfterFires(e.spec.controls().After, t.cause.Job, t.cause.Status); !ok {
		return false, false
	}
	if e.paused() {
		return false, true
	}
	return true, false
}

// handoverTimeLocked returns the scheduled time for hand-over t of job
// id: its upstream run's scheduled time, or the first millisecond after
// it for which id has no run known to memory (active, stored, or planned
// in plan), so that a job after two upstream jobs of one schedule gets a
// run for each.
func (pt *partition) handoverTimeLocked(id string, at time.Time, plan FirePlan) time.Time {
	for range 1000 {
		rid := store.RunID(id, at)
		taken := pt.active[rid] != nil || slices.ContainsFunc(plan.Runs, func(r api.Run) bool { return r.ID == rid })
		if jh := pt.hist.jobs[id]; !taken && jh != nil {
			_, taken = slices.BinarySearchFunc(jh.final, at.UnixNano(), func(s storedRun, t int64) int { return cmp.Compare(s.at, t) })
		}
		if !taken {
			return at
		}
		at = at.Add(time.Millisecond)
	}
	return at
}

// handoverReason is the reason recorded on a run a hand-over fired.
func handoverReason(c *api.RunCause, r api.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "after %s: run %s %s", api.QuoteClipped(c.Job), c.Run, c.Status)
	if r.Status == api.RunSkipped && r.Reason != ReasonTriggered {
		b.WriteString(strings.TrimPrefix(r.Reason, ReasonTriggered))
	}
	return b.String()
}

// handoverRefusedLocked handles a run c of a hand-over whose creation
// did not apply (created is its response): if the hand-over is still
// stored, the run's time was taken by a run memory did not know, and the
// hand-over is tried again at the next millisecond; if not, an earlier
// write of this owner, whose answer was lost, consumed it and created
// its run, and nothing is left to do.
func (pt *partition) handoverRefusedLocked(c createdRun, created *etcdserverpb.TxnResponse) {
	if len(created.Responses) == 0 || created.Responses[0].GetResponseRange().GetCount() == 0 {
		pt.lg.Info("hand-over fired already", zap.String("job_id", c.run.JobID), zap.String("caused_by", c.trigger.cause.Run))
		return
	}
	t := c.trigger
	t.at = c.run.ScheduledAt.Add(time.Millisecond)
	pt.triggers[t.key] = t
	pt.lg.Info("hand-over's run time is taken; trying the next millisecond", zap.String("job_id", c.run.JobID),
		zap.String("run_id", c.run.ID), zap.String("caused_by", t.cause.Run))
	pt.poke()
}

// WaitDependencies blocks until the member's dependency index reflects
// etcd revision rev (a job's stored revision: its edges are written with
// its spec), or returns ctx's error; at once without an index, or with
// one other than a DependencyCache.
func (d *Dispatcher) WaitDependencies(ctx context.Context, rev int64) error {
	c, ok := d.cfg.Dependencies.(*DependencyCache)
	if !ok {
		return nil
	}
	return c.WaitRevision(ctx, rev)
}
