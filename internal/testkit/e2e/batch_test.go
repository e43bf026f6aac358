package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// TestBatchCreatedJobsFire: jobs written in batches through any member
// of a 3-member fleet are taken in by their partitions' owners and fire,
// each once, and their next fire times are answered by any member.
func TestBatchCreatedJobsFire(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 16, Scheduler: true, Quiet: true})
	for _, id := range []string{"m1", "m2", "m3"} {
		f.Join(id)
	}
	f.WaitSettled(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	urls := f.URLs()
	const n = 300
	for b := 0; b*100 < n; b++ {
		c, err := client.New(client.Config{Server: urls[b%len(urls)], Token: f.AdminToken})
		if err != nil {
			t.Fatal(err)
		}
		docs := make([]json.RawMessage, 0, 100)
		for i := b * 100; i < (b+1)*100; i++ {
			// No schedule and no run_at: each runs once, as soon as stored.
			docs = append(docs, json.RawMessage(fmt.Sprintf(`{"id": "batch/%03d", "executor": {"type": "http", "url": "http://127.0.0.1:9/x"}}`, i)))
		}
		reply, err := c.WriteBatch(ctx, client.BatchCreate, docs)
		c.Close()
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		for _, r := range reply.Results {
			if r.Status != 201 {
				t.Fatalf("batch %d: item %+v", b, r)
			}
		}
	}
	runs := store.Keys{NS: f.NS}.AllRunsPrefix()
	for {
		resp, err := f.Client.Get(ctx, runs, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == n {
			break
		}
		if resp.Count > n {
			t.Fatalf("%d runs for %d one-off jobs", resp.Count, n)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d batch-created jobs fired", resp.Count, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	c, err := client.New(client.Config{Server: urls[2], Token: f.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nf, err := c.NextFires(ctx, "batch/007", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(nf.Fires) != 0 {
		t.Errorf("a one-off job that fired still lists fires: %+v", nf)
	}
}
