package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
)

func TestNotifyValidation(t *testing.T) {
	ok := api.Notification{On: []api.RunStatus{api.RunDead}, URL: "https://hooks.example/x", Headers: map[string]api.HeaderValue{"Authorization": api.SecretEnv("HOOK")}}
	for _, tt := range []struct {
		name  string
		edit  func(*api.Notification)
		field string
	}{
		{"no outcome", func(n *api.Notification) { n.On = nil }, "notify[0].on"},
		{"unknown outcome", func(n *api.Notification) { n.On = []api.RunStatus{"running"} }, "notify[0].on"},
		{"outcome twice", func(n *api.Notification) { n.On = []api.RunStatus{"dead", "dead"} }, "notify[0].on"},
		{"no URL", func(n *api.Notification) { n.URL = "" }, "notify[0].url"},
		{"ftp URL", func(n *api.Notification) { n.URL = "ftp://x/" }, "notify[0].url"},
		{"password in the URL", func(n *api.Notification) { n.URL = "https://u:p@x/" }, "notify[0].url"},
		{"reserved header", func(n *api.Notification) {
			n.Headers = map[string]api.HeaderValue{"Jobfleet-Run-Id": api.Literal("x")}
		}, "notify[0].headers[Jobfleet-Run-Id]"},
		{"hop-by-hop header", func(n *api.Notification) {
			n.Headers = map[string]api.HeaderValue{"Connection": api.Literal("close")}
		}, "notify[0].headers[Connection]"},
		{"bad secret name", func(n *api.Notification) { n.Headers = map[string]api.HeaderValue{"X": api.SecretEnv("1BAD")} }, "notify[0].headers[X]"},
		{"port 0", func(n *api.Notification) { n.URL = "http://x:0/" }, "notify[0].url"},
		{"unknown format", func(n *api.Notification) { n.Format = "teams" }, "notify[0].format"},
		{"format in capitals", func(n *api.Notification) { n.Format = "SLACK" }, "notify[0].format"},
		{"port 99999", func(n *api.Notification) { n.URL = "https://x:99999/" }, "notify[0].url"},
		{"headers differing in case", func(n *api.Notification) {
			n.Headers = map[string]api.HeaderValue{"X-A": api.Literal("1"), "x-A": api.Literal("2")}
		}, "notify[0].headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.edit(&n)
			j := api.Job{ID: "a", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "https://x/"}, Notify: []api.Notification{n}}
			err := j.Validate(api.DefaultLimits())
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, api.ErrInvalidJob) {
				t.Fatalf("Validate: %v, want a field error on %s", err, tt.field)
			}
		})
	}
	j := api.Job{ID: "a", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "https://x/"}, Notify: []api.Notification{ok}}
	if err := j.Validate(api.DefaultLimits()); err != nil {
		t.Fatalf("valid notify refused: %v", err)
	}
	j.Notify = make([]api.Notification, api.MaxNotifications+1)
	for i := range j.Notify {
		j.Notify[i] = ok
	}
	if err := j.Validate(api.DefaultLimits()); err == nil || !strings.HasPrefix(err.Error(), "notify: ") {
		t.Fatalf("too many entries: %v", err)
	}
}

func TestRedactedHidesNotifyHeaders(t *testing.T) {
	j := api.Job{ID: "a", Notify: []api.Notification{{On: []api.RunStatus{"dead"}, URL: "https://x/",
		Headers: map[string]api.HeaderValue{"Authorization": api.Literal("Bearer secret"), "X-Ref": api.SecretEnv("HOOK")}}}}
	r := j.Redacted()
	if got := r.Notify[0].Headers["Authorization"]; got.Value != api.RedactedValue {
		t.Fatalf("literal header shown as %q", got.Value)
	}
	if got := r.Notify[0].Headers["X-Ref"]; got.SecretEnv != "HOOK" {
		t.Fatalf("secret reference became %+v", got)
	}
	if j.Notify[0].Headers["Authorization"].Value != "Bearer secret" {
		t.Fatal("Redacted modified the job")
	}
}
