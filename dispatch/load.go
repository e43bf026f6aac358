package dispatch

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap"
)

// load reads the partition's specs, triggers, states, active runs and
// failing-runs index entries at one revision and returns that revision.
// It is a writer (it replaces the partition's memory and removes the data
// of deleted jobs): handlers of a partition being reloaded wait for it.
//
// The first load of an ownership reads them from this member's warm
// standby copy of the partition if it holds one that has caught up with
// the ownership's epoch (package dispatch/standby), else from etcd (paged
// reads, pages.go); both go through loadFrom, which builds the memory. A later load of the same ownership
// (its spec watch ended) always reads etcd: this member has written the
// partition since the epoch, and a copy that caught up with the epoch
// may not have seen those writes yet (a member can hold a copy of a
// partition it owns: the ring made it the heir while the handoff is
// pending, or gave the partition back before it).
func (pt *partition) load(ctx context.Context) (int64, error) {
	sb := pt.d.warm()
	if pt.loaded {
		sb.Skip(pt.p)
	} else if c := sb.Take(ctx, pt.p, pt.own.Epoch); c != nil {
		rev, err := pt.loadFrom(ctx, c.Scan, c.Decoded)
		if err == nil {
			pt.loaded = true
			sb.Loaded(true)
			return rev, nil
		}
		pt.lg.Warn("loading the standby copy failed; reading etcd", zap.Error(err))
	}
	sb.Loaded(false)
	rev, err := pt.loadFrom(ctx, pt.rangePages, nil)
	if err == nil {
		pt.loaded = true
	}
	return rev, err
}

// loadSource is where load reads a partition's keys: it calls fn for
// every key under prefix, in key order, as of revision rev, or, if rev is
// 0, as of a revision it chooses and returns. A source that reads etcd
// reads at most page keys per request. pt.rangePages reads etcd; a
// standby copy (standby.Snapshot.Scan) reads memory.
type loadSource func(ctx context.Context, prefix string, rev int64, page int64, fn func(kv *mvccpb.KeyValue)) (int64, error)

// loadFrom is load from src: every rule of what the memory holds (orphans,
// jobs deleted and created again, failing entries, history) is here, for
// both sources. decoded, if not nil, returns a spec key's job entry
// decoded already (a standby copy decodes specs as they come), or nil:
// then loadFrom decodes it.
func (pt *partition) loadFrom(ctx context.Context, src loadSource, decoded func(kv *mvccpb.KeyValue) *jobEntry) (int64, error) {
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	k := pt.d.keys
	jobs := map[string]*jobEntry{}
	var triggers []triggerReq
	cancels, backfills, retries := map[string]cancelReq{}, map[string]*backfillJob{}, map[string]retryReq{}
	pauses := map[string]*mvccpb.KeyValue{}
	rev, err := src(ctx, k.PartitionJobsPrefix(pt.p), 0, loadPage, func(kv *mvccpb.KeyValue) {
		if id, ok := k.ParsePauseKey(pt.p, string(kv.Key)); ok {
			pauses[id] = kv
			return
		}
		id, at, ok := k.ParseSpecKey(pt.p, string(kv.Key))
		switch {
		case !ok && pt.takeHandover(kv, &triggers):
		case !ok && pt.takeRequest(kv, cancels, backfills, retries):
		case !ok:
			pt.lg.Warn("ignoring unexpected key", zap.ByteString("key", kv.Key))
		case !at.IsZero():
			triggers = append(triggers, pt.triggerOf(id, at, kv))
		default:
			var e *jobEntry
			if decoded != nil {
				e = decoded(kv)
			}
			if e == nil {
				e = pt.entryFromKV(kv)
			}
			if e != nil {
				jobs[e.internID(id)] = e
			}
		}
	})
	if err != nil {
		return 0, err
	}
	for id, kv := range pauses {
		if e := jobs[id]; e != nil {
			e.setPauseKey(kv)
		}
	}
	var orphans []string           // deleted jobs whose state or queue entries remain
	orphaned := map[string]bool{}  // the same, as a set
	recreated := map[string]bool{} // jobs whose state is an earlier job's of the same ID
	_, err = src(ctx, k.StatePrefix(pt.p), rev, loadPage, func(kv *mvccpb.KeyValue) {
		esc := string(kv.Key[len(k.StatePrefix(pt.p)):])
		id, err := api.UnescapeID(esc)
		if err != nil {
			return
		}
		e := jobs[id]
		if e == nil {
			orphaned[id] = true
			orphans = append(orphans, id)
			return
		}
		var st api.JobState
		if err := json.Unmarshal(kv.Value, &st); err != nil {
			pt.lg.Warn("corrupt job state; starting afresh", zap.String("job_id", id), zap.Error(err))
			st = api.JobState{}
		}
		e.setState(st)
		if last := st.Last; !last.IsZero() && last.Before(e.spec.InitialLast()) {
			// A state older than its job is that of an earlier job of the
			// same ID, deleted and created again while the partition had
			// no owner: the new job starts afresh, and the earlier job's
			// runs go (the new job has none yet: every fire writes the
			// state along with its runs).
			e.setState(api.JobState{})
			recreated[id] = true
		}
	})
	if err != nil {
		return 0, err
	}
	queued := map[string]bool{} // run keys with a queue entry: the active runs
	_, err = src(ctx, k.QueuePrefix(pt.p), rev, loadPage, func(kv *mvccpb.KeyValue) {
		id, at, ok := k.ParseQueueKey(pt.p, string(kv.Key))
		if !ok {
			return
		}
		if jobs[id] == nil || recreated[id] {
			if jobs[id] == nil && !orphaned[id] {
				orphaned[id] = true
				orphans = append(orphans, id)
			}
			return
		}
		queued[k.Run(pt.p, id, at)] = true
	})
	if err != nil {
		return 0, err
	}
	// The failing-runs index entries, whose bytes count as their runs'.
	// Those of other jobs go with their data.
	entries := map[string]failingEntry{} // by run key
	_, err = src(ctx, k.FailingPrefix(pt.p), rev, loadPage, func(kv *mvccpb.KeyValue) {
		id, at, ok := k.ParseFailingKey(pt.p, string(kv.Key))
		if !ok {
			return
		}
		if e := jobs[id]; e == nil || recreated[id] {
			return
		}
		var f api.FailingRun
		err := json.Unmarshal(kv.Value, &f)
		entries[k.Run(pt.p, id, at)] = failingEntry{job: jobs[id].spec.ID, at: at, when: f.At, size: len(kv.Key) + len(kv.Value),
			dead: err != nil || f.Status == api.RunDead} // a corrupt entry goes as if its run died long ago
	})
	if err != nil {
		return 0, err
	}
	active, hist, err := pt.loadRuns(ctx, src, rev, func(id string) (string, bool) {
		if e := jobs[id]; e != nil && !recreated[id] {
			return e.spec.ID, true
		}
		return "", false
	}, queued, entries)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e.dead {
			hist.died(e.job, e.at, e.when, e.size) // a day after it died, it goes (trimHistory)
		}
	}

	pending := make(map[string]triggerReq, len(triggers))
	for _, t := range triggers {
		pending[t.key] = t
	}
	pt.mu.Lock()
	pt.jobs, pt.active, pt.triggers, pt.closed = jobs, active, pending, false
	pt.cancelled, pt.takeBacks, pt.unread, pt.hist = map[chainKey]cancelledAttempt{}, map[chainKey]undelivered{}, map[string]api.Run{}, hist
	pt.cancels, pt.backfills, pt.retries = cancels, backfills, retries
	pt.reindexLocked()
	pt.mu.Unlock()
	lvl := zap.DebugLevel // most partitions of a small fleet are empty: keep the log readable
	if len(jobs)+len(active)+len(triggers) > 0 {
		lvl = zap.InfoLevel
	}
	source := "etcd"
	if decoded != nil {
		source = "standby copy"
	}
	pt.lg.Log(lvl, "partition loaded", zap.String("from", source), zap.Int("jobs", len(jobs)), zap.Int("active_runs", len(active)), zap.Int("triggers", len(triggers)),
		zap.Int("runs", hist.runs), zap.Int64("history_bytes", hist.bytes), zap.Int64("revision", rev))

	for _, id := range orphans {
		pt.deleteJobData(ctx, id)
	}
	for _, id := range slices.Sorted(maps.Keys(recreated)) {
		pt.lg.Info("job was deleted and created again while the partition had no owner; removing the earlier job's state and runs", zap.String("job_id", id))
		pt.removeJobData(ctx, id)
	}
	return rev, nil
}

