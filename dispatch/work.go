package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unique"

	"github.com/jobfleet/jobfleet/api"
)

// compactedWork is what a worker needs of a job (its executor and
// payload), and the job's notify entries, encoded (a workDoc's JSON): the
// scheduler decodes it only when it hands a run out or notifies, so a
// resident job does not keep its URL, headers, command, body and payload
// as Go values (a map, strings and slices) between its fires. It lives
// only in the member's memory, never in etcd or on the wire; "" for a job
// whose executor did not encode. (A string, not a []byte: a resident job
// holds one, and a string's header is the smaller.)
type compactedWork string

// jobWork is a compactedWork decoded.
type jobWork struct {
	Executor api.Executor
	Payload  json.RawMessage
	Notify   []api.Notification
	// Params are the items' parameters of a sharded job (shards.params).
	Params []json.RawMessage
	// Steps are the executors and shard parameters of a job made of
	// steps, by step.
	Steps []stepWork
}

// stepWork is what a worker needs of one step.
type stepWork struct {
	Executor api.Executor
	Params   []json.RawMessage
}

// workDoc is a jobWork as a compactedWork encodes it: under one-letter
// names, since every resident job holds one (the executor's and the
// payload's own JSON as they are), and without the executors' types,
// which the spec keeps (decodeFor).
type workDoc struct {
	Executor workExecutor       `json:"e"`
	Payload  json.RawMessage    `json:"p,omitempty"`
	Notify   []api.Notification `json:"n,omitempty"`
	Params   []json.RawMessage  `json:"s,omitempty"`
	Steps    []stepDoc          `json:"t,omitempty"`
}

// stepDoc is a stepWork as a workDoc encodes it.
type stepDoc struct {
	Executor workExecutor      `json:"e"`
	Params   []json.RawMessage `json:"s,omitempty"`
}

// workExecutor is api.Executor under one-letter names: the same fields
// (a conversion from and to api.Executor, which a field added to it
// breaks at compile time), each left out when empty.
type workExecutor struct {
	Type            string                     `json:"t,omitempty"`
	URL             string                     `json:"u,omitempty"`
	Method          string                     `json:"m,omitempty"`
	Headers         map[string]api.HeaderValue `json:"h,omitempty"`
	Body            json.RawMessage            `json:"b,omitempty"`
	FollowRedirects bool                       `json:"f,omitempty"`
	Command         []string                   `json:"c,omitempty"`
}

