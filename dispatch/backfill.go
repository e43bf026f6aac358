package dispatch

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// This file runs backfills (POST /v1/jobs/{id}/backfill): the API records
// a job's backfill (store.Keys.Backfill) with its times; the partition's
// owner creates their runs, paced (Config.BackfillRate, BackfillActive),
// each only if absent, and writes its progress over the record.

// ReasonBackfilled is the reason recorded on a run made by a backfill.
const ReasonBackfilled = "backfilled"

// BackfillStep is one write of a backfill: indices into its Times, in
// order.
type BackfillStep struct {
	// Create are the times to create a run for (only if absent).
	Create []int
	// Existing are the times found with a run stored: not run again.
	Existing []int
}

// PlanBackfill returns the next step of backfill b: its pending times,
// oldest first, each found existing (a run is stored for it) or to be
// created, with room for at most room new runs; existing times cost no
// room. stored reports whether a run of a time is stored; unsure says the
// owner does not know yet (one of its writes of unknown outcome may have
// made it): the step stops before such a time, which waits for the next.
func PlanBackfill(b store.Backfill, room int, stored func(t time.Time) (ok, unsure bool)) BackfillStep {
	var st BackfillStep
	for i := range len(b.Times) {
		if b.Outcome[i] != store.BackfillPending {
			continue
		}
		ok, unsure := stored(b.Times[i])
		switch {
		case unsure:
			return st
		case ok:
			st.Existing = append(st.Existing, i)
		case len(st.Create) < room:
			st.Create = append(st.Create, i)
		default:
			return st
		}
	}
	return st
}

// backfillJob is a job's running backfill as its owner holds it: the
// record and its revision, which the owner's writes compare.
type backfillJob struct {
	key    string
	modRev int64
	doc    store.Backfill
	// dirty: memory corrects the record (a time found existing that the
	// written record says created); the next write says so.
	dirty bool
}

// backfillOf parses kv as a backfill record; nil if it does not decode
// (logged) or is done.
func (pt *partition) backfillOf(kv []byte, key string, rev int64) *backfillJob {
	var b store.Backfill
	err := json.Unmarshal(kv, &b)
	if err == nil {
		err = b.Validate()
	}
	if err != nil {
		pt.lg.Warn("backfill record does not decode; ignoring it", zap.String("key", key), zap.Error(err))
		return nil
	}
	if !b.Pending() {
		return nil
	}
	return &backfillJob{key: key, modRev: rev, doc: b}
}

// backfill makes the next write of each running backfill, in the order
// of the jobs' IDs: the runs of its next pending times, each created only
// if absent (so a time a fire made, or makes at the same moment on a
// former owner, runs once) and pending, with the record's progress, in
// one compare-and-swap on the record's revision (a backfill stopped or
// replaced meanwhile writes nothing), fenced. Each write waits its turn
// in the member's budget of fires in flight, like fires. The caller
// holds wmu.
func (pt *partition) backfill(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	ids := slices.Sorted(maps.Keys(pt.backfills))
	pt.mu.Unlock()
	for _, id := range ids {
		if !pt.backfillJob(ctx, id, now) {
			return
		}
	}
}

