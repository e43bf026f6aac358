package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// compactedWork is what a worker needs of a job (its executor and
// payload), and the job's notify entries, encoded: the scheduler decodes it only when it hands a run
// out, so a resident job does not keep its URL, headers, command, body and
// payload as Go values (a map, strings and slices) between its fires.
type compactedWork []byte

// jobWork is a compactedWork decoded.
type jobWork struct {
	Executor api.Executor       `json:"executor"`
	Payload  json.RawMessage    `json:"payload,omitempty"`
	Notify   []api.Notification `json:"notify,omitempty"`
	// Params are the items' parameters of a sharded job (shards.params).
	Params []json.RawMessage `json:"params,omitempty"`
}

// compactWork moves j's executor (all but its type), payload, notify
// entries and shard parameters into a compactedWork; j keeps its shards'
// count.
func compactWork(j *api.Job) (compactedWork, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the payload and body keep the bytes they were stored with
	w := jobWork{Executor: j.Executor, Payload: j.Payload, Notify: j.Notify}
	if j.Shards != nil {
		w.Params = j.Shards.Params
	}
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("job %q: encode executor and payload: %w", j.ID, err)
	}
	j.Executor = api.Executor{Type: j.Executor.Type}
	j.Payload = nil
	j.Notify = nil
	if j.Shards != nil {
		sh := *j.Shards
		sh.Count, sh.Params = sh.Items(), nil
		j.Shards = &sh
	}
	return bytes.Clone(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// decode returns the executor and payload.
func (c compactedWork) decode() (jobWork, error) {
	var w jobWork
	if err := json.Unmarshal(c, &w); err != nil {
		return jobWork{}, fmt.Errorf("decode executor and payload: %w", err)
	}
	return w, nil
}

// jobSpec is what the scheduler keeps of a job's spec between its fires:
// the fields its decisions read, under their api.Job names. The zone is
// in the parsed schedule; the executor's details and the payload, which
// only a worker needs, are in the job's compactedWork.
type jobSpec struct {
	ID                string
	Schedule          string
	RunAt             *time.Time
	Executor          struct{ Type string }
	Retry             api.RetryPolicy
	Timeout           api.Duration
	ConcurrencyPolicy api.ConcurrencyPolicy
	MisfirePolicy     api.MisfirePolicy
	Paused            bool
	History           api.HistoryPolicy
	DeleteAfter       api.Retention
	// ctl holds the schedule controls the decisions read (the window and
	// jitter are in the parsed schedule); nil for a job that sets none,
	// which most do.
	ctl       *specControls
	Partition int
	Shards    *api.Shards          // without its params (in the work): their count
	Placement *api.PlacementPolicy // as stored: broadcast, selector, retry_elsewhere
	CreatedAt time.Time
	UpdatedAt time.Time
	Revision  int64
	// Placed is Placement as the scheduler keeps it for its placement
	// decisions (the selector parsed once); nil for a job without a
	// selector that retries elsewhere (the defaults).
	Placed *placed
}

// specOf returns what the scheduler keeps of j.
func specOf(j *api.Job) jobSpec {
	s := jobSpec{
		ID: j.ID, Schedule: j.Schedule, RunAt: j.RunAt, Retry: j.Retry, Timeout: j.Timeout,
		ConcurrencyPolicy: j.ConcurrencyPolicy, MisfirePolicy: j.MisfirePolicy, Paused: j.Paused,
		History: j.History, DeleteAfter: j.DeleteAfter, Partition: j.Partition,
		Shards: j.Shards, Placement: j.Placement,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, Revision: j.Revision,
	}
	if c := (specControls{MaxFires: j.MaxFires, Exclude: j.Exclude, PauseAfterFailures: j.PauseAfterFailures, NotAfter: j.NotAfter, Limits: j.Limits, After: j.After, ResumedAt: j.ResumedAt}); !c.none() {
		s.ctl = &c
	}
	s.Executor.Type = j.Executor.Type
	s.Placed = placedOf(j)
	return s
}

// job returns the spec as a api.Job for the decision functions
// (PlanFires, FinishAttempt, …): every field they read is set; the
// executor has only its type, and there is no payload.
func (s *jobSpec) job() api.Job {
	return api.Job{
		ID: s.ID, Schedule: s.Schedule, RunAt: s.RunAt, Executor: api.Executor{Type: s.Executor.Type},
		Retry: s.Retry, Timeout: s.Timeout, ConcurrencyPolicy: s.ConcurrencyPolicy, MisfirePolicy: s.MisfirePolicy,
		Paused: s.Paused, History: s.History, DeleteAfter: s.DeleteAfter, Partition: s.Partition,
		Shards: s.Shards, Placement: s.Placement, Limits: s.controls().Limits, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Revision: s.Revision,
		MaxFires: s.controls().MaxFires, Exclude: s.controls().Exclude, PauseAfterFailures: s.controls().PauseAfterFailures, NotAfter: s.controls().NotAfter,
		After: s.controls().After, ResumedAt: s.controls().ResumedAt,
	}
}

// specControls are the schedule controls of a jobSpec, under their
// api.Job names.
type specControls struct {
	MaxFires           int64
	Exclude            []string
	PauseAfterFailures int
	NotAfter           *time.Time
	ResumedAt          *time.Time // not a control: as rare, kept here
	// Limits are the limit keys the job names (not a schedule control,
	// but as rare: kept here, out of every job's spec).
	Limits []string
	After  []api.Dependency // the upstream jobs (after.go)
}

func (c specControls) none() bool {
	return c.MaxFires == 0 && len(c.Exclude) == 0 && c.PauseAfterFailures == 0 && c.NotAfter == nil && c.ResumedAt == nil && len(c.Limits) == 0 && len(c.After) == 0
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
