package notify

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
)

// deleteBatch is the most keys one deletion deletes.
const deleteBatch = 64

// recordBatch is the most delivery records one write records;
// recordEvery is how long after a write of records the next may write
// records of notifications still retrying alone (without a deletion to
// go with): at most one such write per partition per interval, however
// many notifications fail.
const (
	recordBatch = 32
	recordEvery = time.Minute
)

// Outbox is one owned partition's pending notifications: its owner Adds
// what it writes (and what it finds in etcd when it takes the
// partition), and the Deliverer delivers them and deletes them through
// the partition's Store. Safe for concurrent use.
type Outbox struct {
	d      *Deliverer
	st     Store
	lg     *zap.Logger
	ctx    context.Context // ends with the ownership, or Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // its tries and deletions in flight

	// Guarded by d.mu:
	closed   bool
	entries  map[string]*entry    // by key
	jobs     map[string]*jobQueue // by job ID
	bodies   map[string]int       // run document key → notifications pending that deliver it
	garbage  map[string]struct{}  // keys to delete
	deleting bool                 // a deletion is in flight
	deleteAt time.Time            // no deletion before (after one failed)
	deleteBo *retry.Backoff
	// records are the delivery results to record, by notification key,
	// written with the next deletion; recordAt is when records alone
	// may be written next.
	records  map[string]api.NotificationDelivery
	recordAt time.Time
}

// jobQueue is one job's pending notifications in an Outbox.
type jobQueue struct {
	id       string
	queue    []*entry // oldest first (CreatedAt, then key)
	inFlight int
}

// Open returns the outbox of partition p, whose notifications are in st.
// It ends when ctx does (the partition's ownership) or at Close.
func (d *Deliverer) Open(ctx context.Context, p int, st Store) *Outbox {
	ctx, cancel := context.WithCancel(ctx)
	o := &Outbox{
		d: d, st: st, lg: d.lg.With(zap.Int("partition", p)), ctx: ctx, cancel: cancel,
		entries: map[string]*entry{}, jobs: map[string]*jobQueue{}, bodies: map[string]int{}, garbage: map[string]struct{}{},
		deleteBo: retry.New(d.cfg.DeleteBackoff), records: map[string]api.NotificationDelivery{},
	}
	d.mu.Lock()
	d.outboxes[o] = struct{}{}
	d.mu.Unlock()
	return o
}

// Add queues notifications for delivery now; keys it holds already are
// ignored. A job beyond its bound of pending notifications has its
// oldest dropped: deleted from etcd and counted.
func (o *Outbox) Add(es ...Entry) {
	d := o.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if o.closed || len(es) == 0 {
		return
	}
	touched := map[*jobQueue]bool{}
	for _, e := range es {
		if o.entries[e.Key] == nil {
			touched[o.addLocked(e)] = true
		}
	}
	for job := range touched {
		o.boundLocked(job)
	}
	d.poke()
}

func (o *Outbox) addLocked(en Entry) *jobQueue {
	d := o.d
	dest := d.destLocked(en.Outbox.URL)
	job := o.jobs[en.Outbox.JobID]
	if job == nil {
		job = &jobQueue{id: en.Outbox.JobID}
		o.jobs[job.id] = job
	}
	l := dest.laneLocked(o, job)
	e := &entry{Entry: en, o: o, job: job, dest: dest, lane: l}
	job.queue = insertOldestFirst(job.queue, e)
	l.entries = insertOldestFirst(l.entries, e)
	if e.Body != "" {
		o.bodies[e.Body]++
	}
	o.entries[e.Key] = e
	d.pending++
	return job
}

func insertOldestFirst(es []*entry, e *entry) []*entry {
	i, _ := slices.BinarySearchFunc(es, e, func(a, b *entry) int {
		return cmp.Or(a.Outbox.CreatedAt.Compare(b.Outbox.CreatedAt), cmp.Compare(a.Key, b.Key))
	})
	return slices.Insert(es, i, e)
}

