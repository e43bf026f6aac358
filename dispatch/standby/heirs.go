package standby

import (
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/shard"
)

// Heirs says which standby copies a member keeps.
type Heirs struct {
	// Of are the partitions the member is the heir of (see
	// shard.Ring.Heirs: it would be given each if its owner went away):
	// their copies are made and followed.
	Of map[int]bool
	// Given are the partitions the ring gives the member: the copy of one
	// it was the heir of is kept, for its acquisition to take, but none
	// is made.
	Given map[int]bool
}

// HeirSource returns the member's Heirs and a channel closed when they may
// have changed. A Standby calls it from one goroutine only.
type HeirSource func() (Heirs, <-chan struct{})

// ControllerHeirs is the HeirSource of member id following ctrl's ring:
// the heirs are computed again each time the ring changes (not on every
// status change). It is not safe for concurrent use (one Standby calls
// it).
func ControllerHeirs(ctrl *shard.Controller, id string, lg *zap.Logger) HeirSource {
	var ring *shard.Ring
	heirs := Heirs{Of: map[int]bool{}, Given: map[int]bool{}}
	return func() (Heirs, <-chan struct{}) {
		st, changed := ctrl.Status()
		if st.Ring != ring && st.Ring != nil {
			ring = st.Ring
			h, err := ring.Heirs(id)
			if err != nil {
				lg.Warn("cannot compute the partitions this member is heir of; keeping no standby copies", zap.Error(err))
			}
			heirs = Heirs{Of: make(map[int]bool, len(h)), Given: map[int]bool{}}
			for p := range h {
				heirs.Of[p] = true
			}
			for _, p := range ring.Targets(id) {
				heirs.Given[p] = true
			}
		}
		return heirs, changed
	}
}
