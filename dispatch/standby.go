package dispatch

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/jobfleet/jobfleet/dispatch/standby"
)

// Standby is a dispatcher's warm standby (package dispatch/standby): its
// copies hold specs decoded as the partitions' loads hold them.
type Standby = standby.Standby[jobEntry]

// NewStandby returns the warm standby of d following heirs: it reads its
// copies with d's client, as d's loads read partitions and in turn with
// them (see loadBudget.copyTurn), and d's loads build partitions from its
// copies. It starts nothing; it must be called before d's partitions run
// (before the controller), and at most once. Errors wrap
// standby.ErrInvalidConfig, or ErrInvalidConfig for a second standby.
func (d *Dispatcher) NewStandby(heirs standby.HeirSource, cfg standby.Config) (*Standby, error) {
	s, err := standby.New(standby.Member[jobEntry]{
		Client:         d.client,
		Keys:           d.keys,
		Clock:          d.cfg.Clock,
		RequestTimeout: d.cfg.RequestTimeout,
		Logger:         d.lg.Named("standby"),
		Read:           d.readCopy,
		Decode:         cacheable,
	}, heirs, cfg)
	if err != nil {
		return nil, err
	}
	if !d.standby.CompareAndSwap(nil, s) {
		return nil, fmt.Errorf("%w: the dispatcher has a standby already", ErrInvalidConfig)
	}
	return s, nil
}

// warmStandby is what a partition's load uses of the member's warm
// standby (load.go): the copy to build the partition from, if it has one
// that caught up with the ownership's epoch.
type warmStandby interface {
	Take(ctx context.Context, p int, epoch int64) *standby.Snapshot[jobEntry]
	Skip(p int)
	Loaded(warm bool)
}

// warm returns the member's warm standby, or one without copies.
func (d *Dispatcher) warm() warmStandby {
	if s := d.standby.Load(); s != nil {
		return s
	}
	return noStandby{}
}

// noStandby is the warmStandby of a member without one.
type noStandby struct{}

func (noStandby) Take(context.Context, int, int64) *standby.Snapshot[jobEntry] { return nil }
func (noStandby) Skip(int)                                                     {}
func (noStandby) Loaded(bool)                                                  {}

// readCopy reads partition p's keys for a standby copy: what a load
// reads, at one revision, in turn with the member's loads.
func (d *Dispatcher) readCopy(ctx context.Context, p int, fn func(kv *mvccpb.KeyValue)) (int64, error) {
	release, err := d.loads.copyTurn(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	k := d.keys
	rev, err := d.rangePages(ctx, k.PartitionJobsPrefix(p), 0, loadPage, fn)
	if err != nil {
		return 0, err
	}
	for _, prefix := range []string{k.StatePrefix(p), k.QueuePrefix(p), k.FailingPrefix(p)} {
		if _, err := d.rangePages(ctx, prefix, rev, loadPage, fn); err != nil {
			return 0, err
		}
	}
	if _, err := d.rangePages(ctx, k.PartitionRunsPrefix(p), rev, loadRunsPage, fn); err != nil {
		return 0, err
	}
	return rev, nil
}

// cacheable returns the spec kv decoded, or nil if it does not decode
// cleanly: a load decodes it again then, and logs why.
func cacheable(kv *mvccpb.KeyValue) *jobEntry {
	e, err := decodeEntry(kv)
	if err != nil || e == nil || e.sched.err != nil {
		return nil
	}
	return e
}
