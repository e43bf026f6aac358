package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/store"
)

// fleet is the soak's orchestrators.
type fleet struct {
	sessionsLost  atomic.Int64
	writeFailures atomic.Int64

	clients []*clientv3.Client
	members []*orchestrator.Orchestrator
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startFleet(ctx context.Context, endpoints []string, ns string, cfg Config) (*fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	lg = lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		discard := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.WarnLevel)
		return zapcore.NewTee(c, zapcore.RegisterHooks(discard, f.count))
	}))
	for i := range cfg.Members {
		c, err := bench.NewClient(endpoints, 0)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.clients = append(f.clients, c)
		id := fmt.Sprintf("orchestrator-%d", i+1)
		o, err := orchestrator.New(c, orchestrator.Config{
			ID:         id,
			Advertise:  "http://" + id + ".invalid",
			Namespace:  ns,
			Partitions: cfg.Partitions,
			Dispatch:   dispatch.Config{HistoryMaxRuns: cfg.HistoryMaxRuns, HistoryBudget: cfg.HistoryBudget},
			Storage:    storage.Config{CompactionInterval: cfg.CompactionInterval, CheckInterval: min(cfg.SampleInterval, storage.DefaultCheckInterval)},
			Logger:     lg.With(zap.String("soak_member", id)),
		})
		if err != nil {
			f.stop()
			return nil, err
		}
		f.members = append(f.members, o)
		f.wg.Go(func() { o.Run(ctx) })
	}
	return f, nil
}

// count counts the log entries Events counts (warnings).
func (f *fleet) count(e zapcore.Entry) error {
	switch {
	case e.Message == "lease not renewed within the renew deadline; fencing":
		f.sessionsLost.Add(1)
	case strings.HasPrefix(e.Message, "recording fires failed"), strings.HasPrefix(e.Message, "recording run failed"):
		f.writeFailures.Add(1)
	}
	return nil
}

// stop stops the members and closes their clients. Idempotent.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, c := range f.clients {
		c.Close()
	}
	f.clients = nil
}

// waitLoaded waits until every partition's scheduler runs on some member.
func (f *fleet) waitLoaded(ctx context.Context, cfg Config) error {
	for {
		loaded := 0
		for _, o := range f.members {
			if d, err := o.Dispatcher(); err == nil {
				loaded += len(d.Owned())
			}
		}
		cfg.Progress.Update("  soak: %d of %d partitions loaded", loaded, cfg.Partitions)
		if loaded == cfg.Partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("soak: %d of %d partitions loaded: %w", loaded, cfg.Partitions, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// noopExecutor is the executor type of the soak's jobs: the pollers take
// their attempts and complete them at once.
const noopExecutor = "soak-noop"

// poll starts the pollers and returns a function that stops them and
// waits for them.
func (f *fleet) poll(cfg Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, o := range f.members {
		for j := range cfg.Pollers {
			worker := fmt.Sprintf("soak-%d-%d", i+1, j+1)
			wg.Go(func() { pollLoop(ctx, o, worker) })
		}
	}
	return func() { cancel(); wg.Wait() }
}

func pollLoop(ctx context.Context, o *orchestrator.Orchestrator, worker string) {
	for ctx.Err() == nil {
		d, err := o.Dispatcher()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		resp, err := d.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{noopExecutor}, Max: 100, Wait: api.Duration(time.Second)})
		if err != nil {
			continue
		}
		for _, a := range resp.Attempts {
			// A partition that moved meanwhile refuses the report; the
			// attempt's lease expires and it runs again: fine for a soak.
			d.Complete(ctx, api.CompleteRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt, Success: true})
		}
	}
}

// sample reads etcd's figures now. The fires are counted from the jobs'
// scheduling states, not from the members' metrics: a scrape locks every
// partition's scheduler and may wait behind its writes.
func (f *fleet) sample(ctx context.Context, c *clientv3.Client, ns string, start time.Time) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	keys := store.Keys{NS: ns}
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(keys.AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(keys.AllStatePrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(storage.CompactionKey(ns)),
	).Commit()
	if err != nil {
		return Sample{}, fmt.Errorf("soak: read runs and states: %w", err)
	}
	st, err := status(ctx, c)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{Elapsed: time.Since(start), DBSize: st.DbSize, DBInUse: st.DbSizeInUse, Revision: st.Header.Revision}
	s.HighWater = float64(st.DbSize) > storage.DefaultHighWater*float64(st.DbSizeQuota)
	s.Runs = resp.Responses[0].GetResponseRange().Count
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var js api.JobState
		if json.Unmarshal(kv.Value, &js) == nil {
			s.Fires += js.Fired + js.Skipped
			s.Dropped += js.Dropped
		}
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		var rec storage.Compaction
		if json.Unmarshal(kvs[0].Value, &rec) == nil {
			s.Compacted = rec.Revision
		}
	}
	return s, nil
}

func status(ctx context.Context, c *clientv3.Client) (*clientv3.StatusResponse, error) {
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return nil, fmt.Errorf("soak: etcd status: %w", err)
	}
	return st, nil
}

// createJobs creates the soak's jobs with 16 writers.
func createJobs(ctx context.Context, c *clientv3.Client, ns string, cfg Config) error {
	s := store.NewEtcd(c, ns, cfg.Partitions, api.DefaultLimits(), nil)
	var (
		next    atomic.Int64
		created atomic.Int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		first   error
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(cfg.FiresPerSecond) || ctx.Err() != nil {
					return
				}
				_, err := s.Create(ctx, api.Job{ID: fmt.Sprintf("soak-%06d", i), Schedule: "@every 1s", Executor: api.Executor{Type: noopExecutor}})
				if err != nil {
					errMu.Lock()
					first = errors.Join(first, err)
					errMu.Unlock()
					return
				}
				cfg.Progress.Update("  soak: %d of %d jobs created", created.Add(1), cfg.FiresPerSecond)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("soak: create jobs: %w", first)
	}
	return nil
}

// waitStates waits until the owners have taken every job in (each has a
// scheduling state).
func waitStates(ctx context.Context, c *clientv3.Client, ns string, cfg Config) error {
	for {
		resp, err := c.Get(ctx, store.Keys{NS: ns}.AllStatePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("soak: count states: %w", err)
		}
		if resp.Count >= int64(cfg.FiresPerSecond) {
			return nil
		}
		cfg.Progress.Update("  soak: %d of %d jobs taken in by their owners", resp.Count, cfg.FiresPerSecond)
		select {
		case <-ctx.Done():
			return fmt.Errorf("soak: %d of %d jobs taken in: %w", resp.Count, cfg.FiresPerSecond, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logicalBytes sums the sizes of the keys and values under the prefixes.
func logicalBytes(ctx context.Context, c *clientv3.Client, prefixes ...string) (int64, error) {
	var n int64
	for _, p := range prefixes {
		from := p
		for {
			resp, err := c.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(p)), clientv3.WithLimit(1000))
			if err != nil {
				return 0, fmt.Errorf("soak: read %s: %w", p, err)
			}
			for _, kv := range resp.Kvs {
				n += int64(len(kv.Key) + len(kv.Value))
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return n, nil
}

// meanRunBytes is the mean logical size of up to 2000 run documents.
func meanRunBytes(ctx context.Context, c *clientv3.Client, prefix string) (float64, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(2000))
	if err != nil {
		return 0, fmt.Errorf("soak: read runs: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	var n int64
	for _, kv := range resp.Kvs {
		n += int64(len(kv.Key) + len(kv.Value))
	}
	return float64(n) / float64(len(resp.Kvs)), nil
}
