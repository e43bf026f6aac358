package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// itemsRunAt is a broadcast run of three items: one succeeded on w1,
// one dead after two attempts on w2, one still running on w3.
func itemsRunAt(id string, p int, at time.Time) api.Run {
	attempt := func(n int, w string, start, took time.Duration, errText string) api.Attempt {
		a := api.Attempt{Attempt: n, Worker: w, Credential: "c", StartedAt: at.Add(start)}
		if took > 0 {
			a.FinishedAt, a.Error = at.Add(start+took), errText
		}
		return a
	}
	return api.Run{ID: store.RunID(id, at), JobID: id, Partition: p, ScheduledAt: at, FiredAt: at, Status: api.RunRunning, Owner: "m1", Epoch: 3,
		Attempts: []api.Attempt{}, Broadcast: true, Items: []api.Item{
			{Index: 0, Status: api.RunSucceeded, Worker: "w1", Registration: 10, Attempts: []api.Attempt{attempt(1, "w1", time.Second, 2*time.Second, "")}},
			{Index: 1, Status: api.RunDead, Worker: "w2", Registration: 11, Attempts: []api.Attempt{attempt(1, "w2", time.Second, time.Second, "boom"), attempt(2, "w2", 3*time.Second, time.Second, "boom again: "+longErr)}},
			{Index: 2, Status: api.RunRunning, Worker: "w3", Registration: 12, Attempts: []api.Attempt{attempt(1, "w3", time.Second, 0, "")}},
		}}
}

// TestRunGetItems: run get shows a run of items as its item settings,
// counts and one line per item; --item N shows that item's attempts in
// full; -o json is the API's run document with its items.
func TestRunGetItems(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "bc", "--schedule", "@hourly", "--shell", "true")
	at := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	p := c.store.Partition("bc")
	run := itemsRunAt("bc", p, at)
	val, err := store.EncodeRun(run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Put(context.Background(), c.store.Keys().Run(p, "bc", at), string(val)); err != nil {
		t.Fatal(err)
	}
	out, err := c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID)
	if err != nil {
		t.Fatalf("run get: %v\n%s", err, out)
	}
	for _, want := range []string{"broadcast to 3 workers: 1/3 succeeded, 1 running, 1 dead", "ATTEMPTS   4", "ITEM  STATUS", "0     succeeded  w1      1         2s", "1     dead       w2      2", "boom again", "2     running    w3      1"} {
		if !strings.Contains(out, want) {
			t.Errorf("run get: no %q in\n%s", want, out)
		}
	}
	out, err = c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID, "--item", "1")
	if err != nil {
		t.Fatalf("run get --item: %v\n%s", err, out)
	}
	for _, want := range []string{"ITEM       1 of 3", "PINNED TO  w2", "attempt 1 on worker w2", "attempt 2 on worker w2", "boom again: " + longErr} {
		if !strings.Contains(out, want) {
			t.Errorf("run get --item 1: no %q in\n%s", want, out)
		}
	}
	if _, err := c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID, "--item", "3"); err == nil || !strings.Contains(err.Error(), "has 3 items") {
		t.Errorf("run get --item 3: %v, want an error naming the item count", err)
	}
	out, err = c.runCmd("", "run", "--server", c.url, "--token", c.token, "get", run.ID, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got api.Run
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Items) != 3 || !strings.Contains(out, `"items"`) || strings.Contains(out, "item_state") {
		t.Errorf("run get -o json: %v, %d items, from\n%s", err, len(got.Items), out)
	}
}

func TestRunsTableShowsItems(t *testing.T) {
	at := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printRuns(&b, []api.Run{itemsRunAt("bc", 0, at)}, false, at.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "1/3") || !strings.Contains(out, "3 workers") || !strings.Contains(out, "boom again") || !strings.Contains(out, "9s so far") {
		t.Errorf("runs table:\n%s\nwant the items succeeded, the workers, the last error and the duration so far", out)
	}
	b.Reset()
	j := api.Job{ID: "s", Executor: api.Executor{Type: "http"}, Shards: &api.Shards{Params: []json.RawMessage{[]byte(`"eu"`), []byte(`"us"`)}, MinSucceeded: 1, MaxParallel: 1}}
	if err := printJobDetail(&b, j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `SHARDS       2 items (params "eu", "us"), min_succeeded 1, max_parallel 1`) {
		t.Errorf("job detail:\n%s\nwant the shards", b.String())
	}
}
