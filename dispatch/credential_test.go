package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch"
)

// pollAs takes up to max attempts for worker with credential cred and
// scope prefix, waiting at most wait.
func (h *harness) pollAs(worker, cred, prefix string, max int, wait time.Duration) []api.AttemptGrant {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: max,
		Wait: api.Duration(wait), Credential: cred, Prefix: prefix})
	if err != nil {
		h.t.Fatalf("poll: %v", err)
	}
	return resp.Attempts
}

// TestReportsBoundToCredential: an attempt records the credential that
// polled it; a heartbeat or completion from another credential is refused
// with ErrForbidden, even with the right worker ID, changes nothing, and
// the real worker's result is recorded once, also after a handoff to a
// new owner that knows the attempt only from etcd.
func TestReportsBoundToCredential(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "bound", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(time.Second)}})
	h.advance(time.Hour)
	as := h.pollAs("w1", "cred-real", "", 1, api.MaxPollWait)
	if len(as) != 1 {
		t.Fatalf("poll: %d attempts, want 1", len(as))
	}
	a := as[0]
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunRunning })
	if got := r.Attempts[0].Credential; got != "cred-real" {
		t.Fatalf("attempt recorded credential %q, want cred-real", got)
	}

	forge := func(member string) {
		t.Helper()
		before, err := h.client.Get(context.Background(), h.store.Keys().Run(0, "bound", a.ScheduledAt))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: 1, Credential: "cred-rogue"}); !errors.Is(err, dispatch.ErrForbidden) {
			t.Fatalf("%s: forged heartbeat: %v, want ErrForbidden", member, err)
		}
		for _, success := range []bool{true, false} {
			_, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: 1, Success: success, Error: "forged", Credential: "cred-rogue"})
			if !errors.Is(err, dispatch.ErrForbidden) {
				t.Fatalf("%s: forged complete (success %v): %v, want ErrForbidden", member, success, err)
			}
		}
		// A credential-less report (the field left empty) is no better.
		if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: 1, Success: true}); !errors.Is(err, dispatch.ErrForbidden) {
			t.Fatalf("%s: complete without credential: %v, want ErrForbidden", member, err)
		}
		after, err := h.client.Get(context.Background(), h.store.Keys().Run(0, "bound", a.ScheduledAt))
		if err != nil {
			t.Fatal(err)
		}
		if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
			t.Fatalf("%s: a forged report changed the run: %s", member, after.Kvs[0].Value)
		}
	}
	forge("m1")

	// Hand the partition over: the new owner loads the attempt from etcd.
	h.stop()
	h.start("m2")
	forge("m2")
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: 1, Credential: "cred-real"}); err != nil {
		t.Fatalf("real heartbeat after handoff: %v", err)
	}
	resp, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: 1, Success: true, Output: "real", Credential: "cred-real"})
	if err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("real complete: %+v, %v", resp, err)
	}
	r = h.waitRun(a.RunID, func(r api.Run) bool { return r.Status == api.RunSucceeded })
	if len(r.Attempts) != 1 || r.Attempts[0].Output != "real" || r.Attempts[0].Error != "" {
		t.Fatalf("attempts = %+v, want the real worker's result once", r.Attempts)
	}
}

// TestPollPrefix: a poll limited to a prefix takes only runs of jobs
// within it; the others wait for another poll.
func TestPollPrefix(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "billing/a", Schedule: "@every 1h"})
	h.create(api.Job{ID: "payroll/b", Schedule: "@every 1h"})
	h.advance(time.Hour)
	h.waitRuns("billing/a", 1)
	h.waitRuns("payroll/b", 1)
	// The runs are in etcd, but the owner may not have added them to what
	// it hands out yet (that follows its write's answer): the first polls
	// wait for an attempt; the one expecting nothing does not.
	got := h.pollAs("w-billing", "cred-billing", "billing/", 10, api.MaxPollWait)
	if len(got) != 1 || got[0].JobID != "billing/a" {
		t.Fatalf("scoped poll got %v, want only billing/a", ids(got))
	}
	if again := h.pollAs("w-billing", "cred-billing", "billing/", 10, 0); len(again) != 0 {
		t.Fatalf("scoped poll got %v, want nothing more", ids(again))
	}
	rest := h.pollAs("w-any", "cred-any", "", 10, api.MaxPollWait)
	if len(rest) != 1 || rest[0].JobID != "payroll/b" {
		t.Fatalf("unscoped poll got %v, want payroll/b", ids(rest))
	}
}

func ids(as []api.AttemptGrant) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.JobID)
	}
	return out
}

// TestCredentialNotFromJSON: the credential and prefix of protocol
// requests cannot come from the request body.
func TestCredentialNotFromJSON(t *testing.T) {
	var p api.PollRequest
	if err := json.Unmarshal([]byte(`{"worker":"w","Credential":"admin","credential":"admin","Prefix":"","prefix":"x"}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Credential != "" || p.Prefix != "" {
		t.Fatalf("decoded %+v: credential or prefix set from JSON", p)
	}
	var c api.CompleteRequest
	_ = json.Unmarshal([]byte(`{"worker":"w","Credential":"admin","credential":"admin"}`), &c)
	var hb api.HeartbeatRequest
	_ = json.Unmarshal([]byte(`{"worker":"w","Credential":"admin","credential":"admin"}`), &hb)
	if c.Credential != "" || hb.Credential != "" {
		t.Fatalf("decoded %+v, %+v: credential set from JSON", c, hb)
	}
	b, _ := json.Marshal(api.PollRequest{Worker: "w", Credential: "secret-id", Prefix: "p/"})
	if strings.Contains(string(b), "secret-id") || strings.Contains(string(b), "p/") {
		t.Fatalf("encoded %s carries the credential", b)
	}
}