// boundLocked drops job's oldest notifications beyond the bound.
func (o *Outbox) boundLocked(job *jobQueue) {
	excess := len(job.queue) - o.d.cfg.MaxPendingPerJob
	if excess <= 0 {
		return
	}
	oldest := job.queue[0].Outbox.CreatedAt
	now := o.d.cfg.Clock.Now()
	for _, e := range slices.Clone(job.queue[:excess]) {
		o.recordLocked(e, api.DeliveryDropped, fmt.Sprintf("dropped: the job had more than %d notifications pending", o.d.cfg.MaxPendingPerJob), now)
		o.finishLocked(e, true)
	}
	o.d.cfg.Metrics.result(resultDropped, excess)
	o.lg.Warn("notifications dropped: the job has more pending than its bound", zap.String("job_id", job.id),
		zap.Int("dropped", excess), zap.Int("max_pending", o.d.cfg.MaxPendingPerJob), zap.Time("oldest", oldest))
}

// DropJob forgets job id's notifications: the caller deleted them from
// etcd with the job's data.
func (o *Outbox) DropJob(id string) {
	d := o.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if job := o.jobs[id]; job != nil {
		for _, e := range slices.Clone(job.queue) {
			o.finishLocked(e, false)
		}
	}
	for k, r := range o.records {
		if r.JobID == id {
			delete(o.records, k) // its records went with its data
		}
	}
}

// Discard deletes keys of the partition's outbox from etcd that no
// notification needs (found in etcd when the partition was taken: run
// documents without notifications, notifications of jobs that are gone).
func (o *Outbox) Discard(keys ...string) {
	d := o.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if o.closed {
		return
	}
	for _, k := range keys {
		o.garbage[k] = struct{}{}
	}
	d.poke()
}

// Close forgets the outbox's notifications (what is in etcd stays for
// the partition's next owner), cancels its tries and deletions in
// flight, and returns once they have returned. Idempotent.
func (o *Outbox) Close() {
	d := o.d
	d.mu.Lock()
	if !o.closed {
		o.closed = true
		for _, e := range slices.Collect(maps.Values(o.entries)) {
			o.finishLocked(e, false)
		}
		clear(o.garbage)
		clear(o.records)
		delete(d.outboxes, o)
	}
	d.mu.Unlock()
	o.cancel()
	o.wg.Wait()
	d.poke()
}

// Pending returns the notifications the outbox holds for job id.
func (o *Outbox) Pending(id string) int {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	if job := o.jobs[id]; job != nil {
		return len(job.queue)
	}
	return 0
}

// finishLocked takes e out of the outbox: delivered, given up, dropped
// (del: its key, and its run document's once no other notification
// needs it, are deleted from etcd) or forgotten (not del).
func (o *Outbox) finishLocked(e *entry, del bool) {
	if e.gone {
		return
	}
	e.gone = true
	delete(o.entries, e.Key)
	e.job.queue = slices.DeleteFunc(e.job.queue, func(x *entry) bool { return x == e })
	e.lane.entries = slices.DeleteFunc(e.lane.entries, func(x *entry) bool { return x == e })
	if len(e.lane.entries) == 0 {
		e.dest.dropLaneLocked(e.lane)
	}
	o.tidyJobLocked(e.job)
	o.d.pending--
	if del {
		o.garbage[e.Key] = struct{}{}
	}
	if e.Body != "" {
		if o.bodies[e.Body]--; o.bodies[e.Body] <= 0 {
			delete(o.bodies, e.Body)
			if del {
				o.garbage[e.Body] = struct{}{}
			}
		}
	}
}

// tidyJobLocked forgets job once it has nothing pending or in flight.
func (o *Outbox) tidyJobLocked(job *jobQueue) {
	if len(job.queue) == 0 && job.inFlight == 0 && o.jobs[job.id] == job {
		delete(o.jobs, job.id)
	}
}

