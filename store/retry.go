package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Errors of retry requests.
var (
	// ErrNotRetryable: the run cannot be started again from a step: it
	// has not ended, it succeeded, it is not made of steps, or it has no
	// such step. The message says which.
	ErrNotRetryable = errors.New("run cannot be retried")
)

// RetryRequest is the value of a retry request (Keys.Retry): start the
// run again from step From, asked by credential By. The partition's
// owner applies it (the run's new round) and deletes it.
type RetryRequest struct {
	From        string    `json:"from"`
	By          string    `json:"by"`
	RequestedAt time.Time `json:"requested_at"`
}

// CheckRetry returns nil if run r may be started again from step from:
// it is made of steps, has that step, and ended dead or cancelled; else
// an error matching ErrNotRetryable that says why.
func CheckRetry(r Run, from string) error {
	switch {
	case len(r.Steps) == 0:
		return fmt.Errorf("%w: run %s is not made of steps; only a run of a job with steps is started again from a step", ErrNotRetryable, quoteClipped(r.ID))
	case r.StepIndex(from) < 0:
		return fmt.Errorf("%w: run %s has no step %s", ErrNotRetryable, quoteClipped(r.ID), quoteClipped(from))
	case !r.Status.Final():
		return fmt.Errorf("%w: run %s is %s: wait for it to end (or cancel it) first", ErrNotRetryable, quoteClipped(r.ID), r.Status)
	case r.Status != api.RunDead && r.Status != api.RunCancelled:
		return fmt.Errorf("%w: run %s %s: only a dead or cancelled run is started again", ErrNotRetryable, quoteClipped(r.ID), r.Status)
	}
	return nil
}

// RequestRetry records a request, on behalf of credential by, to start
// run runID again from step from, and returns the revision it is
// recorded at. The run's status is read and the request recorded in one
// compare-and-swap: a run that is not retryable (CheckRetry) is refused
// with that error, and a request made while one is pending keeps the
// first. ErrNotFound if there is no such run (or its job is gone).
func (s *Etcd) RequestRetry(ctx context.Context, runID, from, by string) (int64, error) {
	id, at, err := ParseRunID(runID)
	if err != nil {
		return 0, err
	}
	p := s.Partition(id)
	runKey, spec, req := s.keys.Run(p, id, at), s.keys.Spec(p, id), s.keys.Retry(p, id, at)
	val, err := json.Marshal(RetryRequest{From: from, By: by, RequestedAt: s.nowMillis()})
	if err != nil {
		return 0, err
	}
	for range 10 {
		resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(runKey), clientv3.OpGet(spec, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return 0, Classify(err)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
			return 0, fmt.Errorf("run %s: %w", quoteClipped(runID), ErrNotFound)
		}
		var r Run
		if err := json.Unmarshal(kvs[0].Value, &r); err != nil {
			return 0, fmt.Errorf("stored run is corrupt: %w", err)
		}
		if err := CheckRetry(r, from); err != nil {
			return 0, err
		}
		w, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(runKey), "=", kvs[0].ModRevision),
				clientv3.Compare(clientv3.CreateRevision(spec), ">", 0)).
			Then(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(req), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(req, string(val))}, nil)).
			Commit()
		if err != nil {
			return 0, Classify(err)
		}
		if w.Succeeded {
			return w.Header.Revision, nil
		}
	}
	return 0, fmt.Errorf("run %s: %w", quoteClipped(runID), ErrConflict)
}

// AwaitRetry waits until the retry request of run runID is consumed by
// the partition's owner, or ctx ends, and returns the run as stored
// then (its Round says whether it started again); see AwaitCancel.
func (s *Etcd) AwaitRetry(ctx context.Context, runID string) (r Run, consumed bool, err error) {
	id, at, err := ParseRunID(runID)
	if err != nil {
		return Run{}, false, err
	}
	return s.awaitConsumed(ctx, runID, s.keys.Retry(s.Partition(id), id, at), "retry")
}
