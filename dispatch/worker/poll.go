package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
)

// maxPollMax is the largest PollRequest.Max the protocol allows.
const maxPollMax = 100

// pollLoop long-polls one orchestrator until ctx ends. Before each poll it
// reserves the slots it asks for, so the worker never holds more attempts
// than Concurrency however many orchestrators it polls; slots the reply
// does not fill are given back at once. See initialWant and nextWant for
// how many it asks for.
func (w *Worker) pollLoop(ctx context.Context, addr string) {
	lg := w.lg.With(zap.String("orchestrator", addr))
	bo := newBackOff(w.cfg.RetryInitial, w.cfg.RetryMax)
	want, failing := w.initialWant(), false
	select {
	case <-w.firstRegister:
	case <-ctx.Done():
		return
	}
	for {
		n, err := w.slots.take(ctx, min(want, maxPollMax))
		if err != nil {
			return
		}
		start, wait := w.cfg.Clock.Now(), w.pollWait()
		got, err := w.poll(ctx, addr, n, wait)
		if err != nil {
			w.slots.put(n)
			if ctx.Err() != nil {
				return
			}
			w.cfg.Metrics.pollFailed()
			var refused *CredentialError
			switch {
			case errors.As(err, &refused):
				w.creds.refused(addr, refused)
				failing = true
			case !failing:
				lg.Warn("poll failed; backing off", zap.Error(err))
				failing = true
			default:
				lg.Debug("poll failed", zap.Error(err))
			}
			if !retry.Sleep(ctx, w.cfg.Clock, bo.Next()) {
				return
			}
			continue
		}
		w.creds.accepted()
		if failing {
			lg.Info("poll succeeded again")
			failing = false
		}
		bo.Reset()
		lg.Debug("polled", zap.Int("max", n), zap.Int("attempts", len(got)))
		take := min(len(got), n)
		w.slots.put(n - take)
		for _, a := range got[:take] {
			w.startAttempt(a, addr)
		}
		for _, a := range got[take:] {
			// More than Max: a protocol violation. Holding them would break
			// the concurrency bound; report them failed so they are retried.
			lg.Error("orchestrator handed out more attempts than asked for; reporting the extra ones failed",
				zap.Int("max", n), zap.Int("attempts", len(got)), zap.String("run_id", a.RunID))
			w.startRefused(a, addr)
		}
		want = w.nextWant(len(got))
		// An orchestrator that answers an empty long poll at once (which the
		// protocol does not do) must not make this loop spin.
		if len(got) == 0 && w.cfg.Clock.Since(start) < wait/4 {
			if !retry.Sleep(ctx, w.cfg.Clock, w.cfg.RetryInitial) {
				return
			}
		}
	}
}

// initialWant is how many slots a new poller asks for: all free ones when
// the worker polls a single orchestrator, else a fair share.
func (w *Worker) initialWant() int {
	n := max(int(w.polled.Load()), 1)
	if n == 1 {
		return maxPollMax
	}
	return max(1, w.cfg.Concurrency/n)
}

// nextWant is how many slots a poller asks for after a reply of got
// attempts. With one orchestrator, all free slots. With several it adapts:
// one after an empty reply (an idle long poll then holds a single slot,
// leaving the rest to orchestrators with work), 2·got after a reply of got.
// take caps it at the free slots, the protocol at 100.
func (w *Worker) nextWant(got int) int {
	if w.polled.Load() <= 1 {
		return maxPollMax
	}
	return max(1, 2*got)
}

// shortPollWait is the long-poll wait used while the worker polls more
// orchestrators than it has slots, or while the set it polls is settling.
const shortPollWait = time.Second

// pollWait returns how long the next long poll may be held. Each poll holds
// the slots it asked for while it waits, so:
//
//   - while there are more orchestrators than slots, some pollers wait for
//     a slot while idle polls hold them all: polls are kept short so that
//     the orchestrators take turns quickly;
//   - for one PollWait after the set of orchestrators changed, polls are
//     kept short too. A poller that started while the worker knew a single
//     orchestrator asked for every slot; when more orchestrators appear
//     (members registering one by one as a fleet starts) their pollers
//     wait for slots until that poll returns. An idle long poll there,
//     at a member that owns none of the waiting runs, would hold their
//     runs back for a whole PollWait.
func (w *Worker) pollWait() time.Duration {
	if int(w.polled.Load()) > w.cfg.Concurrency || w.cfg.Clock.Now().UnixNano() < w.settling.Load() {
		return min(w.cfg.PollWait, shortPollWait)
	}
	return w.cfg.PollWait
}

