// Package gapwatch measures ownership gaps as an observer of etcd sees
// them: for each owner key, the time from its deletion to its next
// creation. Tests (internal/testkit/fleettest) and benchmarks (bench/rebalance)
// share it.
package gapwatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Recorder watches the keys under a prefix from the moment Start returns.
// Its methods are safe for concurrent use; Stop must be called.
type Recorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex           // guards the fields below
	deleted map[string]time.Time // keys deleted and not yet created again, with when
	gaps    []time.Duration
	created []time.Time // when each gap ended
}

// Result is what a Recorder saw.
type Result struct {
	// Gaps are the deletion-to-creation times, sorted.
	Gaps []time.Duration
	// Created are the instants the gaps ended, in the order seen.
	Created []time.Time
	// Open is how many keys were deleted and not created again.
	Open int
}

// Start begins watching prefix and returns once the watch is established,
// so every change after Start is seen.
func Start(ctx context.Context, client *clientv3.Client, prefix string) (*Recorder, error) {
	wctx, cancel := context.WithCancel(ctx)
	r := &Recorder{cancel: cancel, done: make(chan struct{}), deleted: map[string]time.Time{}}
	wch := client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr, ok := <-wch; !ok || wr.Err() != nil {
		cancel()
		return nil, fmt.Errorf("gapwatch: watch %s: %v", prefix, wr.Err())
	}
	go func() {
		defer close(r.done)
		for wr := range wch {
			now := time.Now()
			r.mu.Lock()
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				if ev.Type == mvccpb.DELETE {
					r.deleted[k] = now
				} else if t, ok := r.deleted[k]; ok {
					r.gaps = append(r.gaps, now.Sub(t))
					r.created = append(r.created, now)
					delete(r.deleted, k)
				}
			}
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// Stop ends the recording and returns what it saw. A caller that has just
// seen the fleet settle by reading etcd may be a moment ahead of this
// watch, so Stop first waits (up to 2s) for open gaps to close.
func (r *Recorder) Stop() Result {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		n := len(r.deleted)
		r.mu.Unlock()
		if n == 0 {
			break
		}
	}
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	gaps := slices.Clone(r.gaps)
	slices.Sort(gaps)
	return Result{Gaps: gaps, Created: slices.Clone(r.created), Open: len(r.deleted)}
}
