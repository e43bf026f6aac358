package fleettest

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/shard"
)

// GapRecorder measures ownership gaps as an observer sees them: for each
// partition, the time from its owner key's deletion to its next creation.
type GapRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	deleted map[string]time.Time
	gaps    []time.Duration
}

// RecordGaps starts watching the fleet's owner keys from now on. Stop it
// with Stop.
func (f *Fleet) RecordGaps() *GapRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	g := &GapRecorder{cancel: cancel, done: make(chan struct{}), deleted: map[string]time.Time{}}
	wch := f.Client.Watch(ctx, shard.OwnersPrefix(f.NS), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	<-wch // created: events from here on are seen
	go func() {
		defer close(g.done)
		for wr := range wch {
			now := time.Now()
			g.mu.Lock()
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				if ev.Type == mvccpb.Event_DELETE {
					g.deleted[k] = now
				} else if t, ok := g.deleted[k]; ok {
					g.gaps = append(g.gaps, now.Sub(t))
					delete(g.deleted, k)
				}
			}
			g.mu.Unlock()
		}
	}()
	return g
}

// Stop ends the recording and returns the gaps seen, sorted, and how many
// partitions are still without an owner.
func (g *GapRecorder) Stop() (gaps []time.Duration, open int) {
	// A caller that just saw the fleet settled by reading etcd may be a
	// moment ahead of this watch: give the last creations time to arrive.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		n := len(g.deleted)
		g.mu.Unlock()
		if n == 0 {
			break
		}
	}
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	gaps = slices.Clone(g.gaps)
	slices.Sort(gaps)
	return gaps, len(g.deleted)
}

// Quantile returns the q-quantile (0..1) of sorted durations, 0 if empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}
