package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

func TestJobDescribeCommand(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "d/1", "--schedule", "0 9 * * 1-5", "--timezone", "Asia/Tokyo", "--http-url", "http://127.0.0.1:9/x")
	putCLIRun(t, c, "d/1", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), api.RunFailed, longErr)
	out := c.mustRun("describe", "d/1")
	for _, want := range []string{"d/1", "0 9 * * 1-5 (Asia/Tokyo)", "STATE", "not yet taken in", "NEXT FIRES", " 09:00:00 JST", "LAST RUNS", "failed", "connection refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe: no %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, " 09:00:00 JST"); n != 5 {
		t.Errorf("describe: got %d fire rows, want 5:\n%s", n, out)
	}
	out = c.mustRun("describe", "d/1", "-o", "json", "--fires", "2")
	var d described
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Job.ID != "d/1" || len(d.Next.Fires) != 2 || len(d.Runs) != 1 {
		t.Errorf("describe -o json: got %+v", d)
	}
	c.mustFail([]string{"describe", "missing"}, "not found")
}

// TestDescribeStateBeforeFirstFire: a job that has not fired shows no
// "last scheduled" time, though its state records the time accounted up
// to (its creation), which read as a fire.
func TestDescribeStateBeforeFirstFire(t *testing.T) {
	created := time.Date(2026, 11, 30, 22, 32, 10, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		state api.JobState
		want  string
	}{
		{"not fired", api.JobState{Last: created, Next: created.Add(time.Hour)}, "last scheduled             none yet (times after 2026-11-30T22:32:10.000Z are due)"},
		{"fired", api.JobState{Last: created.Add(time.Hour), Fired: 1}, "last scheduled             2026-11-30T23:32:10.000Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state
			var b strings.Builder
			d := described{Job: api.Job{ID: "once", CreatedAt: created, Revision: 1, State: &st}}
			if err := printDescribed(&b, d, false, created); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("got\n%s\nwant a line %q", b.String(), tc.want)
			}
		})
	}
}
