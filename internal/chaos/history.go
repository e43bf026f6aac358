package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// SpecVersion is one write of a job spec, as the history watch saw it.
type SpecVersion struct {
	Rev  int64     `json:"rev"`
	Seen time.Time `json:"seen"` // when the watch delivered it
	// Deleted marks the job's deletion; Job is then zero.
	Deleted bool    `json:"deleted,omitempty"`
	Job     api.Job `json:"job,omitzero"`
}

// RunCreate is one creation of a run key: a fire.
type RunCreate struct {
	Rev  int64     `json:"rev"`
	Seen time.Time `json:"seen"`
	// Owner and Epoch are what the run document says fired it.
	Owner string `json:"owner"`
	Epoch int64  `json:"epoch"`
	// KeyOwner and KeyEpoch are the partition's owner key (member and
	// create revision) at the revision of the creation, as replayed from
	// the history; KeyEpoch 0 means the partition had no owner key.
	KeyOwner string `json:"key_owner"`
	KeyEpoch int64  `json:"key_epoch"`
}

// RunVersion is one write of a run document.
type RunVersion struct {
	Rev  int64     `json:"rev"`
	Seen time.Time `json:"seen"`
	Run  api.Run   `json:"run"`
}

// RunHistory is every write of one run key: the run of (JobID, At).
type RunHistory struct {
	Key       string       `json:"key"`
	Partition int          `json:"partition"`
	JobID     string       `json:"job_id"`
	At        time.Time    `json:"at"`
	Creates   []RunCreate  `json:"creates"`
	Versions  []RunVersion `json:"versions"`
	// Deleted: the key was deleted (history trimming or job deletion), at
	// revision DeletedRev.
	Deleted    bool  `json:"deleted,omitempty"`
	DeletedRev int64 `json:"deleted_rev,omitempty"`
	// Corrupt lists documents that did not decode or did not match the key.
	Corrupt []string `json:"corrupt,omitempty"`
}

// Last returns the latest version of the run document.
func (h *RunHistory) Last() api.Run {
	if len(h.Versions) == 0 {
		return api.Run{}
	}
	return h.Versions[len(h.Versions)-1].Run
}

// OwnerOverlap is an owner key written while it existed: two owners.
type OwnerOverlap struct {
	Partition int    `json:"partition"`
	Rev       int64  `json:"rev"`
	Detail    string `json:"detail"`
}

// History is what the harness learns from watching the fleet's namespace
// in etcd from before the fleet starts: every spec write, every run
// document write, and the owner keys (checked as they are replayed).
type History struct {
	Specs         map[string][]SpecVersion `json:"specs"` // by job ID
	Runs          map[string]*RunHistory   `json:"runs"`  // by run key
	OwnerOverlaps []OwnerOverlap           `json:"owner_overlaps"`
	OwnerEvents   int                      `json:"owner_events"`
	// OwnerRefences counts owner keys rewritten by their owner with the
	// same member and epoch (shard.Ownership.Refence after a write of
	// unknown outcome): not a new owner.
	OwnerRefences int `json:"owner_refences"`
	// OwnerAcquired lists, per partition, when the watch saw each of its
	// owner keys created.
	OwnerAcquired map[int][]time.Time `json:"owner_acquired"`
	LastRev       int64               `json:"last_rev"`
}

// historyWatch maintains a History from a watch of the namespace,
// resuming after every interruption (etcd restarts, leader changes).
type historyWatch struct {
	client *clientv3.Client
	ns     string
	keys   store.Keys
	parts  int // the cluster's partition count
	lg     *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex // guards the fields below
	h      History
	owners map[int]shard.OwnerInfo // the owner keys at h.LastRev
	marks  map[string]chan struct{}
}

// watchHistory starts watching namespace ns, of a cluster of partitions
// partitions, after revision from.
func watchHistory(client *clientv3.Client, ns string, partitions int, from int64, lg *zap.Logger) *historyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &historyWatch{
		client: client, ns: ns, keys: store.Keys{NS: ns}, parts: partitions, lg: lg, cancel: cancel, done: make(chan struct{}),
		h:      History{Specs: map[string][]SpecVersion{}, Runs: map[string]*RunHistory{}, OwnerAcquired: map[int][]time.Time{}, LastRev: from},
		owners: map[int]shard.OwnerInfo{},
		marks:  map[string]chan struct{}{},
	}
	go func() {
		defer close(w.done)
		w.loop(ctx)
	}()
	return w
}

