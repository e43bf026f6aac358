package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/store"
)

// This file has the partition's side of run notifications: the outbox
// writes that go with a run's status, reading the outbox when the
// partition is taken, and the notify.Store the delivery deletes through.
// Delivery itself is package notify's.

// Notifier delivers run notifications: it opens the outbox of each
// partition the member owns (notify.Deliverer does).
type Notifier interface {
	Open(ctx context.Context, p int, st notify.Store) *notify.Outbox
}

// outbox is what a partition needs of its notifications' delivery
// (*notify.Outbox).
type outbox interface {
	Add(es ...notify.Entry)
	DropJob(id string)
	Discard(keys ...string)
	Close()
}

// NotifyConfig configures run notifications.
type NotifyConfig struct {
	// Notifier delivers them; nil turns notifications off (no outbox is
	// written, none delivered).
	Notifier Notifier
	// Default are the notify entries of jobs that have none (the fleet's
	// --notify-url and --notify-on).
	Default []api.Notification
}

// outboxBodyBudget bounds the run document a status write stores for
// its notifications: beyond it the document is stored without attempt
// outputs, so that the write (the run, this copy, the notifications)
// stays well within etcd's request limit.
const outboxBodyBudget = 128 << 10

// notificationsFor returns the outbox writes for run r, written as val
// over prev, of the job whose compacted work is work: the run document
// once, and one notification per notify entry (the job's, else the
// fleet's default) subscribed to r's new status. Nothing unless r reached
// failed (a new failed attempt), dead, succeeded or cancelled.
func (pt *partition) notificationsFor(work compactedWork, prev, r api.Run, val []byte, now time.Time) ([]clientv3.Op, []notify.Entry) {
	cfg := pt.d.cfg.Notify
	if cfg.Notifier == nil || pt.notes == nil {
		return nil, nil
	}
	if !r.Status.Notifiable() {
		return nil, nil
	}
	if r.Status == prev.Status && len(r.Attempts) == len(prev.Attempts) {
		return nil, nil
	}
	w, err := work.decode()
	if err != nil {
		pt.lg.Error("decoding a job's notify entries failed; the fleet's default applies", zap.String("job_id", r.JobID), zap.Error(err))
	}
	subs := w.Notify
	if len(subs) == 0 {
		subs = cfg.Default
	}
	var ops []clientv3.Op
	var out []notify.Entry
	k, attempt := pt.d.keys, len(r.Attempts)
	body := k.OutboxRun(pt.p, r.JobID, r.ScheduledAt, r.Status, attempt)
	for i, n := range subs {
		if !n.Notifies(r.Status) {
			continue
		}
		o := store.Outbox{RunID: r.ID, JobID: r.JobID, Event: r.Status, Attempt: attempt, URL: n.URL, Headers: n.Headers, Format: n.Format, CreatedAt: now.UTC()}
		b, err := json.Marshal(o)
		if err != nil {
			continue
		}
		key := k.Outbox(pt.p, r.JobID, r.ScheduledAt, r.Status, attempt, i)
		ops = append(ops, clientv3.OpPut(key, string(b)))
		out = append(out, notify.Entry{Key: key, Body: body, Outbox: o})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	if len(val) > outboxBodyBudget {
		if b, err := store.EncodeRun(withoutOutputs(r)); err == nil {
			val = b
		}
	}
	if len(val) > outboxBodyBudget && len(r.Items) > 0 {
		// A run of many items: its items' statuses, without their attempts.
		s := r
		s.Items = slices.Clone(r.Items)
		for i := range s.Items {
			s.Items[i].Attempts = []api.Attempt{}
		}
		if b, err := store.EncodeRun(s); err == nil {
			val = b
		}
	}
	return append(ops, clientv3.OpPut(body, string(val))), out
}

// loadOutbox reads the partition's outbox and hands its notifications
// to the delivery: those a former owner left (it crashed or handed over
// mid-delivery) and those of this ownership's writes made before (the
// outbox ignores keys it holds). Notifications of jobs the partition
// does not know, run documents no notification needs and keys that do
// not decode are deleted. The caller holds wmu, so no job's data is
// deleted meanwhile.
func (pt *partition) loadOutbox(ctx context.Context) error {
	k := pt.d.keys
	var (
		entries []notify.Entry
		bodies  = map[string]bool{} // run document keys, true once a notification needs one
		discard []string
	)
	_, err := pt.d.rangePages(ctx, k.OutboxPrefix(pt.p), 0, loadPage, func(kv *mvccpb.KeyValue) {
		key := string(kv.Key)
		ok, parsed := k.ParseOutboxKey(pt.p, key)
		if parsed && ok.Index < 0 {
			if _, seen := bodies[key]; !seen {
				bodies[key] = false
			}
			return
		}
		var o store.Outbox
		if err := json.Unmarshal(kv.Value, &o); err != nil || (!parsed && len(o.Run) == 0) {
			pt.lg.Error("undecodable notification; deleting it", zap.String("key", key), zap.Error(err))
			discard = append(discard, key)
			return
		}
		pt.mu.Lock()
		known := pt.jobs[o.JobID] != nil
		pt.mu.Unlock()
		if !known || (parsed && ok.JobID != o.JobID) {
			discard = append(discard, key)
			return
		}
		e := notify.Entry{Key: key, Outbox: o}
		if parsed {
			e.Body = k.OutboxRun(pt.p, ok.JobID, ok.At, ok.Event, ok.Attempt)
			e.Outbox.Run = nil
			bodies[e.Body] = true
		}
		entries = append(entries, e)
	})
	if err != nil {
		return fmt.Errorf("read the outbox of partition %d: %w", pt.p, err)
	}
	for key, needed := range bodies {
		if !needed {
			discard = append(discard, key)
		}
	}
	pt.notes.Add(entries...)
	pt.notes.Discard(discard...)
	return nil
}

// readOutbox reads the partition's outbox once per ownership, after its
// load (loadOutbox); a failed read is retried with the loop's next tick.
// The caller holds wmu.
func (pt *partition) readOutbox(ctx context.Context) {
	if pt.notes == nil || pt.outboxRead {
		return
	}
	if err := pt.loadOutbox(ctx); err != nil {
		if ctx.Err() == nil {
			pt.lg.Warn("reading the partition's notifications failed; retrying", zap.Error(err))
		}
		pt.failed = true
		return
	}
	pt.outboxRead = true
}

// outboxStore is the partition's outbox in etcd as its notifications'
// delivery reads and deletes it (notify.Store).
type outboxStore struct{ pt *partition }

// Body reads the run document at key.
func (s outboxStore) Body(ctx context.Context, key string) ([]byte, error) {
	pt := s.pt
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.client.Get(rctx, key)
	if err != nil {
		return nil, store.Classify(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: %s", notify.ErrGone, key)
	}
	val := resp.Kvs[0].Value
	if bytes.Contains(val, []byte(`"item_state"`)) {
		// A run of items is stored in a compact form: receivers get the
		// API's.
		var r api.Run
		if err := json.Unmarshal(val, &r); err == nil {
			if b, err := json.Marshal(r); err == nil {
				val = b
			}
		}
	}
	return val, nil
}

// Delete deletes keys and records deliveries, merged into each job's
// kept records (read first: only this owner writes them), in one write
// fenced on the partition's epoch; a job's records are written only
// while its spec exists, so that a job deleted meanwhile keeps none.
func (s outboxStore) Delete(ctx context.Context, keys []string, deliveries []api.NotificationDelivery) error {
	pt := s.pt
	k := pt.d.keys
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	ops := make([]clientv3.Op, 0, len(keys)+len(deliveries))
	for _, key := range keys {
		ops = append(ops, clientv3.OpDelete(key))
	}
	byJob := map[string][]api.NotificationDelivery{}
	for _, d := range deliveries {
		byJob[d.JobID] = append(byJob[d.JobID], d)
	}
	jobs := slices.Sorted(maps.Keys(byJob))
	if len(jobs) > 0 {
		gets := make([]clientv3.Op, len(jobs))
		for i, id := range jobs {
			gets[i] = clientv3.OpGet(k.Deliveries(pt.p, id))
		}
		resp, err := pt.d.client.Txn(rctx).Then(gets...).Commit()
		if err != nil {
			return store.Classify(err)
		}
		for i, id := range jobs {
			kept, err := store.DecodeDeliveries(resp.Responses[i].GetResponseRange().Kvs)
			if err != nil {
				pt.lg.Warn("replacing corrupt notification deliveries", zap.String("job_id", id), zap.Error(err))
			}
			b, err := json.Marshal(api.MergeDeliveries(kept, byJob[id]))
			if err != nil {
				continue
			}
			exists := clientv3.Compare(clientv3.CreateRevision(k.Spec(pt.p, id)), ">", 0)
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{exists}, []clientv3.Op{clientv3.OpPut(k.Deliveries(pt.p, id), string(b))}, nil))
		}
	}
	_, err := pt.d.commits.commit(rctx, pt.own, ops)
	return err
}
