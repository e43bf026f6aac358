package orchestrator

import (
	"context"

	"github.com/jobfleet/jobfleet/api"
)

// LimitStatus returns limit key's use as this member sees it (the slots
// held fleet-wide, the runs waiting on the partitions owned here, the
// starts of the rate window); false if the key has no limit or the member
// has not joined the cluster.
func (o *Orchestrator) LimitStatus(key string) (api.LimitStatus, bool) {
	d, err := o.Dispatcher()
	if err != nil {
		return api.LimitStatus{}, false
	}
	return d.LimitStatus(key)
}

// RunWaitingFor returns the limit key run runID waits for on this member
// and how many runs waiting for it rank ahead of it there ("" if none, or
// if its partition is not owned here).
func (o *Orchestrator) RunWaitingFor(runID string) (string, int) {
	d, err := o.Dispatcher()
	if err != nil {
		return "", 0
	}
	return d.RunWaitingFor(runID)
}

// WaitLimits blocks until this member's limit table reflects etcd
// revision rev, or ctx ends (its error); nil at once if the member has not
// joined the cluster.
func (o *Orchestrator) WaitLimits(ctx context.Context, rev int64) error {
	d, err := o.Dispatcher()
	if err != nil {
		return nil
	}
	return d.WaitLimits(ctx, rev)
}
