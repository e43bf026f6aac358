package dispatch

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// fireBudget bounds the runs this member has planned and not yet written
// at once, over all its partitions (Config.FiresInFlight): a partition
// takes a turn before it plans each write of fires (fire.go), in the order
// the partitions asked, and gives its room back when the write's answer
// is in.
type fireBudget struct {
	sem   *semaphore.Weighted // nil: no bound
	batch int64               // Config.FireBatch: the room a turn takes before the write is planned
	met   *Metrics
}

func newFireBudget(cfg Config) *fireBudget {
	b := &fireBudget{batch: int64(cfg.FireBatch), met: cfg.Metrics}
	if cfg.FiresInFlight > 0 {
		b.sem = semaphore.NewWeighted(int64(cfg.FiresInFlight))
	}
	return b
}

// fireTurn is a partition's room in the member's budget of fires in
// flight (Config.FiresInFlight) for one write: taken for FireBatch runs
// before the write is planned, cut to the runs it plans (at least one),
// given back when its answer is in.
type fireTurn struct {
	b    *fireBudget
	held int64 // runs of the budget held
}

// turn waits for room for one write of fires, in the order the
// partitions asked. It returns ctx's error if ctx ends first.
func (b *fireBudget) turn(ctx context.Context) (*fireTurn, error) {
	t := &fireTurn{b: b}
	if b.sem == nil {
		return t, nil
	}
	waited := b.met.fireWaits()
	err := b.sem.Acquire(ctx, b.batch)
	waited()
	if err != nil {
		return nil, err
	}
	t.held = b.batch
	b.met.firesInFlight(float64(t.held))
	return t, nil
}

// planned gives back the room the write does not use: it holds runs
// (at least one, at most what was taken).
func (t *fireTurn) planned(runs int) {
	keep := min(max(int64(runs), 1), t.held)
	if t.b.sem == nil || keep == t.held {
		return
	}
	t.b.sem.Release(t.held - keep)
	t.b.met.firesInFlight(float64(keep - t.held))
	t.held = keep
}

// done gives back the room the write holds.
func (t *fireTurn) done() {
	if t.b.sem == nil || t.held == 0 {
		return
	}
	t.b.sem.Release(t.held)
	t.b.met.firesInFlight(float64(-t.held))
	t.held = 0
}
