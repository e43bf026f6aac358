package dispatch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file is the decision logic of runs made of steps: pure functions
// of the job and the run, as items.go's are for the runs of items that
// runs of steps are. Each step contributes one item, or one per shard;
// an item is dispatchable only once its step may start (stepReady); a
// step is decided from its items as a sharded run is from its own, and
// skipped, with the reason, once its condition can no longer hold; the
// run is decided once every step is (settleSteps).

// NewStepItems returns the steps and pending items of a run of job j,
// whose steps are j.Steps: each step's items follow the previous step's.
func NewStepItems(j *api.Job) ([]api.RunStep, []api.Item) {
	steps := make([]api.RunStep, len(j.Steps))
	n := 0
	for k, s := range j.Steps {
		c := max(s.Shards.Items(), 1)
		rs := api.RunStep{ID: s.ID, Needs: slices.Clone(s.Needs), When: s.When, First: n, Items: c, Status: api.RunPending}
		if s.Shards != nil {
			rs.Sharded, rs.MinSucceeded, rs.MaxParallel = true, s.Shards.MinSucceeded, s.Shards.MaxParallel
		}
		steps[k] = rs
		n += c
	}
	items := NewItems(n)
	for _, rs := range steps {
		for i := rs.First; i < rs.First+rs.Items; i++ {
			items[i].Step = rs.ID
		}
	}
	return steps, items
}

// stepJobFor returns the job item i of run r runs as: j as its step runs
// it (api.Job.StepJob), j itself for a run not made of steps, and nil for
// an item whose step j no longer has (the job was edited).
func stepJobFor(j *api.Job, r *api.Run, i int) *api.Job {
	if len(r.Steps) == 0 {
		return j
	}
	k := r.StepOf(i)
	if k < 0 {
		return nil
	}
	s := j.Step(r.Steps[k].ID)
	if s == nil {
		return nil
	}
	sj := j.StepJob(s)
	return &sj
}

// stepCounts counts the items of step s of r by status.
func stepCounts(r *api.Run, s api.RunStep) (c api.ItemCounts, started bool) {
	for _, it := range r.Items[s.First : s.First+s.Items] {
		if len(it.Attempts) > 0 {
			started = true
		}
		switch it.Status {
		case api.RunRunning:
			c.Running++
		case api.RunSucceeded:
			c.Succeeded++
		case api.RunDead:
			c.Dead++
		case api.RunSkipped:
			c.Skipped++
		}
	}
	return c, started
}

// stepFailed reports whether step k of r failed, as "failure" steps see
// it: it is dead, or it was skipped because a step it needs failed.
func stepFailed(r *api.Run, index map[string]int, k int, seen int) bool {
	s := r.Steps[k]
	switch {
	case s.Status == api.RunDead:
		return true
	case s.Status != api.RunSkipped || seen > len(r.Steps):
		return false
	}
	for _, n := range s.Needs {
		if m, ok := index[n]; ok && stepFailed(r, index, m, seen+1) {
			return true
		}
	}
	return false
}

// stepCondition says whether step k of r may start now (ready), must
// wait, or can no longer run (skip, with why).
func stepCondition(r *api.Run, index map[string]int, k int) (ready bool, skip string) {
	s := r.Steps[k]
	ended, failed := true, false
	var notOK []string
	for _, n := range s.Needs {
		m, ok := index[n]
		if !ok {
			return false, fmt.Sprintf("step %q it needs is not in the run", n)
		}
		ns := r.Steps[m]
		if !ns.Status.Final() {
			ended = false
			continue
		}
		if ns.Status != api.RunSucceeded {
			notOK = append(notOK, fmt.Sprintf("%q %s", n, ns.Status))
		}
		if stepFailed(r, index, m, 0) {
			failed = true
		}
	}
	switch s.When {
	case api.StepAlways:
		return ended, ""
	case api.StepOnFailure:
		switch {
		case failed:
			return ended, ""
		case ended:
			return false, "when failure: no step it needs failed"
		}
		return false, ""
	default:
		if len(notOK) > 0 {
			return false, listReason("when success: step ", ", step ", notOK)
		}
		return ended, ""
	}
}

