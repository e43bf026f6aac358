package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// jobEntry is a job as its partition's scheduler holds it.
type jobEntry struct {
	// spec is what the scheduler keeps of the job's spec; work the rest a
	// worker needs, encoded.
	spec jobSpec
	work compactedWork
	// sched is the spec's parsed schedule, and the error if it does not
	// parse (should not happen: validated); never nil, shared by the jobs
	// with the same schedule and zone (jobScheduleOf).
	sched *jobSchedule
	st    heldState // the job's state (state, setState)
	dirty bool      // state changed in memory without a fire; persist with the next write
	// stale is set when a write guarded on the spec's revision was refused
	// (the job changed in etcd, or got a trigger request, meanwhile):
	// nothing is planned for the job until the watch brings the change.
	stale bool
	// docPaused is the spec document's own "paused". pause is the job's
	// pause key (nil without one: most jobs have none; never modified
	// once held), which decides instead while it decoded and is newer
	// than the spec (store.PauseKey.Applies); its mod revision is what
	// every write guarded on the spec compares too (pauseRev). spec.Paused
	// is what applies (setPaused).
	docPaused bool
	// firePos is the entry's position in its partition's index of fire
	// times (jobIndex.fires) plus one; 0 while it is not in it. (Beside
	// the flags, where it takes no room of its own.)
	firePos int32
	pause   *heldPause
}

// heldPause is a job's pause key as its owner holds it: the key, and
// whether it decoded (a corrupt key decides nothing, but writes compare
// its revision).
type heldPause struct {
	store.PauseKey
	decoded bool
}

// pauseRev returns the mod revision of the job's pause key, 0 for none.
func (e *jobEntry) pauseRev() int64 {
	if e.pause == nil {
		return 0
	}
	return e.pause.Revision
}

// pauseApplies reports whether the job's pause key decides its pause
// state: it has one that decoded, newer than its spec.
func (e *jobEntry) pauseApplies() bool {
	return e.pause != nil && e.pause.decoded && e.pause.Applies(e.spec.Revision)
}

// revision is the job's revision as reads show it (store.PauseKey.Apply):
// its pause key's if that decides, else its spec's. The state records
// it (SpecRevision), and the owner's pause holds at it
// (JobState.AutoPaused).
func (e *jobEntry) revision() int64 {
	if e.pauseApplies() {
		return e.pause.Revision
	}
	return e.spec.Revision
}

// job returns the job for the decision functions (jobSpec.job) as reads
// show it: its revision, and the later of its spec's and its pause key's
// updated_at, so that a resume bounds what the owner plans as an edit
// does (PlanFrom).
func (e *jobEntry) job() api.Job {
	j := e.spec.job()
	j.Revision = e.revision()
	if e.pauseApplies() && e.pause.UpdatedAt.After(j.UpdatedAt) {
		j.UpdatedAt = e.pause.UpdatedAt
	}
	return j
}

// resumedAt returns when the job was last resumed by its pause key (a
// key saying "not paused" that decides), and false if it was not.
func (e *jobEntry) resumedAt() (time.Time, bool) {
	if !e.pauseApplies() || e.pause.Paused {
		return time.Time{}, false
	}
	return e.pause.UpdatedAt, true
}

// setPaused sets spec.Paused from the document and the pause key.
func (e *jobEntry) setPaused() {
	e.spec.Paused = e.docPaused
	if e.pauseApplies() {
		e.spec.Paused = e.pause.Paused
	}
}

// setPauseKey takes in the job's pause key kv (nil: it has none).
func (e *jobEntry) setPauseKey(kv *mvccpb.KeyValue) {
	e.pause = nil
	if kv != nil {
		pk, err := store.DecodePause(kv.Value, kv.ModRevision)
		pk.Revision = kv.ModRevision
		e.pause = &heldPause{PauseKey: pk, decoded: err == nil}
	}
	e.setPaused()
}

// triggerReq is a trigger request not yet fired: its job, its time, its
// key, and the payload it gives its run (nil: the job's); or a hand-over
// of an upstream run's end (cause).
type triggerReq struct {
	id      string
	at      time.Time
	key     string
	payload json.RawMessage
	// cause is set on a hand-over of an upstream run's end (after.go):
	// the run it fires records it; at is then the time to try next.
	cause *api.RunCause
}

