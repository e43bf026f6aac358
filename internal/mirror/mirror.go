// Package mirror keeps an in-memory copy of every key under an etcd prefix.
//
// A Mirror lists the prefix, then watches it from the listed revision. When
// the watch ends for any reason (history compacted, watch cancelled, no
// leader, connection lost past the client's own retries) it lists again and
// resumes, so the copy converges on etcd's state and no change is missed:
// the worst a consumer sees is several changes folded into one snapshot.
//
// Snapshots are immutable and carry the etcd revision they reflect, so a
// consumer can tell whether the mirror has caught up with a write it made
// (compare Snapshot.Revision with the write's header revision).
package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
)

// KV is one key of the mirrored prefix.
type KV struct {
	// Key is the key with the prefix removed.
	Key            string
	Value          []byte
	CreateRevision int64
	ModRevision    int64
	// Lease is the ID of the lease the key is bound to, 0 for none.
	Lease int64
}

// Snapshot is the mirrored prefix as of one etcd revision. It must not be
// modified; it is safe to share between goroutines.
type Snapshot struct {
	// Revision is the etcd revision the snapshot reflects: every change up
	// to and including it is applied. 0 before the first list.
	Revision int64
	// KVs holds the keys by Key.
	KVs map[string]KV

	changed <-chan struct{}
}

// Changed returns a channel that is closed when a newer snapshot replaces
// this one.
func (s Snapshot) Changed() <-chan struct{} { return s.changed }

// Config configures a Mirror.
type Config struct {
	// Prefix is the key prefix to mirror, e.g. "/jobfleet/members/".
	Prefix string
	// Clock drives retry back-off; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives one line per re-list; nil means no logs.
	Logger *zap.Logger
}

// Mirror mirrors one prefix. Create it with New, start it with Run. Its
// methods are safe for concurrent use.
type Mirror struct {
	client *clientv3.Client
	prefix string
	clock  clockwork.Clock
	lg     *zap.Logger

	mu      sync.Mutex    // guards cur and changed
	cur     Snapshot      // latest published snapshot
	changed chan struct{} // closed and replaced on every publish; cur.changed is this
}

// New returns a mirror of cfg.Prefix. It starts nothing.
func New(client *clientv3.Client, cfg Config) (*Mirror, error) {
	if client == nil {
		return nil, errors.New("mirror: nil client")
	}
	if cfg.Prefix == "" {
		return nil, errors.New("mirror: empty prefix")
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ch := make(chan struct{})
	return &Mirror{
		client:  client,
		prefix:  cfg.Prefix,
		clock:   cfg.Clock,
		lg:      cfg.Logger,
		cur:     Snapshot{KVs: map[string]KV{}, changed: ch},
		changed: ch,
	}, nil
}

// Snapshot returns the latest snapshot. Before the first list completes its
// Revision is 0 and it holds no keys.
func (m *Mirror) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// WaitFor blocks until cond holds for the latest snapshot and returns that
// snapshot, or returns ctx's error.
func (m *Mirror) WaitFor(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	for {
		s := m.Snapshot()
		if s.Revision > 0 && cond(s) {
			return s, nil
		}
		select {
		case <-s.Changed():
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

// Run keeps the mirror current until ctx is cancelled, and returns nil then.
// Errors talking to etcd are retried with back-off, never returned.
func (m *Mirror) Run(ctx context.Context) error {
	bo := retry.New(retry.Watch)
	for {
		rev, err := m.list(ctx)
		if err == nil {
			bo.Reset()
			err = m.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := bo.Next()
		m.lg.Info("re-listing after watch ended", zap.String("prefix", m.prefix), zap.Error(err), zap.Duration("after", wait))
		if !retry.Sleep(ctx, m.clock, wait) {
			return nil
		}
	}
}

func (m *Mirror) list(ctx context.Context) (int64, error) {
	resp, err := m.client.Get(ctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("mirror: list %s: %w", m.prefix, err)
	}
	kvs := make(map[string]KV, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k := m.fromKV(kv)
		kvs[k.Key] = k
	}
	m.publish(resp.Header.Revision, kvs)
	return resp.Header.Revision, nil
}

// errWatchClosed means the client closed the watch channel, which it does
// when ctx ends or the watch can no longer be served.
var errWatchClosed = errors.New("watch channel closed")

func (m *Mirror) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := m.client.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("mirror: watch %s from %d: %w", m.prefix, rev+1, err)
		}
		if resp.Header.Revision <= rev && len(resp.Events) == 0 {
			continue
		}
		snap := m.Snapshot()
		kvs := maps.Clone(snap.KVs)
		for _, ev := range resp.Events {
			key := strings.TrimPrefix(string(ev.Kv.Key), m.prefix)
			switch ev.Type {
			case mvccpb.Event_PUT:
				kvs[key] = m.fromKV(ev.Kv)
			case mvccpb.Event_DELETE:
				delete(kvs, key)
			}
		}
		rev = resp.Header.Revision
		m.publish(rev, kvs)
	}
	return errWatchClosed
}

func (m *Mirror) fromKV(kv *mvccpb.KeyValue) KV {
	return KV{
		Key:            strings.TrimPrefix(string(kv.Key), m.prefix),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Lease:          kv.Lease,
	}
}

func (m *Mirror) publish(rev int64, kvs map[string]KV) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev < m.cur.Revision {
		return // an older list raced a newer watch response; keep the newer
	}
	next := make(chan struct{})
	m.cur = Snapshot{Revision: rev, KVs: kvs, changed: next}
	close(m.changed)
	m.changed = next
}
