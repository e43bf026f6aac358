package api

import (
	"slices"
	"strings"
	"time"
)

// Member is one registered orchestrator, as stored (JSON) under
// <namespace>members/<id> and served by GET /v1/cluster/members.
type Member struct {
	// ID is the member's stable ID, unique in the fleet.
	ID string `json:"id"`
	// Addr is the URL other members and workers use to reach it.
	Addr string `json:"addr"`
	// LeaseID is the etcd lease the registration is bound to. JSON carries
	// it as a decimal string: lease IDs exceed 2^53, which JSON numbers in
	// many clients cannot hold exactly.
	LeaseID int64 `json:"lease_id,string"`
	// StartedAt is when this registration was made.
	StartedAt time.Time `json:"started_at"`
	// Ring is the version of the partition assignment the member computes
	// (shard.RingVersion); 0 for members of builds that did not say. The
	// fleet computes the oldest version any member registered with, so
	// members of two builds agree during a rolling upgrade.
	Ring int `json:"ring,omitempty"`
}

// View is the set of live members at one etcd revision.
type View struct {
	// Revision is the etcd revision the view reflects.
	Revision int64 `json:"revision"`
	// Members is sorted by ID.
	Members []Member `json:"members"`
}

// IDs returns the member IDs in order.
func (v View) IDs() []string {
	ids := make([]string, len(v.Members))
	for i, m := range v.Members {
		ids[i] = m.ID
	}
	return ids
}

// Get returns the member with the given ID.
func (v View) Get(id string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}
