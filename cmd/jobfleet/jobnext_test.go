package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

func TestJobNextAndPreviewCommands(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "once", "--run-at", "2030-06-01T10:00:00Z", "--timezone", "Europe/Berlin", "--shell", "true")
	c.mustRun("create", "--id", "every", "--schedule", "@every 90m", "--shell", "true", "--paused")

	out := c.mustRun("next", "once")
	if !strings.Contains(out, "Sat 2030-06-01 12:00:00 CEST") || !strings.Contains(out, "2030-06-01T10:00:00Z") {
		t.Errorf("next of a one-off: got\n%s", out)
	}
	out = c.mustRun("next", "every", "--count", "4", "-o", "json")
	var nf api.NextFires
	if err := json.Unmarshal([]byte(out), &nf); err != nil {
		t.Fatalf("next -o json: %v\n%s", err, out)
	}
	if nf.JobID != "every" || !nf.Paused || len(nf.Fires) != 4 {
		t.Fatalf("next -o json: got %+v", nf)
	}
	for i, f := range nf.Fires {
		at, err := time.Parse(time.RFC3339, f.UTC)
		if err != nil || at.Unix()%(90*60) != 0 || !at.After(time.Now().Add(-time.Minute)) {
			t.Errorf("fire %d: %q is not a future multiple of 90m since the epoch (%v)", i, f.UTC, err)
		}
	}
	if out := c.mustRun("next", "every"); !strings.Contains(out, "is paused") {
		t.Errorf("next of a paused job does not say so:\n%s", out)
	}
	c.mustFail([]string{"next", "every", "--count", "101"}, "count")
	c.mustFail([]string{"next", "every", "--count", "0"}, "--count 0: want 1 to 100")
	c.mustFail([]string{"next", "every", "--count", "-3"}, "--count -3: want 1 to 100")
	c.mustFail([]string{"next", "missing"}, "not found")

	out = c.mustRun("preview", "--run-at", "2031-01-01T00:00:00Z", "-o", "yaml")
	if !strings.Contains(out, "utc: \"2031-01-01T00:00:00Z\"") {
		t.Errorf("preview --run-at -o yaml: got\n%s", out)
	}
	out = c.mustRun("preview", "0 9 * * 1-5", "--timezone", "Asia/Tokyo", "--count", "3")
	if n := strings.Count(out, " 09:00:00 JST"); n != 3 {
		t.Errorf("preview: got %d weekday 09:00 JST rows, want 3:\n%s", n, out)
	}
	c.mustFail([]string{"preview", "61 * * * *"}, "400", "schedule:")
	c.mustFail([]string{"preview", "@daily", "--timezone", "Mars/Olympus"}, "timezone:")
	c.mustFail([]string{"preview"}, "give a SCHEDULE argument or --run-at")
	c.mustFail([]string{"preview", "@daily", "--count", "0"}, "--count 0: want 1 to 100")
	c.mustFail([]string{"preview", "@daily", "--count", "101"}, "--count 101: want 1 to 100")
}

// TestUntilText: within the hour the IN column counts seconds, so that
// fires 30 s apart do not read "in 1m", "in 1m".
func TestUntilText(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "in 0s"},
		{23*time.Second + 400*time.Millisecond, "in 23s"},
		{time.Minute, "in 1m"},
		{83 * time.Second, "in 1m23s"},
		{113 * time.Second, "in 1m53s"},
		{59*time.Minute + 59*time.Second, "in 59m59s"},
		{time.Hour + 90*time.Second, "in 1h1m"},
		{9*time.Hour + 7*time.Minute + 30*time.Second, "in 9h7m"},
		{-(2*24*time.Hour + 4*time.Hour + 5*time.Minute), "2d4h ago"},
		{-90 * time.Second, "1m30s ago"},
	} {
		if got := untilText(tc.d); got != tc.want {
			t.Errorf("untilText(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
