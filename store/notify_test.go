package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/store"
)

func TestNotifyValidation(t *testing.T) {
	ok := store.Notification{On: []store.RunStatus{store.RunDead}, URL: "https://hooks.example/x", Headers: map[string]store.HeaderValue{"Authorization": store.SecretEnv("HOOK")}}
	for _, tt := range []struct {
		name  string
		edit  func(*store.Notification)
		field string
	}{
		{"no outcome", func(n *store.Notification) { n.On = nil }, "notify[0].on"},
		{"unknown outcome", func(n *store.Notification) { n.On = []store.RunStatus{"running"} }, "notify[0].on"},
		{"outcome twice", func(n *store.Notification) { n.On = []store.RunStatus{"dead", "dead"} }, "notify[0].on"},
		{"no URL", func(n *store.Notification) { n.URL = "" }, "notify[0].url"},
		{"ftp URL", func(n *store.Notification) { n.URL = "ftp://x/" }, "notify[0].url"},
		{"password in the URL", func(n *store.Notification) { n.URL = "https://u:p@x/" }, "notify[0].url"},
		{"reserved header", func(n *store.Notification) {
			n.Headers = map[string]store.HeaderValue{"Jobfleet-Run-Id": store.Literal("x")}
		}, "notify[0].headers[Jobfleet-Run-Id]"},
		{"hop-by-hop header", func(n *store.Notification) {
			n.Headers = map[string]store.HeaderValue{"Connection": store.Literal("close")}
		}, "notify[0].headers[Connection]"},
		{"bad secret name", func(n *store.Notification) { n.Headers = map[string]store.HeaderValue{"X": store.SecretEnv("1BAD")} }, "notify[0].headers[X]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.edit(&n)
			j := store.Job{ID: "a", Schedule: "@hourly", Executor: store.Executor{Type: "http", URL: "https://x/"}, Notify: []store.Notification{n}}
			err := j.Validate(store.DefaultLimits())
			var fe *store.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, store.ErrInvalidJob) {
				t.Fatalf("Validate: %v, want a field error on %s", err, tt.field)
			}
		})
	}
	j := store.Job{ID: "a", Schedule: "@hourly", Executor: store.Executor{Type: "http", URL: "https://x/"}, Notify: []store.Notification{ok}}
	if err := j.Validate(store.DefaultLimits()); err != nil {
		t.Fatalf("valid notify refused: %v", err)
	}
	j.Notify = make([]store.Notification, store.MaxNotifications+1)
	for i := range j.Notify {
		j.Notify[i] = ok
	}
	if err := j.Validate(store.DefaultLimits()); err == nil || !strings.HasPrefix(err.Error(), "notify: ") {
		t.Fatalf("too many entries: %v", err)
	}
}

func TestRedactedHidesNotifyHeaders(t *testing.T) {
	j := store.Job{ID: "a", Notify: []store.Notification{{On: []store.RunStatus{"dead"}, URL: "https://x/",
		Headers: map[string]store.HeaderValue{"Authorization": store.Literal("Bearer secret"), "X-Ref": store.SecretEnv("HOOK")}}}}
	r := j.Redacted()
	if got := r.Notify[0].Headers["Authorization"]; got.Value != store.RedactedValue {
		t.Fatalf("literal header shown as %q", got.Value)
	}
	if got := r.Notify[0].Headers["X-Ref"]; got.SecretEnv != "HOOK" {
		t.Fatalf("secret reference became %+v", got)
	}
	if j.Notify[0].Headers["Authorization"].Value != "Bearer secret" {
		t.Fatal("Redacted modified the job")
	}
}

func TestOutboxKeys(t *testing.T) {
	k := store.Keys{NS: "ns/"}
	at := time.Date(2026, 5, 1, 2, 3, 4, 5e6, time.UTC)
	for _, id := range []string{"a", "a@b", "team/job", "x y"} {
		body := k.OutboxRun(3, id, at, store.RunDead, 2)
		entry := k.Outbox(3, id, at, store.RunDead, 2, 7)
		for _, key := range []string{body, entry} {
			if !strings.HasPrefix(key, k.OutboxJobPrefix(3, id)) {
				t.Errorf("%s is not under its job's prefix %s", key, k.OutboxJobPrefix(3, id))
			}
		}
		got, ok := k.ParseOutboxKey(3, entry)
		if want := (store.OutboxKey{JobID: id, At: at, Event: store.RunDead, Attempt: 2, Index: 7}); !ok || got != want {
			t.Errorf("ParseOutboxKey(%s) = %+v, %v; want %+v", entry, got, ok, want)
		}
		if got, ok := k.ParseOutboxKey(3, body); !ok || got.Index != -1 || got.JobID != id {
			t.Errorf("ParseOutboxKey(%s) = %+v, %v; want the run document of %s", body, got, ok, id)
		}
	}
	// A job's prefix holds none of another's, even when one ID starts
	// with the other.
	if strings.HasPrefix(k.OutboxRun(0, "a@b", at, store.RunDead, 1), k.OutboxJobPrefix(0, "a")) {
		t.Error("job a's prefix covers job a@b's notifications")
	}
	for _, bad := range []string{
		"ns/outbox/00003/" + store.RunID("a", at) + "/dead-2-0", // an earlier version's key
		"ns/outbox/00003/a/" + store.FormatTime(at) + "/running-1",
		"ns/outbox/00003/a/" + store.FormatTime(at) + "/dead-01",
		"ns/outbox/00003/a/" + store.FormatTime(at) + "/dead-1/8",
		"ns/outbox/00003/a/yesterday/dead-1",
		"ns/outbox/00004/a/" + store.FormatTime(at) + "/dead-1",
	} {
		if got, ok := k.ParseOutboxKey(3, bad); ok {
			t.Errorf("ParseOutboxKey(%s) = %+v, want not parsed", bad, got)
		}
	}
}
