package workers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// largest returns the largest registration the protocol allows, with
// every name and URL as long as allowed: what a hostile worker sends.
// Registrations of different variants (short strings) differ in every
// name.
func largest(worker, credential, variant string) api.RegisterRequest {
	r := api.RegisterRequest{Worker: worker, Credential: credential, Concurrency: api.MaxWorkerConcurrency}
	for i := range api.MaxRegisterExecutors {
		name := fmt.Sprintf("%s-%02d", variant, i)
		r.Executors = append(r.Executors, name+strings.Repeat("x", api.MaxExecutorBytes-len(name)))
	}
	for i := range api.MaxRegisterOrchestrators {
		u := fmt.Sprintf("http://%s-%d.example/", variant, i)
		r.Orchestrators = append(r.Orchestrators, u+strings.Repeat("p", api.MaxOrchestratorURLBytes-len(u)))
	}
	return r
}

// TestRegisterRefusesHostileRegistrations: every registration beyond the
// protocol's bounds is refused as a bad request naming the field, and
// leaves etcd as it was; the largest allowed one is stored, in a few KiB.
func TestRegisterRefusesHostileRegistrations(t *testing.T) {
	e := newEnv(t)
	r := e.registry("m1", workers.Config{})
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		edit  func(*api.RegisterRequest)
		field string
	}{
		{"no worker", func(r *api.RegisterRequest) { r.Worker = "" }, "worker"},
		{"worker ID of 129 bytes", func(r *api.RegisterRequest) { r.Worker = strings.Repeat("w", 129) }, "worker"},
		{"control character in the ID", func(r *api.RegisterRequest) { r.Worker = "w\x1b[2J" }, "worker"},
		{"no executors", func(r *api.RegisterRequest) { r.Executors = nil }, "executors"},
		{"65 executors", func(r *api.RegisterRequest) {
			r.Executors = many(65, func(i int) string { return fmt.Sprintf("h%d", i) })
		}, "executors: must list 1 to 64"},
		{"1000 executors", func(r *api.RegisterRequest) {
			r.Executors = many(1000, func(i int) string { return fmt.Sprintf("h%d", i) })
		}, "executors: must list 1 to 64"},
		{"executor name of 65 bytes", func(r *api.RegisterRequest) { r.Executors = []string{"http", strings.Repeat("h", 65)} }, "executors[1]"},
		{"executor with a space", func(r *api.RegisterRequest) { r.Executors = []string{"a b"} }, "executors[0]"},
		{"executor listed twice", func(r *api.RegisterRequest) { r.Executors = []string{"http", "resize", "http"} }, "executors[2]"},
		{"zero concurrency", func(r *api.RegisterRequest) { r.Concurrency = 0 }, "concurrency"},
		{"too much concurrency", func(r *api.RegisterRequest) { r.Concurrency = 5000 }, "concurrency"},
		{"active above concurrency", func(r *api.RegisterRequest) { r.Active = 5 }, "active"},
		{"negative active", func(r *api.RegisterRequest) { r.Active = -1 }, "active"},
		{"9 orchestrators", func(r *api.RegisterRequest) {
			r.Orchestrators = many(9, func(i int) string { return fmt.Sprintf("http://o%d:8080", i) })
		}, "orchestrators: at most 8"},
		{"64 orchestrators", func(r *api.RegisterRequest) {
			r.Orchestrators = many(64, func(i int) string { return fmt.Sprintf("http://o%d:8080", i) })
		}, "orchestrators: at most 8"},
		{"orchestrator URL of 257 bytes", func(r *api.RegisterRequest) {
			r.Orchestrators = []string{"http://o1:8080", "http://" + strings.Repeat("a", 250)}
		}, "orchestrators[1]"},
		{"orchestrator URL with a newline", func(r *api.RegisterRequest) { r.Orchestrators = []string{"http://o1\n"} }, "orchestrators[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rq := req("w1", "cred-a")
			rq.Active = 1
			tt.edit(&rq)
			before := e.revision()
			_, err := r.Register(context.Background(), rq)
			if !errors.Is(err, dispatch.ErrBadRequest) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Register: %v, want a bad request naming %q", err, tt.field)
			}
			if n := e.writesSince(before); n != 0 {
				t.Errorf("%d writes, want none", n)
			}
		})
	}
	if k := e.keys(); len(k) != 0 {
		t.Fatalf("keys after bad requests: %q, want none", k)
	}

	// The largest allowed registration is stored, bounded.
	e.register(r, largest("w-big", "cred-a", "a"))
	_, kv, ok := e.stored("w-big")
	if !ok || kv.size > 7<<10 {
		t.Fatalf("the largest registration: stored %v, %d bytes; want stored in at most 7 KiB", ok, kv.size)
	}
	t.Logf("the largest registration stores %d bytes", kv.size)
}
