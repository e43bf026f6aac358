package docs_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// Example_embedWorker is the program workers.md shows for embedding a
// worker: TestEmbedSnippet keeps the two the same, and the compiler keeps
// this one true to the library. It has no output: it would run a worker.
func Example_embedWorker() {
	lg, err := zap.NewProduction() // one line per attempt, and why an orchestrator refused the worker
	if err != nil {
		log.Fatal(err)
	}
	defer lg.Sync()
	// The worker's credential (jobfleet token create --role worker):
	// without one, the orchestrators refuse every poll.
	token, err := os.ReadFile("/etc/billing/worker.token")
	if err != nil {
		log.Fatal(err)
	}
	// It serves only what it registers: the handler below, not the
	// fleet's "http" jobs (ServeHTTP: true would take those too). Its
	// labels are what jobs' placement selectors match.
	w, err := worker.New(worker.Config{
		ID:            "billing-1",
		Orchestrators: worker.MembersFrom("https://orchestrator.example:8443"),
		Token:         strings.TrimSpace(string(token)),
		Logger:        lg,
		Concurrency:   8,
		Labels:        map[string]string{"team": "billing", "region": "eu-west"},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("send-invoice", func(ctx context.Context, run worker.Run) error {
		return sendInvoice(ctx, run.RunID, run.Payload) // runs are at least once: de-duplicate on run.RunID
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil { // until ctx ends; then it finishes or hands back its attempts
		log.Fatal(err)
	}
}

// sendInvoice stands for the program's own work.
func sendInvoice(ctx context.Context, runID string, payload json.RawMessage) error { return nil }
