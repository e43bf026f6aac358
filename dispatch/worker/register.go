package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// Registration timing. Until an orchestrator names the TTL, the worker
// refreshes as for api.DefaultWorkerTTL; after a failure it tries the
// next orchestrator soon, so that its registration moves before it
// expires.
const (
	minRegisterInterval   = 500 * time.Millisecond
	maxRegisterInterval   = 30 * time.Second
	registerRetryInterval = 500 * time.Millisecond
	// noRegistryInterval is how often an orchestrator without the
	// registry (404: an older version) is asked again.
	noRegistryInterval = 30 * time.Second
)

// errNoRegistry: the orchestrator does not serve the registry (404).
var errNoRegistry = errors.New("orchestrator keeps no worker registry")

// registrar keeps the worker registered with one orchestrator at a time.
// Only registerLoop's goroutine and, after it returned, Run use it.
type registrar struct {
	addr     string        // the orchestrator registered with last; "" before the first success
	ttl      time.Duration // the TTL named last
	interval time.Duration // between refreshes
	failing  bool          // the last attempt failed (logged once)
}

// registerLoop registers the worker before its first poll (pollers wait
// for the first try, successful or not: an attempt taken before the
// registration existed is left to its run lease) and refreshes the registration every third of
// the TTL the orchestrator names, with the orchestrator that answered
// last; when that one fails it moves to the next orchestrator it knows.
// It returns when ctx ends.
func (w *Worker) registerLoop(ctx context.Context, reg *registrar) {
	reg.ttl = api.DefaultWorkerTTL
	reg.interval = registerInterval(reg.ttl)
	next := 0 // index of the orchestrator to try when reg.addr fails
	first := true
	for {
		addrs := w.currentAddrs()
		wait := registerRetryInterval // no orchestrator known yet
		if len(addrs) > 0 {
			addr := reg.addr
			if addr == "" || !slices.Contains(addrs, addr) {
				addr = addrs[next%len(addrs)]
			}
			ttl, err := w.register(ctx, addr, reg.ttl)
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				w.creds.accepted()
				if reg.failing || reg.addr != addr {
					w.lg.Info("worker registered", zap.String("orchestrator", addr), zap.Duration("ttl", ttl))
				}
				reg.addr, reg.failing = addr, false
				w.setPresenceTarget(addr)
				if ttl > 0 {
					reg.ttl = ttl
				}
				reg.interval = registerInterval(reg.ttl)
				wait = reg.interval
			default:
				var refused *CredentialError
				switch {
				case errors.As(err, &refused) && labelsRefused(refused):
					w.lg.Error("the orchestrator refused the worker's labels: its credential allows other labels; stopping (start it with labels its credential allows, or use a credential for these)",
						zap.String("orchestrator", addr), zap.String("reason", refused.Message), zap.String("labels", placement.FormatLabels(w.cfg.Labels)))
					w.creds.stop(fmt.Errorf("%w: orchestrator %s: %s", ErrLabelsRefused, addr, refused.Message))
				case errors.As(err, &refused):
					w.creds.refused(addr, refused)
				case errors.Is(err, errNoRegistry):
					if !reg.failing {
						w.lg.Info("orchestrator keeps no worker registry; the worker runs unregistered there", zap.String("orchestrator", addr))
					}
					wait = noRegistryInterval
				case !reg.failing:
					w.lg.Warn("registering the worker failed; trying the next orchestrator", zap.String("orchestrator", addr), zap.Error(err))
				}
				reg.failing = true
				reg.addr = ""
				next++
				if wait != noRegistryInterval {
					wait = min(reg.interval, registerRetryInterval)
				}
			}
			if first {
				close(w.firstRegister)
				first = false
			}
		}
		if !w.registerWait(ctx, wait) {
			return
		}
	}
}

// labelsRefused reports whether a refusal of a registration is of the
// worker's labels (403: outside its credential's worker labels), not of
// its credential.
func labelsRefused(e *CredentialError) bool {
	return e.Status == http.StatusForbidden && strings.Contains(e.Message, "labels: credential ")
}

// registerWait waits d, or until the orchestrators known change; false if
// ctx ended.
func (w *Worker) registerWait(ctx context.Context, d time.Duration) bool {
	t := w.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
	case <-w.regNote:
	}
	return true
}

// registerInterval is a third of ttl, within bounds.
func registerInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/3, minRegisterInterval), maxRegisterInterval)
}

// minRegisterTimeout is the shortest time a registration request is given.
const minRegisterTimeout = 2 * time.Second

// register sends one registration to addr, bounded by half the current
// TTL (ttl: the last one named, or the default), and returns the TTL the
// orchestrator names.
func (w *Worker) register(ctx context.Context, addr string, ttl time.Duration) (time.Duration, error) {
	addrs := w.currentAddrs()
	if len(addrs) > api.MaxRegisterOrchestrators {
		addrs = addrs[:api.MaxRegisterOrchestrators] // the registration is bounded; these are shown, not used
	}
	req := api.RegisterRequest{
		Worker:        w.cfg.ID,
		Executors:     w.executors(),
		Concurrency:   w.cfg.Concurrency,
		Active:        min(w.held(), w.cfg.Concurrency),
		Orchestrators: addrs,
		Labels:        w.cfg.Labels,
	}
	// An orchestrator slower than half the TTL is given up for the next
	// one, before the registration can expire.
	timeout := min(w.cfg.RequestTimeout, max(ttl/2, minRegisterTimeout))
	r, err := w.client.post(ctx, addr, api.PathRegister, req, timeout, maxOtherReplyBytes)
	switch {
	case err != nil:
		return 0, err
	case r.refused():
		return 0, r.credentialErr()
	case r.status == http.StatusNotFound:
		return 0, errNoRegistry
	case r.status != http.StatusOK:
		return 0, r.err()
	}
	var resp api.RegisterResponse
	if err := json.Unmarshal(r.body, &resp); err != nil {
		return 0, fmt.Errorf("decode registration reply: %w", err)
	}
	return resp.TTL.Std(), nil
}

// deregister removes the worker's registration, with the orchestrator it
// registered with last, at the end of a graceful stop (its attempts have
// ended). Failing, the registration expires after its TTL.
func (w *Worker) deregister(reg *registrar) {
	if reg.addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	r, err := w.client.post(ctx, reg.addr, api.PathDeregister, api.DeregisterRequest{Worker: w.cfg.ID}, w.cfg.RequestTimeout, maxOtherReplyBytes)
	if err == nil && r.status != http.StatusOK {
		err = r.err()
	}
	if err != nil {
		w.lg.Warn("deregistering the worker failed; its registration expires by itself", zap.String("orchestrator", reg.addr), zap.Error(err))
		return
	}
	w.lg.Info("worker deregistered", zap.String("orchestrator", reg.addr))
}
