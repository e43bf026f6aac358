package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Limits of a batch write (WriteBatch): api.MaxBatchJobs and
// api.MaxBatchBytes.
//
// Deprecated: use api.MaxBatchJobs and api.MaxBatchBytes; kept for one
// release.
const (
	MaxBatchJobs  = api.MaxBatchJobs
	MaxBatchBytes = api.MaxBatchBytes
)

// BatchMode says what a batch write does with IDs that exist.
type BatchMode string

// The batch modes.
const (
	// BatchCreate creates every job; an existing ID fails its item with
	// ErrExists (as Create).
	BatchCreate BatchMode = "create"
	// BatchApply creates or replaces every job (as Put): an item naming a
	// Revision replaces only that revision of its job.
	BatchApply BatchMode = "apply"
)

// ErrBatchAborted is the error of a batch's items that were valid but not
// written because another item of the batch failed: a batch is written
// whole or not at all.
var ErrBatchAborted = errors.New("not written: another item of the batch failed, and a batch is written whole or not at all")

// BatchItem is one job of a batch write.
type BatchItem struct {
	// Job is the job to write.
	Job Job
	// Err, when set, marks an item the caller could not decode: it fails
	// the batch and is returned unchanged.
	Err error
}

// BatchResult is the outcome of one item of a batch write.
type BatchResult struct {
	// Job is the job as stored (with partition, timestamps and revision)
	// if the batch was written.
	Job Job
	// Created says whether the job was new (false: it replaced one).
	Created bool
	// Err is why the item failed: a *FieldError (matching ErrInvalidJob),
	// ErrExists, ErrStaleRevision, the item's own BatchItem.Err, or
	// ErrBatchAborted for a valid item of a failed batch. Nil if the batch
	// was written.
	Err error
}

// WriteBatch writes jobs in one etcd transaction: all of them or none.
// Each job is normalized and validated as by Create; mode says whether
// existing IDs fail (BatchCreate) or are replaced (BatchApply, honouring
// each job's Revision as Put does). An ID may appear once per batch.
//
// It returns one result per item, in order. If any item failed, nothing
// was written and every result has its Err (the failures', and
// ErrBatchAborted for the others); err is then nil. err is non-nil when
// the batch as a whole was refused or its outcome is unknown, and then
// results is nil: an invalid mode or size (ErrInvalidJob), documents
// totalling more than MaxBatchBytes (ErrTooLarge), a store WithGuard's
// verdict (ErrHighWater, ErrNoSpace) on a batch that creates jobs or
// does not shrink one it replaces, concurrent changes too many times in a row (ErrConflict), or
// etcd's errors (Classify).
func (s *Etcd) WriteBatch(ctx context.Context, items []BatchItem, mode BatchMode) ([]BatchResult, error) {
	switch {
	case mode != BatchCreate && mode != BatchApply:
		return nil, fieldErr("mode", "%q: want %q or %q", mode, BatchCreate, BatchApply)
	case len(items) == 0:
		return nil, fieldErr("jobs", "empty: a batch holds 1 to %d jobs", MaxBatchJobs)
	case len(items) > MaxBatchJobs:
		return nil, fieldErr("jobs", "%d jobs: a batch holds at most %d (etcd's operations per transaction); send several batches", len(items), MaxBatchJobs)
	}
	res := make([]BatchResult, len(items))
	wants := make([]int64, len(items))
	seen := make(map[string]int, len(items))
	failed := false
	for i, it := range items {
		if it.Err != nil {
			res[i].Err, failed = it.Err, true
			continue
		}
		wants[i] = it.Job.Revision
		j, _, err := s.prepare(it.Job)
		if err != nil {
			res[i].Err, failed = err, true
			continue
		}
		if len(j.After) > 0 {
			res[i].Err, failed = fieldErr("after", "not written by a batch: save a job with after on its own (PUT /v1/jobs/{id}), which checks its dependencies for cycles"), true
			continue
		}
		if first, dup := seen[j.ID]; dup {
			res[i].Err, failed = fieldErr("id", "%s is also item %d of the batch; an ID may appear once per batch", quoteClipped(j.ID), first), true
			continue
		}
		seen[j.ID] = i
		res[i].Job = j
	}
	if failed {
		return abort(res), nil
	}
	if mode == BatchCreate {
		return s.createBatch(ctx, res)
	}
	return s.applyBatch(ctx, res, wants)
}

