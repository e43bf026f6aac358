package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// calendar runs `jobfleet calendar --server URL --token TOKEN args...`.
func (c *cliEnv) calendar(args ...string) (string, error) {
	c.t.Helper()
	return c.runCmd("", append([]string{"calendar", "--server", c.url, "--token", c.token}, args...)...)
}

func TestCalendarCommands(t *testing.T) {
	c := newCLIEnv(t)
	out, err := c.calendar("set", "us-holidays", "--timezone", "America/New_York", "--date", "2026-12-25", "--date", "2026-07-03", "--range", "2026-12-31T18:00/2027-01-02", "--description", "US federal holidays")
	if err != nil || !strings.Contains(out, `created calendar "us-holidays" (2 dates, 1 ranges, in America/New_York)`) {
		t.Fatalf("calendar set: %q, %v", out, err)
	}
	doc := writeFile(t, "maint.json", `{"ranges": [{"from": "2026-06-01T02:00", "to": "2026-06-01T04:00"}]}`)
	if out, err := c.calendar("set", "maintenance", "-f", doc); err != nil || !strings.Contains(out, "created") {
		t.Fatalf("calendar set -f: %q, %v", out, err)
	}
	if out, err := c.calendar("set", "maintenance", "-f", doc); err != nil || !strings.Contains(out, "replaced") {
		t.Fatalf("calendar set -f again: %q, %v", out, err)
	}
	out, err = c.calendar("get", "us-holidays")
	for _, want := range []string{"America/New_York", "2026-12-25", "2026-12-31T18:00 to 2027-01-02 (excluded)", "US federal holidays"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("calendar get: %q (%v) lacks %q", out, err, want)
		}
	}
	out, err = c.calendar("ls")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "maintenance") {
		t.Errorf("calendar ls: %q, %v; want a header and two rows", out, err)
	}
	var list api.CalendarList
	out, _ = c.calendar("ls", "-o", "json", "--prefix", "us")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Calendars) != 1 {
		t.Errorf("calendar ls -o json --prefix us: %q (%v)", out, err)
	}
	for _, bad := range [][]string{
		{"set", "x", "--date", "2026-02-30"},
		{"set", "x", "--range", "2026-01-01"},
		{"set", "x", "-f", doc, "--date", "2026-01-01"},
		{"get", "nope"},
	} {
		if out, err := c.calendar(bad...); err == nil {
			t.Errorf("calendar %q: got success %q, want an error", bad, out)
		}
	}
	if out, err := c.calendar("rm", "maintenance"); err != nil || !strings.Contains(out, `deleted calendar "maintenance"`) {
		t.Errorf("calendar rm: %q, %v", out, err)
	}
	if _, err := c.calendar("rm", "maintenance"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("calendar rm again: %v, want not found", err)
	}
}

func TestJobControlsCommands(t *testing.T) {
	c := newCLIEnv(t)
	if _, err := c.calendar("set", "holidays", "--date", "2026-12-25"); err != nil {
		t.Fatal(err)
	}
	c.mustRun("create", "--id", "ctl", "--schedule", "@hourly", "--http-url", "http://127.0.0.1:9000/hook",
		"--jitter", "5m", "--max-fires", "3", "--not-after", "2030-01-01T00:00:00Z", "--exclude", "holidays", "--pause-after-failures", "2", "--delete-after", "24h")
	j, err := c.get("ctl")
	if err != nil || j.Jitter != api.Duration(5*time.Minute) || j.MaxFires != 3 || j.NotAfter == nil || len(j.Exclude) != 1 || j.PauseAfterFailures != 2 || j.DeleteAfter != "24h" {
		t.Fatalf("created %+v (%v)", j, err)
	}
	out := c.mustRun("get", "ctl")
	for _, want := range []string{"JITTER", "5m", "MAX FIRES", "3 (0 fired)", "EXCLUDE", "holidays", "PAUSE AFTER", "STATUS", "active"} {
		if !strings.Contains(out, want) {
			t.Errorf("get: output lacks %q:\n%s", want, out)
		}
	}
	out = c.mustRun("describe", "ctl")
	for _, want := range []string{"SCHEDULED (UTC)", "JITTER"} { // the jitter delays the next fires
		if !strings.Contains(out, want) {
			t.Errorf("describe: output lacks %q:\n%s", want, out)
		}
	}
	// The owner paused it: ls and describe say so, and why.
	st, _ := json.Marshal(api.JobState{Last: time.Now(), Failures: 2, Pause: &api.AutoPause{Reason: "pause_after_failures: 2 runs in a row ended dead; the last, ctl@x: boom", At: time.Now(), Revision: j.Revision}})
	if _, err := c.client.Put(context.Background(), c.store.Keys().State(j.Partition, "ctl"), string(st)); err != nil {
		t.Fatal(err)
	}
	out = c.mustRun("ls")
	if !strings.Contains(out, "STATUS") || !strings.Contains(out, "paused") {
		t.Errorf("ls: want the owner's pause shown:\n%s", out)
	}
	out = c.mustRun("describe", "ctl")
	for _, want := range []string{"paused by its owner", "2 runs in a row ended dead", "dead in a row", "misfires"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe: output lacks %q:\n%s", want, out)
		}
	}
	// Triggers with a payload, inline or from a file.
	out = c.mustRun("trigger", "ctl", "--payload", `{"day": "2026-05-31"}`)
	if !strings.Contains(out, `triggered job "ctl": run ctl@`) {
		t.Errorf("trigger --payload: %q", out)
	}
	c.mustRun("trigger", "ctl", "--payload", "@"+writeFile(t, "p.json", `[1, 2, 3]`))
	c.mustFail([]string{"trigger", "ctl", "--payload", `{"a":`}, "--payload")
	c.mustFail([]string{"trigger", "ctl", "--payload", `{"secret_env": "bad name"}`}, "payload")
}
