package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// runWorkerCmd runs `jobfleet worker args...` until it has polled orch
// once (then cancels it) or failed, and returns its error and the
// Authorization header of that poll.
func runWorkerCmd(t *testing.T, args ...string) (auth string, err error) {
	t.Helper()
	polled := make(chan string, 1)
	orch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathPoll {
			http.NotFound(w, r)
			return
		}
		select {
		case polled <- r.Header.Get("Authorization"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.PollResponse{Attempts: []api.AttemptGrant{}})
	}))
	defer orch.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	root.SetArgs(append([]string{"worker", "--orchestrators=" + orch.URL, "--poll-wait=1s", "--log-level=error"}, args...))
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case auth = <-polled:
		cancel()
		return auth, <-done
	case err := <-done:
		return "", err
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatal("the worker neither polled nor failed")
		return "", nil
	}
}

func TestWorkerCommandCredentials(t *testing.T) {
	t.Run("token from the environment", func(t *testing.T) {
		t.Setenv("JOBFLEET_TOKEN", "from-env")
		auth, err := runWorkerCmd(t)
		if err != nil || auth != "Bearer from-env" {
			t.Errorf("got Authorization %q, %v; want the bearer token from JOBFLEET_TOKEN", auth, err)
		}
	})
	t.Run("token file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth, err := runWorkerCmd(t, "--token-file="+file)
		if err != nil || auth != "Bearer from-file" {
			t.Errorf("got Authorization %q, %v; want the bearer token from the file", auth, err)
		}
	})
	t.Run("no token", func(t *testing.T) {
		auth, err := runWorkerCmd(t)
		if err != nil || auth != "" {
			t.Errorf("got Authorization %q, %v; want none", auth, err)
		}
	})
}

func TestWorkerCommandFlagErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--token=a", "--token-file=" + empty}, "--token and --token-file both given"},
		{[]string{"--token-file=" + empty}, "is empty"},
		{[]string{"--token-file=/nonexistent/jobfleet-token"}, "--token-file"},
		{[]string{"--cert=c.pem"}, "--cert and --key go together"},
		{[]string{"--ca=/nonexistent/ca.pem"}, "--ca"},
		{[]string{"--http-allow=not a host!"}, "HTTP allow list"},
		{[]string{"--http-deny=10.0.0.0/40"}, "HTTP deny list"},
		{[]string{"--shell-env=PATH,JOBFLEET_TOKEN"}, "JOBFLEET_TOKEN is refused"},
		{[]string{"--secret-env=JOBFLEET_ETCD_PASSWORD"}, "JOBFLEET_ETCD_PASSWORD is refused"},
	} {
		_, err := runWorkerCmd(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("worker %q: %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}