// spawn runs f in a goroutine that the outbox and its deliverer wait
// for, with a context that ends when the outbox's or the deliverer's run
// does.
func (o *Outbox) spawn(f func(ctx context.Context)) {
	d := o.d
	ctx, cancel := context.WithCancel(o.ctx)
	stop := context.AfterFunc(d.runCtx, cancel)
	d.wg.Add(1)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer d.wg.Done()
		defer stop()
		defer cancel()
		f(ctx)
	}()
}

// deleteDueLocked starts a write of the outbox's garbage (deletions)
// and delivery records if one is due at now, and returns when the next
// one is (zero: none). Records of notifications still retrying, with no
// deletion to go with, wait for recordEvery after the last write of
// records.
func (o *Outbox) deleteDueLocked(now time.Time) time.Time {
	d := o.d
	switch {
	case o.closed || o.deleting || (len(o.garbage) == 0 && len(o.records) == 0) || d.runCtx == nil:
		return time.Time{}
	case now.Before(o.deleteAt):
		return o.deleteAt
	case len(o.garbage) == 0 && now.Before(o.recordAt):
		return o.recordAt
	}
	keys := slices.Sorted(maps.Keys(o.garbage))
	keys = keys[:min(len(keys), deleteBatch)]
	for _, k := range keys {
		delete(o.garbage, k)
	}
	recKeys := slices.Sorted(maps.Keys(o.records))
	recKeys = recKeys[:min(len(recKeys), recordBatch)]
	recs := make([]api.NotificationDelivery, len(recKeys))
	for i, k := range recKeys {
		recs[i] = o.records[k]
		delete(o.records, k)
	}
	if len(recs) > 0 {
		o.recordAt = now.Add(recordEvery)
	}
	o.deleting = true
	o.spawn(func(ctx context.Context) {
		err := o.st.Delete(ctx, keys, recs)
		d.mu.Lock()
		defer d.mu.Unlock()
		defer d.poke()
		o.deleting = false
		if err == nil {
			o.deleteBo.Reset()
			return
		}
		if o.closed {
			return // the next owner finds them
		}
		for _, k := range keys {
			o.garbage[k] = struct{}{}
		}
		for i, k := range recKeys {
			if _, newer := o.records[k]; !newer {
				o.records[k] = recs[i]
			}
		}
		wait := o.deleteBo.Next()
		o.deleteAt = d.cfg.Clock.Now().Add(wait)
		if ctx.Err() == nil {
			o.lg.Warn("deleting finished notifications failed; retrying (a delivered one is not sent again meanwhile)", zap.Int("keys", len(keys)), zap.Duration("after", wait), zap.Error(err))
		}
	})
	return time.Time{}
}

// maxErrorBytes bounds a delivery record's error.
const maxErrorBytes = 200

// recordLocked notes e's delivery result at now, with why (an error, or
// why it was given up or dropped), for the outbox's next write.
func (o *Outbox) recordLocked(e *entry, result, why string, now time.Time) {
	if len(why) > maxErrorBytes {
		cut := maxErrorBytes
		for cut > 0 && why[cut]&0xC0 == 0x80 {
			cut--
		}
		why = why[:cut] + "…"
	}
	m := e.Outbox
	o.records[e.Key] = api.NotificationDelivery{JobID: m.JobID, RunID: m.RunID, Event: m.Event, Attempt: m.Attempt, URL: redactedURL(m.URL),
		CreatedAt: m.CreatedAt.UTC(), Tries: e.tries, Result: result, LastError: why, At: now.UTC()}
}

// logger returns the outbox's logger with e's fields.
func (o *Outbox) logger(e *entry) *zap.Logger {
	return o.lg.With(zap.String("job_id", e.Outbox.JobID), zap.String("run_id", e.Outbox.RunID), zap.String("event", string(e.Outbox.Event)), zap.Int("attempt", e.Outbox.Attempt))
}
