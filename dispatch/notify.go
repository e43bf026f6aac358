package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// Sender delivers one notification: it POSTs o.Run to o.URL with o's
// headers and the Jobfleet-* ones, and returns nil only on a 2xx answer.
// It must obey the fleet's destination policy; an error wrapping
// ErrNotificationRefused says the policy refused the destination, and the
// notification is given up without another try. Safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, o store.Outbox) error
}

// NotifyConfig configures run notifications.
type NotifyConfig struct {
	// Sender delivers them; nil turns notifications off (no outbox is
	// written, none delivered).
	Sender Sender
	// Default are the notify entries of jobs that have none (the fleet's
	// --notify-url and --notify-on).
	Default []store.Notification
	// MaxAge is how long a notification is retried, from the status it
	// reports, before it is given up (counted and logged). Default
	// DefaultNotifyMaxAge.
	MaxAge time.Duration
	// Backoff bounds the waits between tries. Default 1s doubling to 5m.
	Backoff retry.Policy
	// SendTimeout bounds one try. Default 10s.
	SendTimeout time.Duration
}

func (c *NotifyConfig) setDefaults() {
	if c.MaxAge == 0 {
		c.MaxAge = DefaultNotifyMaxAge
	}
	if c.Backoff.Initial == 0 {
		c.Backoff = retry.Policy{Initial: time.Second, Max: 5 * time.Minute}
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = 10 * time.Second
	}
}

// outboxBudget bounds the run documents a status write copies into
// notifications: beyond it they are copied without attempt outputs, so
// that the write stays well within etcd's request limit.
const outboxBudget = 256 << 10

