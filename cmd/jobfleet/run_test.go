package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"sigs.k8s.io/yaml"

	"github.com/jobfleet/jobfleet/store"
)

// longErr is an error as Go's HTTP client words it: what failed first,
// the cause at the end.
const longErr = `Post "http://127.0.0.1:9000/hooks/billing/nightly-report/with/a/rather/long/path?and=query&more=parameters": dial tcp 127.0.0.1:9000: connect: connection refused`

func TestRunsTableKeepsTheCause(t *testing.T) {
	at := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	runs := []api.Run{{ID: store.RunID("j", at), Status: api.RunFailed, ScheduledAt: at, FiredAt: at, Reason: "retrying",
		Attempts: []api.Attempt{{Attempt: 1, Worker: "w1", StartedAt: at, FinishedAt: at.Add(1500 * time.Millisecond), Error: longErr}}}}
	var b bytes.Buffer
	if err := printRuns(&b, runs, false, at); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "connect: connection refused") || !strings.Contains(out, `Post "http://`) || strings.Contains(out, longErr) {
		t.Errorf("table: got\n%s\nwant the error cut in the middle, keeping its start and its cause", out)
	}
	if !strings.Contains(out, "1.5s") || !strings.Contains(out, "retrying") {
		t.Errorf("table: no duration or reason:\n%s", out)
	}
	b.Reset()
	if err := printRuns(&b, runs, true, at); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, longErr) || !strings.Contains(out, "FIRED") {
		t.Errorf("wide: got\n%s\nwant the whole error and the fire time", out)
	}
}

// TestRunsTableShowsAWaitingRunsReason: the reason a run waits names what
// is missing (a handler, a worker with --allow-shell, a scope) in its
// middle; without an error to show, the table prints it whole.
func TestRunsTableShowsAWaitingRunsReason(t *testing.T) {
	at := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	const reason = `no live worker serves handler "send-invoice" (run a program that registers it with the worker library's Handle)`
	var b bytes.Buffer
	if err := printRuns(&b, []api.Run{{ID: store.RunID("j", at), Status: api.RunPending, ScheduledAt: at, FiredAt: at, Reason: reason}}, false, at); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), reason) {
		t.Errorf("table: got\n%s\nwant the whole reason %q", b.String(), reason)
	}
}

func TestRunGetCommand(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "r/1", "--schedule", "@hourly", "--shell", "true")
	at := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	p := c.store.Partition("r/1")
	run := api.Run{ID: store.RunID("r/1", at), JobID: "r/1", Partition: p, ScheduledAt: at, FiredAt: at.Add(12 * time.Millisecond),
		Status: api.RunSucceeded, Owner: "m1", Epoch: 7, Attempts: []api.Attempt{
			{Attempt: 1, Worker: "w1", StartedAt: at.Add(time.Second), FinishedAt: at.Add(3 * time.Second), Error: longErr + "\nsecond line\x1b[2J"},
			{Attempt: 2, Worker: "w2", StartedAt: at.Add(5 * time.Second), FinishedAt: at.Add(6 * time.Second), Output: "all good\n"},
		}}
	val, _ := json.Marshal(run)
	if _, err := c.client.Put(context.Background(), c.store.Keys().Run(p, "r/1", at), string(val)); err != nil {
		t.Fatal(err)
	}
	out, err := c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID)
	if err != nil {
		t.Fatalf("run get: %v\n%s", err, out)
	}
	for _, want := range []string{"succeeded", "w1", "w2", "took 2s", "took 1s", "DURATION   5s", longErr, "    second line\\x1b[2J", "all good", "epoch 7", "12ms after its time"} {
		if !strings.Contains(out, want) {
			t.Errorf("run get: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("run get printed an escape sequence raw:\n%q", out)
	}
	out, err = c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got api.Run
	if err := yaml.Unmarshal([]byte(out), &got); err != nil || got.ID != run.ID || len(got.Attempts) != 2 || got.Attempts[0].Error != run.Attempts[0].Error {
		t.Errorf("run get -o yaml: got %+v (%v) from\n%s", got, err, out)
	}
	if _, err := c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", store.RunID("r/1", at.Add(time.Hour))); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("run get of a missing run: got %v", err)
	}
}
