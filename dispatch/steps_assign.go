package dispatch

import (
	"github.com/jobfleet/jobfleet/api"
)

// This file hands out the items of runs made of steps: which step of the
// job an item is, and what its grant carries of its step.

// stepOf returns the index in the job's steps of the step item i of run
// r belongs to, -1 if the job no longer has it.
func (s *jobSpec) stepOf(r *api.Run, i int) int {
	k := r.StepOf(i)
	if k < 0 {
		return -1
	}
	id := r.Steps[k].ID
	steps := s.controls().Steps
	for n := range steps {
		if steps[n].ID == id {
			return n
		}
	}
	return -1
}

// grantStep fills grant g of item i of run r, made of steps, of job e
// with its step: the step's executor, timeout and shard parameter, and
// the results of the steps it needs (StepNeeds).
func grantStep(g *AttemptGrant, e *jobEntry, work jobWork, r *api.Run, i int) {
	n := e.spec.stepOf(r, i)
	rs := r.Steps[r.StepOf(i)]
	g.Round = r.Round
	g.Step = &api.StepGrant{ID: rs.ID, Needs: StepNeeds(r, i)}
	g.Item.Param = nil
	if rs.Sharded {
		g.Step.Shard, g.Step.Shards = i-rs.First, rs.Items
	}
	if n < 0 || n >= len(work.Steps) {
		return // not handed out (mayStep): the job was edited meanwhile
	}
	st := e.spec.controls().Steps[n]
	g.Executor = work.Steps[n].Executor
	if st.Timeout != 0 {
		g.Timeout = st.Timeout
	}
	if shard := i - rs.First; shard < len(work.Steps[n].Params) {
		g.Item.Param = work.Steps[n].Params[shard]
	}
}