// compactWork moves j's executor (all but its type), payload, notify
// entries and shard parameters into a compactedWork; j keeps its shards'
// count.
func compactWork(j *api.Job) (compactedWork, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the payload and body keep the bytes they were stored with
	w := workDoc{Executor: workExecutor(j.Executor), Payload: j.Payload, Notify: j.Notify}
	w.Executor.Type = ""
	if j.Shards != nil {
		w.Params = j.Shards.Params
	}
	for _, st := range j.Steps {
		sw := stepDoc{Executor: workExecutor(st.Executor)}
		sw.Executor.Type = ""
		if st.Shards != nil {
			sw.Params = st.Shards.Params
		}
		w.Steps = append(w.Steps, sw)
	}
	if err := enc.Encode(w); err != nil {
		return "", fmt.Errorf("job %q: encode executor and payload: %w", j.ID, err)
	}
	j.Executor = api.Executor{Type: j.Executor.Type}
	j.Payload = nil
	j.Notify = nil
	if j.Shards != nil {
		sh := *j.Shards
		sh.Count, sh.Params = sh.Items(), nil
		j.Shards = &sh
	}
	j.Steps = slices.Clone(j.Steps)
	for k := range j.Steps {
		st := &j.Steps[k]
		st.Executor = api.Executor{Type: st.Executor.Type}
		if st.Shards != nil {
			sh := *st.Shards
			sh.Count, sh.Params = sh.Items(), nil
			st.Shards = &sh
		}
	}
	return compactedWork(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// decodeFor returns the executor and payload of the job whose spec is s,
// compacted with it (compactWork): with the executors' types, which s
// keeps.
func (c compactedWork) decodeFor(s *jobSpec) (jobWork, error) {
	w, err := c.decode()
	if err != nil {
		return jobWork{}, err
	}
	w.Executor.Type = s.Executor.Type
	for k, st := range s.controls().Steps {
		if k < len(w.Steps) {
			w.Steps[k].Executor.Type = st.Executor.Type
		}
	}
	return w, nil
}

// decode returns the executor (without its type: see decodeFor), payload
// and notify entries.
func (c compactedWork) decode() (jobWork, error) {
	var d workDoc
	if err := json.Unmarshal([]byte(c), &d); err != nil {
		return jobWork{}, fmt.Errorf("decode executor and payload: %w", err)
	}
	w := jobWork{Executor: api.Executor(d.Executor), Payload: d.Payload, Notify: d.Notify, Params: d.Params}
	for _, sd := range d.Steps {
		w.Steps = append(w.Steps, stepWork{Executor: api.Executor(sd.Executor), Params: sd.Params})
	}
	return w, nil
}

// jobSpec is what the scheduler keeps of a job's spec between its fires:
// the fields its decisions read, under their api.Job names. The zone is
// in the parsed schedule; the executor's details and the payload, which
// only a worker needs, are in the job's compactedWork. It is held per
// resident job, so it is kept small (TestResidentJobMemory): the
// settings that many jobs have in common are one shared specShape, what
// most jobs leave unset is behind ctl, and the two times are UTC
// nanoseconds.
type jobSpec struct {
	// specShape is shared with every resident job whose spec has the same
	// shape (shapeOf); never modified. Never nil.
	*specShape
	ID    string
	RunAt *time.Time
	// ctl holds the schedule controls the decisions read (the window and
	// jitter are in the parsed schedule) and the rarer settings; nil for
	// a job that sets none, which most do.
	ctl      *specControls
	Revision int64
	// created and updated are the job's created_at and updated_at
	// (CreatedAt, UpdatedAt), in nanoseconds since the Unix epoch.
	created, updated int64
	Partition        int32
	Paused           bool
}

// specShape is the part of a jobSpec that many jobs have in common (all
// made from one template, or left at the defaults): their schedule,
// executor type, retry, timeout, policies and retention, under their
// api.Job names. Resident jobs with the same shape share one (shapeOf):
// it is never modified once made, so it is safe for concurrent reads.
type specShape struct {
	Schedule          string
	Executor          struct{ Type string }
	Retry             api.RetryPolicy
	Timeout           api.Duration
	ConcurrencyPolicy api.ConcurrencyPolicy
	MisfirePolicy     api.MisfirePolicy
	History           api.HistoryPolicy
	DeleteAfter       api.Retention
}

// shapes holds the shared specShapes by their value.
var shapes interner[specShape, specShape]

// shapeOf returns j's shape as the resident jobs with the same one share
// it.
func shapeOf(j *api.Job) *specShape {
	sh := specShape{
		Schedule: shared(j.Schedule), Retry: j.Retry, Timeout: j.Timeout,
		ConcurrencyPolicy: internPolicy(j.ConcurrencyPolicy, api.ConcurrencyAllow, api.ConcurrencyForbid, api.ConcurrencyReplace),
		MisfirePolicy:     internPolicy(j.MisfirePolicy, api.MisfireSkip, api.MisfireRunOnce, api.MisfireRunAll),
		History:           j.History, DeleteAfter: shared(j.DeleteAfter),
	}
	sh.Executor.Type = shared(j.Executor.Type)
	return shapes.get(sh, func() *specShape { c := sh; return &c })
}

// specOf returns what the scheduler keeps of j.
func specOf(j *api.Job) jobSpec {
	s := jobSpec{
		specShape: shapeOf(j), ID: j.ID, RunAt: j.RunAt,
		Paused: j.Paused, Partition: int32(j.Partition),
		created: unixNano(j.CreatedAt), updated: unixNano(j.UpdatedAt), Revision: j.Revision,
	}
	c := specControls{
		MaxFires: j.MaxFires, Exclude: j.Exclude, PauseAfterFailures: j.PauseAfterFailures, NotAfter: j.NotAfter, Limits: j.Limits, Priority: j.Priority, After: j.After, ResumedAt: j.ResumedAt,
		Shards: j.Shards, Placement: j.Placement, Placed: placedOf(j), Steps: j.Steps, ExpectSuccessWithin: j.ExpectSuccessWithin,
	}
	for k := range j.Steps {
		sj := j.StepJob(&j.Steps[k])
		c.stepsPlaced = append(c.stepsPlaced, placedOf(&sj))
	}
	if !c.none() {
		s.ctl = &c
	}
	return s
}

// job returns the spec as a api.Job for the decision functions
// (PlanFires, FinishAttempt, …): every field they read is set; the
// executor has only its type, and there is no payload.
func (s *jobSpec) job() api.Job {
	c := s.controls()
	return api.Job{
		ID: s.ID, Schedule: s.Schedule, RunAt: s.RunAt, Executor: api.Executor{Type: s.Executor.Type},
		Retry: s.Retry, Timeout: s.Timeout, ConcurrencyPolicy: s.ConcurrencyPolicy, MisfirePolicy: s.MisfirePolicy,
		Paused: s.Paused, History: s.History, DeleteAfter: s.DeleteAfter, Partition: int(s.Partition),
		Shards: c.Shards, Placement: c.Placement, Steps: c.Steps, Limits: c.Limits, Priority: c.Priority, CreatedAt: s.CreatedAt(), UpdatedAt: s.UpdatedAt(), Revision: s.Revision,
		MaxFires: c.MaxFires, Exclude: c.Exclude, PauseAfterFailures: c.PauseAfterFailures, NotAfter: c.NotAfter,
		After: c.After, ResumedAt: c.ResumedAt, ExpectSuccessWithin: c.ExpectSuccessWithin,
	}
}

// CreatedAt is the job's created_at, in UTC.
func (s *jobSpec) CreatedAt() time.Time { return fromUnixNano(s.created) }

// UpdatedAt is the job's updated_at, in UTC.
func (s *jobSpec) UpdatedAt() time.Time { return fromUnixNano(s.updated) }

// Placed is the job's placement as the scheduler keeps it for its
// placement decisions (the selector parsed once); nil for a job without
// a selector that retries elsewhere (the defaults).
func (s *jobSpec) Placed() *placed { return s.controls().Placed }

// Placement is the job's placement as stored (broadcast, selector,
// retry_elsewhere); nil without one.
func (s *jobSpec) Placement() *api.PlacementPolicy { return s.controls().Placement }

// unixNano returns t in nanoseconds since the Unix epoch; 0 for the zero
// time (a job's times are set by the server, well inside int64's years
// 1678 to 2262).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano is unixNano's inverse, in UTC.
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// internPolicy returns p as the one of known it equals, so that a
// resident job does not hold its own copy of the text; p itself if it
// is none of them.
func internPolicy[P ~string](p P, known ...P) P {
	for _, k := range known {
		if p == k {
			return k
		}
	}
	return p
}

// shared returns s as the one copy of its text that every resident job
// with the same text holds (unique.Make): schedules, executor types and
// retentions repeat across many jobs.
func shared[S ~string](s S) S {
	return S(unique.Make(string(s)).Value())
}

// specControls are the schedule controls of a jobSpec, under their
// api.Job names, and its other settings that most jobs leave unset.
type specControls struct {
	MaxFires           int64
	Exclude            []string
	PauseAfterFailures int
	NotAfter           *time.Time
	ResumedAt          *time.Time // not a control: as rare, kept here
	// Limits are the limit keys the job names (not a schedule control,
	// but as rare: kept here, out of every job's spec).
	Limits []string
	// Priority is the job's priority (nil: api.DefaultPriority; the
	// steps' are in Steps).
	Priority *int
	After    []api.Dependency // the upstream jobs (after.go)
	// Shards is the job's shards without their params (in the work):
	// their count.
	Shards    *api.Shards
	Placement *api.PlacementPolicy // as stored: broadcast, selector, retry_elsewhere
	Placed    *placed              // Placement parsed (jobSpec.Placed)
	// Steps are the job's steps, their executors with only their type
	// and their shards without their params (in the work);
	// stepsPlaced their placements as the scheduler keeps them, by step.
	Steps       []api.Step
	stepsPlaced []*placed
	// ExpectSuccessWithin is the job's dead man's switch (overdue.go).
	ExpectSuccessWithin api.Duration
}

func (c specControls) none() bool {
	return c.MaxFires == 0 && len(c.Exclude) == 0 && c.PauseAfterFailures == 0 && c.NotAfter == nil && c.ResumedAt == nil && len(c.Limits) == 0 && c.Priority == nil && len(c.After) == 0 &&
		c.Shards == nil && c.Placement == nil && c.Placed == nil && len(c.Steps) == 0 && c.ExpectSuccessWithin == 0
}

// noControls are the controls of a job that sets none.
var noControls = &specControls{}

// controls returns the spec's schedule controls (none: zero values).
func (s *jobSpec) controls() *specControls {
	if s.ctl == nil {
		return noControls
	}
	return s.ctl
}

// IsOneOff is api.Job.IsOneOff.
func (s *jobSpec) IsOneOff() bool {
	return s.Schedule == "" && (s.RunAt != nil || len(s.controls().After) == 0)
}

// Finite is api.Job.Finite: the job can complete.
func (s *jobSpec) Finite() bool {
	return s.IsOneOff() || s.controls().NotAfter != nil || s.controls().MaxFires > 0
}

// InitialLast is api.Job.InitialLast.
func (s *jobSpec) InitialLast() time.Time {
	j := s.job()
	return j.InitialLast()
}