// abort gives every result without an error ErrBatchAborted, and drops
// the jobs: nothing was written.
func abort(res []BatchResult) []BatchResult {
	for i := range res {
		res[i].Job, res[i].Created = Job{}, false
		if res[i].Err == nil {
			res[i].Err = ErrBatchAborted
		}
	}
	return res
}

// encodeBatch encodes the prepared jobs of res with timestamps now (and
// the creation times in created, for replaced jobs), checking the batch's
// size.
func (s *Etcd) encodeBatch(res []BatchResult, created map[int]Job) ([]string, []string, error) {
	now := s.nowMillis()
	keys, vals := make([]string, len(res)), make([]string, len(res))
	total := 0
	for i := range res {
		j := &res[i].Job
		j.CreatedAt, j.UpdatedAt = now, now
		if old, ok := created[i]; ok {
			j.CreatedAt = old.CreatedAt
			j.ResumedAt = resumedAt(old, *j, now)
		}
		val, err := json.Marshal(j)
		if err != nil {
			return nil, nil, err
		}
		keys[i], vals[i] = s.keys.Spec(j.Partition, j.ID), string(val)
		total += len(keys[i]) + len(val)
	}
	if total > MaxBatchBytes {
		return nil, nil, fmt.Errorf("%w: the batch's %d jobs take %d bytes stored; a batch takes at most %d: send fewer jobs per batch", ErrTooLarge, len(res), total, MaxBatchBytes)
	}
	return keys, vals, nil
}

// createBatch writes the prepared jobs of res if none of their IDs exist.
func (s *Etcd) createBatch(ctx context.Context, res []BatchResult) ([]BatchResult, error) {
	keys, vals, err := s.encodeBatch(res, nil)
	if err != nil {
		return nil, err
	}
	if err := s.guard(); err != nil {
		return nil, err
	}
	cmps := make([]clientv3.Cmp, len(res))
	puts := make([]clientv3.Op, len(res))
	gets := make([]clientv3.Op, len(res))
	for i := range res {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(keys[i]), "=", 0)
		puts[i] = clientv3.OpPut(keys[i], vals[i])
		gets[i] = clientv3.OpGet(keys[i], clientv3.WithCountOnly())
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return nil, Classify(err)
	}
	if !resp.Succeeded {
		for i := range res {
			if resp.Responses[i].GetResponseRange().GetCount() > 0 {
				res[i].Err = fmt.Errorf("job %s: %w", quoteClipped(res[i].Job.ID), ErrExists)
			}
		}
		return abort(res), nil
	}
	for i := range res {
		res[i].Job.Revision = resp.Header.Revision
		res[i].Created = true
	}
	return res, nil
}