// notificationsFor returns the outbox writes for run r, written as val
// over prev, of the job whose compacted work is work: one per notify entry
// (the job's, else the fleet's default) subscribed to r's new status.
// Nothing unless r reached failed (a new failed attempt), dead or
// succeeded.
func (pt *partition) notificationsFor(work compactedWork, prev, r store.Run, val []byte, now time.Time) ([]clientv3.Op, []outboxEntry) {
	cfg := pt.d.cfg.Notify
	if cfg.Sender == nil {
		return nil, nil
	}
	switch r.Status {
	case store.RunFailed, store.RunDead, store.RunSucceeded:
	default:
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
	var out []outboxEntry
	for i, n := range subs {
		if !n.Notifies(r.Status) {
			continue
		}
		if len(val)*(len(subs)+1) > outboxBudget {
			if b, err := json.Marshal(withoutOutputs(r)); err == nil {
				val = b
			}
		}
		o := store.Outbox{RunID: r.ID, JobID: r.JobID, Event: r.Status, Attempt: len(r.Attempts), URL: n.URL, Headers: n.Headers, Run: val, CreatedAt: now.UTC()}
		b, err := json.Marshal(o)
		if err != nil {
			continue
		}
		key := pt.d.keys.Outbox(pt.p, r.ID, r.Status, len(r.Attempts), i)
		ops = append(ops, clientv3.OpPut(key, string(b)))
		out = append(out, outboxEntry{key: key, o: o})
	}
	return ops, out
}

// outboxEntry is a notification the partition's notifier delivers.
type outboxEntry struct {
	key  string
	o    store.Outbox
	next time.Time      // not tried before
	bo   *retry.Backoff // nil until the first failure
}

// notifier delivers a partition's notifications: those found in etcd
// when the partition is taken (a former owner's, whether it crashed or
// handed over mid-delivery) and those its own writes add. Each is deleted
// (fenced) after a 2xx answer, or given up after MaxAge.
type notifier struct {
	pt *partition

	mu      sync.Mutex // guards pending
	pending map[string]*outboxEntry
	wake    chan struct{} // buffer 1
}

func newNotifier(pt *partition) *notifier {
	return &notifier{pt: pt, pending: map[string]*outboxEntry{}, wake: make(chan struct{}, 1)}
}

// add queues entries for delivery now.
func (n *notifier) add(es []outboxEntry) {
	if n == nil || len(es) == 0 {
		return
	}
	n.mu.Lock()
	for _, e := range es {
		if n.pending[e.key] == nil {
			e := e
			n.pending[e.key] = &e
		}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run loads the partition's outbox and delivers until ctx ends.
func (n *notifier) run(ctx context.Context) {
	pt := n.pt
	clock := pt.d.cfg.Clock
	bo := retry.New(retry.Etcd)
	for ctx.Err() == nil {
		if err := n.load(ctx); err != nil {
			if ctx.Err() != nil {
				return // ownership ended
			}
			pt.lg.Warn("loading the partition's notifications failed; retrying", zap.Error(err))
			retry.Sleep(ctx, clock, bo.Next())
			continue
		}
		break
	}
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		timer.Stop()
		next := n.deliverDue(ctx)
		if ctx.Err() != nil {
			return
		}
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			armAt(clock, timer, next)
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		case <-timer.Chan():
		}
	}
}

func (n *notifier) load(ctx context.Context) error {
	pt := n.pt
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.client.Get(rctx, pt.d.keys.OutboxPrefix(pt.p), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	var es []outboxEntry
	for _, kv := range resp.Kvs {
		var o store.Outbox
		if err := json.Unmarshal(kv.Value, &o); err != nil {
			pt.lg.Error("undecodable notification; deleting it", zap.String("key", string(kv.Key)), zap.Error(err))
			n.remove(ctx, string(kv.Key))
			continue
		}
		es = append(es, outboxEntry{key: string(kv.Key), o: o})
	}
	n.add(es)
	return nil
}

// deliverDue tries every due notification once and returns when the next
// one is due (zero: none pending).
func (n *notifier) deliverDue(ctx context.Context) time.Time {
	pt := n.pt
	cfg := pt.d.cfg.Notify
	now := pt.now()
	n.mu.Lock()
	var due []*outboxEntry
	for _, k := range slices.Sorted(maps.Keys(n.pending)) {
		if e := n.pending[k]; !now.Before(e.next) {
			due = append(due, e)
		}
	}
	n.mu.Unlock()
	for _, e := range due {
		if ctx.Err() != nil {
			return time.Time{}
		}
		lg := pt.lg.With(zap.String("run_id", e.o.RunID), zap.String("event", string(e.o.Event)), zap.Int("attempt", e.o.Attempt))
		if now.Sub(e.o.CreatedAt) > cfg.MaxAge {
			if n.remove(ctx, e.key) {
				pt.d.cfg.Metrics.notification("given_up")
				lg.Error("notification given up: not delivered within the notify max age", zap.Duration("max_age", cfg.MaxAge), zap.String("url", redactedURL(e.o.URL)))
			}
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, cfg.SendTimeout)
		err := cfg.Sender.Send(sctx, e.o)
		cancel()
		if err == nil {
			pt.d.cfg.Metrics.notification("delivered")
			lg.Info("notification delivered")
			if n.remove(ctx, e.key) {
				continue
			}
			err = errors.New("delivered, but deleting it failed; it will be delivered again")
		} else if errors.Is(err, ErrNotificationRefused) {
			// No later try can succeed: retrying until MaxAge would only
			// repeat the refusal.
			if n.remove(ctx, e.key) {
				pt.d.cfg.Metrics.notification("given_up")
				lg.Error("notification given up: its destination is refused", zap.String("url", redactedURL(e.o.URL)), zap.Error(err))
				continue
			}
			pt.d.cfg.Metrics.notification("failed")
		} else {
			pt.d.cfg.Metrics.notification("failed")
		}
		if ctx.Err() != nil {
			return time.Time{}
		}
		n.mu.Lock()
		if e.bo == nil {
			e.bo = retry.New(cfg.Backoff)
			lg.Warn("notification not delivered; retrying with backoff", zap.Error(err))
		}
		e.next = pt.now().Add(e.bo.Next())
		n.mu.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var next time.Time
	for _, e := range n.pending {
		if next.IsZero() || e.next.Before(next) {
			next = e.next
		}
	}
	return next
}

// remove deletes a notification from etcd (fenced on the partition's
// epoch) and from memory; false if the delete failed (it is tried again
// with the next delivery).
func (n *notifier) remove(ctx context.Context, key string) bool {
	pt := n.pt
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	if _, err := pt.d.commits.commit(rctx, pt.own, []clientv3.Op{clientv3.OpDelete(key)}); err != nil {
		if !errors.Is(err, shard.ErrFenced) && ctx.Err() == nil {
			pt.lg.Warn("deleting a delivered notification failed; it may be delivered again", zap.String("key", key), zap.Error(err))
		}
		return false
	}
	n.mu.Lock()
	delete(n.pending, key)
	n.mu.Unlock()
	return true
}

// redactedURL returns raw without user information or query (for logs).
func redactedURL(raw string) string {
	for i, c := range raw {
		if c == '?' {
			return raw[:i] + "?…"
		}
	}
	return raw
}
