package shard

import "slices"

// Heirs returns the partitions member id is the heir of in r: for each
// partition p whose target is another member X, the heir is the target of
// p in the ring computed from r's members without X, the member that would
// be given p if X went away. Every partition with a target other than id
// has exactly one heir, so for each such p exactly one member finds p in
// its Heirs. The result maps each partition id inherits to its current
// target, ascending by partition; it is empty if id takes no part in r or
// r has fewer than two members.
//
// It computes one ring per other member, each an update of the one before
// (Assigner): call it when the ring changes, not per request.
// It returns ErrInvalidConfig only for a ring whose settings do not
// validate.
func (r *Ring) Heirs(id string) (map[int]string, error) {
	heirs := map[int]string{}
	if len(r.members) < 2 || !slices.Contains(r.members, id) {
		return heirs, nil
	}
	// One assigner: each ring without a member differs from the one
	// before by two members, an update rather than a fresh build.
	a, err := NewAssigner(r.cfg)
	if err != nil {
		return nil, err
	}
	for _, x := range r.members {
		if x == id {
			continue
		}
		var rest []string
		for _, m := range r.members {
			if m != x {
				rest = append(rest, m)
			}
		}
		without, err := a.Ring(rest)
		if err != nil {
			return nil, err
		}
		for p, m := range r.target {
			if m == x && without.target[p] == id {
				heirs[p] = x
			}
		}
	}
	return heirs, nil
}
