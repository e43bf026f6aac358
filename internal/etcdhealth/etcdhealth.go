// Package etcdhealth keeps an etcd client's requests off the members of
// its endpoint list that stop answering.
//
// The etcd client spreads its requests over every endpoint it was given
// (gRPC's round robin) and leaves one only when its connection closes. A
// member cut off by a network partition, or whose host stopped, closes
// nothing: its connection goes silent, and every request the client sends
// it hangs until the request's own timeout, for as long as the fault
// lasts or until the connection's keepalive (10 s at the least, gRPC's
// floor) closes it. For a scheduler that is a partition's writes stalled
// one in every few, past a job's misfire grace.
//
// A Watcher probes each endpoint over a connection of its own (etcd's
// Maintenance.Status, answered by the member alone, without consensus)
// and, once an endpoint has failed Config.Failures probes in a row, sets
// the client's endpoints to those that answer (clientv3.Client.
// SetEndpoints): new requests and streams go to them at once; requests
// and streams already open on the silent connection (watches, say) still
// end only at their own timeouts or when the connection's keepalive
// closes it. An endpoint left is given back once Config.Failures probes
// in a row answer again (so that one slow member, answering now and
// then, does not draw every request to it and away at each answer). A
// member that answers but knows no leader counts as failing: it cannot
// serve a linearizable request either (with password authentication on,
// a probe, which carries no credentials, is refused at once: an answer,
// and its leader is not known). If every endpoint fails, the client
// keeps them all, so that a fault of the whole cluster changes nothing.
//
// A Watcher is also a prometheus.Collector of jobfleet_etcd_endpoint_up:
// 1 for each endpoint taken as answering, 0 for each taken as failing
// (also while every endpoint fails and the client keeps them all).
//
// This is the health check that etcd's own clients leave to their users
// (etcdctl endpoint health does the same probe once).
package etcdhealth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of Config.
const (
	// DefaultInterval is the time between the starts of two probes of one
	// endpoint.
	DefaultInterval = 500 * time.Millisecond
	// DefaultTimeout bounds one probe.
	DefaultTimeout = time.Second
	// DefaultFailures is how many probes in a row must fail before an
	// endpoint is left: a silent endpoint is left within about
	// DefaultFailures × (DefaultInterval + DefaultTimeout), 3 s, before a
	// member's lease at the default TTL (5 s) runs out.
	DefaultFailures = 2
)

// Config configures a Watcher. The zero value of a field means its
// default.
type Config struct {
	// Endpoints are the client's endpoints as it was given them (URLs or
	// host:port). With fewer than two there is nothing to choose from,
	// and Run only waits for its context.
	Endpoints []string
	// TLS is the client's TLS configuration, for the probes' own
	// connections; nil for plain connections.
	TLS *tls.Config
	// Interval is the time between the starts of two probes of one
	// endpoint. Default DefaultInterval.
	Interval time.Duration
	// Timeout bounds one probe. Default DefaultTimeout.
	Timeout time.Duration
	// Failures is how many probes of an endpoint in a row must fail before
	// it is left, and how many in a row must answer before it is given
	// back. Default DefaultFailures.
	Failures int
	// Clock paces the probes. Default the real clock.
	Clock clockwork.Clock
	// Logger logs an endpoint left and given back. Default none.
	Logger *zap.Logger
}

