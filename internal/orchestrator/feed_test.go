package orchestrator

import (
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/shard"
)

func TestPartitionFeedKeepsSinceWhileTheOwnerStays(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := newPartitionFeed(3, func() time.Time { return now })
	view := api.View{Revision: 1, Members: []api.Member{{ID: "a"}, {ID: "b"}}}
	ring, err := shard.NewRing(view.IDs(), shard.DefaultRingConfig(3))
	if err != nil {
		t.Fatal(err)
	}
	table := []shard.OwnerInfo{{Member: "a", Epoch: 5}, {Member: "b", Epoch: 6}, {}}
	f.update(table, 10, view, ring, true)
	s, ch := f.current()
	for _, r := range s.Rows {
		if r.Since != nil {
			t.Errorf("partition %d: since %v at the first update, want unknown (nil)", r.Partition, r.Since)
		}
		if r.Target != ring.Target(r.Partition) {
			t.Errorf("partition %d: target %q, want the ring's %q", r.Partition, r.Target, ring.Target(r.Partition))
		}
	}

	// Nothing changed: nothing is published.
	f.update(table, 11, view, ring, false)
	select {
	case <-ch:
		t.Fatal("an unchanged table was published again")
	default:
	}

	// Partition 1 gets a new epoch, partition 2 an owner: since is now
	// for them; partition 0 keeps its unknown since.
	now = now.Add(time.Minute)
	table = []shard.OwnerInfo{{Member: "a", Epoch: 5}, {Member: "b", Epoch: 9}, {Member: "a", Epoch: 12}}
	f.update(table, 12, view, ring, false)
	select {
	case <-ch:
	default:
		t.Fatal("a changed table was not published")
	}
	s, _ = f.current()
	if s.Rows[0].Since != nil {
		t.Errorf("partition 0 kept its owner but since became %v", s.Rows[0].Since)
	}
	for _, p := range []int{1, 2} {
		if s.Rows[p].Since == nil || !s.Rows[p].Since.Equal(now) {
			t.Errorf("partition %d: since %v, want %v", p, s.Rows[p].Since, now)
		}
	}
	if s.Revision != 12 || s.Rows[1].Epoch != 9 {
		t.Errorf("state %+v, want revision 12 and partition 1 at epoch 9", s)
	}
}

func TestPlacementReason(t *testing.T) {
	for _, tt := range []struct{ owner, target, want string }{
		{"a", "a", "owner is the ring's target"},
		{"", "b", "no owner: partition being acquired by b"},
		{"", "", "no owner: no member is registered"},
		{"a", "b", "handoff in progress from a to b"},
	} {
		if got := placementReason(tt.owner, tt.target); len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
			t.Errorf("owner %q, target %q: got %q, want it to start with %q", tt.owner, tt.target, got, tt.want)
		}
	}
}
