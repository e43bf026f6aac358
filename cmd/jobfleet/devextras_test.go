package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestStoreExamplesKeepsUserChanges restarts dev's example loading on the
// same store, as `jobfleet dev` restarted with the same data directory
// does: the user's pause and edits survive; only the echo endpoint's port,
// which changes on every start, is updated.
func TestStoreExamplesKeepsUserChanges(t *testing.T) {
	ctx := context.Background()
	s := store.NewEtcd(etcd.Client(t), etcdtest.Namespace(t), 16, api.DefaultLimits(), nil)
	lg := zaptest.NewLogger(t)

	storeExamples(ctx, lg, s, "http://127.0.0.1:41001")
	for _, j := range exampleJobs("") {
		if _, err := s.Get(ctx, j.ID); err != nil {
			t.Fatalf("first start: example %q: %v", j.ID, err)
		}
	}

	// The user pauses two examples and edits one.
	for _, id := range []string{"example-echo", "example-shell"} {
		if _, err := s.SetPaused(ctx, id, true); err != nil {
			t.Fatal(err)
		}
	}
	flaky, err := s.Get(ctx, "example-flaky")
	if err != nil {
		t.Fatal(err)
	}
	flaky.Schedule = "@every 1h"
	if _, _, err := s.Put(ctx, flaky); err != nil {
		t.Fatal(err)
	}

	storeExamples(ctx, lg, s, "http://127.0.0.1:41002") // the next start: another echo port
	for _, tt := range []struct {
		id, schedule, url string
		paused            bool
	}{
		{"example-echo", "@every 5s", "http://127.0.0.1:41002/echo", true},
		{"example-shell", "*/10 * * * * *", "", true},
		{"example-flaky", "@every 1h", "http://127.0.0.1:41002/flaky", false},
	} {
		j, err := s.Get(ctx, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Paused != tt.paused || j.Schedule != tt.schedule || j.Executor.URL != tt.url {
			t.Errorf("%s after a restart: got paused %v schedule %q url %q, want %v %q %q", tt.id, j.Paused, j.Schedule, j.Executor.URL, tt.paused, tt.schedule, tt.url)
		}
	}

	// An example the user aimed elsewhere keeps its URL.
	echo, _ := s.Get(ctx, "example-echo")
	echo.Executor.URL = "https://hooks.example.com/echo"
	if _, _, err := s.Put(ctx, echo); err != nil {
		t.Fatal(err)
	}
	storeExamples(ctx, lg, s, "http://127.0.0.1:41003")
	if j, _ := s.Get(ctx, "example-echo"); j.Executor.URL != "https://hooks.example.com/echo" || !j.Paused {
		t.Errorf("example-echo aimed elsewhere: got url %q paused %v, want the user's URL, paused", j.Executor.URL, j.Paused)
	}
}

// TestEchoServerPort checks that dev's echo endpoint listens on the port
// it is given, so that a job aimed at it works again after a restart, and
// on another port, still answering, when that one is taken.
func TestEchoServerPort(t *testing.T) {
	lg := zaptest.NewLogger(t)
	cfg := serverConfig(lg, 10, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	first, err := startEchoServer(lg, "127.0.0.1", port, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Shutdown()
	want := "http://127.0.0.1:" + strconv.Itoa(port)
	if first.URL() != want {
		t.Errorf("echo endpoint at %s, want %s", first.URL(), want)
	}
	second, err := startEchoServer(lg, "127.0.0.1", port, cfg) // the port is taken now
	if err != nil {
		t.Fatal(err)
	}
	defer second.Shutdown()
	if second.URL() == want {
		t.Fatalf("two echo endpoints at %s", want)
	}
	for _, srv := range []string{first.URL(), second.URL()} {
		resp, err := http.Post(srv+"/echo", "application/json", strings.NewReader(`{"hello":"echo"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != `{"hello":"echo"}` {
			t.Errorf("POST %s/echo: %s %q, want 200 with the body sent", srv, resp.Status, body)
		}
	}
}