// poll asks addr for up to max attempts, to be held up to wait. When ctx
// ends first (the worker is stopping, or addr left its list), poll asks
// addr to end the poll (api.EndPollsRequest; with KeepPolling when the
// worker is not stopping) and still reads the reply, so that attempts
// addr recorded for the poll in the meantime reach the worker, which runs
// them; it cuts the poll only when addr cannot be told (an orchestrator
// of a version without the request answers 404), or does not answer
// within endPollsTimeout of being told. With ctx done already, poll
// sends nothing.
func (w *Worker) poll(ctx context.Context, addr string, max int, wait time.Duration) ([]api.AttemptGrant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	ending := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ending)
		// Not stopping: addr only left the worker's list, and may come
		// back; its later polls must not be held.
		keep := w.stopping == nil || w.stopping.Err() == nil
		if !w.endPolls(rctx, addr, keep) {
			cut()
			return
		}
		t := w.cfg.Clock.NewTimer(endPollsTimeout(w.cfg.RequestTimeout))
		defer t.Stop()
		select {
		case <-t.Chan():
			cut()
		case <-rctx.Done():
		}
	})
	defer func() {
		if !stop() { // ending, or ended: let it finish
			cut()
			<-ending
		}
	}()
	return w.pollOnce(rctx, addr, max, wait)
}

// endPollsTimeout bounds the end request, and the wait for the ended
// poll's reply after it, by the worker's RequestTimeout and 2 s: a
// stopping worker whose orchestrator cannot answer cuts its poll soon.
func endPollsTimeout(requestTimeout time.Duration) time.Duration {
	return min(requestTimeout, 2*time.Second)
}

// endPolls asks addr to end the worker's polls waiting there (holding
// none of its later polls if keepPolling), and reports whether addr did.
func (w *Worker) endPolls(ctx context.Context, addr string, keepPolling bool) bool {
	req := api.EndPollsRequest{Worker: w.cfg.ID, KeepPolling: keepPolling}
	r, err := w.client.post(ctx, addr, api.PathEndPolls, req, endPollsTimeout(w.cfg.RequestTimeout), maxOtherReplyBytes)
	if err == nil && r.status != http.StatusOK {
		err = r.err()
	}
	if err != nil {
		w.lg.Debug("ending the poll failed; cutting it", zap.String("orchestrator", addr), zap.Error(err))
		return false
	}
	return true
}

// pollOnce sends one poll to addr and decodes its reply.
func (w *Worker) pollOnce(ctx context.Context, addr string, max int, wait time.Duration) ([]api.AttemptGrant, error) {
	req := api.PollRequest{
		Worker:    w.cfg.ID,
		Executors: w.executors(),
		Max:       max,
		Wait:      api.Duration(wait),
		Features:  []string{api.FeatureItems},
		// The freest of the workers waiting at a member gets a run first.
		Free: w.cfg.Concurrency - w.held(),
	}
	r, err := w.client.post(ctx, addr, api.PathPoll, req, wait+w.cfg.RequestTimeout, maxPollReplyBytes)
	if err != nil {
		return nil, err
	}
	if r.refused() {
		return nil, r.credentialErr()
	}
	if r.status != http.StatusOK {
		return nil, r.err()
	}
	var resp api.PollResponse
	if err := json.Unmarshal(r.body, &resp); err != nil {
		return nil, fmt.Errorf("decode poll reply: %w", err)
	}
	// Before any attempt of this reply runs: its "http" jobs must not
	// reach the fleet's etcd, which this worker may not have been told of.
	if n := w.policy.LearnEtcd(resp.EtcdEndpoints); n > 0 {
		w.lg.Info("etcd endpoints learned from an orchestrator; denied to http jobs", zap.String("orchestrator", addr), zap.Strings("etcd_endpoints", resp.EtcdEndpoints))
	}
	return resp.Attempts, nil
}
