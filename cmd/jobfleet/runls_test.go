package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

func TestFailingRunsTable(t *testing.T) {
	at := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	runs := []api.FailingRun{
		{RunID: store.RunID("team/a", at), JobID: "team/a", Status: api.RunDead, Attempt: 3, At: at.Add(time.Minute), Error: longErr},
		{RunID: store.RunID("b", at), JobID: "b", Status: api.RunFailed, Attempt: 1, At: at, Error: "bad\x1b[2Jterminal\nline"},
	}
	tests := []struct {
		name       string
		wide       bool
		want, dont []string
	}{
		{"table", false,
			[]string{"JOB", "RUN", "STATUS", "ATTEMPT", "AT", "ERROR", "team/a", "team%2Fa@2026-03-01T06:00:00.000Z", "dead", "2026-03-01T06:01:00Z",
				`Post "http://`, "connect: connection refused", "failed", `bad\x1b[2Jterminal line`},
			[]string{longErr, "\x1b"}},
		{"wide", true, []string{longErr, `bad\x1b[2Jterminal\x0aline`}, []string{"\x1b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printFailingRuns(&b, runs, tt.wide); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s", w, out)
				}
			}
			for _, d := range tt.dont {
				if strings.Contains(out, d) {
					t.Errorf("%q in\n%s", d, out)
				}
			}
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 {
				t.Errorf("%d lines, want a header and a line per run:\n%s", len(lines), out)
			}
		})
	}
}

func TestRunLsCommand(t *testing.T) {
	c := newCLIEnv(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	put := func(id string, sched time.Time, st api.RunStatus, ago time.Duration) {
		p := c.store.Partition(id)
		f := api.FailingRun{RunID: store.RunID(id, sched), JobID: id, Status: st, Attempt: 2, At: now.Add(-ago), Error: "boom " + id}
		b, _ := json.Marshal(f)
		if _, err := c.client.Put(context.Background(), c.store.Keys().Failing(p, id, sched), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	sched := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	put("team/old", sched, api.RunDead, 5*time.Hour)
	put("team/new", sched, api.RunFailed, time.Minute)
	put("team/mid", sched, api.RunDead, time.Hour)
	put("other/x", sched, api.RunDead, 2*time.Minute)
	put("team/ancient", sched, api.RunDead, 30*time.Hour)
	ls := func(args ...string) (string, error) {
		return c.runCmd("", append([]string{"run", "--server", c.url, "--token", c.token, "ls"}, args...)...)
	}
	// rows returns the job column of a table, in order.
	rows := func(out string) []string {
		var jobs []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			jobs = append(jobs, strings.Fields(l)[0])
		}
		return jobs
	}
	tests := []struct {
		args []string
		want string
	}{
		{nil, "team/new other/x team/mid team/old"},
		{[]string{"--prefix", "team/"}, "team/new team/mid team/old"},
		{[]string{"--status", "dead"}, "other/x team/mid team/old"},
		{[]string{"--status", "failed"}, "team/new"},
		{[]string{"--since", "90m"}, "team/new other/x team/mid"},
		{[]string{"--limit", "2"}, "team/new other/x"},
	}
	for _, tt := range tests {
		out, err := ls(tt.args...)
		if err != nil {
			t.Fatalf("run ls %q: %v\n%s", tt.args, err, out)
		}
		if got := strings.Join(rows(out), " "); got != tt.want {
			t.Errorf("run ls %q: jobs %q, want %q\n%s", tt.args, got, tt.want, out)
		}
	}
	out, err := ls("--prefix", "team/", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc api.FailingRunList
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 3 || doc.Runs[0].Error == "" || doc.Runs[0].Attempt != 2 {
		t.Errorf("run ls -o yaml: %+v (%v) from\n%s", doc, err, out)
	}
	for _, bad := range [][]string{{"--status", "succeeded"}, {"--since", "25h"}, {"--since", "0s"}, {"--limit", "0"}} {
		if out, err := ls(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("run ls %q: %v, want an error naming %s\n%s", bad, err, bad[0], out)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour:               "24h",
		90 * time.Minute:             "1h30m",
		90 * time.Second:             "1m30s",
		2 * time.Minute:              "2m",
		time.Hour + time.Second:      "1h0m1s",
		1500 * time.Millisecond:      "1.5s",
		3*time.Hour + 20*time.Minute: "3h20m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
