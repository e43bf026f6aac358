package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfleet/jobfleet/store"
)

// workerReg is the registration an attempt's worker held when the
// attempt was recorded, as far as the owner knows: the registration's
// create revision, for attempt number attempt of the run. A zero value
// means not known (yet).
type workerReg struct {
	attempt int
	rev     int64
}

// workerLostLocked reports whether ar's running attempt belongs to a
// worker whose registration ended: the registry listed the registration
// it held when the attempt was recorded, and that registration is gone
// (expired or removed; a new one of the same ID does not bring the
// attempt back). An attempt of a worker the owner has not seen registered
// is left to its run lease (an older worker that does not register, or a
// registration the owner's mirror has not shown yet). The caller holds
// mu.
func (pt *partition) workerLostLocked(ar *activeRun) (bool, string) {
	reg := pt.d.cfg.Workers
	if reg == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) == 0 {
		return false, ""
	}
	n := len(ar.run.Attempts)
	a := ar.run.Attempts[n-1]
	cur, ok, synced := reg.lookup(a.Worker)
	if !synced {
		return false, ""
	}
	if ar.worker.attempt != n || ar.worker.rev == 0 {
		// Adopt the registration if it existed when the attempt was
		// recorded (the run's write came after it) and is the same
		// credential's.
		ar.worker = workerReg{}
		if ok && cur.doc.Credential == a.Credential && cur.createRev <= ar.modRev {
			ar.worker = workerReg{attempt: n, rev: cur.createRev}
		}
		return false, ""
	}
	if ok && cur.createRev == ar.worker.rev {
		return false, ""
	}
	return true, fmt.Sprintf("worker %s lost: its registration expired (crashed, stopped without deregistering, or cut off from the fleet)", strconv.Quote(a.Worker))
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
			if ar.run.Status == store.RunRunning && len(ar.run.Attempts) > 0 && slices.Contains(ids, ar.run.Attempts[len(ar.run.Attempts)-1].Worker) {
				hit = true
				break
			}
		}
		pt.mu.Unlock()
		if hit {
			pt.poke()
		}
	}
}

// checkWorkerID refuses a poll under a worker ID registered to another
// credential.
func (d *Dispatcher) checkWorkerID(worker, credential string) error {
	if d.cfg.Workers == nil {
		return nil
	}
	if reg, ok, _ := d.cfg.Workers.lookup(worker); ok && reg.doc.Credential != credential {
		return fmt.Errorf("%w: worker %q", ErrWorkerIDTaken, worker)
	}
	return nil
}

// ErrNoRegistry: the dispatcher was configured without a worker registry.
var ErrNoRegistry = fmt.Errorf("this member keeps no worker registry")

// Register creates or refreshes a worker's registration (see Registry).
func (d *Dispatcher) Register(ctx context.Context, req RegisterRequest) (RegisterResponse, error) {
	if d.cfg.Workers == nil {
		return RegisterResponse{}, ErrNoRegistry
	}
	return d.cfg.Workers.Register(ctx, req)
}

// Deregister removes a worker's registration (see Registry).
func (d *Dispatcher) Deregister(ctx context.Context, req DeregisterRequest) error {
	if d.cfg.Workers == nil {
		return ErrNoRegistry
	}
	return d.cfg.Workers.Deregister(ctx, req)
}

// Workers returns the live worker registrations, by ID, as this member's
// mirror of them shows them (Active is what each worker reported at its
// latest refresh). It returns ErrNoRegistry without a registry, or an
// error while the registry has not listed etcd yet.
func (d *Dispatcher) Workers() ([]store.Worker, error) {
	if d.cfg.Workers == nil {
		return nil, ErrNoRegistry
	}
	ws, rev := d.cfg.Workers.Workers()
	if rev == 0 {
		return nil, fmt.Errorf("the worker registry is not loaded yet; retry")
	}
	return ws, nil
}

// WhyPending says why a waiting run of job jobID, whose executor type is
// executor, may not be taken by any worker: no live worker serves the
// executor type, or none that does may take jobs with that ID (their
// credentials are scoped to other prefixes). It returns "" when some live
// worker could take it (it then waits for a free slot or its backoff),
// and when the member keeps no registry or has not listed it yet. The
// reason names the other prefixes only for a reader with no scope
// (readerPrefix ""): a credential scoped to a prefix is not told of other
// teams' prefixes.
func (d *Dispatcher) WhyPending(jobID, executor, readerPrefix string) string {
	if d.cfg.Workers == nil {
		return ""
	}
	ws, rev := d.cfg.Workers.Workers()
	if rev == 0 {
		return ""
	}
	return whyPending(ws, jobID, executor, readerPrefix == "")
}

// whyPending is WhyPending's decision over the registrations ws; names
// says whether the reason may name the workers' prefixes.
func whyPending(ws []store.Worker, jobID, executor string, names bool) string {
	if len(ws) == 0 {
		return "no live worker is registered (start one: jobfleet worker)"
	}
	prefixes := map[string]bool{}
	serving := 0
	for _, w := range ws {
		if !slices.Contains(w.Executors, executor) {
			continue
		}
		serving++
		if strings.HasPrefix(jobID, w.Prefix) {
			return ""
		}
		prefixes[w.Prefix] = true
	}
	if serving == 0 {
		switch executor {
		case store.ExecutorShell:
			return `no live worker serves executor "shell" (start a worker with --allow-shell)`
		case store.ExecutorHTTP:
			return `no live worker serves executor "http"`
		default:
			return fmt.Sprintf("no live worker serves handler %s (run a program that registers it with the worker library's Handle)", strconv.Quote(executor))
		}
	}
	if !names {
		return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to other prefixes", strconv.Quote(executor))
	}
	var ps []string
	for _, p := range slices.Sorted(maps.Keys(prefixes)) {
		ps = append(ps, strconv.Quote(p))
	}
	return fmt.Sprintf("no live worker serving executor %s accepts jobs under this ID: their credentials are limited to the prefixes %s", strconv.Quote(executor), strings.Join(ps, ", "))
}

// unservable counts the waiting runs of parts (not running) that no live
// worker can take, by executor type; nil without a loaded registry.
func (d *Dispatcher) unservable(parts []*partition) map[string]int {
	if d.cfg.Workers == nil {
		return nil
	}
	ws, rev := d.cfg.Workers.Workers()
	if rev == 0 {
		return nil
	}
	out := map[string]int{}
	for _, pt := range parts {
		pt.mu.Lock()
		for _, ar := range pt.active {
			e := pt.jobs[ar.run.JobID]
			if e == nil || ar.run.Status == store.RunRunning {
				continue
			}
			if whyPending(ws, ar.run.JobID, e.spec.Executor.Type, false) != "" {
				out[e.spec.Executor.Type]++
			}
		}
		pt.mu.Unlock()
	}
	return out
}
