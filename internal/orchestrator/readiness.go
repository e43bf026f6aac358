package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/shard"
)

// Ready reports whether the member is registered, owns exactly the
// partitions the ring assigns it and has loaded each of them (it fires
// their due jobs); if not, it says why.
func (o *Orchestrator) Ready() (bool, string) {
	ok, reason, _ := o.ready()
	return ok, reason
}

// ready is Ready with, when the member waits for partitions to load, a
// channel closed when one loads.
func (o *Orchestrator) ready() (bool, string, <-chan struct{}) {
	o.mu.Lock()
	ctrl, registered, startErr, scheduling := o.controller, o.registered, o.startErr, o.scheduling
	o.mu.Unlock()
	switch {
	case startErr != nil:
		return false, startErr.Error(), nil
	case ctrl == nil:
		return false, "starting: reading the cluster's partition count", nil
	case !registered:
		return false, "not registered", nil
	}
	if err := o.space.WritesRefused(); err != nil {
		return false, "firing is stopped: " + err.Error(), nil
	}
	st, _ := ctrl.Status()
	if !st.Ready {
		return false, st.Reason, nil
	}
	d, err := o.Dispatcher()
	if err != nil {
		return true, "", nil // no scheduler here: nothing to load
	}
	if err := d.Health(); err != nil {
		return false, "writes to etcd are failing: " + err.Error(), nil
	}
	if !scheduling {
		return true, "", nil // the controller runs another Work (tests of ownership alone)
	}
	loading := 0
	var changed <-chan struct{}
	for _, p := range slices.Sorted(maps.Keys(st.Owned)) {
		loaded, ch := d.Loaded(p)
		if !loaded {
			loading++
			changed = ch
		}
	}
	if loading > 0 {
		return false, fmt.Sprintf("loading %d of its %d partitions", loading, len(st.Owned)), changed
	}
	return true, "", nil
}

// readyRecheck is how often WaitReady looks again at the conditions of
// Ready that announce no change (etcd's space, the dispatcher's write
// health); the others wake it at once.
const readyRecheck = time.Second

// WaitReady blocks until Ready reports true, or returns ctx's error with
// the last reason. It wakes when the member's state or its controller's
// status changes, and looks again every readyRecheck for the conditions
// that announce no change.
func (o *Orchestrator) WaitReady(ctx context.Context) error {
	t := o.cfg.Clock.NewTicker(readyRecheck)
	defer t.Stop()
	for {
		o.mu.Lock()
		changed, ctrl := o.changed, o.controller
		o.mu.Unlock()
		var status <-chan struct{}
		if ctrl != nil {
			_, status = ctrl.Status()
		}
		ok, reason, loaded := o.ready()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), reason)
		case <-changed:
		case <-status:
		case <-loaded:
		case <-t.Chan():
		}
	}
}

// Healthy returns an error if the member holds partitions but has not
// renewed its lease within the TTL plus grace: it may be acting as an owner
// it no longer is, which self-fencing should have prevented.
func (o *Orchestrator) Healthy(grace time.Duration) error {
	o.mu.Lock()
	ctrl, s := o.controller, o.session
	o.mu.Unlock()
	if ctrl == nil || s == nil {
		return nil
	}
	st, _ := ctrl.Status()
	if len(st.Owned) == 0 {
		return nil
	}
	if since := o.cfg.Clock.Since(s.LastRenewal()); since > s.TTL()+grace {
		return fmt.Errorf("owns %d partitions but last renewed its lease %v ago (TTL %v)", len(st.Owned), since.Round(time.Millisecond), s.TTL())
	}
	return nil
}

// Status returns the shard controller's status; ok is false before the
// controller exists.
func (o *Orchestrator) Status() (st shard.Status, ok bool) {
	o.mu.Lock()
	ctrl := o.controller
	o.mu.Unlock()
	if ctrl == nil {
		return shard.Status{}, false
	}
	st, _ = ctrl.Status()
	return st, true
}
