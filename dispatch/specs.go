package dispatch

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// jobEntry is a job as its partition's scheduler holds it.
type jobEntry struct {
	// spec is what the scheduler keeps of the job's spec; work the rest a
	// worker needs, encoded.
	spec     jobSpec
	work     compactedWork
	sched    schedule.Schedule
	schedErr error // the spec's schedule does not parse (should not happen: validated)
	state    store.JobState
	dirty    bool // state changed in memory without a fire; persist with the next write
	// stale is set when a write guarded on the spec's revision was refused
	// (the job changed in etcd, or got a trigger request, meanwhile):
	// nothing is planned for the job until the watch brings the change.
	stale bool
	// docPaused is the spec document's own "paused". pause is the job's
	// pause key (store.PauseKey; zero without one, or if it does not
	// decode), which decides instead while it is newer than the spec
	// (store.PauseKey.Applies); pauseRev is the key's mod revision (0:
	// none), which every write guarded on the spec compares too.
	// spec.Paused is what applies (setPaused).
	docPaused bool
	pause     store.PauseKey
	pauseRev  int64
}

// setPaused sets spec.Paused from the document and the pause key.
func (e *jobEntry) setPaused() {
	e.spec.Paused = e.docPaused
	if e.pause.Applies(e.spec.Revision) {
		e.spec.Paused = e.pause.Paused
	}
}

// setPauseKey takes in the job's pause key kv (nil: it has none).
func (e *jobEntry) setPauseKey(kv *mvccpb.KeyValue) {
	e.pause, e.pauseRev = store.PauseKey{}, 0
	if kv != nil {
		e.pauseRev = kv.ModRevision
		if pk, err := store.DecodePause(kv.Value, kv.ModRevision); err == nil {
			e.pause = pk
		}
	}
	e.setPaused()
}

// triggerReq is a trigger request not yet fired: its job, its time and
// its key.
type triggerReq struct {
	id  string
	at  time.Time
	key string
}

// apply handles spec, trigger and request changes. Trigger requests are
// queued for the next tick, which fires them with the scheduled fires;
// cancel requests too (requests.go).
func (pt *partition) apply(ctx context.Context, events []*clientv3.Event) {
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	k := pt.d.keys
	for _, ev := range events {
		if id, ok := k.ParsePauseKey(pt.p, string(ev.Kv.Key)); ok {
			pt.applyPause(id, ev)
			continue
		}
		id, at, ok := k.ParseSpecKey(pt.p, string(ev.Kv.Key))
		if !ok {
			pt.mu.Lock()
			pt.applyRequestLocked(ev)
			pt.mu.Unlock()
			continue
		}
		switch {
		case !at.IsZero() && ev.Type == mvccpb.PUT:
			pt.mu.Lock()
			pt.triggers[string(ev.Kv.Key)] = triggerReq{id: id, at: at, key: string(ev.Kv.Key)}
			if e := pt.jobs[id]; e != nil {
				e.stale = false
				pt.indexLocked(id)
			}
			pt.mu.Unlock()
		case !at.IsZero():
			// our own deletion of a consumed trigger, or the API's along
			// with the job's
			pt.mu.Lock()
			delete(pt.triggers, string(ev.Kv.Key))
			pt.mu.Unlock()
		case ev.Type == mvccpb.DELETE:
			pt.mu.Lock()
			known := pt.jobs[id] != nil || pt.hist.jobs[id] != nil
			pt.mu.Unlock()
			if !known {
				continue // deleted by this owner (a finished one-off job), or never loaded
			}
			pt.lg.Info("job deleted; removing its state and runs", zap.String("job_id", id))
			pt.deleteJobData(ctx, id)
		default:
			e := pt.entryFromKV(ev.Kv)
			if e == nil {
				continue
			}
			pt.mu.Lock()
			if old := pt.jobs[id]; old != nil {
				e.state = old.state
				// The pause key stays (the document, newer, decides
				// now); a put of the job deletes it in the same revision.
				e.pause, e.pauseRev = old.pause, old.pauseRev
				e.setPaused()
				if old.spec.Paused && !e.spec.Paused {
					e.state = Resumed(e.state, pt.now())
					e.dirty = true
				}
				if !old.spec.CreatedAt.Equal(e.spec.CreatedAt) { // deleted and created again
					e.state = store.JobState{}
				}
			}
			pt.jobs[e.internID(id)] = e
			pt.indexLocked(id)
			pt.mu.Unlock()
		}
	}
}

// applyPause handles a change of job id's pause key: the job is paused
// or resumed, as a change of its spec's "paused" would. The caller holds
// wmu.
func (pt *partition) applyPause(id string, ev *clientv3.Event) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	e := pt.jobs[id]
	if e == nil {
		return // deleted with its job, or the job is not loaded
	}
	was := e.spec.Paused
	kv := ev.Kv
	if ev.Type == mvccpb.DELETE {
		kv = nil
	}
	e.setPauseKey(kv)
	if was && !e.spec.Paused {
		e.state = Resumed(e.state, pt.now())
		e.dirty = true
	}
	if was != e.spec.Paused {
		pt.lg.Debug("job paused or resumed", zap.String("job_id", id), zap.Bool("paused", e.spec.Paused))
	}
	e.stale = false
	pt.indexLocked(id)
}

// internID makes the entry's ID the string id, equal to it, so that the
// maps keyed by id and the entry share one copy; it returns id.
func (e *jobEntry) internID(id string) string {
	if e.spec.ID == id {
		e.spec.ID = id
	}
	return id
}

func (pt *partition) entryFromKV(kv *mvccpb.KeyValue) *jobEntry {
	e, err := decodeEntry(kv)
	switch {
	case e == nil:
		pt.lg.Warn("ignoring corrupt job spec", zap.ByteString("key", kv.Key), zap.Error(err))
		return nil
	case err != nil:
		pt.lg.Warn("ignoring job spec whose executor does not encode", zap.ByteString("key", kv.Key), zap.Error(err))
		return nil
	case e.schedErr != nil:
		pt.lg.Warn("job schedule does not parse; not scheduling it", zap.String("job_id", e.spec.ID), zap.Error(e.schedErr))
	}
	return e
}

// decodeEntry decodes a spec key's value into a job entry, without its
// state. It returns nil and the error for a value that does not decode,
// an entry without work and the error for an executor that does not
// encode, and an entry with schedErr set for a schedule that does not
// parse.
func decodeEntry(kv *mvccpb.KeyValue) (*jobEntry, error) {
	j, err := store.DecodeStoredJob(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, err
	}
	work, err := compactWork(&j)
	if err != nil {
		return &jobEntry{spec: specOf(&j), docPaused: j.Paused}, err
	}
	e := &jobEntry{spec: specOf(&j), work: work, docPaused: j.Paused}
	e.sched, e.schedErr = j.ParseSchedule()
	return e, nil
}
