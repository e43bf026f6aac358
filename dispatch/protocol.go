package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"unicode"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// Poll hands up to req.Max dispatchable runs of this member's partitions
// (of jobs starting with req.Prefix, whose placement selector the
// worker's registered labels match) to worker req.Worker, waiting up to
// req.Wait for some. Each attempt is recorded in etcd, with req.Worker and
// req.Credential, before it is returned. Runs that another poll waiting
// here, of a worker with more free slots, may take are left to it, and a
// retry to another worker than its failed attempt's (see spread.go). It
// returns an error wrapping ErrForbidden if the worker's registered labels
// are outside req.WorkerLabels.
func (d *Dispatcher) Poll(ctx context.Context, req PollRequest) (PollResponse, error) {
	if err := validatePoll(req); err != nil {
		return PollResponse{}, err
	}
	if err := d.checkWorkerID(req.Worker, req.Credential); err != nil {
		return PollResponse{}, err
	}
	clock := d.cfg.Clock
	wait := min(req.Wait.Std(), MaxPollWait)
	timer := clock.NewTimer(wait)
	defer timer.Stop()
	p := d.startPoll(req)
	defer d.endPoll(p)
	written := 0 // bytes of run documents this poll's writes stored
	for {
		// A registration that shows up meanwhile (this member's copy lags
		// the member the worker registered with) gives the worker its
		// labels: look again then.
		var registered <-chan struct{}
		if d.cfg.Workers != nil {
			registered = d.cfg.Workers.Changed()
		}
		if d.pollEnded(p) {
			return PollResponse{Attempts: []AttemptGrant{}, Written: written}, nil
		}
		id, err := d.identify(req)
		if err != nil {
			return PollResponse{}, err
		}
		p.id.Store(id)
		if id.known {
			registered = nil
		}
		parts, avail := d.snapshot()
		rand.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		byBestWaiting(parts, clock.Now())
		rivals := d.rivals(p)
		var out []AttemptGrant
		for _, pt := range parts {
			if len(out) >= req.Max {
				break
			}
			got, n := pt.assign(p, rivals, req.Max-len(out))
			p.took(len(got))
			out, written = append(out, got...), written+n
		}
		if len(out) > 0 && ctx.Err() != nil {
			// The worker gave up on this poll (shutdown, timeout): it will
			// never see these attempts, so take them back rather than let
			// them burn an attempt each when their leases expire.
			d.takeBack(req.Worker, out)
			return PollResponse{Attempts: []AttemptGrant{}, Written: written}, nil
		}
		if len(out) > 0 || wait <= 0 {
			return PollResponse{Attempts: nonNil(out), Written: written}, nil
		}
		select {
		case <-avail:
		case <-p.nudge:
		case <-registered:
		case <-timer.Chan():
			return PollResponse{Attempts: []AttemptGrant{}, Written: written}, nil
		case <-ctx.Done():
			return PollResponse{Attempts: []AttemptGrant{}, Written: written}, nil
		}
	}
}

func nonNil(a []AttemptGrant) []AttemptGrant {
	if a == nil {
		return []AttemptGrant{}
	}
	return a
}

func validatePoll(req PollRequest) error {
	if err := validateWorkerID(req.Worker); err != nil {
		return err
	}
	switch {
	case len(req.Executors) == 0 || len(req.Executors) > 1000:
		return fmt.Errorf("%w: executors: must list 1 to 1000 executor types", ErrBadRequest)
	case req.Max < 1 || req.Max > 100:
		return fmt.Errorf("%w: max: must be 1 to 100, got %d", ErrBadRequest, req.Max)
	case req.Wait < 0 || req.Wait.Std() > MaxPollWait:
		return fmt.Errorf("%w: wait: must be 0 to %v", ErrBadRequest, MaxPollWait)
	}
	return nil
}

// validateWorkerID checks a protocol request's worker ID: 1 to 128 bytes
// under the rules of every name of the API (api.ValidateName: no control,
// invisible or look-alike characters), since it is recorded in attempts,
// listed by GET /v1/cluster/workers and printed by clients.
func validateWorkerID(worker string) error {
	if err := api.ValidateName("worker", worker, 128); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// validateText checks a completion's error or output: valid UTF-8 without
// control characters other than newline and tab (workers escape the
// others), so that what is recorded cannot drive a reader's terminal.
func validateText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s: not valid UTF-8", ErrBadRequest, field)
	}
	for i, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fmt.Errorf("%w: %s: control character %U at byte %d (escape it)", ErrBadRequest, field, r, i)
		}
	}
	return nil
}

func validateReport(worker, runID string, attempt int) (string, error) {
	if err := validateWorkerID(worker); err != nil {
		return "", err
	}
	if attempt < 1 {
		return "", fmt.Errorf("%w: attempt: must be at least 1", ErrBadRequest)
	}
	id, _, err := store.ParseRunID(runID)
	if err != nil {
		return "", fmt.Errorf("%w: run_id: %q is not a run ID", ErrBadRequest, runID)
	}
	return id, nil
}

// takeBack hands attempts that were recorded but never delivered to
// their partitions' loops, which return the runs to pending (see
// partition.queueTakeBack).
func (d *Dispatcher) takeBack(worker string, as []AttemptGrant) {
	for _, a := range as {
		if pt, err := d.partitionFor(a.JobID); err == nil {
			pt.queueTakeBack(worker, a)
		}
	}
}

// Heartbeat extends the lease of a running attempt. It returns
// ErrStaleAttempt if the attempt is not current, ErrForbidden if it was
// handed to another credential than req.Credential, or a *NotOwnerError.
func (d *Dispatcher) Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResponse, error) {
	id, err := validateReport(req.Worker, req.RunID, req.Attempt)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	return pt.heartbeat(req)
}

// Complete records an attempt's result. It returns the run's new status,
// ErrStaleAttempt if the attempt is not current (the report is not
// recorded), ErrForbidden if it was handed to another credential than
// req.Credential (not recorded either), or a *NotOwnerError.
func (d *Dispatcher) Complete(ctx context.Context, req CompleteRequest) (CompleteResponse, error) {
	id, err := validateReport(req.Worker, req.RunID, req.Attempt)
	if err != nil {
		return CompleteResponse{}, err
	}
	if len(req.Output) > MaxOutputBytes {
		return CompleteResponse{}, fmt.Errorf("%w: output: longer than %d bytes", ErrBadRequest, MaxOutputBytes)
	}
	if len(req.Error) > MaxOutputBytes {
		return CompleteResponse{}, fmt.Errorf("%w: error: longer than %d bytes", ErrBadRequest, MaxOutputBytes)
	}
	if err := validateText("output", req.Output); err != nil {
		return CompleteResponse{}, err
	}
	if err := validateText("error", req.Error); err != nil {
		return CompleteResponse{}, err
	}
	if len(req.Result) > api.MaxStepResultBytes {
		return CompleteResponse{}, fmt.Errorf("%w: result: %d bytes, longer than %d", ErrBadRequest, len(req.Result), api.MaxStepResultBytes)
	}
	if len(req.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Result); err != nil {
			return CompleteResponse{}, fmt.Errorf("%w: result: not valid JSON: %v", ErrBadRequest, err)
		}
		req.Result = buf.Bytes()
	}
	if string(req.Result) == "null" {
		req.Result = nil
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return CompleteResponse{}, err
	}
	// The executor is done: its live output ends here, whatever becomes
	// of the report (a worker holding the attempt pushes nothing after
	// it).
	defer d.live.End(liveKey(req.RunID, req.Item, req.Attempt))
	return pt.complete(req)
}
