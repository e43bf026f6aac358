package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// BenchmarkCreateJobs measures job creation through the API of a
// 3-member fleet (in process, on the test's embedded etcd, which runs
// without fsync): batches (POST /v1/jobs:batch, 128 jobs each, 8 in
// flight) against one request per job (POST /v1/jobs, 32 in flight), in
// the same run, and reports both rates and their ratio; and, to tell the
// store's share from the API's, the rate of the same batches written
// straight to the store (store.WriteBatch, decoding and validating each
// job as the API does, 8 in flight). Requests go to the members in turn;
// the API's rate limit is off. Run it with
//
//	go test -run '^$' -bench BenchmarkCreateJobs -benchtime 1x ./internal/testkit/e2e
func BenchmarkCreateJobs(b *testing.B) {
	const (
		batchJobs  = 20000
		singleJobs = 2000
	)
	f := fleettest.New(b, etcd, fleettest.Options{Partitions: 64, Scheduler: true, Quiet: true, APILimits: admin.Limits{Rate: -1}})
	for _, id := range []string{"m1", "m2", "m3"} {
		f.Join(id)
	}
	f.WaitSettled(30 * time.Second)
	var clients []*client.Client
	for _, u := range f.URLs() {
		c, err := client.New(client.Config{Server: u, Token: f.AdminToken, Timeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	doc := func(id string) json.RawMessage {
		return json.RawMessage(`{"id": "` + id + `", "schedule": "@hourly", "executor": {"type": "http", "url": "http://127.0.0.1:9/hook"}}`)
	}
	ctx := context.Background()
	// run calls send(k) for k in [0, n) with width calls in flight, and
	// returns the elapsed time.
	run := func(n, width int, send func(c *client.Client, k int) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, width)
		start := time.Now()
		for w := range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := int(next.Add(1) - 1)
					if k >= n {
						return
					}
					if err := send(clients[(w+k)%len(clients)], k); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	round := 0
	for b.Loop() {
		round++
		batches := (batchJobs + 127) / 128
		batchTook := run(batches, 8, func(c *client.Client, k int) error {
			docs := make([]json.RawMessage, 0, 128)
			for i := k * 128; i < min((k+1)*128, batchJobs); i++ {
				docs = append(docs, doc(fmt.Sprintf("batch-%d/%06d", round, i)))
			}
			_, err := c.WriteBatch(ctx, client.BatchCreate, docs)
			return err
		})
		singleTook := run(singleJobs, 32, func(c *client.Client, k int) error {
			_, err := c.CreateJobJSON(ctx, doc(fmt.Sprintf("single-%d/%06d", round, k)))
			return err
		})
		st := store.NewEtcd(f.Client, f.NS, 64, jfapi.DefaultLimits(), nil)
		storeTook := run(batches, 8, func(_ *client.Client, k int) error {
			items := make([]store.BatchItem, 0, 128)
			for i := k * 128; i < min((k+1)*128, batchJobs); i++ {
				j, err := jfapi.DecodeJob(bytes.NewReader(doc(fmt.Sprintf("store-%d/%06d", round, i))), 0)
				if err != nil {
					return err
				}
				items = append(items, store.BatchItem{Job: j})
			}
			_, err := st.WriteBatch(ctx, items, store.BatchCreate)
			return err
		})
		b.ReportMetric(float64(batchJobs)/storeTook.Seconds(), "store-batch-jobs/s")
		batchRate := float64(batchJobs) / batchTook.Seconds()
		singleRate := float64(singleJobs) / singleTook.Seconds()
		b.ReportMetric(batchRate, "batch-jobs/s")
		b.ReportMetric(singleRate, "single-jobs/s")
		b.ReportMetric(batchRate/singleRate, "ratio")
	}
}