// backfillJob makes the next write of job id's backfill; false if the
// partition's work ended.
func (pt *partition) backfillJob(ctx context.Context, id string, now time.Time) bool {
	pt.mu.Lock()
	bj, e := pt.backfills[id], pt.jobs[id]
	if bj == nil || e == nil {
		delete(pt.backfills, id) // its job is gone, and its record with it
		pt.mu.Unlock()
		return true
	}
	room := pt.backfillRoomLocked(e)
	avail := pt.d.backfillTokens(now, room)
	step := PlanBackfill(bj.doc, avail, pt.storedLocked(id))
	if len(step.Create) == avail && avail < room {
		// The rate holds it back: wake up when it allows the next run.
		pt.backfillWake = pt.d.backfillWait(now, len(step.Create))
	}
	pt.d.backfillTake(now, len(step.Create))
	if len(step.Create) == 0 && len(step.Existing) == 0 && !bj.dirty {
		pt.mu.Unlock()
		return true
	}
	next := bj.doc
	outcome := []byte(next.Outcome)
	for _, i := range step.Existing {
		outcome[i] = store.BackfillExisting
	}
	j := e.spec.job()
	runs := make([]api.Run, len(step.Create))
	for k, i := range step.Create {
		outcome[i] = store.BackfillCreated
		runs[k] = NewRun(&j, next.Times[i], now, pt.own.Member, pt.own.Epoch)
		runs[k].Reason = ReasonBackfilled
	}
	// A broadcast job's runs get their items as its fires do: one per
	// live worker now, or skipped when there is none.
	bp := FirePlan{Runs: runs}
	pt.broadcastLocked(e, &bp)
	next.Outcome = string(outcome)
	if !next.Pending() {
		next.DoneAt = now.UTC()
	}
	pt.mu.Unlock()

	k := pt.d.keys
	then := make([]clientv3.Op, 0, len(runs)+1)
	sizes := make([]int, len(runs))
	for i, r := range runs {
		val, err := store.EncodeRun(r)
		if err != nil {
			pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
			return true
		}
		sizes[i] = len(val)
		then = append(then, k.CreateRunOp(r, val))
	}
	val, err := json.Marshal(next)
	if err != nil {
		pt.lg.Error("encoding a backfill record failed", zap.String("job_id", id), zap.Error(err))
		return true
	}
	then = append(then, clientv3.OpPut(bj.key, string(val)))
	op := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(bj.key), "=", bj.modRev)}, then, nil)

	turn, err := pt.d.fires.turn(ctx)
	if err != nil {
		return false // released while waiting: the next owner goes on
	}
	turn.planned(len(runs))
	resp, err := pt.commit(ctx, []clientv3.Op{op})
	turn.done()
	if err != nil {
		pt.lg.Warn("recording backfilled runs failed; will retry", zap.String("job_id", id), zap.Error(err))
		if unknownOutcome(err) {
			pt.mu.Lock()
			for _, r := range runs {
				pt.unread[r.ID] = r // read back first (see fireDue)
			}
			pt.mu.Unlock()
		}
		return true
	}
	guard := resp.Responses[0].GetResponseTxn()
	var lost []api.Run
	pt.mu.Lock()
	if !guard.Succeeded {
		// Stopped or replaced through the API: the watch brings it.
		if pt.backfills[id] == bj {
			delete(pt.backfills, id)
		}
		pt.mu.Unlock()
		pt.lg.Info("backfill changed while its runs were being written; not recorded", zap.String("job_id", id))
		return true
	}
	created := 0
	fixed := false
	for n, r := range runs {
		if !guard.Responses[n].GetResponseTxn().Succeeded {
			// Made by a write of this owner whose answer was lost: it
			// exists, and is not this backfill's.
			lost = append(lost, r)
			outcome[step.Create[n]] = store.BackfillExisting
			fixed = true
			continue
		}
		created++
		pt.hist.created(r.JobID, r.ScheduledAt, sizes[n], r.Status.Final())
		if !r.Status.Final() {
			pt.addActiveLocked(&activeRun{run: r, modRev: resp.Header.Revision, size: sizes[n], chainRT: chainRT{notBefore: now}})
		}
	}
	next.Outcome = string(outcome)
	bj.doc, bj.modRev, bj.dirty = next, resp.Header.Revision, fixed
	if !next.Pending() && !fixed {
		delete(pt.backfills, id)
	}
	pt.mu.Unlock()
	pt.d.cfg.Metrics.backfilled(created)
	pt.lg.Info("backfilled", zap.String("job_id", id), zap.Int("created", created), zap.Int("existing", len(step.Existing)+len(lost)),
		zap.Bool("done", !next.Pending()))
	pt.readopt(ctx, lost)
	if created > 0 {
		pt.d.wakePollers()
	}
	pt.poke() // the next step, as room and the rate allow
	return true
}

// backfillRoomLocked returns how many runs job e's backfill may create
// now: up to Config.BackfillActive of its runs active at once (and no more
// than the job's active-run cap and one write allow); under
// concurrency_policy forbid or replace, one run, once none of the job's
// runs is active, so that a backfill neither overlaps nor replaces a run.
func (pt *partition) backfillRoomLocked(e *jobEntry) int {
	active := pt.activeOfLocked(e.spec.ID)
	switch e.spec.ConcurrencyPolicy {
	case api.ConcurrencyForbid, api.ConcurrencyReplace:
		if len(active) > 0 {
			return 0
		}
		return 1
	}
	mine := 0
	for _, rid := range active {
		if ar := pt.active[rid]; ar != nil && ar.run.Reason == ReasonBackfilled {
			mine++
		}
	}
	return max(0, min(pt.d.cfg.BackfillActive-mine, pt.d.cfg.MaxActivePerJob-len(active), pt.d.cfg.FireBatch))
}

// storedLocked returns whether a run of job id for a time is stored, as
// PlanBackfill asks it: an active or a final run the history holds; unsure
// while one of the owner's writes of unknown outcome may have made it.
func (pt *partition) storedLocked(id string) func(time.Time) (bool, bool) {
	return func(t time.Time) (bool, bool) {
		rid := store.RunID(id, t)
		if _, ok := pt.unread[rid]; ok {
			return false, true
		}
		if pt.active[rid] != nil {
			return true, false
		}
		if jh := pt.hist.jobs[id]; jh != nil {
			if _, found := jh.find(t.Truncate(time.Millisecond).UnixNano()); found {
				return true, false
			}
		}
		return false, false
	}
}

// backfillTokens returns how many of want runs the member's backfill rate
// (Config.BackfillRate) lets writes create at now.
func (d *Dispatcher) backfillTokens(now time.Time, want int) int {
	if d.backfillRate == nil || want <= 0 {
		return max(want, 0)
	}
	return max(0, min(want, int(math.Floor(d.backfillRate.TokensAt(now)))))
}

// backfillTake takes n runs of the member's backfill rate at now.
func (d *Dispatcher) backfillTake(now time.Time, n int) {
	if d.backfillRate != nil && n > 0 {
		d.backfillRate.AllowN(now, n)
	}
}

// backfillWait returns when the member's backfill rate has a run again
// after taking took runs at now.
func (d *Dispatcher) backfillWait(now time.Time, took int) time.Time {
	if d.backfillRate == nil {
		return now
	}
	missing := 1 + float64(took) - d.backfillRate.TokensAt(now)
	return now.Add(time.Duration(math.Ceil(max(missing, 0) / float64(d.backfillRate.Limit()) * float64(time.Second))))
}