// applyBatch creates or replaces the prepared jobs of res, each only if
// it is at the revision its item names (wants[i], 0 for any). A job's
// revision counts its pause key (PauseKey.Apply), so an item naming a
// revision is refused if the job was paused or resumed since; its pause
// key is compared in a transaction nested in the write (etcd allows 128
// compares per transaction, the spec keys of a full batch take them
// all). The documents written are newer than any pause key, which then
// no longer applies: the batch leaves the keys.
func (s *Etcd) applyBatch(ctx context.Context, res []BatchResult, wants []int64) ([]BatchResult, error) {
	for range 10 {
		gets := make([]clientv3.Op, len(res))
		pauseGets := make([]clientv3.Op, len(res))
		for i := range res {
			gets[i] = clientv3.OpGet(s.keys.Spec(res[i].Job.Partition, res[i].Job.ID))
		}
		read, err := s.client.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, Classify(err)
		}
		for i := range res {
			pauseGets[i] = clientv3.OpGet(s.keys.Pause(res[i].Job.Partition, res[i].Job.ID), clientv3.WithRev(read.Header.Revision))
		}
		pauseRead, err := s.client.Txn(ctx).Then(pauseGets...).Commit()
		if err != nil {
			return nil, Classify(err)
		}
		cur := make([]storedJob, len(res))
		old := map[int]Job{}
		failed := false
		for i := range res {
			c, err := stored(read.Responses[i].GetResponseRange().Kvs, pauseRead.Responses[i].GetResponseRange().Kvs)
			if err == nil {
				old[i] = c.job
			} else if len(read.Responses[i].GetResponseRange().Kvs) == 1 {
				// A corrupt spec is replaced, as Put replaces it.
				kv := read.Responses[i].GetResponseRange().Kvs[0]
				c.specRev, c.size, c.job.Revision = kv.ModRevision, len(kv.Value), kv.ModRevision
			}
			cur[i] = c
			if len(c.job.After) > 0 {
				res[i].Err, failed = fieldErr("after", "the stored job %s has after: replace it on its own (PUT /v1/jobs/{id}), which keeps its dependencies", quoteClipped(res[i].Job.ID)), true
				continue
			}
			if err := staleRevision(res[i].Job.ID, wants[i], c.job.Revision); err != nil {
				res[i].Err, failed = err, true
			}
		}
		if failed {
			return abort(res), nil
		}
		keys, vals, err := s.encodeBatch(res, old)
		if err != nil {
			return nil, err
		}
		for i := range res {
			if cur[i].specRev == 0 || len(vals[i]) >= cur[i].size {
				if err := s.guard(); err != nil {
					return nil, err
				}
				break
			}
		}
		cmps := make([]clientv3.Cmp, len(res))
		puts := make([]clientv3.Op, len(res))
		var pauseCmps []clientv3.Cmp
		for i := range res {
			cmps[i] = clientv3.Compare(clientv3.ModRevision(keys[i]), "=", cur[i].specRev)
			puts[i] = clientv3.OpPut(keys[i], vals[i])
			if wants[i] != 0 {
				pauseCmps = append(pauseCmps, clientv3.Compare(clientv3.ModRevision(s.keys.Pause(res[i].Job.Partition, res[i].Job.ID)), "=", cur[i].pause.Revision))
			}
		}
		then := puts
		if len(pauseCmps) > 0 {
			then = []clientv3.Op{clientv3.OpTxn(pauseCmps, puts, nil)}
		}
		resp, err := s.client.Txn(ctx).If(cmps...).Then(then...).Commit()
		if err != nil {
			return nil, Classify(err)
		}
		if resp.Succeeded && (len(pauseCmps) == 0 || resp.Responses[0].GetResponseTxn().Succeeded) {
			for i := range res {
				res[i].Job.Revision = resp.Header.Revision
				res[i].Created = cur[i].specRev == 0
			}
			return res, nil
		}
	}
	return nil, fmt.Errorf("batch of %d jobs: %w", len(res), ErrConflict)
}

// staleRevision returns the error of a write of job id naming revision
// want (0: none) over the stored revision rev (0: absent), nil if the
// write may go ahead.
func staleRevision(id string, want, rev int64) error {
	switch {
	case want == 0 || rev == want:
		return nil
	case rev == 0:
		return fmt.Errorf("job %s: %w: the document names revision %d, but the job no longer exists; leave \"revision\" out to create it again",
			quoteClipped(id), ErrStaleRevision, want)
	default:
		return fmt.Errorf("job %s: %w: the document names revision %d, but the job is at revision %d: it changed since the document was read; read it again, redo the change and apply that",
			quoteClipped(id), ErrStaleRevision, want, rev)
	}
}
