package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Create stores a new job. The job is normalized and validated here; it
// returns a *FieldError for invalid input, ErrExists if the ID is taken,
// and the stored job (with partition, timestamps and revision) on success,
// once it is durable in etcd. A store WithGuard returns the guard's error
// (ErrHighWater, ErrNoSpace) for valid input it refuses.
func (s *Etcd) Create(ctx context.Context, j Job) (Job, error) {
	j, p, err := s.prepare(j)
	if err != nil {
		return Job{}, err
	}
	if err := s.guard(); err != nil {
		return Job{}, err
	}
	now := s.nowMillis()
	j.CreatedAt, j.UpdatedAt = now, now
	val, err := json.Marshal(j)
	if err != nil {
		return Job{}, err
	}
	key := s.keys.Spec(p, j.ID)
	deps, err := s.keys.DepOps(j.ID, nil, j.After)
	if err != nil {
		return Job{}, err
	}
	for range 10 {
		// The dependency index is read for cycles; the write holds only if
		// no edge changed since (checkAfter), else it reads again.
		unchanged, err := s.checkAfter(ctx, j)
		if err != nil {
			return Job{}, err
		}
		resp, err := s.client.Txn(ctx).
			If(append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, unchanged...)...).
			Then(append([]clientv3.Op{clientv3.OpPut(key, string(val)), clientv3.OpDelete(s.keys.Pause(p, j.ID))}, deps...)...).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
			Commit()
		if err != nil {
			return Job{}, Classify(err)
		}
		if resp.Succeeded {
			j.Revision = resp.Header.Revision
			return j, nil
		}
		if resp.Responses[0].GetResponseRange().GetCount() > 0 {
			return Job{}, fmt.Errorf("job %q: %w", j.ID, ErrExists)
		}
	}
	return Job{}, fmt.Errorf("job %q: %w", j.ID, ErrConflict)
}

