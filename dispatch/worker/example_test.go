package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
)

// A worker embedded in a Go program: it runs "send-invoice" jobs with a Go
// function, and nothing else (not the fleet's "http" jobs: ServeHTTP is
// off), for the fleet found through one orchestrator, until interrupted.
// Its labels let jobs select it ("placement": {"selector":
// "team=billing"}). Its credential is a token of role worker; without a
// valid one, Run logs why and returns ErrCredentialRefused.
func Example() {
	lg, _ := zap.NewProduction()
	w, err := worker.New(worker.Config{
		ID:            "billing-1",
		Orchestrators: worker.MembersFrom("http://127.0.0.1:8080"),
		Token:         os.Getenv("JOBFLEET_TOKEN"),
		Concurrency:   8,
		Labels:        map[string]string{"team": "billing"},
		Logger:        lg,
	})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("send-invoice", func(ctx context.Context, run worker.Run) error {
		// Runs may be delivered more than once: make the effect idempotent
		// on run.RunID, e.g. as the payment provider's idempotency key.
		fmt.Println("invoice", run.RunID, string(run.Payload))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Run returns nil after a graceful shutdown; an error wrapping
	// worker.ErrCredentialRefused if no orchestrator accepts the token.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleConfig_Validate() {
	cfg := worker.DefaultConfig()
	cfg.ID = "w1"
	cfg.Orchestrators = worker.StaticOrchestrators("http://10.0.0.5:8080", "http://10.0.0.6:8080")
	fmt.Println(cfg.Validate())

	cfg.Concurrency = 0 // the default
	fmt.Println(cfg.Validate())

	cfg.Concurrency = -1
	err := cfg.Validate()
	fmt.Println(errors.Is(err, worker.ErrInvalidConfig), err)
	// Output:
	// <nil>
	// <nil>
	// true worker: invalid config: concurrency -1: want 1 to 1024 (0: the default, 4)
}

func ExampleFormatScheduledAt() {
	t, _ := time.Parse(time.RFC3339Nano, "2026-12-01T03:00:00.5+01:00")
	fmt.Println(worker.FormatScheduledAt(t))
	// Output: 2026-12-01T02:00:00.500Z
}

// A worker's least-privilege settings: its credential, where its HTTP jobs
// may connect, which variables shell jobs and secret references may use.
func ExampleConfig_leastPrivilege() {
	cfg := worker.DefaultConfig()
	cfg.ID = "w1"
	cfg.Orchestrators = worker.StaticOrchestrators("https://10.0.0.5:8080")
	cfg.Token = "worker-token" // read it from a file or the environment
	cfg.HTTPPolicy = egress.Policy{
		Allow: []string{"127.0.0.1:9000"},                         // a receiver on this host, that port only
		Deny:  []string{"10.0.0.0/8", "*.internal"},               // internal networks and names
		Fleet: []string{"https://10.0.0.9:2379", "10.0.0.9:2380"}, // etcd
	}
	cfg.SecretEnv = []string{"DEPLOY_HOOK_TOKEN"}
	cfg.ShellEnv = []string{"JOBFLEET_TOKEN"}
	err := cfg.Validate()
	fmt.Println(errors.Is(err, worker.ErrInvalidConfig), err)
	// Output: true worker: invalid config: shell-env "JOBFLEET_TOKEN": variable JOBFLEET_TOKEN is refused: JOBFLEET_* variables are the worker's own settings and secrets
}
