package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/store"
)

func TestJobDescribeCommand(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "d/1", "--schedule", "0 9 * * 1-5", "--timezone", "Asia/Tokyo", "--http-url", "http://127.0.0.1:9/x")
	putCLIRun(t, c, "d/1", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), store.RunFailed, longErr)
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
