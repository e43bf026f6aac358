package chaos

import (
	"fmt"

	"github.com/jobfleet/jobfleet/api"
)

// Steps are the checker's figures of runs made of steps.
type Steps struct {
	Runs       int `json:"runs"`       // runs of steps checked
	Steps      int `json:"steps"`      // their steps
	Executions int `json:"executions"` // step executions the recorder saw in their last round
	// The must-be-zero counts.
	// StepsStartedEarly: a step's execution started before a step it
	// needs had ended as its when requires (a needed step's item whose
	// success the run records had no successful execution ending before
	// it), or a step ran whose condition the run says did not hold.
	StepsStartedEarly int `json:"steps_started_early"`
	// StepsLost: a step (or one of its items) of a final run that is not
	// cancelled did not end, or ended otherwise than its items, or the
	// run's status is not what its steps make it.
	StepsLost int `json:"steps_lost"`
}

// execsOf returns the recorded executions of attempt a of item i of a
// run.
type execsOf func(i, a int) []Execution

// checkStepRun checks run r, made of steps, the last version of its
// history, against the executions the recorder saw (checkSteps).
func (c *checker) checkStepRun(r api.Run, k Kind, execs map[execKey][]Execution, deleted bool) {
	g := &c.res.Global.Steps
	g.Runs++
	g.Steps += len(r.Steps)
	early, lost, n := checkSteps(r, func(i, a int) []Execution { return execs[execKey{r.ID, i, a}] }, deleted)
	g.Executions += n
	for _, d := range early {
		g.StepsStartedEarly++
		c.violate("steps_started_early", k, d)
	}
	for _, d := range lost {
		g.StepsLost++
		c.violate("steps_lost", k, d)
	}
}

// checkSteps is the pure check of run r, made of steps, against its
// executions: invariant 1 (early: no execution of a step in the run's
// last round started before every step it needs had ended as its when
// requires, judged by the recorder's intervals) and invariant 2 (lost:
// every step of a final run that is not cancelled has ended, as its
// items make it, and the run's status follows from its steps). n is the
// executions checked. A run deleted with its job is checked for 1 only.
func checkSteps(r api.Run, execs execsOf, deleted bool) (early, lost []string, n int) {
	index := map[string]int{}
	for k, s := range r.Steps {
		index[s.ID] = k
	}
	// doneBy returns whether item i has a successful execution of the
	// round ended by t, and whether it has one at all.
	doneBy := func(i int, t Execution) (ok, any bool) {
		for a := 1; a <= len(r.Items[i].Attempts); a++ {
			for _, x := range execs(i, a) {
				if x.Round != r.Round || !x.Succeeded() {
					continue
				}
				any = true
				if !x.End.After(t.Start) {
					return true, true
				}
			}
		}
		return false, any
	}
	for k, s := range r.Steps {
		for i := s.First; i < s.First+s.Items && i < len(r.Items); i++ {
			for a := 1; a <= len(r.Items[i].Attempts); a++ {
				for _, e := range execs(i, a) {
					if e.Round != r.Round {
						continue
					}
					n++
					early = append(early, startedEarly(r, index, k, e, doneBy)...)
				}
			}
		}
	}
	if deleted || !r.Status.Final() || r.Status == api.RunCancelled {
		return early, nil, n
	}
	dead := false
	for _, s := range r.Steps {
		if d := stepEnd(r, s); d != "" {
			lost = append(lost, fmt.Sprintf("run %s step %s: %s", r.ID, s.ID, d))
		}
		dead = dead || s.Status == api.RunDead
	}
	if want := map[bool]api.RunStatus{true: api.RunDead, false: api.RunSucceeded}[dead]; r.Status != want {
		lost = append(lost, fmt.Sprintf("run %s is %s, but its steps make it %s", r.ID, r.Status, want))
	}
	return early, lost, n
}

// startedEarly checks execution e of step k of r against the steps it
// needs.
func startedEarly(r api.Run, index map[string]int, k int, e Execution, doneBy func(int, Execution) (bool, bool)) []string {
	s := r.Steps[k]
	var out []string
	failed := false
	for _, id := range s.Needs {
		m, ok := index[id]
		if !ok {
			out = append(out, fmt.Sprintf("run %s step %s needs %q, which the run does not have", r.ID, s.ID, id))
			continue
		}
		ns := r.Steps[m]
		if ns.Status != api.RunSucceeded {
			failed = true
			if s.When == api.StepOnSuccess || s.When == "" {
				out = append(out, fmt.Sprintf("run %s step %s (when success) ran at %s though step %s it needs is %s", r.ID, s.ID, ts(e.Start), id, ns.Status))
			}
		}
		for i := ns.First; i < ns.First+ns.Items && i < len(r.Items); i++ {
			if r.Items[i].Status != api.RunSucceeded {
				continue
			}
			if ok, any := doneBy(i, e); any && !ok {
				out = append(out, fmt.Sprintf("run %s step %s item %d started at %s before item %d of step %s it needs succeeded", r.ID, s.ID, *e.Item, ts(e.Start), i, id))
			}
		}
	}
	if s.When == api.StepOnFailure && !failed {
		out = append(out, fmt.Sprintf("run %s step %s (when failure) ran at %s though every step it needs succeeded", r.ID, s.ID, ts(e.Start)))
	}
	return out
}

// stepEnd says how step s of final run r did not end as its items make
// it; "" if it did.
func stepEnd(r api.Run, s api.RunStep) string {
	if s.First < 0 || s.First+s.Items > len(r.Items) {
		return fmt.Sprintf("items %d to %d of %d", s.First, s.First+s.Items, len(r.Items))
	}
	var succeeded, dead, started int
	for i := s.First; i < s.First+s.Items; i++ {
		it := r.Items[i]
		if !it.Status.Final() {
			return fmt.Sprintf("item %d still %s", i, it.Status)
		}
		if len(it.Attempts) > 0 {
			started++
		}
		switch it.Status {
		case api.RunSucceeded:
			succeeded++
		case api.RunDead:
			dead++
		}
	}
	need := s.Items
	if s.MinSucceeded > 0 && s.MinSucceeded <= s.Items {
		need = s.MinSucceeded
	}
	switch s.Status {
	case api.RunSucceeded:
		if succeeded < need {
			return fmt.Sprintf("succeeded with %d of %d items succeeded (%d required)", succeeded, s.Items, need)
		}
	case api.RunDead:
		if succeeded >= need || dead == 0 {
			return fmt.Sprintf("dead with %d items succeeded and %d dead (%d required)", succeeded, dead, need)
		}
	case api.RunSkipped:
		if started > 0 {
			return fmt.Sprintf("skipped (%q) after %d of its items started", s.Reason, started)
		}
	default:
		return fmt.Sprintf("still %s", s.Status)
	}
	return ""
}
