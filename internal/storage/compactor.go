package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/store"
)

// Compaction is the fleet's compaction record, the JSON value of
// <namespace>compaction, written by the member that claims a round (the
// API's document).
type Compaction = api.Compaction

// CompactionKey is the key of namespace ns's compaction record.
func CompactionKey(ns string) string { return ns + "compaction" }

// ReadCompaction returns namespace ns's compaction record, the zero record
// if the fleet never compacted.
func ReadCompaction(ctx context.Context, kv clientv3.KV, ns string) (Compaction, error) {
	resp, err := kv.Get(ctx, CompactionKey(ns))
	if err != nil {
		return Compaction{}, fmt.Errorf("storage: read compaction record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Compaction{}, nil
	}
	return decodeCompaction(resp.Kvs[0].Value)
}

func decodeCompaction(val []byte) (Compaction, error) {
	var c Compaction
	if err := json.Unmarshal(val, &c); err != nil {
		return Compaction{}, fmt.Errorf("storage: compaction record is corrupt: %w", err)
	}
	return c, nil
}

// Compactor takes part in the fleet's compaction rounds (see the package
// documentation). Create it with NewCompactor and run it with Run.
type Compactor struct {
	client *clientv3.Client
	cfg    Config
	key    string
	lg     *zap.Logger
	// due and rounded are the monitor's (CompactOnHistory): a round is
	// due early when due receives, and rounded is called after every
	// round. Nil: rounds on the clock only.
	due     <-chan struct{}
	rounded func()
	checked func() (rev int64, at time.Time)
}

// NewCompactor validates cfg and returns a compactor. It starts nothing.
func NewCompactor(client *clientv3.Client, cfg Config) (*Compactor, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Compactor{
		client: client,
		cfg:    cfg,
		key:    CompactionKey(cfg.Namespace),
		lg:     cfg.Logger.Named("compaction").With(zap.String("member", cfg.Member)),
	}, nil
}

// round is what a member remembers between its rounds.
type round struct {
	// seen is the compaction record's version (0: no record) at the
	// previous round; a claim succeeds only if it is unchanged.
	seen int64
	// rev is the revision observed at the previous round, 0 before it:
	// the revision this round compacts to, at least one interval old.
	rev int64
	// failing is set while rounds fail, so that only the first failure
	// is logged.
	failing bool
}

// CompactOnHistory makes the compactor's rounds also start early, at
// least MinCompactionGap apart, when m finds the history written since
// the last round above Config.CompactionBytes (Monitor.NoteWritten,
// Monitor.Check). Call it before Run, with the monitor of the same member
// (run too).
func (c *Compactor) CompactOnHistory(m *Monitor) {
	c.due, c.rounded, c.checked = m.due, m.rounded, m.checked
}

// Run takes part in a round every interval, and earlier when history
// grows fast (CompactOnHistory), until ctx is cancelled, and returns nil
// then. With compaction off it returns nil at once. Errors are logged and
// the round retried at the next interval.
func (c *Compactor) Run(ctx context.Context) error {
	if c.cfg.CompactionInterval <= 0 {
		c.lg.Info("compaction is left to etcd (compaction interval 0)")
		return nil
	}
	var r round
	trigger := triggerInterval
	for {
		last := c.cfg.Clock.Now()
		r = c.round(ctx, r, trigger)
		if c.rounded != nil {
			c.rounded()
		}
		prev := trigger
		var ok bool
		if trigger, ok = c.wait(ctx); !ok {
			return nil
		}
		if trigger == triggerHistory {
			// At least MinCompactionGap after the last round: the
			// revision it observed is what this one compacts to.
			if !retry.Sleep(ctx, c.cfg.Clock, MinCompactionGap-c.cfg.Clock.Since(last)) {
				return nil
			}
			c.cfg.Metrics.historyRound()
			if prev != triggerHistory {
				c.lg.Info("etcd's history grew past the compaction size before the interval ended: compacting now, then as often as it does (at most every MinCompactionGap)",
					zap.Int64("compaction_bytes", c.cfg.CompactionBytes), zap.Duration("min_gap", MinCompactionGap))
			}
		}
	}
}

// Why a round starts.
const (
	triggerInterval = "interval" // the compaction interval passed
	triggerHistory  = "history"  // the history since the last round passed the compaction size
)

// wait waits for the next round: the interval, or the monitor saying the
// history is too large; ok is false once ctx ends.
func (c *Compactor) wait(ctx context.Context) (trigger string, ok bool) {
	t := c.cfg.Clock.NewTimer(c.cfg.CompactionInterval)
	defer t.Stop()
	select {
	case <-t.Chan():
		return triggerInterval, true
	case <-c.due:
		return triggerHistory, true
	case <-ctx.Done():
		return "", false
	}
}

// round runs one round: with no revision from a previous round it only
// observes; otherwise it claims the round if nobody did since its
// previous one, and compacts to that round's revision.
func (c *Compactor) round(ctx context.Context, r round, trigger string) round {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	if r.rev == 0 {
		resp, err := c.client.Get(rctx, c.key)
		if err != nil {
			return c.failed(ctx, r, "reading the compaction record failed", err)
		}
		r.seen = 0
		if len(resp.Kvs) == 1 {
			r.seen = resp.Kvs[0].Version
			c.adopt(resp.Kvs[0].Value)
		}
		r.rev, r.failing = resp.Header.Revision, false
		return r
	}
	target := r.rev
	if trigger == triggerHistory && c.checked != nil {
		// The revision of the monitor's last check, if newer and at
		// least MinCompactionGap old: after a quiet interval the
		// previous round's is from long before the writes.
		if rev, at := c.checked(); rev > target && !at.IsZero() && c.cfg.Clock.Since(at) >= MinCompactionGap {
			target = rev
		}
	}
	rec := Compaction{Member: c.cfg.Member, Revision: target, At: c.cfg.Clock.Now().UTC(), Interval: api.Duration(c.cfg.CompactionInterval)}
	val, err := json.Marshal(rec)
	if err != nil {
		return c.failed(ctx, r, "encoding the compaction record failed", err)
	}
	resp, err := c.client.Txn(rctx).
		If(clientv3.Compare(clientv3.Version(c.key), "=", r.seen)).
		Then(clientv3.OpPut(c.key, string(val))).
		Else(clientv3.OpGet(c.key)).
		Commit()
	if err != nil {
		if errors.Is(store.Classify(err), store.ErrNoSpace) {
			// The claim is a write, refused under the NOSPACE alarm;
			// compaction is not. Compact unclaimed: other members may
			// do the same, which is harmless.
			c.compact(rctx, target, trigger, "unclaimed, etcd's NOSPACE alarm is raised")
			return r // the same revision again next round: only older
		}
		return c.failed(ctx, r, "claiming a compaction round failed", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		// Another member claimed since our previous round: it compacts.
		r.seen = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			r.seen = kvs[0].Version
			c.adopt(kvs[0].Value)
		}
		r.rev, r.failing = cur, false
		return r
	}
	r.seen++ // our put made the record's version one more
	c.compact(rctx, rec.Revision, trigger, "")
	r.rev, r.failing = cur, false
	return r
}

// compact compacts etcd to rev and logs and counts the outcome. A round
// started by the history's size logs at debug level: under a flood of
// writes they come every MinCompactionGap (Run logs when they start).
func (c *Compactor) compact(ctx context.Context, rev int64, trigger, note string) {
	start := c.cfg.Clock.Now()
	_, err := c.client.Compact(ctx, rev)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		// Another fleet on this etcd, or etcd's own auto-compaction, is
		// past rev already.
		c.cfg.Metrics.compaction("already_compacted")
		c.lg.Info("etcd history is compacted past this round's revision already", zap.Int64("revision", rev))
	case err != nil:
		c.cfg.Metrics.compaction("failed")
		c.lg.Warn("compacting etcd failed; the next round compacts further", zap.Int64("revision", rev), zap.Error(err))
	default:
		c.cfg.Metrics.compaction("ok")
		c.cfg.Metrics.setCompacted(rev)
		fields := []zap.Field{zap.Int64("revision", rev), zap.String("trigger", trigger), zap.Duration("took", c.cfg.Clock.Since(start))}
		if trigger == triggerInterval {
			fields = append(fields, zap.Duration("kept", c.cfg.CompactionInterval))
		}
		if note != "" {
			fields = append(fields, zap.String("note", note))
		}
		lvl := zap.InfoLevel
		if trigger == triggerHistory {
			lvl = zap.DebugLevel
		}
		c.lg.Log(lvl, "compacted etcd history", fields...)
	}
}

// adopt takes the compacted revision of another member's record into the
// metric.
func (c *Compactor) adopt(val []byte) {
	if rec, err := decodeCompaction(val); err == nil {
		c.cfg.Metrics.setCompacted(rec.Revision)
	}
}

// failed logs the first of consecutive failed rounds; the next round
// starts over, observing.
func (c *Compactor) failed(ctx context.Context, r round, msg string, err error) round {
	if ctx.Err() == nil && !r.failing {
		c.lg.Warn(msg+"; retrying every interval", zap.Error(err), zap.Duration("interval", c.cfg.CompactionInterval))
	}
	return round{failing: true}
}
