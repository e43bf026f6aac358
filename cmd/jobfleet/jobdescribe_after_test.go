package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// TestDescribeShowsDependencies: job describe lists the jobs a job runs
// after and those that run after it, and run get names the run that
// caused a run.
func TestDescribeShowsDependencies(t *testing.T) {
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	d := described{
		Job:        api.Job{ID: "transform", Executor: api.Executor{Type: "x"}, After: []api.Dependency{{Job: "extract", On: []api.RunStatus{api.RunSucceeded, api.RunDead}}}},
		Dependents: []api.Dependency{{Job: "load", On: []api.RunStatus{api.RunSucceeded}}},
		Runs:       []api.Run{},
	}
	var out bytes.Buffer
	if err := printDescribed(&out, d, false, at); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DEPENDENCIES", "after extract: fires when a run of it ends succeeded or dead", "before load: fires it when a run of this job ends succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	r := api.Run{ID: "transform@2026-12-01T02:00:00.000Z", JobID: "transform", ScheduledAt: at, FiredAt: at, Status: api.RunPending, Attempts: []api.Attempt{},
		CausedBy: &api.RunCause{Job: "extract", Run: "extract@2026-12-01T02:00:00.000Z", Status: api.RunSucceeded}}
	if err := printRunDetail(&out, r, false, at); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "run extract@2026-12-01T02:00:00.000Z of extract, ended succeeded") {
		t.Errorf("run get lacks the cause:\n%s", out.String())
	}
}
