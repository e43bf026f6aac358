package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/store"
)

var exampleNS int

// startExampleAPI serves the job API over the test etcd, without
// credentials (as `jobfleet dev --insecure` does on loopback), and
// returns its URL and how to stop it.
func startExampleAPI() (string, func()) {
	ec, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	exampleNS++
	jobs := store.NewEtcd(ec, fmt.Sprintf("/example-%d/", exampleNS), 16, api.DefaultLimits(), nil)
	srv := httptest.NewServer(admin.Handler(admintest.Member{Jobs: jobs}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Insecure: true,
	}))
	return srv.URL, func() { srv.Close(); ec.Close() }
}

func Example() {
	server, stop := startExampleAPI()
	defer stop()
	ctx := context.Background()

	c, err := client.New(client.Config{Server: server, Token: "", Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	job, err := c.CreateJob(ctx, api.Job{
		ID:       "billing/nightly-report",
		Schedule: "0 2 * * *",
		Timezone: "Europe/Berlin",
		Executor: api.Executor{Type: api.ExecutorHTTP, URL: "http://127.0.0.1:9000/report"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("created %s (%s %s)\n", job.ID, job.Schedule, job.Timezone)

	// Replace it only if nobody changed it since: PutJob at its revision.
	job.Schedule = "30 2 * * *"
	job, _, err = c.PutJob(ctx, job)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("now at", job.Schedule)

	jobs, err := c.AllJobs(ctx, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(jobs), "job")
	// Output:
	// created billing/nightly-report (0 2 * * * Europe/Berlin)
	// now at 30 2 * * *
	// 1 job
}

func ExampleError() {
	server, stop := startExampleAPI()
	defer stop()
	ctx := context.Background()
	c, err := client.New(client.Config{Server: server})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	_, err = c.GetJob(ctx, "no-such-job")
	var apiErr *client.Error
	switch {
	case errors.Is(err, client.ErrNotFound) && errors.As(err, &apiErr):
		fmt.Println("not found:", apiErr.StatusCode)
	case err != nil:
		fmt.Println("failed:", err)
	}

	// A stale revision is a conflict: read the job again and retry.
	if _, err := c.CreateJob(ctx, api.Job{ID: "j", Executor: api.Executor{Type: "reindex"}, Schedule: "@every 1h"}); err != nil {
		fmt.Println(err)
		return
	}
	_, _, err = c.PutJob(ctx, api.Job{ID: "j", Revision: 1, Executor: api.Executor{Type: "reindex"}, Schedule: "@every 2h"})
	fmt.Println("conflict:", errors.Is(err, client.ErrConflict))
	// Output:
	// not found: 404
	// conflict: true
}
