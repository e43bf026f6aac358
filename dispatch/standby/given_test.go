package standby

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// emptyMember is a Member over client whose partitions hold nothing (a
// copy's read returns no keys).
func emptyMember(t *testing.T, client *clientv3.Client) Member[struct{}] {
	return Member[struct{}]{
		Client: client,
		Keys:   store.Keys{NS: "/standby-given/"},
		Logger: zaptest.NewLogger(t),
		Read: func(ctx context.Context, _ int, _ func(*mvccpb.KeyValue)) (int64, error) {
			resp, err := client.Get(ctx, "/standby-given/")
			if err != nil {
				return 0, err
			}
			return resp.Header.Revision, nil
		},
		Decode: func(*mvccpb.KeyValue) *struct{} { return &struct{}{} },
	}
}

// waitHeld waits until s holds partition p's copy, read.
func waitHeld[T any](t *testing.T, s *Standby[T], p int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Held(p) {
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not read its copy of partition %d within 10s", p)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStandbyKeepsTheCopyOfAPartitionItIsGiven: when the ring gives the
// heir the partition (its owner went away), the copy stays for the
// acquisition to take, though the heir no longer inherits it; it goes
// when the ring gives the partition to neither.
func TestStandbyKeepsTheCopyOfAPartitionItIsGiven(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	changed := make(chan struct{})
	var mu sync.Mutex
	heirs := Heirs{Of: map[int]bool{1: true, 2: true}}
	s, err := New(emptyMember(t, client), func() (Heirs, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return heirs, changed
	}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.Run(ctx) })
	waitHeld(t, s, 1)
	waitHeld(t, s, 2)
	set := func(h Heirs) {
		mu.Lock()
		heirs = h
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
	}
	set(Heirs{Of: map[int]bool{3: true}, Given: map[int]bool{1: true, 0: true}})
	waitHeld(t, s, 3)
	s.mu.Lock()
	c1, c2, c0 := s.copies[1], s.copies[2], s.copies[0]
	s.mu.Unlock()
	if c1 == nil || c2 != nil || c0 != nil {
		t.Fatalf("copies of 1, 2, 0 after the ring gave 1 and 0: %v, %v, %v; want 1's only", c1 != nil, c2 != nil, c0 != nil)
	}
	set(Heirs{Of: map[int]bool{3: true}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		c1 = s.copies[1]
		s.mu.Unlock()
		if c1 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy of a partition neither inherited nor given stayed")
		}
		time.Sleep(time.Millisecond)
	}
}
