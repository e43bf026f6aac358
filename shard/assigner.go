package shard

import (
	"slices"
	"sync"

	"github.com/buraksezer/consistent"
)

// Assigner computes Rings for the successive member sets of one cluster.
// It keeps the previous set's hash ring and updates it with the library's
// Add and Remove, which costs a fraction of building it afresh when a few
// members join or leave (the library sorts the whole ring once per member
// added); it returns the previous Ring when the set has not changed. The
// result is always the Ring NewRing computes for the same set and config.
// Safe for concurrent use.
type Assigner struct {
	cfg RingConfig

	mu   sync.Mutex             // guards the fields below
	hr   *consistent.Consistent // hash ring of ids; nil when ids has fewer than two members
	ids  []string               // members on hr, sorted
	last *Ring                  // the ring of ids; nil before the first call
}

// NewAssigner returns an Assigner for cfg, or ErrInvalidConfig.
func NewAssigner(cfg RingConfig) (*Assigner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Assigner{cfg: cfg}, nil
}

// Config returns the ring settings.
func (a *Assigner) Config() RingConfig { return a.cfg }

// Ring returns the Ring of members, as NewRing(members, a.Config()) would.
func (a *Assigner) Ring(members []string) (*Ring, error) {
	ids := participants(members, a.cfg.Partitions)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil && slices.Equal(ids, a.ids) {
		return a.last, nil
	}
	if a.cfg.version() == 1 {
		a.ids, a.last = ids, legacyRing(ids, a.cfg)
		return a.last, nil
	}
	switch {
	case !usesHashRing(len(ids)):
		a.hr = nil
	case a.hr == nil:
		a.hr = newHashRing(ids, a.cfg)
	default:
		added, removed := diff(a.ids, ids)
		switch {
		case len(added)+len(removed) > len(ids)/2:
			// Each Add sorts the whole ring: past this point a fresh
			// build is as cheap.
			a.hr = newHashRing(ids, a.cfg)
		case len(a.ids)-len(removed) >= 2:
			// Removes first: the ring never holds more than P members
			// (the library's bound needs P/n ≥ 1) nor fewer than two
			// (it cannot place partitions on one virtual node).
			for _, id := range removed {
				a.hr.Remove(string(ringKey(id)))
			}
			for _, id := range added {
				a.hr.Add(ringKey(id))
			}
		case len(a.ids)+len(added) <= a.cfg.Partitions:
			for _, id := range added {
				a.hr.Add(ringKey(id))
			}
			for _, id := range removed {
				a.hr.Remove(string(ringKey(id)))
			}
		default:
			a.hr = newHashRing(ids, a.cfg)
		}
	}
	r, err := assign(ids, a.hr, a.cfg)
	if err != nil {
		a.hr, a.ids, a.last = nil, nil, nil
		return nil, err
	}
	a.ids, a.last = ids, r
	return r, nil
}

// diff returns the IDs in b and not in a, and in a and not in b; both
// sorted.
func diff(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}