// listReason returns head followed by parts joined with sep, as many as
// fit in api.MaxReasonBytes, the others counted ("… and 12 more"): a
// reason naming steps stays small however many steps it could name.
func listReason(head, sep string, parts []string) string {
	const more = 32 // room for " and 1024 more"
	b := strings.Builder{}
	b.WriteString(head)
	for n, p := range parts {
		if n > 0 {
			if b.Len()+len(sep)+len(p) > api.MaxReasonBytes-more {
				fmt.Fprintf(&b, " and %d more", len(parts)-n)
				break
			}
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// stepIndex maps r's step IDs to their index.
func stepIndex(r *api.Run) map[string]int {
	m := make(map[string]int, len(r.Steps))
	for k, s := range r.Steps {
		m[s.ID] = k
	}
	return m
}

// readySteps returns, by step index, whether each step of r may start
// items now: not decided, and its condition holds.
func readySteps(r *api.Run) []bool {
	index := stepIndex(r)
	out := make([]bool, len(r.Steps))
	for k, s := range r.Steps {
		if s.Status.Final() {
			continue
		}
		out[k], _ = stepCondition(r, index, k)
	}
	return out
}

// settleSteps is Settle for a run made of steps: it decides each step
// from its items (succeeded once its required items have, dead once too
// few can still succeed, its items not ended then skipped, running ones
// cancelled), skips each step whose condition can no longer hold (with
// its items), repeating until nothing changes; then the run is decided
// once every step is: dead if a step is dead, else succeeded; pending or
// running before. It returns the items it ended while running.
func settleSteps(r api.Run, now time.Time) (api.Run, []int) {
	r.Steps = slices.Clone(r.Steps)
	index := stepIndex(&r)
	var cancelled []int
	for changed := true; changed; {
		changed = false
		for k := range r.Steps {
			s := &r.Steps[k]
			if s.Status.Final() {
				continue
			}
			c, started := stepCounts(&r, *s)
			need := s.Items
			if s.MinSucceeded > 0 && s.MinSucceeded <= s.Items {
				need = s.MinSucceeded
			}
			var why string
			switch {
			case c.Succeeded >= need:
				s.Status, why = api.RunSucceeded, "the step succeeded without it (min_succeeded reached)"
			case c.Dead+c.Skipped > s.Items-need:
				s.Status, why = api.RunDead, "the step is dead without it (too few items can still succeed)"
				if s.Sharded {
					s.Reason = fmt.Sprintf("%d of %d items succeeded (%d required)", c.Succeeded, s.Items, need)
				}
			case !started:
				if _, skip := stepCondition(&r, index, k); skip != "" {
					// The items say only that their step was skipped: the
					// step holds the reason, once.
					s.Status, s.Reason, why = api.RunSkipped, skip, "step skipped"
				}
			}
			if !s.Status.Final() {
				s.Status = api.RunPending
				if started {
					s.Status = api.RunRunning
				}
				continue
			}
			changed = true
			var ended []int
			r, ended = endStepItems(r, *s, why, now)
			cancelled = append(cancelled, ended...)
		}
	}
	r.Status = api.RunPending
	decided, dead := true, []string{}
	for _, s := range r.Steps {
		switch {
		case s.Status == api.RunDead:
			dead = append(dead, s.ID)
		case !s.Status.Final():
			decided = false
			if s.Status == api.RunRunning {
				r.Status = api.RunRunning
			}
		}
	}
	if !decided {
		for _, it := range r.Items {
			if len(it.Attempts) > 0 {
				r.Status = api.RunRunning
				break
			}
		}
		return r, cancelled
	}
	r.Status = api.RunSucceeded
	if len(dead) > 0 {
		r.Status = api.RunDead
		r.Reason = joinReason(r.Reason, listReason("dead steps: ", ", ", dead))
	}
	return r, cancelled
}

// endStepItems ends the items of step s of r not ended, skipped with
// why (EndItems' rules, for the step's range of items).
func endStepItems(r api.Run, s api.RunStep, why string, now time.Time) (api.Run, []int) {
	sub := api.Run{Items: r.Items[s.First : s.First+s.Items]}
	sub, ended := EndItems(sub, why, now)
	r.Items = slices.Clone(r.Items)
	copy(r.Items[s.First:], sub.Items)
	for k := range ended {
		ended[k] += s.First
	}
	return r, ended
}

// endSteps marks the steps of r that are not decided skipped with why:
// the run was decided without them (cancelled, replaced).
func endSteps(r api.Run, why string) api.Run {
	r.Steps = slices.Clone(r.Steps)
	for k := range r.Steps {
		if s := &r.Steps[k]; !s.Status.Final() {
			s.Status, s.Reason = api.RunSkipped, why
		}
	}
	return r
}

// stepResult checks outcome o of item i of r, made of steps: a result
// over api.MaxStepResultBytes, or one that takes the run's results past
// api.MaxRunResultsBytes, turns a success into a failure saying so. A
// result of a run not made of steps is dropped.
func stepResult(r *api.Run, i int, o Outcome) Outcome {
	if len(r.Steps) == 0 || !o.Success || len(o.Result) == 0 {
		o.Result = nil
		return o
	}
	switch total := r.ResultsBytes() - len(r.Items[i].Result) + len(o.Result); {
	case len(o.Result) > api.MaxStepResultBytes:
		o.Success, o.Error = false, fmt.Sprintf("step result of %d bytes refused: a step's result is at most %d bytes", len(o.Result), api.MaxStepResultBytes)
		o.Result = nil
	case total > api.MaxRunResultsBytes:
		o.Success, o.Error = false, fmt.Sprintf("step result of %d bytes refused: the run's results would take %d bytes, more than the %d a run keeps", len(o.Result), total, api.MaxRunResultsBytes)
		o.Result = nil
	}
	return o
}

// StepNeeds returns what item i of r receives of the steps its step
// needs: a JSON object of each needed step's result (api.Run.StepResult)
// by step ID; nil for an item of a step that needs none, or of a run not
// made of steps.
func StepNeeds(r *api.Run, i int) []byte {
	k := r.StepOf(i)
	if k < 0 || len(r.Steps[k].Needs) == 0 {
		return nil
	}
	index := stepIndex(r)
	out := []byte{'{'}
	for n, id := range r.Steps[k].Needs {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, quoteKey(id)...)
		out = append(out, ':')
		if m, ok := index[id]; ok {
			out = append(out, r.StepResult(m)...)
		} else {
			out = append(out, "null"...)
		}
	}
	return append(out, '}')
}

// quoteKey quotes a step ID (letters, digits, '-', '_', '.': nothing to
// escape) as a JSON string.
func quoteKey(id string) string { return `"` + id + `"` }
