package api

import (
	"strings"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// PlacementPolicy is the job document's "placement": which workers may run
// the job's attempts, whether each fire runs on every one of them, and
// where its retries go.
//
// A run is handed only to a live worker whose registered labels match
// Selector (package dispatch/placement): one that registered with the
// member it polls (POST /v1/worker/register), with labels its credential
// allows. A worker without a registration has no labels, and takes only
// runs of jobs without a selector. A run that no live worker matches
// waits ("pending", with a reason naming the selector).
//
// Broadcast and Selector combine: a broadcast fire runs on every live
// worker that runs the job's executor type and whose labels match
// Selector, and no other.
type PlacementPolicy struct {
	// Broadcast runs each fire once on every live worker that runs the
	// job's executor type (within its credential's scope) and matches
	// Selector, at the time of the fire: one item per worker, pinned to
	// it and retried on it only (RetryElsewhere does not apply). The run
	// succeeds when every item does; a worker whose registration ends
	// before its item succeeded has the item dead with that reason; a
	// worker that registers after the fire does not get it. At most
	// MaxBroadcastWorkers workers (the first by ID) get one fire. Not
	// together with Shards.
	Broadcast bool `json:"broadcast,omitempty"`
	// Selector is a label selector in Kubernetes' syntax:
	// "pool=gpu,region in (eu-west,eu-central),!spot" (=, ==, !=, in,
	// notin, a key alone for "has it", !key for "has it not"); at most
	// placement.MaxSelectorBytes. Empty: any worker.
	Selector string `json:"selector,omitempty"`
	// RetryElsewhere makes a retry prefer a worker other than the one
	// whose attempt failed or was lost: that worker is passed over while
	// another live worker that may take the run exists, for at most one
	// run lease after the retry is due. Default (absent) true; false lets
	// any worker take the retry, the same one included.
	RetryElsewhere *bool `json:"retry_elsewhere,omitempty"`
}

// Selector returns the job's placement selector, "" for any worker.
func (j *Job) Selector() string {
	if j.Placement == nil {
		return ""
	}
	return j.Placement.Selector
}

// RetriesElsewhere reports whether the job's retries prefer another
// worker than the failed attempt's: Placement.RetryElsewhere, true when
// unset.
func (j *Job) RetriesElsewhere() bool {
	return j.Placement == nil || j.Placement.RetryElsewhere == nil || *j.Placement.RetryElsewhere
}

// normalize trims the selector.
func (p *PlacementPolicy) normalize() {
	if p != nil {
		p.Selector = strings.TrimSpace(p.Selector)
	}
}

// validate checks the selector; errors are *FieldError naming
// "placement.selector".
func (p *PlacementPolicy) validate() error {
	if p == nil {
		return nil
	}
	if _, err := placement.Parse(p.Selector); err != nil {
		msg := strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": ")
		return fieldErr("placement.selector", "%s is not a label selector: %s; want, for example, \"pool=gpu,region in (eu-west,eu-central),!spot\"", quoteClipped(p.Selector), msg)
	}
	return nil
}
