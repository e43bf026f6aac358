package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StepWhen is a step's "when": which ends of the steps it needs let it
// run.
type StepWhen string

// The step conditions.
const (
	// StepOnSuccess (the default) runs the step once every step it needs
	// has succeeded; it is skipped as soon as one of them ends otherwise.
	StepOnSuccess StepWhen = "success"
	// StepOnFailure runs the step once every step it needs has ended and
	// at least one of them failed (is dead, or was skipped because a step
	// before it failed); it is skipped when they all ended without a
	// failure. It needs at least one step.
	StepOnFailure StepWhen = "failure"
	// StepAlways runs the step once every step it needs has ended,
	// however they ended.
	StepAlways StepWhen = "always"
)

// Step is one step of a job made of steps (Job.Steps): an attempt chain
// (or, with Shards, a set of them) of the job's runs, with its own
// executor, retry, timeout and placement, that starts once the steps it
// needs have ended as When requires.
type Step struct {
	// ID names the step within its job: 1 to MaxStepIDBytes bytes of
	// letters, digits, '-', '_' and '.', starting with a letter or a
	// digit; unique among the job's steps.
	ID string `json:"id"`
	// Needs are the IDs of the steps that must end before this one
	// starts; none: the step starts when the run fires.
	Needs []string `json:"needs,omitempty"`
	// When says which ends of Needs let the step run; default
	// StepOnSuccess.
	When StepWhen `json:"when,omitempty"`
	// Executor says how a worker runs the step, as a job's does.
	Executor Executor `json:"executor"`
	// Retry bounds the attempts of the step (of each of its items); left
	// out: the job's retry.
	Retry RetryPolicy `json:"retry,omitzero"`
	// Timeout bounds one attempt of the step; left out: the job's.
	Timeout Duration `json:"timeout,omitzero"`
	// Placement says which workers may run the step's attempts, as a
	// job's does; broadcast is refused in a step.
	Placement *PlacementPolicy `json:"placement,omitempty"`
	// Shards makes the step a sharded one: one item per shard, as a
	// sharded job's run has (see Shards).
	Shards *Shards `json:"shards,omitempty"`
	// Priority orders the step's attempts as a job's does (Job.Priority);
	// nil: the job's.
	Priority *int `json:"priority,omitempty"`
}

// Limits of jobs made of steps.
const (
	// MaxSteps is the most steps a job has.
	MaxSteps = 256
	// MaxStepIDBytes is the longest step ID.
	MaxStepIDBytes = 64
	// MaxStepNeeds is the most "needs" entries of a job's steps together,
	// so that the graph a run records stays small (at most 1024 × 66
	// bytes).
	MaxStepNeeds = 1024
	// MaxStepResultBytes is the most JSON one item of a step may return
	// as its result; a larger result fails the attempt (see
	// docs/jobs.md, "Steps").
	MaxStepResultBytes = 64 << 10
	// MaxRunResultsBytes is the most the results of one run's items take
	// together: an attempt whose result would take the run past it fails.
	// With MaxStepNeeds, MaxSteps and MaxShardAttempts it keeps a run of
	// steps within store.MaxItemRunBytes, well under etcd's request limit.
	MaxRunResultsBytes = 256 << 10
	// MaxRunRounds is the most ended rounds a run of steps records
	// (Run.Rounds): the first and the latest; the rounds between are
	// counted in Run.RoundsDropped. A run may be started again any
	// number of times.
	MaxRunRounds = 32
	// MaxReasonBytes is the most a step's or a run of steps' reason
	// takes: the steps it names are listed up to it, then counted.
	MaxReasonBytes = 1024
)

// HasSteps reports whether the job's runs are made of steps.
func (j *Job) HasSteps() bool { return len(j.Steps) > 0 }

// Step returns the job's step id, nil if it has none.
func (j *Job) Step(id string) *Step {
	for i := range j.Steps {
		if j.Steps[i].ID == id {
			return &j.Steps[i]
		}
	}
	return nil
}

// StepJob returns job j as step s runs it: j's fields with s's executor,
// retry, timeout, placement and shards, and no steps; the decision
// functions of a run's chains (retries, timeouts, placement) read it for
// the step's items.
func (j *Job) StepJob(s *Step) Job {
	sj := *j
	sj.Steps = nil
	sj.Executor, sj.Placement, sj.Shards = s.Executor, s.Placement, s.Shards
	if s.Retry != (RetryPolicy{}) {
		sj.Retry = s.Retry
		sj.Retry.normalize()
	}
	if s.Timeout != 0 {
		sj.Timeout = s.Timeout
	}
	if s.Priority != nil {
		sj.Priority = s.Priority
	}
	return sj
}

// normalizeSteps fills the steps' defaults: when "success", the
// executor's (the method of an "http" one), and a retry's that is given
// in part; a retry or timeout left out stays so (the job's applies, see
// StepJob).
func (j *Job) normalizeSteps() {
	for i := range j.Steps {
		s := &j.Steps[i]
		if s.When == "" {
			s.When = StepOnSuccess
		}
		s.Executor.normalize()
		if s.Retry != (RetryPolicy{}) {
			s.Retry.normalize()
		}
		if s.Shards != nil {
			for k, p := range s.Shards.Params {
				s.Shards.Params[k] = compactJSON(p)
			}
		}
		s.Placement.normalize()
		if len(s.Needs) == 0 {
			s.Needs = nil
		}
	}
}