func (c *Config) withDefaults() error {
	switch {
	case c.Interval < 0:
		return fmt.Errorf("etcdhealth: interval %v is negative", c.Interval)
	case c.Timeout < 0:
		return fmt.Errorf("etcdhealth: timeout %v is negative", c.Timeout)
	case c.Failures < 0:
		return fmt.Errorf("etcdhealth: failures %d is negative", c.Failures)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Failures == 0 {
		c.Failures = DefaultFailures
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// Watcher probes a client's endpoints and keeps the client on those that
// answer. Create it with New and run it with Run; its methods are safe for
// concurrent use.
type Watcher struct {
	client *clientv3.Client
	cfg    Config

	mu       sync.Mutex
	failed   map[string]int // probes failed in a row, by endpoint
	answered map[string]int // probes answered in a row, by endpoint
	down     map[string]bool
	inUse    []string // the endpoints last set on the client
}

// New returns a watcher of client's endpoints cfg.Endpoints. It returns
// an error for a negative setting.
func New(client *clientv3.Client, cfg Config) (*Watcher, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	cfg.Endpoints = Distinct(cfg.Endpoints)
	return &Watcher{client: client, cfg: cfg, failed: map[string]int{}, answered: map[string]int{}, down: map[string]bool{},
		inUse: slices.Clone(cfg.Endpoints)}, nil
}

// Distinct returns endpoints once each, in the order given: an endpoint
// listed twice is one endpoint to probe and to show. A Watcher of fewer
// than two distinct endpoints has nothing to choose from.
func Distinct(endpoints []string) []string {
	var out []string
	for _, ep := range endpoints {
		if !slices.Contains(out, ep) {
			out = append(out, ep)
		}
	}
	return out
}

// Run probes the endpoints until ctx ends, then closes the probes'
// connections and returns nil. It returns an error only if a probe's
// client cannot be made (a malformed endpoint).
func (w *Watcher) Run(ctx context.Context) error {
	if len(w.cfg.Endpoints) < 2 {
		<-ctx.Done()
		return nil
	}
	probes := make([]*clientv3.Client, 0, len(w.cfg.Endpoints))
	defer func() {
		for _, c := range probes {
			c.Close()
		}
	}()
	for _, ep := range w.cfg.Endpoints {
		c, err := clientv3.New(clientv3.Config{
			Endpoints: []string{ep}, TLS: w.cfg.TLS, Context: ctx,
			// The probe's connection is the one that must notice
			// silence: its requests time out, it is not closed.
			Logger: zap.NewNop(),
		})
		if err != nil {
			return fmt.Errorf("etcdhealth: a probe of %s: %w", ep, err)
		}
		probes = append(probes, c)
	}
	var wg sync.WaitGroup
	for i, ep := range w.cfg.Endpoints {
		wg.Go(func() { w.watch(ctx, ep, pb.NewMaintenanceClient(probes[i].ActiveConnection())) })
	}
	wg.Wait()
	return nil
}

// InUse returns the endpoints the client is set to now.
func (w *Watcher) InUse() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.inUse)
}

// watch probes ep every Interval until ctx ends.
func (w *Watcher) watch(ctx context.Context, ep string, mc pb.MaintenanceClient) {
	tick := w.cfg.Clock.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		err := w.probe(ctx, mc)
		if ctx.Err() != nil {
			return // stopping: a probe cut short is no verdict
		}
		w.record(ep, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}

// probe returns nil if the member answered within the timeout and knows
// a leader, why not otherwise. An error the member itself returns (a
// refusal for want of credentials, say) is an answer.
func (w *Watcher) probe(ctx context.Context, mc pb.MaintenanceClient) error {
	pctx, cancel := clockwork.WithTimeout(ctx, w.cfg.Clock, w.cfg.Timeout)
	defer cancel()
	resp, err := mc.Status(pctx, &pb.StatusRequest{})
	switch {
	case err == nil && resp.Leader == 0:
		return errors.New("the member knows no leader")
	case err == nil:
		return nil
	case pctx.Err() != nil:
		return fmt.Errorf("no answer within %v", w.cfg.Timeout)
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return err
	}
	return nil
}

// record takes the outcome of a probe of ep and sets the client's
// endpoints if the set that answers changed.
func (w *Watcher) record(ep string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lg := w.cfg.Logger.With(zap.String("endpoint", ep))
	if err == nil {
		w.failed[ep] = 0
		w.answered[ep]++
		if !w.down[ep] || w.answered[ep] < w.cfg.Failures {
			return
		}
		delete(w.down, ep)
		lg.Info("etcd endpoint answers again; requests go to it", zap.Int("answered_probes", w.answered[ep]))
	} else {
		w.failed[ep]++
		w.answered[ep] = 0
		if w.down[ep] || w.failed[ep] < w.cfg.Failures {
			return
		}
		w.down[ep] = true
		lg.Warn("etcd endpoint not answering; requests leave it", zap.Int("failed_probes", w.failed[ep]), zap.Error(err))
	}
	use := slices.DeleteFunc(slices.Clone(w.cfg.Endpoints), func(e string) bool { return w.down[e] })
	if len(use) == 0 {
		use = slices.Clone(w.cfg.Endpoints) // all failing: the cluster's fault, not an endpoint's
	}
	if slices.Equal(use, w.inUse) {
		return
	}
	w.inUse = use
	w.client.SetEndpoints(use...)
}

// upDesc describes jobfleet_etcd_endpoint_up.
var upDesc = prometheus.NewDesc("jobfleet_etcd_endpoint_up",
	"1 while the etcd endpoint answers this member's health probes, 0 once it has failed them (no answer, or a member that knows no leader): the member then sends its requests to the endpoints that answer, or to all of them if none does.",
	[]string{"endpoint"}, nil)

// Describe implements prometheus.Collector.
func (w *Watcher) Describe(ch chan<- *prometheus.Desc) { ch <- upDesc }

// Collect implements prometheus.Collector: jobfleet_etcd_endpoint_up of
// each endpoint, as the probes judge it now.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ep := range w.cfg.Endpoints {
		up := 1.0
		if w.down[ep] {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, ep)
	}
}
