package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/shard"
)

// partitionFeed keeps the placement of every partition (owner, epoch,
// ring target, and since when this member has seen the owner hold it) and
// the member view, from the member's own watches: the owner table's
// mirror, the member view's mirror and the controller's ring. Any number
// of readers (the partition stream's clients) follow it without a watch
// of their own. It is safe for concurrent use.
type partitionFeed struct {
	p     int
	clock func() time.Time

	mu      sync.Mutex // guards the fields below
	state   api.PartitionStreamSnapshot
	changed chan struct{} // closed and replaced when state changes
}

func newPartitionFeed(p int, now func() time.Time) *partitionFeed {
	return &partitionFeed{p: p, clock: now, changed: make(chan struct{})}
}

// current returns the state (Rows must not be modified) and a channel
// closed when it is replaced.
func (f *partitionFeed) current() (api.PartitionStreamSnapshot, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state, f.changed
}

// run follows owners, members and ctrl until ctx ends.
func (f *partitionFeed) run(ctx context.Context, owners *shard.Owners, members *membership.Watcher, ctrl *shard.Controller) {
	first := true
	for {
		table, rev, ownersChanged := owners.Table(f.p)
		view, viewChanged := members.View()
		st, statusChanged := ctrl.Status()
		ring := st.Ring
		if ring == nil {
			ring, _ = shard.NewRing(view.IDs(), shard.DefaultRingConfig(f.p)) // a valid P cannot fail
		}
		f.update(table, rev, view, ring, first)
		first = false
		select {
		case <-ctx.Done():
			return
		case <-ownersChanged:
		case <-viewChanged:
		case <-statusChanged:
		}
	}
}

// update publishes the state made of table, view and ring, if it differs.
// A partition's Since is kept while its owner and epoch stay, and set to
// now when they change, except at the first update (the owner may have
// held it for long: etcd keeps no time with a key).
func (f *partitionFeed) update(table []shard.OwnerInfo, rev int64, view api.View, ring *shard.Ring, first bool) {
	if view.Members == nil {
		view.Members = []api.Member{}
	}
	members, err := json.Marshal(view)
	if err != nil {
		members = []byte(`{"revision":0,"members":[]}`) // cannot happen: plain fields
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.state.Rows
	now := f.clock().UTC()
	rows := make([]api.PartitionStreamChange, f.p)
	for i := range rows {
		r := api.PartitionStreamChange{Partition: i, Owner: table[i].Member, Epoch: table[i].Epoch}
		if ring != nil {
			r.Target = ring.Target(i)
		}
		switch {
		case i < len(old) && old[i].Owner == r.Owner && old[i].Epoch == r.Epoch:
			r.Since = old[i].Since
		case !first && r.Owner != "":
			r.Since = &now
		}
		rows[i] = r
	}
	if slices.Equal(rows, old) && bytes.Equal(members, f.state.Members) {
		return
	}
	f.state = api.PartitionStreamSnapshot{Partitions: f.p, Revision: rev, Rows: rows, Members: members}
	close(f.changed)
	f.changed = make(chan struct{})
}