// validateSteps checks a job made of steps: the job sets no executor,
// shards or placement of its own; at most MaxSteps steps with valid,
// unique IDs; each step valid as a job's executor, retry, timeout,
// placement and shards are (its fields named "steps[i]…"); every need
// names another step, once; no cycle (the error names one); and the
// items and attempts of a run within the limits of sharded runs.
func (j *Job) validateSteps(limits Limits) error {
	switch {
	case j.Executor.Type != "" || j.Executor.URL != "" || len(j.Executor.Command) > 0:
		return fieldErr("executor", "not together with steps: each step has its own executor")
	case j.Shards != nil:
		return fieldErr("shards", "not together with steps: give the step that is sharded its shards")
	case j.Placement != nil:
		return fieldErr("placement", "not together with steps: give each step its placement")
	case len(j.Steps) > MaxSteps:
		return fieldErr("steps", "%d steps; want at most %d", len(j.Steps), MaxSteps)
	}
	index := make(map[string]int, len(j.Steps))
	items, attempts, needs := 0, 0, 0
	for i := range j.Steps {
		s := &j.Steps[i]
		field := "steps[" + strconv.Itoa(i) + "]"
		if err := validateStepID(field+".id", s.ID); err != nil {
			return err
		}
		if k, dup := index[s.ID]; dup {
			return fieldErr(field+".id", "%q is the ID of steps[%d] too; step IDs must be unique", s.ID, k)
		}
		index[s.ID] = i
		if err := j.validateStep(s, limits); err != nil {
			return prefixField(field, err)
		}
		n := max(s.Shards.Items(), 1)
		items += n
		sj := j.StepJob(s)
		attempts += n * max(sj.Retry.MaxAttempts, 1)
		needs += len(s.Needs)
	}
	switch {
	case items > MaxShards:
		return fieldErr("steps", "%d items in all (a step counts one, a sharded step its shards); want at most %d", items, MaxShards)
	case attempts > MaxShardAttempts:
		return fieldErr("steps", "the steps' items × their retry.max_attempts may make %d attempts in one run; want at most %d", attempts, MaxShardAttempts)
	case needs > MaxStepNeeds:
		return fieldErr("steps", "%d needs in all; want at most %d", needs, MaxStepNeeds)
	}
	for i, s := range j.Steps {
		for k, n := range s.Needs {
			field := fmt.Sprintf("steps[%d].needs[%d]", i, k)
			if _, ok := index[n]; !ok {
				return fieldErr(field, "no step has the ID %s", quoteClipped(n))
			}
			if slices.Index(s.Needs, n) < k {
				return fieldErr(field, "%q is listed twice", n)
			}
		}
	}
	if cycle := StepCycle(j.Steps); cycle != nil {
		return fieldErr("steps", "the steps' needs form a cycle: %s", strings.Join(cycle, " → "))
	}
	return nil
}

// validateStep checks step s of job j, its fields named from the step.
func (j *Job) validateStep(s *Step, limits Limits) error {
	switch s.When {
	case "", StepOnSuccess, StepAlways:
	case StepOnFailure:
		if len(s.Needs) == 0 {
			return fieldErr("when", `"failure" needs steps to fail: list them in needs`)
		}
	default:
		return fieldErr("when", "unknown condition %s; want %q, %q or %q", quoteClipped(string(s.When)), StepOnSuccess, StepOnFailure, StepAlways)
	}
	if err := s.Executor.validate(limits); err != nil {
		return err
	}
	if err := s.Retry.validate(); err != nil {
		return err
	}
	if s.Timeout != NoTimeout {
		if err := validateDuration("timeout", s.Timeout, MinTimeout); err != nil {
			return err
		}
	}
	if err := validatePriority(s.Priority); err != nil {
		return err
	}
	if s.Placement != nil && s.Placement.Broadcast {
		return fieldErr("placement.broadcast", "not in a step: a step's items are its shards")
	}
	if err := s.Placement.validate(); err != nil {
		return err
	}
	sj := j.StepJob(s)
	return sj.validateShards()
}

// validateStepID checks a step ID.
func validateStepID(field, id string) error {
	switch {
	case id == "":
		return fieldErr(field, "required")
	case len(id) > MaxStepIDBytes:
		return fieldErr(field, "%d bytes long; want at most %d", len(id), MaxStepIDBytes)
	}
	for i, r := range id {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !letter && (i == 0 || !strings.ContainsRune("-_.", r)) {
			return fieldErr(field, "%s: want letters, digits, '-', '_' and '.', starting with a letter or a digit", quoteClipped(id))
		}
	}
	return nil
}

// prefixField returns err with its field named under prefix: a
// *FieldError "executor.url" becomes "steps[2].executor.url".
func prefixField(prefix string, err error) error {
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Field: prefix + "." + fe.Field, Msg: fe.Msg}
	}
	return err
}

// StepCycle returns a cycle of the steps' needs as the IDs along it,
// the first repeated at the end ("a", "b", "a"), or nil if there is none.
// Needs naming no step are ignored. It is a depth-first search, linear in
// the steps and needs.
func StepCycle(steps []Step) []string {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.ID] = i
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(steps))
	var path []int
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		path = append(path, i)
		for _, n := range steps[i].Needs {
			k, ok := index[n]
			if !ok {
				continue
			}
			switch state[k] {
			case open:
				at := slices.Index(path, k)
				for _, p := range path[at:] {
					found = append(found, steps[p].ID)
				}
				found = append(found, steps[k].ID)
				return true
			case unseen:
				if visit(k) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return false
	}
	for i := range steps {
		if state[i] == unseen && visit(i) {
			return found
		}
	}
	return nil
}