// Put creates or replaces a job, keeping the creation time of a replaced
// one. created tells which happened. The document's "paused" decides
// whether the job is paused, whatever pause or resume came before. A
// store WithGuard asks its guard before creating, or before replacing
// with a document that is not smaller than the one it replaces: above
// the high-water mark a rewrite is admitted only if it shrinks the store.
//
// A job that names a Revision (as one read with Get does) replaces only
// the stored job of that revision: if the stored job has another (it was
// edited, paused or resumed since), or is gone, Put changes nothing and
// returns an error matching ErrStaleRevision, so that two people editing
// the same job cannot lose one edit silently. A job without a Revision
// replaces whatever is stored.
//
// Create and Put write the job's edges in the dependency index (after.go)
// with its spec, and refuse a job whose after closes a cycle of jobs with
// a *FieldError naming the cycle.
func (s *Etcd) Put(ctx context.Context, j Job) (stored Job, created bool, err error) {
	want := j.Revision
	j, p, err := s.prepare(j)
	if err != nil {
		return Job{}, false, err
	}
	key, pauseKey := s.keys.Spec(p, j.ID), s.keys.Pause(p, j.ID)
	for range 10 {
		cur, err := s.read(ctx, p, j.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Job{}, false, err
		}
		if err := staleRevision(j.ID, want, cur.job.Revision); err != nil {
			return Job{}, false, err
		}
		now := s.nowMillis()
		j.CreatedAt, j.UpdatedAt = now, now
		if cur.specRev != 0 {
			j.CreatedAt = cur.job.CreatedAt
			j.ResumedAt = resumedAt(cur.job, j, now)
		}
		val, err := json.Marshal(j)
		if err != nil {
			return Job{}, false, err
		}
		if cur.specRev == 0 || len(val) >= cur.size {
			if err := s.guard(); err != nil {
				return Job{}, false, err
			}
		}
		unchanged, err := s.checkAfter(ctx, j)
		if err != nil {
			return Job{}, false, err
		}
		deps, err := s.keys.DepOps(j.ID, cur.job.After, j.After)
		if err != nil {
			return Job{}, false, err
		}
		resp, err := s.client.Txn(ctx).
			If(append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", cur.specRev), clientv3.Compare(clientv3.ModRevision(pauseKey), "=", cur.pause.Revision)}, unchanged...)...).
			Then(append([]clientv3.Op{clientv3.OpPut(key, string(val)), clientv3.OpDelete(pauseKey)}, deps...)...).
			Commit()
		if err != nil {
			return Job{}, false, Classify(err)
		}
		if resp.Succeeded {
			j.Revision = resp.Header.Revision
			return j, cur.specRev == 0, nil
		}
	}
	return Job{}, false, fmt.Errorf("job %q: %w", j.ID, ErrConflict)
}

// resumedAt returns the ResumedAt of job j written at now over the stored
// job cur (its pause key applied): now if j resumes it (cur is paused, j
// is not), else cur's, which later writes keep so that the next owner
// learns of a resume it did not see (api.Job.PlanFrom).
func resumedAt(cur, j Job, now time.Time) *time.Time {
	if cur.Paused && !j.Paused {
		return &now
	}
	return cur.ResumedAt
}

// nowMillis is the store's time in UTC at millisecond precision, the
// precision of run IDs: a job with neither schedule nor run_at runs at
// its creation time, and its run's scheduled_at must match its run ID.
func (s *Etcd) nowMillis() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

func (s *Etcd) prepare(j Job) (Job, int, error) {
	j.State, j.ResumedAt = nil, nil // server-set, read-only
	j.Normalize()
	if err := j.ValidateAt(s.limits, s.now()); err != nil {
		return Job{}, 0, err
	}
	j.Partition = s.Partition(j.ID)
	j.Revision = 0
	return j, j.Partition, nil
}

// Delete removes job id, its pause key, its pending requests
// (triggers, cancel requests, its backfill, hand-overs of upstream runs)
// and its edges in the dependency index. The owner then
// stops scheduling it and removes its state, runs and queue entries.
// ErrNotFound if there is no such job.
func (s *Etcd) Delete(ctx context.Context, id string) error {
	p := s.Partition(id)
	key := s.keys.Spec(p, id)
	for range 10 {
		// The job's edges in the dependency index go with it: they are
		// read from the spec deleted, at its revision.
		cur, err := s.read(ctx, p, id)
		if errors.Is(err, ErrNotFound) {
			return ErrNotFound
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
		if err == nil {
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", cur.specRev)
		}
		deps, _ := s.keys.DepOps(id, cur.job.After, nil)
		resp, err := s.client.Txn(ctx).
			If(cmp).
			Then(append([]clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.keys.Pause(p, id)), clientv3.OpDelete(s.keys.JobRequestsPrefix(p, id), clientv3.WithPrefix())}, deps...)...).
			Commit()
		if err != nil {
			return Classify(err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("job %q: %w", id, ErrConflict)
}

// SetPaused pauses or resumes job id and returns the stored job. It
// writes the job's pause key (pause.go), a few dozen bytes, never the
// job's document; a job already in the state asked for is returned as it
// is, and nothing is written. A job its owner paused
// (pause_after_failures: JobState.AutoPaused) is paused: resuming it
// writes the pause key, which ends that pause.
func (s *Etcd) SetPaused(ctx context.Context, id string, paused bool) (Job, error) {
	p := s.Partition(id)
	key, pauseKey := s.keys.Spec(p, id), s.keys.Pause(p, id)
	for range 10 {
		resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(pauseKey), clientv3.OpGet(s.keys.State(p, id))).Commit()
		if err != nil {
			return Job{}, Classify(err)
		}
		cur, err := stored(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
		if err != nil {
			return Job{}, err
		}
		j := cur.job
		st := decodeState(resp.Responses[2].GetResponseRange().Kvs)
		if j.Paused == paused && !(st.AutoPaused(j.Revision) && !paused) {
			j.ApplyState(st)
			return j, nil
		}
		now := s.nowMillis()
		tresp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.specRev), clientv3.Compare(clientv3.ModRevision(pauseKey), "=", cur.pause.Revision)).
			Then(clientv3.OpPut(pauseKey, EncodePause(paused, now))).
			Commit()
		if err != nil {
			return Job{}, Classify(err)
		}
		if tresp.Succeeded {
			j.Paused, j.UpdatedAt, j.Revision = paused, now, tresp.Header.Revision
			j.ApplyState(st)
			return j, nil
		}
	}
	return Job{}, ErrConflict
}

// Trigger records a request to fire job id now and returns the ID the run
// will have. The request is durable when Trigger returns; the partition's
// owner fires it (once) and deletes it. ErrNotFound if there is no such
// job. A paused job can be triggered. A store WithGuard asks its guard
// first.
//
// Every accepted trigger gets a run of its own: run IDs have millisecond
// precision, so a trigger whose millisecond is taken (by another trigger
// or an existing run) takes the next free one of TriggerSlots. It is one
// transaction: the candidates are nested, each tried only if the ones
// before are taken. If all are, it returns ErrTooManyTriggers.
func (s *Etcd) Trigger(ctx context.Context, id string) (string, error) {
	return s.TriggerWith(ctx, id, nil)
}

// TriggerWith is Trigger with a payload for the run instead of the job's
// (nil: the job's). The payload is checked as a job's is
// (api.ValidateTriggerPayload, at most MaxTriggerPayloadBytes; errors are
// *FieldError naming "payload"), stored in the trigger request and, by the
// owner, in the run.
func (s *Etcd) TriggerWith(ctx context.Context, id string, payload json.RawMessage) (string, error) {
	val := ""
	if payload != nil {
		payload = compactPayload(payload)
		if err := api.ValidateTriggerPayload(payload, api.Limits{MaxPayloadBytes: min(s.limits.MaxPayloadBytes, MaxTriggerPayloadBytes)}); err != nil {
			return "", err
		}
		b, err := json.Marshal(api.TriggerRequest{Payload: payload})
		if err != nil {
			return "", fieldErr("payload", "%v", err)
		}
		val = string(b)
	}
	if err := s.guard(); err != nil {
		return "", err
	}
	p := s.Partition(id)
	at := s.nowMillis()
	var chain []clientv3.Op // the candidates from slot i on
	for i := TriggerSlots - 1; i >= 0; i-- {
		t := at.Add(time.Duration(i) * time.Millisecond)
		trig, run := s.keys.Trigger(p, id, t), s.keys.Run(p, id, t)
		chain = []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(trig), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(run), "=", 0),
			},
			[]clientv3.Op{clientv3.OpPut(trig, val)},
			chain)}
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.keys.Spec(p, id)), ">", 0)).
		Then(chain...).
		Commit()
	if err != nil {
		return "", Classify(err)
	}
	if !resp.Succeeded {
		return "", ErrNotFound
	}
	level := resp.Responses[0].GetResponseTxn()
	for i := 0; level != nil; i++ {
		if level.Succeeded {
			return RunID(id, at.Add(time.Duration(i)*time.Millisecond)), nil
		}
		if len(level.Responses) == 0 {
			break
		}
		level = level.Responses[0].GetResponseTxn()
	}
	return "", fmt.Errorf("job %q: %w: %d milliseconds from %s are taken", id, ErrTooManyTriggers, TriggerSlots, FormatTime(at))
}

// TriggerSlots is how many consecutive milliseconds Trigger tries for a
// trigger's run.
const TriggerSlots = 16

// MaxTriggerPayloadBytes bounds a trigger's payload (or the store's
// payload limit, if smaller): the run document that records it is kept
// within a budget of its own (dispatch.Config.MaxRunBytes, 256 KiB by
// default) with its attempts' outputs.
const MaxTriggerPayloadBytes = 64 << 10

// compactPayload returns raw without insignificant white space, as a
// job's payload is stored; invalid JSON is returned unchanged for the
// check to report.
func compactPayload(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
