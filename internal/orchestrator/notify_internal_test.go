package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/store"
)

// TestSenderDeliversThroughThePolicy: a notification reaches a receiver
// the policy allows, with the run document as its body and the Jobfleet
// headers, its literal and secret headers; loopback is refused unless
// allowed, a member's address and etcd's always, and a non-2xx answer or
// a redirect is a failure.
func TestSenderDeliversThroughThePolicy(t *testing.T) {
	type got struct {
		header http.Header
		body   string
	}
	seen := make(chan got, 10)
	status := http.StatusOK
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Clone(), string(b)}
		if status == http.StatusFound {
			w.Header().Set("Location", "http://169.254.169.254/")
		}
		w.WriteHeader(status)
	}))
	defer rcv.Close()
	t.Setenv("HOOK_TOKEN", "s3cret")
	run, _ := json.Marshal(api.Run{ID: "team%2Fa@2026-06-01T00:00:00.000Z", JobID: "team/a", Status: api.RunDead})
	o := store.Outbox{RunID: "team%2Fa@2026-06-01T00:00:00.000Z", JobID: "team/a", Event: api.RunDead, Attempt: 2, URL: rcv.URL + "/hook", Run: run,
		Headers: map[string]api.HeaderValue{"X-Team": api.Literal("a"), "Authorization": api.SecretEnv("HOOK_TOKEN")}}
	members := []string{}
	newS := func(allow []string, secretEnv []string) *sender {
		s, err := newSender(NotifyConfig{Policy: egress.Policy{Allow: allow}, SecretEnv: secretEnv}, []string{"http://127.0.0.1:2379"}, func() []string { return members })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()

	if err := newS(nil, []string{"HOOK_TOKEN"}).Send(ctx, o); !errors.Is(err, egress.ErrDestinationDenied) || !errors.Is(err, dispatch.ErrNotificationRefused) {
		t.Fatalf("loopback receiver without --notify-allow: %v, want refused (given up at once)", err)
	} else if msg := err.Error(); !strings.Contains(msg, "allow it with --notify-allow") || strings.Contains(msg, "--http-allow") {
		// The operator is told of the orchestrator's flag, not the
		// worker's.
		t.Fatalf("refusal %q, want it to name --notify-allow only", msg)
	}
	s := newS([]string{"127.0.0.1"}, []string{"HOOK_TOKEN"})
	if err := s.Send(ctx, o); err != nil {
		t.Fatalf("Send: %v", err)
	}
	g := <-seen
	for name, want := range map[string]string{"Jobfleet-Run-Id": o.RunID, "Jobfleet-Job-Id": "team%2Fa", "Jobfleet-Notify-Event": "dead", "Jobfleet-Attempt": "2",
		"X-Team": "a", "Authorization": "s3cret", "Content-Type": "application/json"} {
		if g.header.Get(name) != want {
			t.Errorf("header %s = %q, want %q", name, g.header.Get(name), want)
		}
	}
	if g.body != string(run) {
		t.Errorf("body %s, want the run document %s", g.body, run)
	}

	if err := newS([]string{"127.0.0.1"}, nil).Send(ctx, o); err == nil || !strings.Contains(err.Error(), "HOOK_TOKEN is not on --notify-secret-env") {
		t.Fatalf("secret not allowed: %v", err)
	}
	members = []string{rcv.URL}
	if err := s.Send(ctx, o); !errors.Is(err, egress.ErrDestinationDenied) {
		t.Fatalf("a member's address: %v, want refused", err)
	}
	members = nil
	etcdLike := o
	etcdLike.URL = "http://127.0.0.1:2379/v3/kv/range"
	if err := s.Send(ctx, etcdLike); !errors.Is(err, egress.ErrDestinationDenied) {
		t.Fatalf("etcd's endpoint: %v, want refused", err)
	}
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusFound} {
		status = code
		if err := s.Send(ctx, o); err == nil || errors.Is(err, dispatch.ErrNotificationRefused) {
			t.Fatalf("answer %d: %v, want a failure to retry", code, err)
		}
		<-seen
	}
}
