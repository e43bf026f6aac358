package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// Errors of retry requests.
var (
	// ErrNotRetryable: the run cannot be started again from a step: it
	// has not ended, it succeeded, it is not made of steps, or it has no
	// such step. The message says which.
	ErrNotRetryable = errors.New("run cannot be retried")
	// ErrRetryFrom: the request's step (its "from") names no step of the
	// run, or the run is not made of steps. It matches ErrNotRetryable
	// too; the API answers it as bad input (400), not as a conflict.
	ErrRetryFrom = errors.New("no such step to start the run again from")
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
// an error matching ErrNotRetryable that says why, and ErrRetryFrom too
// when the run has no step from (or none at all).
func CheckRetry(r Run, from string) error {
	switch {
	case len(r.Steps) == 0:
		return fmt.Errorf("%w: %w: run %s is not made of steps; only a run of a job with steps is started again from a step", ErrNotRetryable, ErrRetryFrom, quoteClipped(r.ID))
	case r.StepIndex(from) < 0:
		return fmt.Errorf("%w: %w: run %s has no step %s", ErrNotRetryable, ErrRetryFrom, quoteClipped(r.ID), quoteClipped(from))
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
	val, err := json.Marshal(RetryRequest{From: from, By: by, RequestedAt: s.nowMillis()})
	if err != nil {
		return 0, err
	}
	return s.putRunRequest(ctx, runID, s.keys.Retry(s.Partition(id), id, at), val, func(r Run) error {
		return CheckRetry(r, from)
	})
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