func (w *historyWatch) loop(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		from := w.h.LastRev + 1
		w.mu.Unlock()
		wch := w.client.Watch(ctx, w.ns, clientv3.WithPrefix(), clientv3.WithRev(from))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				w.lg.Warn("history watch interrupted; resuming", zap.Error(err), zap.Int64("from", from))
				break
			}
			now := time.Now()
			w.mu.Lock()
			for _, ev := range wr.Events {
				w.applyLocked(ev, now)
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the watch.
func (w *historyWatch) stop() {
	w.cancel()
	<-w.done
}

// mark writes a marker key and waits until the watch has seen it, so that
// the history holds every write committed before mark was called.
func (w *historyWatch) mark(ctx context.Context, name string) error {
	key := w.ns + "chaos/" + name
	ch := make(chan struct{})
	w.mu.Lock()
	w.marks[key] = ch
	w.mu.Unlock()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.client.Put(pctx, key, time.Now().UTC().Format(time.RFC3339Nano))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("history mark: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("history watch did not deliver mark %s: %w", name, ctx.Err())
	}
}

// snapshot returns the history (it must not be used while the watch runs).
func (w *historyWatch) snapshot() History {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.h
}

// openRuns returns how many runs of existing jobs are not final yet, and
// how many jobs exist, as the history shows them.
func (w *historyWatch) openRuns() (open int, jobs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := map[string]bool{}
	for id, vs := range w.h.Specs {
		if !vs[len(vs)-1].Deleted {
			live[id] = true
		}
	}
	for _, r := range w.h.Runs {
		if !r.Deleted && live[r.JobID] && !r.Last().Status.Final() {
			open++
		}
	}
	return open, len(live)
}

// run returns the latest run document of a run ID, if seen.
func (w *historyWatch) run(runID string) (api.Run, bool) {
	id, at, err := store.ParseRunID(runID)
	if err != nil {
		return api.Run{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.h.Runs[w.keys.Run(shard.Partition(id, w.parts), id, at)]
	if h == nil || len(h.Versions) == 0 {
		return api.Run{}, false
	}
	return h.Last(), true
}

func (w *historyWatch) applyLocked(ev *clientv3.Event, seen time.Time) {
	kv := ev.Kv
	if kv.ModRevision > w.h.LastRev {
		w.h.LastRev = kv.ModRevision
	}
	rest, ok := strings.CutPrefix(string(kv.Key), w.ns)
	if !ok {
		return
	}
	del := ev.Type == mvccpb.DELETE
	switch {
	case strings.HasPrefix(rest, "owners/"):
		w.applyOwnerLocked(strings.TrimPrefix(rest, "owners/"), kv, del, seen)
	case strings.HasPrefix(rest, "jobs/"):
		w.applySpecLocked(strings.TrimPrefix(rest, "jobs/"), kv, del, seen)
	case strings.HasPrefix(rest, "runs/"):
		w.applyRunLocked(strings.TrimPrefix(rest, "runs/"), kv, del, seen)
	case strings.HasPrefix(rest, "chaos/"):
		if ch := w.marks[string(kv.Key)]; ch != nil {
			close(ch)
			delete(w.marks, string(kv.Key))
		}
	}
}

func (w *historyWatch) applyOwnerLocked(suffix string, kv *mvccpb.KeyValue, del bool, seen time.Time) {
	p, err := strconv.Atoi(suffix)
	if err != nil {
		return
	}
	w.h.OwnerEvents++
	if del {
		delete(w.owners, p)
		return
	}
	next := shard.OwnerInfoOf(kv)
	if old, exists := w.owners[p]; exists && shard.IsRefence(old, next) {
		w.h.OwnerRefences++
		w.owners[p] = next
		return
	}
	if old, exists := w.owners[p]; exists || kv.CreateRevision != kv.ModRevision {
		w.h.OwnerOverlaps = append(w.h.OwnerOverlaps, OwnerOverlap{Partition: p, Rev: kv.ModRevision,
			Detail: fmt.Sprintf("owner key written by %q (created at %d) while held by %q (epoch %d)", kv.Value, kv.CreateRevision, old.Member, old.Epoch)})
	}
	w.owners[p] = next
	w.h.OwnerAcquired[p] = append(w.h.OwnerAcquired[p], seen)
}

// applySpecLocked records a write under jobs/: "<p>/<escaped id>" is a
// spec, "<p>/!paused/<escaped id>" a pause key, recorded as a version of
// the spec with its state (the job's document and its pause key are one
// setting, the later write deciding: store.PauseKey); trigger keys, and
// the noisy tenant's job, are ignored.
func (w *historyWatch) applySpecLocked(suffix string, kv *mvccpb.KeyValue, del bool, seen time.Time) {
	ps, esc, ok := strings.Cut(suffix, "/")
	if p, err := strconv.Atoi(ps); ok && err == nil {
		if id, ok := w.keys.ParsePauseKey(p, string(kv.Key)); ok {
			if !strings.HasPrefix(id, noisyPrefix) {
				w.applyPauseLocked(id, kv, del, seen)
			}
			return
		}
	}
	if !ok || strings.Contains(esc, "/") {
		return
	}
	id, err := api.UnescapeID(esc)
	if err != nil || strings.HasPrefix(id, noisyPrefix) {
		// The noisy tenant's job is not checked (its writes, megabytes
		// each, many a second, are not kept).
		return
	}
	v := SpecVersion{Rev: kv.ModRevision, Seen: seen, Deleted: del}
	if !del {
		j, err := store.DecodeStoredJob(kv.Value, kv.ModRevision)
		if err != nil {
			w.lg.Warn("undecodable job spec in history", zap.String("job_id", id), zap.Error(err))
			return
		}
		v.Job = j
	}
	w.h.Specs[id] = append(w.h.Specs[id], v)
}

// applyPauseLocked records a write of job id's pause key as a version of
// its spec: the last one's document with the key's state. A deleted key
// (the job was replaced or deleted, in the same revision) records
// nothing.
func (w *historyWatch) applyPauseLocked(id string, kv *mvccpb.KeyValue, del bool, seen time.Time) {
	vs := w.h.Specs[id]
	if del || len(vs) == 0 || vs[len(vs)-1].Deleted {
		return
	}
	pk, err := store.DecodePause(kv.Value, kv.ModRevision)
	if err != nil {
		w.lg.Warn("undecodable pause key in history", zap.String("job_id", id), zap.Error(err))
		return
	}
	last := vs[len(vs)-1]
	w.h.Specs[id] = append(vs, SpecVersion{Rev: kv.ModRevision, Seen: seen, Job: pk.Apply(last.Job)})
}

// applyRunLocked records a write under runs/: "<p>/<escaped id>/<time>".
func (w *historyWatch) applyRunLocked(suffix string, kv *mvccpb.KeyValue, del bool, seen time.Time) {
	parts := strings.Split(suffix, "/")
	if len(parts) != 3 {
		return
	}
	p, err1 := strconv.Atoi(parts[0])
	id, err2 := api.UnescapeID(parts[1])
	at, err3 := time.Parse(api.TimeFormat, parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	key := string(kv.Key)
	h := w.h.Runs[key]
	if h == nil {
		h = &RunHistory{Key: key, Partition: p, JobID: id, At: at}
		w.h.Runs[key] = h
	}
	if del {
		h.Deleted, h.DeletedRev = true, kv.ModRevision
		return
	}
	var r api.Run
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		h.Corrupt = append(h.Corrupt, fmt.Sprintf("rev %d: %v", kv.ModRevision, err))
		return
	}
	if r.ID != store.RunID(id, at) || r.JobID != id || !r.ScheduledAt.Equal(at) || r.Partition != p {
		h.Corrupt = append(h.Corrupt, fmt.Sprintf("rev %d: document says run %q of job %q at %v in partition %d", kv.ModRevision, r.ID, r.JobID, r.ScheduledAt, r.Partition))
	}
	if kv.CreateRevision == kv.ModRevision {
		o := w.owners[p]
		h.Creates = append(h.Creates, RunCreate{Rev: kv.ModRevision, Seen: seen, Owner: r.Owner, Epoch: r.Epoch, KeyOwner: o.Member, KeyEpoch: o.Epoch})
		h.Deleted = false
	}
	h.Versions = append(h.Versions, RunVersion{Rev: kv.ModRevision, Seen: seen, Run: r})
}