// failingEntry is a failing-runs index entry read by load.
type failingEntry struct {
	job      string
	at, when time.Time // the run's scheduled time; when it got its status
	size     int       // bytes of key and value
	dead     bool
}

// loadRuns reads the partition's run documents at revision rev from src, in pages:
// it accounts every run of a job keep accepts in a history (under the
// job ID keep returns, so that the partition holds one copy of each ID),
// with the bytes of its failing-runs entry if it has one (entries, by run
// key), and decodes the runs with a queue entry (queued, by run key) into
// the active runs.
// Runs of other jobs (deleted, or of an earlier job of the same ID) are
// left for the removal of their job's data.
func (pt *partition) loadRuns(ctx context.Context, src loadSource, rev int64, keep func(id string) (string, bool), queued map[string]bool, entries map[string]failingEntry) (map[string]*activeRun, *history, error) {
	k := pt.d.keys
	now := pt.now()
	active := map[string]*activeRun{}
	hist := newHistory(pt.retentionLocked) // touched again once pt.jobs is the loaded jobs (reindexLocked)
	_, err := src(ctx, k.PartitionRunsPrefix(pt.p), rev, loadRunsPage, func(kv *mvccpb.KeyValue) {
		id, at, ok := k.ParseRunKey(pt.p, string(kv.Key))
		if !ok {
			return
		}
		if id, ok = keep(id); !ok {
			return
		}
		size := len(kv.Value) + entries[string(kv.Key)].size
		if !queued[string(kv.Key)] {
			hist.created(id, at, size, true)
			if runIsDead(kv.Value) {
				hist.markDead(id, at) // its job's floor may keep it
			}
			return
		}
		var run api.Run
		if err := json.Unmarshal(kv.Value, &run); err != nil {
			pt.lg.Warn("ignoring corrupt run", zap.ByteString("key", kv.Key), zap.Error(err))
			hist.created(id, at, size, true) // trimmed in time
			return
		}
		hist.created(id, at, size, run.Status.Final())
		if run.Status == api.RunDead {
			hist.markDead(id, at)
		}
		if run.Status.Final() {
			return
		}
		// Attempts in flight under the previous owner keep running: their
		// workers heartbeat here once redirected. Give them a full lease.
		active[run.ID] = newActiveRun(run, kv.ModRevision, size, now, pt.d.cfg.RunLease)
	})
	if err != nil {
		return nil, nil, err
	}
	return active, hist, nil
}
