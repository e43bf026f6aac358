package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidateAfter(t *testing.T) {
	many := make([]Dependency, MaxAfter+1)
	for i := range many {
		many[i] = Dependency{Job: fmt.Sprintf("up-%d", i)}
	}
	tests := []struct {
		name      string
		after     []Dependency
		noSched   bool
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "default states", after: []Dependency{{Job: "nightly-extract"}}},
		{name: "every final state", after: []Dependency{{Job: "a", On: []RunStatus{RunSucceeded, RunDead, RunCancelled}}}},
		{name: "without a schedule", after: []Dependency{{Job: "a"}}, noSched: true},
		{name: "a team's job", after: []Dependency{{Job: "billing/extract eu"}}},
		{name: "at most 32", after: many[:MaxAfter]},
		{name: "too many", after: many, wantField: "after", wantMsg: "at most 32"},
		{name: "no job", after: []Dependency{{}}, wantField: "after[0].job", wantMsg: "missing"},
		{name: "invalid ID", after: []Dependency{{Job: "a"}, {Job: "x\u200by"}}, wantField: "after[1].job", wantMsg: "invisible"},
		{name: "itself", after: []Dependency{{Job: "nightly-report"}}, wantField: "after[0].job", wantMsg: "cycle nightly-report -> nightly-report"},
		{name: "twice", after: []Dependency{{Job: "a"}, {Job: "a", On: []RunStatus{RunDead}}}, wantField: "after[1].job", wantMsg: "named twice"},
		{name: "failed", after: []Dependency{{Job: "a", On: []RunStatus{RunFailed}}}, wantField: "after[0].on[0]", wantMsg: `ends "dead"`},
		{name: "skipped", after: []Dependency{{Job: "a", On: []RunStatus{RunSucceeded, RunSkipped}}}, wantField: "after[0].on[1]", wantMsg: "never ran"},
		{name: "unknown state", after: []Dependency{{Job: "a", On: []RunStatus{"done"}}}, wantField: "after[0].on[0]", wantMsg: `want "succeeded", "dead", "cancelled"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			j.After = tc.after
			if tc.noSched {
				j.Schedule = ""
			}
			j.Normalize()
			err := j.Validate(Limits{})
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.wantField || !strings.Contains(fe.Msg, tc.wantMsg) || !errors.Is(err, ErrInvalidJob) {
				t.Fatalf("Validate: %v, want field %s with %q", err, tc.wantField, tc.wantMsg)
			}
		})
	}
}

// A job with after and neither schedule nor run_at fires only after its
// upstream runs: no time of its own, no one-off, never completed; one
// with run_at as well is still a one-off.
func TestAfterOnlyJobHasNoTimes(t *testing.T) {
	j := Job{ID: "load", Executor: Executor{Type: "x"}, After: []Dependency{{Job: "extract"}}, CreatedAt: time.Now()}
	j.Normalize()
	if !j.AfterOnly() || j.IsOneOff() || j.Finite() {
		t.Fatalf("AfterOnly %v, IsOneOff %v, Finite %v; want true, false, false", j.AfterOnly(), j.IsOneOff(), j.Finite())
	}
	s, err := j.ParseSchedule()
	if err != nil || !s.IsZero() {
		t.Fatalf("ParseSchedule = %v, %v; want the zero schedule", s, err)
	}
	up, err := j.Upcoming(time.Now(), 5, nil)
	if err != nil || len(up) != 0 {
		t.Fatalf("Upcoming = %v, %v; want none", up, err)
	}
	if got := j.After[0].On; len(got) != 1 || got[0] != RunSucceeded {
		t.Fatalf("normalized on = %v, want [succeeded]", got)
	}
	j.DeleteAfter = "24h"
	if err := j.Validate(Limits{}); err == nil {
		t.Fatal("delete_after on a job after others without run_at: accepted, want refused (it never completes)")
	}
	at := time.Now().Add(time.Hour)
	j.RunAt, j.DeleteAfter = &at, ""
	if j.AfterOnly() || !j.IsOneOff() {
		t.Fatal("a job with run_at and after is not a one-off")
	}
}

func TestDependencyFires(t *testing.T) {
	d := Dependency{Job: "a"}
	if !d.Fires(RunSucceeded) || d.Fires(RunDead) {
		t.Fatal("a dependency without states fires on succeeded only")
	}
	d.On = []RunStatus{RunDead, RunCancelled}
	if d.Fires(RunSucceeded) || !d.Fires(RunCancelled) {
		t.Fatal("a dependency fires on its states only")
	}
	if _, ok := AfterFires([]Dependency{{Job: "b"}, d}, "a", RunDead); !ok {
		t.Fatal("AfterFires found no entry")
	}
	if _, ok := AfterFires([]Dependency{d}, "b", RunDead); ok {
		t.Fatal("AfterFires found another job's entry")
	}
}
