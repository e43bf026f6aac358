package scaling

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/shard"
)

// sharded is n real orchestrators (internal/orchestrator with the
// dispatch scheduler) in this process, each with its own etcd client.
type sharded struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events *eventCounter
}

func (s *sharded) stop() (int, int) {
	s.cancel()
	s.wg.Wait()
	return int(s.events.duplicates.Load()), int(s.events.errors.Load())
}

// eventCounter counts the scheduler's warnings that matter here, from its
// log: a fire that found its run already created (a duplicate decision,
// refused by the run key's create-if-absent check) and failed or refused
// writes.
type eventCounter struct {
	duplicates atomic.Int64
	errors     atomic.Int64
}

func (c *eventCounter) logger() *zap.Logger {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.WarnLevel)
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		switch e.Message {
		case "run existed already; not fired again":
			c.duplicates.Add(1)
		case "recording fires failed; will retry", "fenced write refused; stopping partition":
			c.errors.Add(1)
		}
		return nil
	}))
}

func (e *env) startSharded(ctx context.Context, ns string, n, commitsInFlight int) (runner, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &sharded{cancel: cancel, events: &eventCounter{}}
	lg := s.events.logger()
	var ids []string
	var orchs []*orchestrator.Orchestrator
	for i := range n {
		id := fmt.Sprintf("orchestrator-%d", i+1)
		o, err := orchestrator.New(e.clients[i], orchestrator.Config{
			ID:             id,
			Advertise:      "http://" + id + ".invalid",
			Namespace:      ns,
			Partitions:     e.cfg.Partitions,
			LeaseTTL:       e.cfg.LeaseTTL,
			RebalanceDelay: 100 * time.Millisecond,
			Dispatch:       dispatch.Config{CommitsInFlight: commitsInFlight},
			Logger:         lg,
		})
		if err != nil {
			s.stop()
			return nil, err
		}
		ids = append(ids, id)
		orchs = append(orchs, o)
		s.wg.Go(func() { o.Run(ctx) })
	}
	if err := e.waitSettled(ctx, ns, ids, orchs); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitSettled waits until every partition is owned by its ring target and
// every owner's scheduler has loaded it.
func (e *env) waitSettled(ctx context.Context, ns string, ids []string, orchs []*orchestrator.Orchestrator) error {
	p := e.cfg.Partitions
	ring, err := shard.NewRing(ids, shard.DefaultRingConfig(p))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(e.cfg.Timeout)
	for {
		resp, err := e.observer.Get(ctx, shard.OwnersPrefix(ns), clientv3.WithPrefix())
		if err != nil {
			return err
		}
		right := 0
		for _, kv := range resp.Kvs {
			var part int
			if _, err := fmt.Sscanf(string(kv.Key[len(shard.OwnersPrefix(ns)):]), "%d", &part); err == nil && part < p && ring.Target(part) == string(kv.Value) {
				right++
			}
		}
		loaded := 0
		for _, o := range orchs {
			if d, err := o.Dispatcher(); err == nil {
				loaded += len(d.Owned())
			}
		}
		e.cfg.Progress.Update("  sharded: %d/%d partitions owned, %d loaded", right, p, loaded)
		if right == p && loaded == p {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d partitions owned by their target, %d loaded", errNotSettled, right, p, loaded)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
