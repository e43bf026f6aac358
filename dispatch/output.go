package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/liveoutput"
	"github.com/jobfleet/jobfleet/store"
)

// This file has the live output of running attempts: workers push it
// (PushOutput) to the owner of the run's partition, which holds the last
// bytes of each attempt in memory (package liveoutput, never etcd) for
// readers (Output) and followers (FollowOutput).

// ErrOutputNotHeld says this member holds no live output of the attempt
// asked for (it is not running here and its output was not kept, or it
// never ran): the run's stored output is what there is.
var ErrOutputNotHeld = errors.New("no live output held")

// outputCheck is how often a follower checks that its attempt still runs
// here: an attempt lost, cancelled or moved with its partition ends its
// stream within it.
const outputCheck = time.Second

func liveKey(runID string, item *int, attempt int) liveoutput.Key {
	k := keyOf(runID, item)
	return liveoutput.Key{Run: runID, Item: k.item, Attempt: attempt}
}

// PushOutput takes the next bytes of a running attempt's output. Only the
// worker holding the attempt under req.Credential may push: ErrForbidden
// for another credential, ErrStaleAttempt if the attempt is not running
// (Held false if it ended here already), a *NotOwnerError if this member
// does not own the run's partition, ErrBadRequest for a malformed push.
// It writes nothing to etcd. Safe for concurrent use.
func (d *Dispatcher) PushOutput(_ context.Context, req api.OutputPush) (api.OutputPushResponse, error) {
	id, err := validateReport(req.Worker, req.RunID, req.Attempt)
	if err != nil {
		return api.OutputPushResponse{}, err
	}
	switch {
	case len(req.Data) > api.MaxOutputChunkBytes:
		return api.OutputPushResponse{}, fmt.Errorf("%w: data: longer than %d bytes", ErrBadRequest, api.MaxOutputChunkBytes)
	case req.Offset < 0:
		return api.OutputPushResponse{}, fmt.Errorf("%w: offset: must not be negative", ErrBadRequest)
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return api.OutputPushResponse{}, err
	}
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return api.OutputPushResponse{}, pt.notOwned()
	}
	_, _, err = pt.currentLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential)
	pt.mu.Unlock()
	if err != nil {
		return api.OutputPushResponse{}, err
	}
	held := d.live.Write(liveKey(req.RunID, req.Item, req.Attempt), req.Offset, []byte(req.Data))
	return api.OutputPushResponse{Held: held}, nil
}

// runningAttempt returns the number of chain (run, item)'s latest attempt
// (0 if it has none or the run is not active here) and whether it runs.
func (pt *partition) runningAttempt(runID string, item int) (int, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	ar := pt.active[runID]
	if pt.closed || ar == nil {
		return 0, false
	}
	c, ok := ar.chain(item)
	if !ok {
		return 0, false
	}
	_, running := c.current()
	return len(c.attempts), running
}

// resolveOutput finds the attempt an output request is about: attempt,
// or (0) the chain's latest attempt here or held. It returns the key and
// whether the attempt runs here.
func (d *Dispatcher) resolveOutput(runID string, item *int, attempt int) (liveoutput.Key, bool, error) {
	id, _, err := store.ParseRunID(runID)
	if err != nil {
		return liveoutput.Key{}, false, fmt.Errorf("%w: run ID %q does not parse", ErrBadRequest, runID)
	}
	if attempt < 0 {
		return liveoutput.Key{}, false, fmt.Errorf("%w: attempt: must not be negative", ErrBadRequest)
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return liveoutput.Key{}, false, err
	}
	k := liveKey(runID, item, attempt)
	cur, running := pt.runningAttempt(runID, k.Item)
	if k.Attempt == 0 {
		k.Attempt = max(cur, d.live.Latest(runID, k.Item))
	}
	return k, running && k.Attempt == cur, nil
}

// Output returns what this member holds of an attempt's live output:
// attempt's (item nil for the run's own chain), or for attempt 0 the
// latest one. ErrOutputNotHeld if it holds none (read the run's stored
// output instead), a *NotOwnerError if it does not own the run's
// partition, ErrBadRequest for a malformed run ID. Safe for concurrent
// use.
func (d *Dispatcher) Output(runID string, item *int, attempt int) (api.RunOutput, error) {
	k, running, err := d.resolveOutput(runID, item, attempt)
	if err != nil {
		return api.RunOutput{}, err
	}
	out := api.RunOutput{RunID: runID, Item: item, Attempt: k.Attempt, Running: running, Source: api.OutputLive}
	data, start, _, ok := d.live.Snapshot(k)
	if !ok && !running {
		return api.RunOutput{}, ErrOutputNotHeld
	}
	out.Output, out.Skipped = string(data), start
	return out, nil
}

// FollowOutput follows an attempt's live output (chosen as by Output)
// until it ends or ctx is done, calling emit with each event (an
// api.OutputEvent for api.EventOutput, an api.RunOutput without output
// for api.EventEnd, last) in the caller's goroutine; it returns emit's
// first error, ctx's, ErrOutputNotHeld (before any event) if the attempt
// neither runs here nor has its output held, or Output's errors. The
// stream ends when the attempt's report comes in, or within a second of
// the attempt being lost, cancelled or its partition moving. A slow
// follower skips ahead (OutputEvent.Skipped); it never slows the worker.
func (d *Dispatcher) FollowOutput(ctx context.Context, runID string, item *int, attempt int, emit func(event string, v any) error) error {
	k, running, err := d.resolveOutput(runID, item, attempt)
	if err != nil {
		return err
	}
	if _, _, _, ok := d.live.Snapshot(k); !ok && !running {
		return ErrOutputNotHeld
	}
	f := d.live.Follow(k)
	defer f.Close()
	tick := d.cfg.Clock.NewTicker(outputCheck)
	defer tick.Stop()
	next := int64(0)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.Chan():
			if !d.attemptRuns(k) {
				d.live.End(k)
			}
			continue
		case <-f.Wake():
		}
		data, skipped, ended := f.Read()
		next += skipped
		if len(data) > 0 || skipped > 0 {
			ev := api.OutputEvent{Attempt: k.Attempt, Offset: next, Skipped: skipped, Data: string(data)}
			if err := emit(api.EventOutput, ev); err != nil {
				return err
			}
			next += int64(len(data))
		}
		if ended {
			return emit(api.EventEnd, api.RunOutput{RunID: runID, Item: item, Attempt: k.Attempt, Source: api.OutputLive})
		}
	}
}

// attemptRuns reports whether attempt k runs in a partition this member
// owns.
func (d *Dispatcher) attemptRuns(k liveoutput.Key) bool {
	id, _, err := store.ParseRunID(k.Run)
	if err != nil {
		return false
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return false
	}
	cur, running := pt.runningAttempt(k.Run, k.Item)
	return running && cur == k.Attempt
}
