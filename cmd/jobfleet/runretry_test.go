package main

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// TestRunRetryCommandRefusals: run retry --from a step the run does not
// have fails naming --from's step and the field; without --from, the
// command refuses before asking; a run that succeeded is refused with its
// status. None starts anything.
func TestRunRetryCommandRefusals(t *testing.T) {
	c := newCLIEnv(t)
	ctx := context.Background()
	runAt := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hook := api.Executor{Type: "http", URL: "http://127.0.0.1:9/h"}
	j := api.Job{ID: "etl", RunAt: &runAt, Steps: []api.Step{
		{ID: "extract", Executor: hook}, {ID: "load", Needs: []string{"extract"}, Executor: hook},
	}}
	j.Normalize()
	if _, err := c.store.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	put := func(at time.Time, st api.RunStatus) string {
		p := c.store.Partition("etl")
		r := api.Run{ID: store.RunID("etl", at), JobID: "etl", Partition: p, ScheduledAt: at, FiredAt: at, Status: st, Attempts: []api.Attempt{},
			Steps: []api.RunStep{{ID: "extract", Items: 1, Status: api.RunSucceeded}, {ID: "load", Needs: []string{"extract"}, First: 1, Items: 1, Status: st}},
			Items: []api.Item{{Index: 0, Status: api.RunSucceeded, Attempts: []api.Attempt{}}, {Index: 1, Status: st, Attempts: []api.Attempt{}}}}
		val, err := store.EncodeRun(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.Put(ctx, c.store.Keys().Run(p, "etl", at), string(val)); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	dead, succeeded := put(at, api.RunDead), put(at.Add(time.Hour), api.RunSucceeded)
	retry := func(args ...string) (string, error) {
		return c.runCmd("", append([]string{"run", "--server", c.url, "--token", c.token, "retry"}, args...)...)
	}
	if out, err := retry(dead, "--from", "nope"); err == nil || !strings.Contains(err.Error(), "from: ") || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("run retry --from nope: %v\n%s\nwant an error naming from and the step", err, out)
	}
	if out, err := retry(dead); err == nil || !strings.Contains(err.Error(), `"from"`) {
		t.Errorf("run retry without --from: %v\n%s\nwant the flag required", err, out)
	}
	if out, err := retry(succeeded, "--from", "load"); err == nil || !strings.Contains(err.Error(), "succeeded") {
		t.Errorf("run retry of a succeeded run: %v\n%s\nwant refused naming its status", err, out)
	}
	ids, err := c.client.Get(ctx, c.ns, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range ids.Kvs {
		if strings.Contains(string(kv.Key), "/retry/") {
			t.Errorf("a refused retry left a request: %s", kv.Key)
		}
	}
}
