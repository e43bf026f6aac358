package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFinal: the run is final already (succeeded, dead, skipped or
// cancelled): there is nothing to cancel. Errors matching it are
// *FinalError, which names the status.
var ErrFinal = errors.New("run is final")

// FinalError says that run RunID is final, in Status.
type FinalError struct {
	RunID  string
	Status RunStatus
}

func (e *FinalError) Error() string {
	return fmt.Sprintf("run %s is %s already: only a pending, failed (awaiting its retry) or running run can be cancelled", quoteClipped(e.RunID), e.Status)
}

// Is makes a FinalError match ErrFinal.
func (e *FinalError) Is(target error) bool { return target == ErrFinal }

// CancelRequest is the value of a cancel request (Keys.Cancel): who asked
// and when. The partition's owner applies it (the run ends cancelled, its
// running attempt told to stop) and deletes it.
type CancelRequest struct {
	// By is the ID of the credential that asked.
	By string `json:"by"`
	// RequestedAt is when it asked (UTC).
	RequestedAt time.Time `json:"requested_at"`
}

// RequestCancel records a request, on behalf of credential by, to cancel
// run runID, and returns the revision it is recorded at (see
// AwaitCancel). The request is durable when RequestCancel returns; the
// run's partition's owner applies it once. A request made again while
// one is pending keeps the first. It returns ErrNotFound if there is no
// such run (or its job is gone) and a *FinalError if the run is final;
// the run's status is read and the request recorded in one
// compare-and-swap, so a run recorded final before the request is never
// asked to cancel. Cancelling frees work: it is admitted above the
// high-water mark.
func (s *Etcd) RequestCancel(ctx context.Context, runID, by string) (int64, error) {
	id, at, err := ParseRunID(runID)
	if err != nil {
		return 0, err
	}
	val, err := json.Marshal(CancelRequest{By: by, RequestedAt: s.nowMillis()})
	if err != nil {
		return 0, err
	}
	return s.putRunRequest(ctx, runID, s.keys.Cancel(s.Partition(id), id, at), val, func(r Run) error {
		if r.Status.Final() {
			return &FinalError{RunID: r.ID, Status: r.Status}
		}
		return nil
	})
}

// putRunRequest records request val of run runID under key req (a
// cancel or retry request) and returns the revision it is recorded at.
// It reads the run, asks check whether the request may be made of it
// (check's error is returned as it is), and records the request in one
// compare-and-swap on the run's revision and its job's existence, so a
// run that changed since it was checked is checked again (up to ten
// times, then ErrConflict). A request made while one is pending keeps
// the first. ErrNotFound if there is no such run or its job is gone.
func (s *Etcd) putRunRequest(ctx context.Context, runID, req string, val []byte, check func(Run) error) (int64, error) {
	id, at, err := ParseRunID(runID)
	if err != nil {
		return 0, err
	}
	p := s.Partition(id)
	runKey, spec := s.keys.Run(p, id, at), s.keys.Spec(p, id)
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
		if err := check(r); err != nil {
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

// AwaitCancel waits until the cancel request of run runID is consumed by
// the partition's owner (it applied it, or found the run final), or ctx
// ends, and returns the run as stored then. consumed is false if ctx
// ended first: the request stays, and the owner applies it later (a
// partition without an owner, an owner that is slow). It watches the
// request's key, so it costs one watch while it waits.
func (s *Etcd) AwaitCancel(ctx context.Context, runID string) (r Run, consumed bool, err error) {
	id, at, err := ParseRunID(runID)
	if err != nil {
		return Run{}, false, err
	}
	return s.awaitConsumed(ctx, runID, s.keys.Cancel(s.Partition(id), id, at), "cancel")
}

// awaitConsumed waits until request key req of run runID (a cancel or
// retry request, what names it) is deleted or ctx ends, and returns the
// run as stored then; see AwaitCancel.
func (s *Etcd) awaitConsumed(ctx context.Context, runID, req, what string) (r Run, consumed bool, err error) {
	resp, err := s.client.Get(ctx, req, clientv3.WithKeysOnly())
	if err != nil {
		return Run{}, false, Classify(err)
	}
	if len(resp.Kvs) > 0 {
		wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer stop()
		wch := s.client.Watch(wctx, req, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
	wait:
		for {
			select {
			case <-ctx.Done():
				return Run{}, false, nil
			case wr, ok := <-wch:
				if ctx.Err() != nil {
					return Run{}, false, nil
				}
				if !ok {
					return Run{}, false, fmt.Errorf("watching the %s request of run %s: %w: the watch ended", what, quoteClipped(runID), ErrUnavailable)
				}
				if err := wr.Err(); err != nil {
					return Run{}, false, fmt.Errorf("watching the %s request of run %s: %w", what, quoteClipped(runID), Classify(err))
				}
				if len(wr.Events) > 0 {
					break wait
				}
			}
		}
	}
	r, err = s.GetRun(ctx, runID)
	if err != nil {
		return Run{}, false, err
	}
	return r, true, nil
}
