package dispatch

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// This file starts runs of steps again from a step on request (POST
// /v1/runs/{id}/retry): the decision (RetryFrom, pure) and the partition
// applying the requests the API records (store.Keys.Retry), as it applies
// cancel requests.

// RetryFrom returns run r, made of steps and ended dead or cancelled,
// started again at now from step from on the request of credential by: a
// new round (Round + 1, the ended one recorded in Rounds, which keeps the
// first and the latest api.MaxRunRounds and counts the others in
// RoundsDropped, its reason clipped to api.MaxReasonBytes); step from and
// every step that needs it, directly or not, pending again with their
// items (no attempts, no results); the other steps kept as they ended,
// with their results. The run is then settled (a step that can no longer
// run is skipped at once). It returns store.CheckRetry's error for a run
// that may not be started again.
func RetryFrom(r api.Run, from, by string, now time.Time) (api.Run, error) {
	if err := store.CheckRetry(r, from); err != nil {
		return r, err
	}
	reset := map[string]bool{from: true}
	for grew := true; grew; {
		grew = false
		for _, s := range r.Steps {
			if reset[s.ID] {
				continue
			}
			for _, n := range s.Needs {
				if reset[n] {
					reset[s.ID], grew = true, true
					break
				}
			}
		}
	}
	r.Rounds = append(slices.Clone(r.Rounds), api.RunRound{Round: r.Round, Status: r.Status, Reason: clipRoundReason(r.Reason), From: from, By: by, At: now.UTC()})
	if n := len(r.Rounds) - api.MaxRunRounds; n > 0 {
		// The first round and the latest are kept; those between are
		// counted.
		r.Rounds = slices.Delete(r.Rounds, 1, 1+n)
		r.RoundsDropped += n
	}
	r.Round++
	r.Status, r.Reason = api.RunPending, ""
	r.Steps = slices.Clone(r.Steps)
	r.Items = slices.Clone(r.Items)
	for k := range r.Steps {
		s := &r.Steps[k]
		if !reset[s.ID] {
			continue
		}
		s.Status, s.Reason = api.RunPending, ""
		for i := s.First; i < s.First+s.Items; i++ {
			r.Items[i] = api.Item{Index: i, Status: api.RunPending, Attempts: []api.Attempt{}, Step: s.ID}
		}
	}
	r, _ = Settle(r, now)
	return r, nil
}

// retryReq is a retry request not yet applied: of the run of job id for
// scheduled time at, the value of key.
type retryReq struct {
	id   string
	at   time.Time
	key  string
	from string
	by   string
}

// retryOf parses kv, a retry request of job key jk.
func (pt *partition) retryOf(jk store.JobKey, kv *mvccpb.KeyValue) retryReq {
	c := retryReq{id: jk.JobID, at: jk.At, key: string(kv.Key)}
	var v store.RetryRequest
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		pt.lg.Warn("retry request does not decode; dropping it", zap.ByteString("key", kv.Key), zap.Error(err))
	}
	c.from, c.by = v.From, v.By
	return c
}

// applyRetries applies the pending retry requests, at most
// cancelsPerTick a tick: each run, read from etcd (it is final, so not
// in memory), is written as RetryFrom decides, back in the active-run
// index, with its request's deletion in the same fenced compare-and-swap,
// and taken into memory; a request that cannot apply (the run is active,
// gone, or not retryable) is deleted, and the API reads the run to say
// why. The caller holds wmu.
func (pt *partition) applyRetries(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	var todo []retryReq
	for _, key := range slices.Sorted(maps.Keys(pt.retries)) {
		if len(todo) == cancelsPerTick {
			pt.poke()
			break
		}
		todo = append(todo, pt.retries[key])
	}
	pt.mu.Unlock()
	for _, c := range todo {
		if err := pt.applyRetry(ctx, c, now); err != nil {
			pt.lg.Warn("starting a run again from a step failed; retrying", zap.String("job_id", c.id), zap.String("key", c.key), zap.Error(err))
		}
	}
}

// applyRetry applies retry request c. The caller holds wmu.
func (pt *partition) applyRetry(ctx context.Context, c retryReq, now time.Time) error {
	rid := store.RunID(c.id, c.at)
	drop := func(why string) error {
		if _, err := pt.commit(ctx, []clientv3.Op{clientv3.OpDelete(c.key)}); err != nil {
			return err
		}
		pt.mu.Lock()
		delete(pt.retries, c.key)
		pt.mu.Unlock()
		pt.lg.Info("retry request dropped", zap.String("run_id", rid), zap.String("from", c.from), zap.String("why", why))
		return nil
	}
	pt.mu.Lock()
	_, active := pt.active[rid]
	known := pt.jobs[c.id] != nil
	pt.mu.Unlock()
	if active || !known {
		return drop("the run is not finished, or its job is gone")
	}
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	resp, err := pt.d.client.Get(rctx, pt.d.keys.Run(pt.p, c.id, c.at))
	cancel()
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return drop("no such run")
	}
	var run api.Run
	if err := json.Unmarshal(resp.Kvs[0].Value, &run); err != nil {
		return drop("the stored run does not decode")
	}
	next, err := RetryFrom(run, c.from, c.by, now)
	if err != nil {
		return drop(err.Error())
	}
	if next.Status.Final() {
		return drop("the steps from " + c.from + " can no longer run: a step they need did not end as they require")
	}
	ar := newActiveRun(run, resp.Kvs[0].ModRevision, len(resp.Kvs[0].Value), now, pt.d.cfg.RunLease)
	r, err := pt.writeRunAlso(ctx, ar, next, time.Time{}, clientv3.OpPut(pt.d.keys.Queue(pt.p, c.id, c.at), ""), clientv3.OpDelete(c.key))
	if err != nil {
		return err
	}
	pt.mu.Lock()
	delete(pt.retries, c.key)
	if !r.Status.Final() {
		pt.hist.reopened(c.id, c.at)
		pt.addActiveLocked(ar)
	}
	pt.mu.Unlock()
	pt.poke()
	pt.lg.Info("run started again from a step", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.String("from", c.from),
		zap.String("by", c.by), zap.Int("round", r.Round), zap.String("status", string(r.Status)))
	return nil
}

// clipRoundReason returns reason cut to at most api.MaxReasonBytes, marked
// when cut.
func clipRoundReason(reason string) string {
	if len(reason) <= api.MaxReasonBytes {
		return reason
	}
	const mark = "… (cut)"
	cut := api.MaxReasonBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + mark
}
