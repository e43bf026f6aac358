package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// heartbeatInterval is a third of lease, within bounds.
func heartbeatInterval(lease time.Duration) time.Duration {
	if lease <= 0 {
		lease = defaultLease
	}
	return max(lease/3, minHeartbeatInterval)
}

// heartbeat extends the attempt's lease every Lease/3 until ctx ends. A 409
// reply cancels the execution with errStale, a reply asking to cancel with
// errCancelledByOrchestrator, a lease without a successful heartbeat (from
// the sending of the last that succeeded) of an attempt holding limit
// keys with errLeaseLost; a 421 moves the attempt to the new owner and
// resends. Failed heartbeats are retried sooner, with back-off.
func (at *attempt) heartbeat(ctx context.Context, cancelExec context.CancelCauseFunc) {
	w := at.w
	lease := at.a.RunLease.Std()
	if lease <= 0 {
		lease = defaultLease
	}
	interval := heartbeatInterval(lease)
	bo := newBackOff(min(w.cfg.RetryInitial, interval), interval)
	lastOK := w.cfg.Clock.Now()
	warned := false
	t := w.cfg.Clock.NewTimer(interval)
	defer t.Stop()
	req := api.HeartbeatRequest{Worker: w.cfg.ID, RunID: at.a.RunID, Attempt: at.a.Attempt, Item: at.item()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		next := interval
		sent := w.cfg.Clock.Now()
		hctx, cancel := ctx, context.CancelFunc(func() {})
		if len(at.a.Limits) > 0 {
			// A heartbeat that hangs (a cut that drops packets) must not
			// keep an attempt holding slots running past its lease: its
			// owner may give them away from then on.
			hctx, cancel = clockwork.WithDeadline(ctx, w.cfg.Clock, lastOK.Add(lease))
		}
		resp, err := at.sendHeartbeat(hctx, req)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && len(at.a.Limits) > 0 && w.cfg.Clock.Since(lastOK) >= lease:
			// The attempt holds slots of limit keys: once the owner may
			// have declared it lost (a lease after the last heartbeat it
			// answered was sent), it may give them to another attempt, so
			// this one stops.
			at.lg.Warn("no heartbeat succeeded within the lease of an attempt holding limit keys; stopping it",
				zap.Strings("limits", at.a.Limits), zap.Duration("since_last_heartbeat", w.cfg.Clock.Since(lastOK)), zap.Error(err))
			cancelExec(errLeaseLost)
			return
		case errors.Is(err, errStale):
			at.lg.Warn("heartbeat refused: attempt is stale; cancelling it without a report")
			cancelExec(errStale)
			return
		case err != nil:
			if since := w.cfg.Clock.Since(lastOK); since >= lease && !warned {
				at.lg.Warn("no heartbeat succeeded within the lease; the orchestrator may retry the run elsewhere",
					zap.Duration("since_last_heartbeat", since), zap.Error(err))
				warned = true
			} else {
				at.lg.Debug("heartbeat failed; retrying", zap.Error(err))
			}
			next = min(bo.Next(), interval)
		default:
			lastOK, warned = sent, false
			bo.Reset()
			if resp.Cancel {
				at.lg.Info("orchestrator cancelled the attempt")
				cancelExec(errCancelledByOrchestrator)
				return
			}
			if l := resp.RunLease.Std(); l > 0 {
				lease = l
				interval = heartbeatInterval(l)
				next = interval
			}
		}
		t.Reset(next)
	}
}

// sendHeartbeat sends one heartbeat, following 421 redirects. It returns
// errStale on 409.
func (at *attempt) sendHeartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	w := at.w
	for range maxRedirects + 1 {
		addr := at.ownerAddr()
		r, err := w.client.post(ctx, addr, api.PathHeartbeat, req, w.cfg.RequestTimeout, maxOtherReplyBytes)
		if err != nil {
			if ctx.Err() == nil {
				at.rotate(addr) // the next heartbeat asks another orchestrator
			}
			return api.HeartbeatResponse{}, err
		}
		switch r.status {
		case http.StatusOK:
			var resp api.HeartbeatResponse
			if err := json.Unmarshal(r.body, &resp); err != nil {
				return resp, fmt.Errorf("decode heartbeat reply: %w", err)
			}
			return resp, nil
		case http.StatusConflict:
			return api.HeartbeatResponse{}, errStale
		case http.StatusMisdirectedRequest:
			if at.redirect(r.notOwner(), addr) {
				continue
			}
			return api.HeartbeatResponse{}, fmt.Errorf("heartbeat to %s: no owner now: %w", addr, r.err())
		default:
			if r.refused() {
				err := r.credentialErr()
				w.creds.refused(addr, err)
				return api.HeartbeatResponse{}, fmt.Errorf("heartbeat to %s: %w", addr, err)
			}
			if !r.retryable() {
				at.lg.Error("heartbeat rejected", zap.String("orchestrator", addr), zap.Error(r.err()))
			}
			return api.HeartbeatResponse{}, fmt.Errorf("heartbeat to %s: %w", addr, r.err())
		}
	}
	return api.HeartbeatResponse{}, errors.New("heartbeat: too many redirects")
}
