package dispatch

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/jobfleet/jobfleet/api"
)

// DefaultWorkerTTL is api.DefaultWorkerTTL.
//
// Deprecated: use api.DefaultWorkerTTL; kept for one release.
const DefaultWorkerTTL = api.DefaultWorkerTTL

// Registry is the worker registry as the scheduler consults it; package
// dispatch/workers provides the fleet's. Its methods answer from memory
// and are safe for concurrent use.
type Registry interface {
	// Registration returns worker's live registration as the registry's
	// copy shows it: the credential it is bound to and its etcd create
	// revision (0: none; a worker that expired and registered again has a
	// new one), and whether the copy has been listed from etcd yet.
	Registration(worker string) (credential string, rev int64, synced bool)
	// CheckID returns an error if worker is bound to a credential other
	// than credential (the error says so; the HTTP layer maps it), nil if
	// the ID is free or bound to credential.
	CheckID(worker, credential string) error
	// Subscribe has gone called, from the registry's own goroutine, with
	// the IDs of workers whose registration ended (expired, removed, or
	// replaced by a new one). gone must not block.
	Subscribe(gone func(workers []string))
	// WhyPending says why no live worker may take a waiting run of job
	// jobID whose executor type is executor and whose placement selector
	// is selector ("" for none), as told to a reader scoped to
	// readerPrefix; "" when some live worker could, and before the
	// registry has been listed.
	WhyPending(jobID, executor, selector, readerPrefix string) string
	// Worker returns worker's live registration as the registry's copy
	// shows it (its credential and labels: what the registry checked when
	// it stored it), and whether it has one. Its slices and map are
	// shared: read, never modify.
	Worker(id string) (api.Worker, bool)
	// OtherCanTake reports whether a live worker other than except serves
	// executor, may take jobs with ID jobID (its scope) and has labels
	// selector matches.
	OtherCanTake(jobID, executor, selector, except string) bool
	// Changed returns a channel closed when the registrations change
	// next (as the registry's copy shows them).
	Changed() <-chan struct{}
	// Live returns the live registrations with their create revisions,
	// and whether the copy has been listed from etcd yet (none before).
	Live() (workers []LiveWorker, synced bool)
}

// ValidateWorkerID checks a protocol request's worker ID: 1 to 128 bytes
// of UTF-8 without control characters. Its error wraps ErrBadRequest and
// names the field.
func ValidateWorkerID(worker string) error { return validateWorkerID(worker) }

// workerReg is the registration an attempt's worker held when the
// attempt was recorded, as far as the owner knows: the registration's
// create revision, for attempt number attempt of the run. A zero value
// means not known (yet).
type workerReg struct {
	attempt int
	rev     int64
}

// workerLostLocked reports whether chain c of ar has a running attempt
// of a worker whose registration ended: the registry listed the
// registration it held when the attempt was recorded, and that
// registration is gone (expired or removed; a new one of the same ID
// does not bring the attempt back). An attempt of a worker the owner has
// not seen registered is left to its run lease (an older worker that
// does not register, or a registration the owner's mirror has not shown
// yet). The caller holds mu.
func (pt *partition) workerLostLocked(ar *activeRun, c chain) (bool, string) {
	reg := pt.d.cfg.Workers
	a, running := c.current()
	if reg == nil || !running {
		return false, ""
	}
	n := len(c.attempts)
	cred, rev, synced := reg.Registration(a.Worker)
	if !synced {
		return false, ""
	}
	if c.rt.worker.attempt != n || c.rt.worker.rev == 0 {
		// Adopt the registration if it existed when the attempt was
		// recorded (the run's write came after it) and is the same
		// credential's.
		c.rt.worker = workerReg{}
		if rev != 0 && cred == a.Credential && rev <= ar.modRev {
			c.rt.worker = workerReg{attempt: n, rev: rev}
		}
		return false, ""
	}
	if rev == c.rt.worker.rev {
		return false, ""
	}
	return true, fmt.Sprintf("worker %s lost: its registration expired or was revoked (crashed, stopped without deregistering, or cut off from the fleet)", strconv.Quote(a.Worker))
}

// pinnedGoneLocked reports whether item it of a broadcast run is pinned
// to a worker whose registration of the fire ended, with the reason.
// The caller holds mu.
func (pt *partition) pinnedGoneLocked(it api.Item) (bool, string) {
	reg := pt.d.cfg.Workers
	if reg == nil || it.Worker == "" {
		return false, ""
	}
	_, rev, synced := reg.Registration(it.Worker)
	if !synced || rev == it.Registration {
		return false, ""
	}
	return true, fmt.Sprintf("worker %s lost: the registration it had when the run fired ended (crashed, stopped, or cut off from the fleet); a broadcast item runs on its worker only", strconv.Quote(it.Worker))
}

// workersGone wakes the loops of the partitions that hold running
// attempts of workers whose registrations ended, so that those attempts
// are retried now. It runs in the registry's goroutine and takes each
// partition's state lock briefly.
func (d *Dispatcher) workersGone(ids []string) {
	parts, _ := d.snapshot()
	for _, pt := range parts {
		pt.mu.Lock()
		hit := false
		for _, ar := range pt.active {
			for _, c := range ar.chains() {
				a, running := c.current()
				pinned := c.item != noItem && slices.Contains(ids, ar.run.Items[c.item].Worker)
				if (running && slices.Contains(ids, a.Worker)) || (pinned && !c.status.Final()) {
					hit = true
					break
				}
			}
			if hit {
				break
			}
		}
		hit = hit || len(pt.heldLost) > 0 // a lost attempt's slots may go now
		pt.mu.Unlock()
		if hit {
			pt.poke()
		}
	}
}

// checkWorkerID refuses a poll under a worker ID bound to another
// credential.
func (d *Dispatcher) checkWorkerID(worker, credential string) error {
	if d.cfg.Workers == nil {
		return nil
	}
	return d.cfg.Workers.CheckID(worker, credential)
}

// unservable counts the waiting runs of parts (not running) that no live
// worker can take, by executor type (nil without a registry), and those
// of them that a live worker could take but for its labels: the runs no
// live worker's labels match (unplaceable).
func (d *Dispatcher) unservable(parts []*partition) (out map[string]int, unplaceable int) {
	if d.cfg.Workers == nil {
		return nil, 0
	}
	out = map[string]int{}
	for _, pt := range parts {
		pt.mu.Lock()
		for _, ar := range pt.active {
			e := pt.jobs[ar.run.JobID]
			if e == nil || ar.run.Status == api.RunRunning {
				continue
			}
			sel := e.spec.Placed().selector()
			if d.cfg.Workers.WhyPending(ar.run.JobID, e.spec.Executor.Type, sel, "") == "" {
				continue
			}
			out[e.spec.Executor.Type]++
			if sel != "" && d.cfg.Workers.WhyPending(ar.run.JobID, e.spec.Executor.Type, "", "") == "" {
				unplaceable++ // a worker could take it but for its labels
			}
		}
		pt.mu.Unlock()
	}
	return out, unplaceable
}
