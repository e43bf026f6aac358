package storage_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/store"
)

// A member runs a Monitor and asks it, from memory, before writes that
// grow the database: store.Etcd does it through WithGuard, the
// dispatcher through WritesRefused.
func ExampleMonitor() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	cfg := storage.DefaultConfig("/example/", "orchestrator-1")
	cfg.QuotaBytes = 1 << 30
	m, err := storage.NewMonitor(client, cfg)
	if err != nil {
		panic(err)
	}
	st := m.Check(context.Background()) // Run does this every CheckInterval
	fmt.Printf("quota %d MiB from the %s, high-water mark %d MiB\n", st.Quota>>20, st.QuotaSource, st.HighWaterBytes>>20)

	jobs := store.NewEtcd(client, "/example/", 16, api.DefaultLimits(), nil).WithGuard(m.Admit)
	_, err = jobs.Create(context.Background(), api.Job{ID: "nightly", Schedule: "@daily", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}})
	fmt.Println("created:", err == nil, "refused for space:", errors.Is(err, store.ErrHighWater) || errors.Is(err, store.ErrNoSpace))
	// Output:
	// quota 1024 MiB from the flag, high-water mark 819 MiB
	// created: true refused for space: false
}

// Every member runs a Compactor; each interval one of them compacts etcd
// to the revision it saw one interval earlier, and records it.
func ExampleCompactor() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	cfg := storage.DefaultConfig("/example/", "orchestrator-1")
	cfg.CompactionInterval = time.Second
	c, err := storage.NewCompactor(client, cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	for {
		rec, err := storage.ReadCompaction(context.Background(), client, "/example/")
		if err == nil && rec.Revision > 0 {
			fmt.Println("compacted by", rec.Member, "keeping", rec.Interval)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	// Output:
	// compacted by orchestrator-1 keeping 1s
}
