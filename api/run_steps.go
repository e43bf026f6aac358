package api

import (
	"encoding/json"
	"time"
)

// RunStep is one step of a run made of steps (Run.Steps): the step's
// place in the run's graph as the job said when the run fired, the range
// of the run's items that are its attempt chains (one, or one per shard),
// and its status. A step is pending until it may start and while it
// waits for a worker, running once one of its items has an attempt,
// succeeded once enough of its items have (all, or its
// shards.min_succeeded), dead once that can no longer happen, skipped
// when its condition (When) can no longer hold or the run was decided
// without it (Reason says which).
type RunStep struct {
	// ID is the step's ID.
	ID string `json:"id"`
	// Needs and When are the step's, as the job said at the fire.
	Needs []string `json:"needs,omitempty"`
	When  StepWhen `json:"when,omitempty"`
	// First is the index of the step's first item in Run.Items; Items is
	// its number of items (its shards, or 1).
	First int `json:"first_item"`
	Items int `json:"items"`
	// Sharded is set on a step with shards (even of one): it hands the
	// steps that need it an array of its items' results.
	Sharded bool `json:"sharded,omitempty"`
	// MinSucceeded and MaxParallel are the step's shards' (0: all, no
	// bound).
	MinSucceeded int `json:"min_succeeded,omitempty"`
	MaxParallel  int `json:"max_parallel,omitempty"`
	// Status is the step's state; Reason says why it is skipped or dead
	// without a failed attempt.
	Status RunStatus `json:"status"`
	Reason string    `json:"reason,omitempty"`
}

// RunRound records a round of a run of steps that ended and was started
// again from a step (POST /v1/runs/{id}/retry).
type RunRound struct {
	// Round numbers the round that ended, from 0 (the fire's).
	Round int `json:"round"`
	// Status and Reason are the run's when that round ended.
	Status RunStatus `json:"status"`
	Reason string    `json:"reason,omitempty"`
	// From is the step the next round started from; By who asked (the
	// credential); At when the owner started it.
	From string    `json:"from"`
	By   string    `json:"by,omitempty"`
	At   time.Time `json:"at"`
}

// StepIndex returns the index in r.Steps of step id, -1 if r has none.
func (r *Run) StepIndex(id string) int {
	for i := range r.Steps {
		if r.Steps[i].ID == id {
			return i
		}
	}
	return -1
}

// StepOf returns the index in r.Steps of the step item i belongs to, -1
// if r is not made of steps.
func (r *Run) StepOf(i int) int {
	for k := range r.Steps {
		if s := r.Steps[k]; i >= s.First && i < s.First+s.Items {
			return k
		}
	}
	return -1
}

// StepResult returns what step k of r hands the steps that need it: the
// result of its item for a step of one item (JSON null if it returned
// none), an array of its items' results, by shard, for a sharded step.
func (r *Run) StepResult(k int) json.RawMessage {
	s := r.Steps[k]
	res := func(i int) json.RawMessage {
		if i < len(r.Items) && len(r.Items[i].Result) > 0 {
			return r.Items[i].Result
		}
		return json.RawMessage("null")
	}
	if !s.Sharded {
		return res(s.First)
	}
	out := []byte{'['}
	for i := s.First; i < s.First+s.Items; i++ {
		if i > s.First {
			out = append(out, ',')
		}
		out = append(out, res(i)...)
	}
	return append(out, ']')
}

// ResultsBytes returns the bytes the results of r's items take together.
func (r *Run) ResultsBytes() int {
	n := 0
	for _, it := range r.Items {
		n += len(it.Result)
	}
	return n
}

// fillSteps sets each item's Step from r.Steps.
func (r *Run) fillSteps() {
	for _, s := range r.Steps {
		for i := s.First; i < s.First+s.Items && i < len(r.Items); i++ {
			r.Items[i].Step = s.ID
		}
	}
}
