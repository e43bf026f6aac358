package dispatch

import (
	"context"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// endedPolls marks a worker that ended its polls here (EndPolls): its
// polls answer at once with nothing while its registration is the one it
// had then (createRev, 0 for none) and until until.
type endedPolls struct {
	credential string
	createRev  int64
	until      time.Time
}

// EndPolls ends the polls req.Worker has waiting here with
// req.Credential: each answers at once with what it was handed (nothing,
// or the attempts its last look recorded), and, if this member shows the
// worker registered with that credential, the worker's polls that arrive
// afterwards answer at once with nothing, for api.EndPollsHold or until
// the worker registers anew (not with req.KeepPolling). A stopping worker
// sends it instead of cutting its polls, so that every attempt recorded
// for it reaches it (api.EndPollsRequest). It returns an error wrapping ErrBadRequest for a
// malformed worker ID, or ErrIDTaken (from the registry) when the ID is
// bound to another credential. Safe for concurrent use.
func (d *Dispatcher) EndPolls(ctx context.Context, req api.EndPollsRequest) error {
	if err := validateWorkerID(req.Worker); err != nil {
		return err
	}
	if err := d.checkWorkerID(req.Worker, req.Credential); err != nil {
		return err
	}
	// A mark only for a worker registered here with the credential: a
	// credential cannot fill memory with marks of made-up IDs.
	var rev int64
	mark := !req.KeepPolling
	if mark && d.cfg.Workers != nil {
		var cred string
		cred, rev, _ = d.cfg.Workers.Registration(req.Worker)
		mark = rev != 0 && cred == req.Credential
	}
	now := d.cfg.Clock.Now()
	d.pollsMu.Lock()
	defer d.pollsMu.Unlock()
	for w, e := range d.ended { // forget the marks that no longer hold
		if !now.Before(e.until) {
			delete(d.ended, w)
		}
	}
	if mark {
		until := now.Add(api.EndPollsHold)
		d.ended[req.Worker] = endedPolls{credential: req.Credential, createRev: rev, until: until}
		if until.UnixNano() > d.heldUntil.Load() {
			d.heldUntil.Store(until.UnixNano())
		}
	}
	for p := range d.polls {
		if p.req.Worker == req.Worker && p.req.Credential == req.Credential {
			p.ended.Store(true)
			p.wake()
		}
	}
	return nil
}

// pollEnded reports whether p is to answer now with nothing: its worker
// ended its polls (EndPolls) while p was waiting, or before p arrived
// and the mark still holds.
func (d *Dispatcher) pollEnded(p *poll) bool {
	if p.ended.Load() {
		return true
	}
	if d.cfg.Clock.Now().UnixNano() >= d.heldUntil.Load() {
		return false // no mark holds any more (the lock is not taken)
	}
	d.pollsMu.Lock()
	e, ok := d.ended[p.req.Worker]
	d.pollsMu.Unlock()
	if !ok || e.credential != p.req.Credential || !d.cfg.Clock.Now().Before(e.until) {
		return false
	}
	if d.cfg.Workers != nil {
		if _, rev, _ := d.cfg.Workers.Registration(p.req.Worker); rev != e.createRev && rev != 0 {
			return false // registered anew: a restarted worker
		}
	}
	p.ended.Store(true)
	return true
}
