package scaling

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// baseline is n orchestrators of the global-lock or no-coordination
// design.
type baseline struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dups   atomic.Int64
	errs   atomic.Int64
}

func (b *baseline) stop() (int, int) {
	b.cancel()
	b.wg.Wait()
	return int(b.dups.Load()), int(b.errs.Load())
}

// startBaseline starts n baseline orchestrators on namespace ns: with
// lock, each cycle holds the global mutex; recurring moves each fired
// job's due-index entry one second on (the "@every 1s" schedule).
func (e *env) startBaseline(ctx context.Context, ns string, n int, lock, recurring bool) (runner, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &baseline{cancel: cancel}
	for i := range n {
		m := &baselineMember{
			env: e, b: b, ns: ns, id: fmt.Sprintf("baseline-%d", i+1),
			client: e.clients[i], keys: store.Keys{NS: ns}, recurring: recurring,
		}
		if lock {
			s, err := concurrency.NewSession(m.client, concurrency.WithTTL(int(e.cfg.LeaseTTL.Seconds())))
			if err != nil {
				b.stop()
				return nil, fmt.Errorf("lock session: %w", err)
			}
			m.session = s
			m.mutex = concurrency.NewMutex(s, ns+"lock")
		}
		b.wg.Go(func() { m.loop(ctx) })
	}
	return b, nil
}

type baselineMember struct {
	env       *env
	b         *baseline
	ns, id    string
	client    *clientv3.Client
	keys      store.Keys
	recurring bool
	session   *concurrency.Session // global-lock only
	mutex     *concurrency.Mutex
}

func (m *baselineMember) loop(ctx context.Context) {
	if m.session != nil {
		defer m.session.Close()
	}
	for ctx.Err() == nil {
		var fence []clientv3.Cmp
		if m.mutex != nil {
			if err := m.mutex.Lock(ctx); err != nil {
				if ctx.Err() == nil {
					m.b.errs.Add(1)
				}
				continue
			}
			fence = []clientv3.Cmp{m.mutex.IsOwner()}
		}
		wait := m.cycle(ctx, fence)
		if m.mutex != nil {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.mutex.Unlock(uctx); err != nil {
				m.b.errs.Add(1)
			}
			cancel()
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

type dueEntry struct {
	key string
	id  string
	at  time.Time
}

// cycle reads the earliest due-index entries and fires those that are due,
// FireBatch runs per transaction (conditional on fence), one transaction
// after the other. It returns how long to wait before the next cycle.
func (m *baselineMember) cycle(ctx context.Context, fence []clientv3.Cmp) time.Duration {
	cfg := m.env.cfg
	limit := cfg.FireBatch
	if m.mutex != nil {
		limit *= cfg.LockBatches
	}
	prefix := duePrefix(m.ns)
	resp, err := m.client.Get(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(int64(limit)))
	if err != nil {
		if ctx.Err() == nil {
			m.b.errs.Add(1)
		}
		return 10 * time.Millisecond
	}
	now := time.Now()
	var due []dueEntry
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), prefix)
		ms, esc, ok := strings.Cut(rest, "/")
		msv, err := strconv.ParseInt(ms, 10, 64)
		id, uerr := api.UnescapeID(esc)
		if !ok || err != nil || uerr != nil {
			continue
		}
		at := time.UnixMilli(msv)
		if at.After(now) {
			break
		}
		due = append(due, dueEntry{key: string(kv.Key), id: id, at: at})
	}
	if len(due) == 0 {
		if len(resp.Kvs) == 0 {
			return 100 * time.Millisecond
		}
		ms, _, _ := strings.Cut(strings.TrimPrefix(string(resp.Kvs[0].Key), prefix), "/")
		v, _ := strconv.ParseInt(ms, 10, 64)
		return min(max(time.Until(time.UnixMilli(v)), time.Millisecond), 100*time.Millisecond)
	}
	for i := 0; i < len(due); i += cfg.FireBatch {
		if !m.fire(ctx, fence, due[i:min(i+cfg.FireBatch, len(due))], now) {
			break
		}
	}
	return 0
}

// fire records the runs of entries in one transaction: per run, created
// only if absent together with its queue entry and the move of its due
// entry. It returns false if the transaction failed.
func (m *baselineMember) fire(ctx context.Context, fence []clientv3.Cmp, entries []dueEntry, now time.Time) bool {
	p := m.env.cfg.Partitions
	ops := make([]clientv3.Op, 0, len(entries))
	for _, d := range entries {
		j := api.Job{ID: d.id, Partition: shard.Partition(d.id, p)}
		r := dispatch.NewRun(&j, d.at, now, m.id, 0)
		val, _ := json.Marshal(r)
		runKey := m.keys.Run(j.Partition, d.id, d.at)
		then := []clientv3.Op{
			clientv3.OpPut(runKey, string(val)),
			clientv3.OpPut(m.keys.Queue(j.Partition, d.id, d.at), ""),
			clientv3.OpDelete(d.key),
		}
		if m.recurring {
			then = append(then, clientv3.OpPut(dueKey(m.ns, d.at.Add(time.Second), d.id), ""))
		}
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)}, then, nil))
	}
	resp, err := m.client.Txn(ctx).If(fence...).Then(ops...).Commit()
	if err != nil {
		if ctx.Err() == nil {
			m.b.errs.Add(1)
		}
		return false
	}
	if !resp.Succeeded { // the lock was lost
		m.b.errs.Add(1)
		return false
	}
	for _, r := range resp.Responses {
		if !r.GetResponseTxn().Succeeded {
			m.b.dups.Add(1)
		}
	}
	return true
}
