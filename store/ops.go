package store

import (
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file builds the etcd operations a partition's owner makes on the
// documents it writes (run, queue entry, state), so that their encoding and
// key layout live in one place. The operations are not fenced: the owner
// wraps them in a transaction fenced on its epoch (shard.Ownership).

// EncodeRun returns the stored form of r (api.Run.MarshalStored: a run
// of one item as the API writes it, a run's items in their compact
// form). Its length is what the run costs in etcd (history accounting
// counts it).
func EncodeRun(r Run) ([]byte, error) {
	b, err := r.MarshalStored()
	if err != nil {
		return nil, fmt.Errorf("encode run %s: %w", r.ID, err)
	}
	return b, nil
}

// EncodeState returns the stored form of a job's scheduling state.
func EncodeState(st JobState) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode job state: %w", err)
	}
	return b, nil
}

// QueueJobPrefix is the prefix of job id's active-run index entries.
func (k Keys) QueueJobPrefix(p int, id string) string {
	return k.QueuePrefix(p) + EscapeID(id) + "/"
}

// CreateRunOp returns the write that creates run r, stored as val (from
// EncodeRun or FitRun), only if its key is absent (so a (job, scheduled
// time) is recorded at most once): a nested transaction
// If(create_revision(run) == 0) Then(put run, put queue entry unless r is
// final). Its response's Succeeded says whether the run was created.
func (k Keys) CreateRunOp(r Run, val []byte) clientv3.Op {
	key := k.Run(r.Partition, r.JobID, r.ScheduledAt)
	then := []clientv3.Op{clientv3.OpPut(key, string(val))}
	if !r.Status.Final() {
		then = append(then, clientv3.OpPut(k.Queue(r.Partition, r.JobID, r.ScheduledAt), ""))
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	return clientv3.OpTxn([]clientv3.Cmp{cmp}, then, nil)
}

// CreateCausedRunOp is CreateRunOp for a run a hand-over fires: the run
// is created only while the hand-over key exists, and the hand-over is
// deleted with its creation, so each hand-over creates at most one run
// however often it is tried: If(create_revision(run) == 0,
// create_revision(handover) > 0) Then(put run, put queue entry unless r
// is final, delete handover) Else(count handover). A response that did
// not succeed says by its count whether the hand-over is still there
// (the run's time is taken) or was consumed before.
func (k Keys) CreateCausedRunOp(r Run, val []byte, handover string) clientv3.Op {
	key := k.Run(r.Partition, r.JobID, r.ScheduledAt)
	then := []clientv3.Op{clientv3.OpPut(key, string(val)), clientv3.OpDelete(handover)}
	if !r.Status.Final() {
		then = append(then, clientv3.OpPut(k.Queue(r.Partition, r.JobID, r.ScheduledAt), ""))
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(handover), ">", 0),
	}
	return clientv3.OpTxn(cmps, then, []clientv3.Op{clientv3.OpGet(handover, clientv3.WithCountOnly())})
}

// UpdateRunOp returns the compare-and-swap write of run r, stored as val,
// over the version with mod revision modRev: a nested transaction
// If(mod_revision(run) == modRev) Then(put run, delete queue entry if r is
// final, the operations also). Its response's Succeeded says whether it
// applied.
func (k Keys) UpdateRunOp(r Run, val []byte, modRev int64, also ...clientv3.Op) clientv3.Op {
	key := k.Run(r.Partition, r.JobID, r.ScheduledAt)
	then := []clientv3.Op{clientv3.OpPut(key, string(val))}
	if r.Status.Final() {
		then = append(then, clientv3.OpDelete(k.Queue(r.Partition, r.JobID, r.ScheduledAt)))
	}
	then = append(then, also...)
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", modRev)
	return clientv3.OpTxn([]clientv3.Cmp{cmp}, then, nil)
}

// PutStateOp returns the write of job id's scheduling state.
func (k Keys) PutStateOp(p int, id string, st JobState) (clientv3.Op, error) {
	val, err := EncodeState(st)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("job %q: %w", id, err)
	}
	return clientv3.OpPut(k.State(p, id), string(val)), nil
}

// DeleteRunOp returns the deletion of job id's final run for time at, with
// its failing-runs index entry: a nested transaction that deletes them
// only if the run has no queue entry, so an active run is never deleted
// whatever the caller believes.
func (k Keys) DeleteRunOp(p int, id string, at time.Time) clientv3.Op {
	cmp := clientv3.Compare(clientv3.CreateRevision(k.Queue(p, id, at)), "=", 0)
	return clientv3.OpTxn([]clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpDelete(k.Run(p, id, at)), clientv3.OpDelete(k.Failing(p, id, at))}, nil)
}

// DeleteJobDataOps returns the deletions of everything the owner stores for
// job id: its state, runs, queue entries, failing-runs index entries,
// pending notifications and their delivery records (not its spec).
func (k Keys) DeleteJobDataOps(p int, id string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpDelete(k.State(p, id)),
		clientv3.OpDelete(k.RunPrefix(p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.QueueJobPrefix(p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.FailingJobPrefix(p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.OutboxJobPrefix(p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.Deliveries(p, id)),
	}
}

// DeleteJobOp returns the deletion of job id with everything stored for it
// (spec, pause key, cancel requests, backfill, state, runs, queue and
// failing-runs index entries, pending notifications), applied only if its
// spec still has mod revision rev and its pause key pauseRev (0: none;
// the version the caller decided on: an edit, pause or resume made since
// is not lost) and no trigger request of the job is pending (an accepted
// trigger is not lost): a nested transaction whose response's Succeeded
// says whether it applied.
func (k Keys) DeleteJobOp(p int, id string, rev, pauseRev int64) clientv3.Op {
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(k.Spec(p, id)), "=", rev),
		clientv3.Compare(clientv3.ModRevision(k.Pause(p, id)), "=", pauseRev),
		clientv3.Compare(clientv3.CreateRevision(k.TriggerPrefix(p, id)), "=", 0).WithPrefix(),
	}
	ops := append([]clientv3.Op{clientv3.OpDelete(k.Spec(p, id)), clientv3.OpDelete(k.Pause(p, id)), clientv3.OpDelete(k.CancelPrefix(p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.Backfill(p, id))}, k.DeleteJobDataOps(p, id)...)
	return clientv3.OpTxn(cmps, ops, nil)
}

// SpecGuardOp returns ops as one nested transaction applied only if job
// id's spec still has mod revision rev and its pause key pauseRev (0:
// none): the writes a scheduler decided from that version of the job
// (its runs, its state, the trigger requests they consume) are refused
// together if the job was changed, paused, resumed, deleted or deleted
// and created again meanwhile. Its response's Succeeded says whether they
// applied; Responses are those of ops.
func (k Keys) SpecGuardOp(p int, id string, rev, pauseRev int64, ops []clientv3.Op) clientv3.Op {
	return clientv3.OpTxn(k.AppendSpecGuard(nil, p, id, rev, pauseRev), ops, nil)
}

// AppendSpecGuard appends to cmps the compares of SpecGuardOp: job id's
// spec has mod revision rev and its pause key pauseRev (0: none). A write
// of several jobs' fires guarded by all their compares at once applies
// only if none of them changed.
func (k Keys) AppendSpecGuard(cmps []clientv3.Cmp, p int, id string, rev, pauseRev int64) []clientv3.Cmp {
	return append(cmps,
		clientv3.Compare(clientv3.ModRevision(k.Spec(p, id)), "=", rev),
		clientv3.Compare(clientv3.ModRevision(k.Pause(p, id)), "=", pauseRev))
}
