package dispatch

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/semaphore"
)

// loadBudget bounds the member's loads of the partitions it acquires: the
// partitions loading at once (Config.LoadsInFlight) and the jobs they load
// (Config.LoadJobsInFlight, each load weighing its partition's keys).
// Waiters are served in the order they came; a load takes a slot, then its
// jobs. It also counts the partitions waiting for their load or loading:
// the warm standby reads its copies, each holding a slot, only while there
// are none (copyTurn).
type loadBudget struct {
	slots   *semaphore.Weighted // nil: no bound on the partitions
	jobs    *semaphore.Weighted // nil: no bound on the jobs
	pending loadGate
}

func newLoadBudget(cfg Config) *loadBudget {
	b := &loadBudget{}
	if cfg.LoadsInFlight > 0 {
		b.slots = semaphore.NewWeighted(int64(cfg.LoadsInFlight))
	}
	if cfg.LoadJobsInFlight > 0 {
		b.jobs = semaphore.NewWeighted(int64(cfg.LoadJobsInFlight))
	}
	return b
}

// loadInTurn waits for one of the member's load slots
// (Config.LoadsInFlight), then for room for the partition's jobs in the
// member's load budget (Config.LoadJobsInFlight), each in the order the
// partitions asked, then loads the partition. It returns ctx's error if
// ctx ends first, or the error of counting the partition's jobs.
func (pt *partition) loadInTurn(ctx context.Context) (int64, error) {
	d := pt.d
	waited := d.cfg.Metrics.loadWaits()
	weight, err := pt.awaitLoadTurn(ctx)
	waited()
	if err != nil {
		return 0, err
	}
	defer pt.endLoadTurn(weight)
	clock := d.cfg.Clock
	start := clock.Now()
	took := d.cfg.Metrics.loadStarts(weight)
	if d.loadHook != nil {
		defer d.loadHook(pt.p)()
	}
	rev, err := pt.load(ctx)
	took(clock.Since(start).Seconds())
	return rev, err
}

// awaitLoadTurn acquires a load slot and the partition's weight in jobs
// of the load budget (see loadInTurn), and returns that weight (0 without
// a budget). On an error it holds nothing.
func (pt *partition) awaitLoadTurn(ctx context.Context) (int64, error) {
	d, b := pt.d, pt.d.loads
	if b.slots != nil {
		if err := b.slots.Acquire(ctx, 1); err != nil {
			return 0, err
		}
	}
	if b.jobs == nil {
		return 0, nil
	}
	// The count is a weight, not part of the load: serializable, it needs
	// neither a read index nor the revision the load will read at.
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	resp, err := d.client.Get(rctx, d.keys.PartitionJobsPrefix(pt.p), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	cancel()
	weight := int64(0)
	if err == nil {
		weight = min(max(resp.Count, 1), int64(d.cfg.LoadJobsInFlight))
		err = b.jobs.Acquire(ctx, weight)
	} else {
		err = fmt.Errorf("count the jobs of partition %d before loading it: %w", pt.p, err)
	}
	if err != nil {
		if b.slots != nil {
			b.slots.Release(1)
		}
		return 0, err
	}
	return weight, nil
}

// endLoadTurn gives back what awaitLoadTurn acquired.
func (pt *partition) endLoadTurn(weight int64) {
	b := pt.d.loads
	if weight > 0 {
		b.jobs.Release(weight)
	}
	if b.slots != nil {
		b.slots.Release(1)
	}
}

// copyTurn waits until no partition of the member waits for its load or
// loads (the member's own loads go first), then for a load slot, for the
// read of a standby copy; release gives the slot back. It returns ctx's
// error if ctx ends first.
func (b *loadBudget) copyTurn(ctx context.Context) (release func(), err error) {
	if err := b.pending.wait(ctx); err != nil {
		return nil, err
	}
	if b.slots == nil {
		return func() {}, nil
	}
	if err := b.slots.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return func() { b.slots.Release(1) }, nil
}

// loadGate counts the partitions waiting for their load or loading.
type loadGate struct {
	mu   sync.Mutex // guards n and idle
	n    int
	idle chan struct{} // closed when n is 0; nil: never made (n is 0)
}

func (g *loadGate) add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n += d
	switch {
	case g.n == 0 && g.idle != nil:
		close(g.idle)
	case g.n == d && d > 0: // from 0
		g.idle = make(chan struct{})
	}
}

// wait returns once no partition waits for its load or loads, or ctx's
// error.
func (g *loadGate) wait(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	n := g.n
	g.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
