package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Bounds of a job's "after".
const (
	// MaxAfter is the most upstream jobs one job names in "after".
	MaxAfter = 32
	// MaxDependents is the most jobs that run after one job: the
	// hand-overs of a run's end are written with its final status, in one
	// transaction.
	MaxDependents = 32
)

// Dependency is one entry of a job's "after": the job fires once for
// each run of the upstream job Job that ends in one of the states On.
type Dependency struct {
	// Job is the upstream job's ID. It need not exist yet: the
	// dependency takes effect for its runs once it does.
	Job string `json:"job"`
	// On are the final states of the upstream run that fire the job, a
	// non-empty subset of AfterStates; default ["succeeded"].
	On []RunStatus `json:"on,omitempty"`
}

// AfterStates are the states a Dependency may list in On: the final
// states a run reaches once it ran or was meant to. A run "failed" is
// not final (another attempt remains: the run ends dead when its last
// one fails); a skipped run never ran.
var AfterStates = []RunStatus{RunSucceeded, RunDead, RunCancelled}

// DefaultAfterOn is Dependency.On by default.
var DefaultAfterOn = []RunStatus{RunSucceeded}

// Fires reports whether an upstream run ending in status s fires the
// downstream job.
func (d Dependency) Fires(s RunStatus) bool {
	if len(d.On) == 0 {
		return s == RunSucceeded
	}
	return slices.Contains(d.On, s)
}

// AfterFires returns the entry of after naming upstream job up whose
// states include s, and whether there is one.
func AfterFires(after []Dependency, up string, s RunStatus) (Dependency, bool) {
	for _, d := range after {
		if d.Job == up && d.Fires(s) {
			return d, true
		}
	}
	return Dependency{}, false
}

// AfterOnly reports whether the job fires only from its upstream runs
// (and triggers): it has "after" and neither schedule nor run_at. Such a
// job never completes.
func (j *Job) AfterOnly() bool {
	return len(j.After) > 0 && j.Schedule == "" && j.RunAt == nil
}

// normalizeAfter fills each entry's default states.
func (j *Job) normalizeAfter() {
	if len(j.After) == 0 {
		j.After = nil
		return
	}
	for i := range j.After {
		if len(j.After[i].On) == 0 {
			j.After[i].On = slices.Clone(DefaultAfterOn)
		}
	}
}

// validateAfter checks "after": at most MaxAfter entries, each naming a
// valid job ID other than the job's own, no job twice, and only states of
// AfterStates. Cycles across jobs need the other jobs' dependencies: the
// store refuses them when the job is saved.
func (j *Job) validateAfter() error {
	if len(j.After) > MaxAfter {
		return fieldErr("after", "%d upstream jobs; want at most %d", len(j.After), MaxAfter)
	}
	seen := make(map[string]bool, len(j.After))
	for i, d := range j.After {
		field := fmt.Sprintf("after[%d].job", i)
		if d.Job == "" {
			return fieldErr(field, "missing: name the upstream job")
		}
		if err := validateID(d.Job); err != nil {
			msg := err.Error()
			var fe *FieldError
			if errors.As(err, &fe) {
				msg = fe.Msg
			}
			return fieldErr(field, "%s", msg)
		}
		if d.Job == j.ID {
			return fieldErr(field, "the job itself: a job cannot run after its own runs (cycle %s -> %s)", j.ID, j.ID)
		}
		if seen[d.Job] {
			return fieldErr(field, "%s named twice; give one entry with every state in \"on\"", QuoteClipped(d.Job))
		}
		seen[d.Job] = true
		for k, s := range d.On {
			if !slices.Contains(AfterStates, s) {
				return fieldErr(fmt.Sprintf("after[%d].on[%d]", i, k), "%s is not a state that ends a run; want %s%s",
					QuoteClipped(string(s)), joinStates(AfterStates), failedHint(s))
			}
		}
	}
	return nil
}

func failedHint(s RunStatus) string {
	switch s {
	case RunFailed:
		return ` (a run whose last attempt fails ends "dead")`
	case RunSkipped:
		return " (a skipped run never ran)"
	}
	return ""
}

// joinStates names states for a message: "failed", "dead", ….
func joinStates(states []RunStatus) string {
	q := make([]string, len(states))
	for i, s := range states {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// RunCause names the upstream run whose end fired a run (Run.CausedBy).
type RunCause struct {
	// Job is the upstream job's ID.
	Job string `json:"job"`
	// Run is the upstream run's ID.
	Run string `json:"run"`
	// Status is the final state the upstream run ended in.
	Status RunStatus `json:"status"`
}

// Dependents is the reply of GET /v1/jobs/{id}/dependents: the jobs that
// name the job in their "after", by ID, each with the states that fire
// it.
type Dependents struct {
	Job        string       `json:"job"`
	Dependents []Dependency `json:"dependents"`
}
