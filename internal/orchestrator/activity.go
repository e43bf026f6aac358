package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/store"
)

// Each member keeps its last hour per minute in memory (package
// activity, fed by the dispatcher's metrics) and publishes it under
// activity/<member>, bound to its session's lease, so that any member can
// answer GET /v1/cluster/activity for the fleet with one read. A member
// gone takes its key with its lease.

// activityPrefix is where members publish their activity.
func activityPrefix(ns string) string { return ns + "activity/" }

// ownActivity samples the dispatcher and returns this member's minutes.
func (o *Orchestrator) ownActivity() api.MemberActivity {
	if d, err := o.Dispatcher(); err == nil {
		st := d.Stats()
		o.activity.Sample(st.Running, st.Waiting)
	}
	a := api.MemberActivity{Member: o.cfg.ID, Published: o.cfg.Clock.Now().UTC(), Minutes: o.activity.Minutes()}
	if d, err := o.Dispatcher(); err == nil {
		a.Late, a.LateTruncated = d.Late(api.MaxLatePerMember)
		for i := range a.Late {
			a.Late[i].Member = o.cfg.ID
		}
	}
	return a
}

// startPublishing starts publishing this member's minutes for session s
// (publishActivity) and returns the function that stops it and waits.
func (o *Orchestrator) startPublishing(s *membership.Session) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.publishActivity(ctx, s) }()
	return func() { cancel(); <-done }
}

// publishActivity publishes this member's minutes under session s's lease
// every Config.ActivityInterval (one put of about 15 KiB, so readers see
// a peer's current minute at most that late), until ctx ends; never if
// the interval is negative. A failed put is logged at
// debug level and tried again at the next tick: the charts of peers then
// show this member's figures late, nothing else depends on them.
func (o *Orchestrator) publishActivity(ctx context.Context, s *membership.Session) {
	if o.cfg.ActivityInterval < 0 {
		return
	}
	key := activityPrefix(o.cfg.Namespace) + o.cfg.ID
	t := o.cfg.Clock.NewTicker(o.cfg.ActivityInterval)
	defer t.Stop()
	for {
		val, err := json.Marshal(o.ownActivity())
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, o.sessCfg.RenewDeadline)
			_, err = o.client.Put(pctx, key, string(val), clientv3.WithLease(s.Lease()))
			cancel()
		}
		if err != nil && ctx.Err() == nil {
			o.lg.Debug("publishing activity failed; trying again at the next tick", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// Activity returns the last hour of every registered member, per minute:
// this member's taken now, the others' as they last published them
// (within Config.ActivityInterval), sorted by member ID, without their
// late runs (see Late). A member that has not published yet is listed
// without minutes. Errors are etcd's, as store.Classify names them.
func (o *Orchestrator) Activity(ctx context.Context) (api.FleetActivity, error) {
	members, err := o.fleetActivity(ctx)
	if err != nil {
		return api.FleetActivity{}, err
	}
	for i := range members {
		members[i].Late, members[i].LateTruncated = nil, false
	}
	return api.FleetActivity{Member: o.cfg.ID, Now: o.cfg.Clock.Now().UTC(), LagBounds: api.ActivityLagBounds(), Members: members}, nil
}

// Late returns the late runs of every registered member (this member's
// taken now, the others' as they last published them), the most late
// first, of every job: the caller filters them by credential.
func (o *Orchestrator) Late(ctx context.Context) (api.LateRuns, error) {
	members, err := o.fleetActivity(ctx)
	if err != nil {
		return api.LateRuns{}, err
	}
	out := api.LateRuns{Now: o.cfg.Clock.Now().UTC(), Runs: []api.LateRun{}}
	for _, m := range members {
		out.Runs = append(out.Runs, m.Late...)
		out.Truncated = out.Truncated || m.LateTruncated
	}
	slices.SortStableFunc(out.Runs, func(a, b api.LateRun) int { return a.Since.Compare(b.Since) })
	return out, nil
}

// fleetActivity returns every registered member's published activity
// (this member's taken now), sorted by member ID.
func (o *Orchestrator) fleetActivity(ctx context.Context) ([]api.MemberActivity, error) {
	prefix := activityPrefix(o.cfg.Namespace)
	resp, err := o.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, store.Classify(err)
	}
	published := map[string]api.MemberActivity{}
	for _, kv := range resp.Kvs {
		var m api.MemberActivity
		id := strings.TrimPrefix(string(kv.Key), prefix)
		if json.Unmarshal(kv.Value, &m) != nil || m.Member != id {
			continue // not one this version wrote: left out
		}
		published[id] = m
	}
	out := []api.MemberActivity{}
	for _, m := range o.Members().Members {
		switch a, ok := published[m.ID]; {
		case m.ID == o.cfg.ID:
			out = append(out, o.ownActivity())
		case ok:
			out = append(out, a)
		default:
			out = append(out, api.MemberActivity{Member: m.ID, Minutes: []api.ActivityMinute{}})
		}
	}
	slices.SortFunc(out, func(a, b api.MemberActivity) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}
