package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// PartitionState returns every partition's placement and the member view
// as this member's watches last saw them, and a channel closed when that
// changes; ErrNotStarted before the member knows the partition count. The
// returned Rows must not be modified.
func (o *Orchestrator) PartitionState() (api.PartitionStreamSnapshot, <-chan struct{}, error) {
	o.mu.Lock()
	f := o.feed
	o.mu.Unlock()
	if f == nil {
		return api.PartitionStreamSnapshot{}, nil, ErrNotStarted
	}
	s, ch := f.current()
	if s.Rows == nil { // the feed has not read its sources yet
		return api.PartitionStreamSnapshot{}, nil, ErrNotStarted
	}
	return s, ch, nil
}

// Placement returns where job ID id lands: its hash, partition, the
// partition's ring target and owner, and why. id must be a valid job ID
// (the caller checks); the job need not exist. Errors: ErrNotStarted, or
// the store's for the existence check (classified by store.Classify).
func (o *Orchestrator) Placement(ctx context.Context, id string) (api.Placement, error) {
	st, _, err := o.PartitionState()
	if err != nil {
		return api.Placement{}, err
	}
	jobs, err := o.Jobs()
	if err != nil {
		return api.Placement{}, err
	}
	h := shard.Hash(id)
	p := shard.Partition(id, st.Partitions)
	row := st.Rows[p]
	pl := api.Placement{
		Job:        id,
		Hash:       fmt.Sprintf("%016x", h),
		Partitions: st.Partitions,
		Partition:  p,
		Target:     row.Target,
		Owner:      row.Owner,
		Epoch:      row.Epoch,
		OwnerSince: row.Since,
		Reason:     placementReason(row.Owner, row.Target),
	}
	switch _, err := jobs.Get(ctx, id); {
	case err == nil:
		pl.Exists = true
	case errors.Is(err, store.ErrNotFound):
	default:
		return api.Placement{}, err
	}
	return pl, nil
}

// placementReason says in one sentence why a partition with ring target
// target is owned by owner.
func placementReason(owner, target string) string {
	switch {
	case owner == "" && target == "":
		return "no owner: no member is registered"
	case owner == "":
		return fmt.Sprintf("no owner: partition being acquired by %s", target)
	case owner == target:
		return "owner is the ring's target"
	case target == "":
		return fmt.Sprintf("%s still holds it while the ring has no target", owner)
	}
	return fmt.Sprintf("handoff in progress from %s to %s: the owner keeps the partition until it has stopped its work there, then %s takes it", owner, target, target)
}

// Overview returns the fleet as this member sees it and this member's own
// activity; ErrNotStarted before it knows the partition count.
func (o *Orchestrator) Overview() (api.Overview, error) {
	st, _, err := o.PartitionState()
	if err != nil {
		return api.Overview{}, err
	}
	now := o.cfg.Clock.Now().UTC()
	ready, reason := o.Ready()
	ov := api.Overview{Member: o.cfg.ID, Now: now, Ready: ready, ReadyReason: reason, Partitions: st.Partitions, Members: []api.OverviewMember{}}
	owned, targeted := map[string]int{}, map[string]int{}
	for _, r := range st.Rows {
		if r.Owner == "" {
			ov.Unowned++
		} else {
			owned[r.Owner]++
		}
		if r.Owner != r.Target {
			ov.Moving++
		}
		targeted[r.Target]++
	}
	for _, m := range o.Members().Members {
		ov.Members = append(ov.Members, api.OverviewMember{
			ID: m.ID, Addr: m.Addr, RegisteredAt: m.StartedAt.UTC(),
			LeaseAgeSeconds: max(now.Sub(m.StartedAt).Seconds(), 0),
			Owned:           owned[m.ID], Targeted: targeted[m.ID],
		})
	}
	t := o.dispMet.Totals()
	ov.Activity = api.Activity{FiresTotal: t.Fires, LagP99Seconds: t.LagP99, RunsDead: t.Dead, RunsFailed: t.Failed}
	if d, err := o.Dispatcher(); err == nil {
		ds := d.Stats()
		ov.Activity.RunsWaiting, ov.Activity.RunsRunning = float64(ds.Waiting), float64(ds.Running)
	}
	return ov, nil
}