// triggerOf returns the trigger request stored as kv, of job id for time
// at. A value that does not decode (it was checked when it was stored)
// gives the job's payload.
func (pt *partition) triggerOf(id string, at time.Time, kv *mvccpb.KeyValue) triggerReq {
	t := triggerReq{id: id, at: at, key: string(kv.Key)}
	if len(kv.Value) > 0 {
		var req api.TriggerRequest
		if err := json.Unmarshal(kv.Value, &req); err != nil {
			pt.lg.Warn("trigger request does not decode; its run takes the job's payload", zap.String("job_id", id), zap.ByteString("key", kv.Key), zap.Error(err))
		}
		t.payload = req.Payload
	}
	return t
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
			pt.triggers[string(ev.Kv.Key)] = pt.triggerOf(id, at, ev.Kv)
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
				e.st = old.st
				// The pause key stays (the document, newer, decides
				// now); a put of the job deletes it in the same revision.
				e.pause = old.pause
				e.setPaused()
				if old.paused() && !e.paused() {
					e.setState(Resumed(e.state(), pt.now()))
					e.dirty = true
				}
				if !old.spec.CreatedAt().Equal(e.spec.CreatedAt()) { // deleted and created again
					e.setState(api.JobState{})
				}
			}
			pt.setJobLocked(e.internID(id), e)
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
	was, wasPaused := e.spec.Paused, e.paused()
	kv := ev.Kv
	if ev.Type == mvccpb.DELETE {
		kv = nil
	}
	e.setPauseKey(kv)
	if wasPaused && !e.paused() {
		e.setState(Resumed(e.state(), pt.now()))
		e.dirty = true
	}
	if was != e.spec.Paused {
		pt.lg.Debug("job paused or resumed", zap.String("job_id", id), zap.Bool("paused", e.spec.Paused))
	}
	e.stale = false
	pt.indexLocked(id)
}

// internID returns the string the maps keyed by job id and the entry
// share: the entry's own ID, decoded from its spec, when it equals id,
// else a copy of id. id is parsed from the spec's key and points into
// the whole key (namespace, partition and escaped ID): kept, it held
// every resident job's key, about 50 bytes more than its ID.
func (e *jobEntry) internID(id string) string {
	if e.spec.ID == id {
		return e.spec.ID
	}
	return strings.Clone(id)
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
	case e.sched.err != nil:
		pt.lg.Warn("job schedule does not parse; not scheduling it", zap.String("job_id", e.spec.ID), zap.Error(e.sched.err))
	}
	return e
}

// decodeEntry decodes a spec key's value into a job entry, without its
// state. It returns nil and the error for a value that does not decode,
// an entry without work and the error for an executor that does not
// encode, and an entry whose sched.err is set for a schedule that does not
// parse.
func decodeEntry(kv *mvccpb.KeyValue) (*jobEntry, error) {
	j, err := store.DecodeStoredJob(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, err
	}
	work, err := compactWork(&j)
	if err != nil {
		return &jobEntry{spec: specOf(&j), sched: &noSchedule, docPaused: j.Paused}, err
	}
	return &jobEntry{spec: specOf(&j), work: work, sched: jobScheduleOf(&j), docPaused: j.Paused}, nil
}

// jobSchedule is a job's parsed schedule as its entry holds it, with the
// error if the schedule does not parse. It is never modified once made:
// the entries of jobs with the same schedule and zone share one
// (jobScheduleOf), so it is safe for concurrent reads.
type jobSchedule struct {
	schedule.Schedule
	err error
}

// noSchedule is the schedule of an entry without one (its executor did
// not encode): it never fires.
var noSchedule jobSchedule

// scheduleKey is what a shared jobSchedule is parsed from: a recurring
// schedule and its zone, without bounds or jitter.
type scheduleKey struct{ spec, zone string }

// schedules holds the shared jobSchedules by what they were parsed from.
var schedules interner[scheduleKey, jobSchedule]

// jobScheduleOf returns j's parsed schedule (api.Job.ParseSchedule): the
// one every resident job with the same recurring schedule and zone holds
// when j has neither bounds nor jitter nor a run_at (most jobs), else one
// of its own. A schedule that does not parse is not shared (its error
// names the job).
func jobScheduleOf(j *api.Job) *jobSchedule {
	parse := func() *jobSchedule {
		s, err := j.ParseSchedule()
		return &jobSchedule{Schedule: s, err: err}
	}
	if j.RunAt != nil || j.Schedule == "" || j.NotBefore != nil || j.NotAfter != nil || j.Jitter != 0 {
		return parse()
	}
	s := parse()
	if s.err != nil {
		return s
	}
	return schedules.get(scheduleKey{shared(j.Schedule), shared(j.Timezone)}, func() *jobSchedule { return s })
}
