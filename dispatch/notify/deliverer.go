package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
)

// Deliverer delivers the notifications of a member's Outboxes (see the
// package comment for the order and bounds). New validates and starts
// nothing; Run delivers until its context ends. Safe for concurrent use.
type Deliverer struct {
	cfg  Config
	lg   *zap.Logger
	wake chan struct{} // buffer 1: something changed; a pass is due

	// mu guards the fields below and every Outbox's, destination's,
	// lane's, job's and entry's mutable fields.
	mu       sync.Mutex
	runCtx   context.Context // Run's; nil while Run is not running: nothing starts
	outboxes map[*Outbox]struct{}
	dests    map[string]*destination // by name (destinationOf)
	order    []*destination          // destinations with pending notifications, in turn
	turn     int                     // index in order of the next destination's turn
	inFlight int                     // tries in flight
	pending  int                     // notifications held by the outboxes
	wg       sync.WaitGroup          // tries and deletions in flight; added to only while runCtx is set
}

// destination is where notifications go: one scheme, host and port.
type destination struct {
	name     string
	inFlight int
	br       breaker
	queued   bool    // in Deliverer.order
	lanes    []*lane // one per job with notifications here, in turn
	turn     int     // index in lanes of the next job's turn
	byJob    map[*jobQueue]*lane
}

// lane is one job's pending notifications to one destination.
type lane struct {
	o       *Outbox
	job     *jobQueue
	entries []*entry // oldest first
}

// entry is a pending notification.
type entry struct {
	Entry
	o    *Outbox
	job  *jobQueue
	dest *destination
	lane *lane

	next    time.Time      // not tried before
	bo      *retry.Backoff // nil until its first failure
	tries   int            // tries that returned
	sending bool           // a try is in flight
	gone    bool           // delivered, given up, dropped or forgotten
}

// New returns a deliverer of cfg, which needs a Sender; errors wrap
// ErrInvalidConfig.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Sender == nil {
		return nil, fmt.Errorf("%w: no sender", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Deliverer{
		cfg:      cfg,
		lg:       cfg.Logger,
		wake:     make(chan struct{}, 1),
		outboxes: map[*Outbox]struct{}{},
		dests:    map[string]*destination{},
	}, nil
}

// Run delivers until ctx ends, then cancels the tries and deletions in
// flight and returns once they have.
func (d *Deliverer) Run(ctx context.Context) {
	d.mu.Lock()
	d.runCtx = ctx
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.runCtx = nil
		d.mu.Unlock()
		d.wg.Wait()
	}()
	clock := d.cfg.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The timer is stopped while a pass works and set once the loop
		// is about to wait: a controlled clock (tests) sees it as a
		// waiter only then.
		timer.Stop()
		d.mu.Lock()
		next := d.passLocked(clock.Now())
		d.mu.Unlock()
		retry.ArmAt(clock, timer, next)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.Chan():
		}
	}
}

// InFlight returns the tries in flight.
func (d *Deliverer) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}

// Pending returns the notifications the outboxes hold (in flight
// included).
func (d *Deliverer) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending
}

func (d *Deliverer) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// passLocked starts the deletions and tries due at now, as far as the
// bounds allow, and returns when the next one is due (zero: only on an
// event: a try returning, an Add).
func (d *Deliverer) passLocked(now time.Time) time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for o := range d.outboxes {
		earlier(o.deleteDueLocked(now))
	}
	// One try per destination per turn, until a whole round starts none
	// or the member's bound is reached.
	for idle := 0; idle < len(d.order) && d.inFlight < d.cfg.Concurrency; {
		d.turn %= len(d.order)
		dest := d.order[d.turn]
		d.turn++
		e, wait := d.pickLocked(dest, now)
		if e == nil {
			earlier(wait)
			idle++
			continue
		}
		idle = 0
		d.startLocked(e, now)
	}
	d.pruneLocked(now)
	open := 0
	for _, dest := range d.dests {
		if dest.br.isOpen() {
			open++
		}
	}
	d.cfg.Metrics.gauges(d.pending, d.inFlight, open)
	return next
}

// pickLocked returns the notification to try next at dest at now: the
// oldest due of the next job in turn that may have one more try in
// flight. If none, wait is when one may be due (zero: on an event).
// Notifications it finds past their max age are given up.
func (d *Deliverer) pickLocked(dest *destination, now time.Time) (_ *entry, wait time.Time) {
	if dest.inFlight >= d.cfg.PerDestination {
		return nil, time.Time{}
	}
	if ok, until := dest.br.allow(now); !ok {
		return nil, until
	}
	var expired []*entry
	defer func() {
		for _, e := range expired {
			d.cfg.Metrics.result(resultGivenUp, 1)
			e.o.logger(e).Error("notification given up: not delivered within the notify max age", zap.Duration("max_age", d.cfg.MaxAge), zap.String("destination", dest.name))
			why := fmt.Sprintf("given up: not delivered within the notify max age (%v)", d.cfg.MaxAge)
			if r, ok := e.o.records[e.Key]; ok && r.LastError != "" {
				why += "; last error: " + r.LastError
			}
			e.o.recordLocked(e, api.DeliveryGivenUp, why, now)
			e.o.finishLocked(e, true)
		}
	}()
	n := len(dest.lanes)
	for i := range n {
		l := dest.lanes[(dest.turn+i)%n]
		if l.job.inFlight >= d.cfg.PerJob {
			continue
		}
		for _, e := range l.entries {
			switch {
			case e.sending:
			case now.Sub(e.Outbox.CreatedAt) > d.cfg.MaxAge:
				expired = append(expired, e)
			case now.Before(e.next):
				if wait.IsZero() || e.next.Before(wait) {
					wait = e.next
				}
			default:
				dest.turn = (dest.turn+i)%n + 1 // the next lane's turn, also if lanes are added
				return e, time.Time{}
			}
		}
	}
	return nil, wait
}

// startLocked starts a try of e at now.
func (d *Deliverer) startLocked(e *entry, now time.Time) {
	e.sending = true
	e.dest.inFlight++
	e.job.inFlight++
	d.inFlight++
	e.dest.br.started(now)
	e.o.spawn(func(ctx context.Context) {
		err, sent := d.try(ctx, e)
		d.tried(ctx, e, err, sent)
	})
}

// try delivers e once: it reads the run document, then sends. sent is
// false if it did not get as far as sending.
func (d *Deliverer) try(ctx context.Context, e *entry) (err error, sent bool) {
	msg := e.Outbox
	if e.Body != "" {
		body, err := e.o.st.Body(ctx, e.Body)
		if err != nil {
			return err, false
		}
		msg.Run = body
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.SendTimeout)
	defer cancel()
	return d.cfg.Sender.Send(sctx, msg), true
}

// tried records the outcome of a try of e made under ctx. The outcome
// counts for e's destination (the metrics, its circuit breaker) whatever
// happened to e meanwhile: an entry dropped for its job's bound (or
// forgotten) while its try was in flight still tells whether the
// destination answers, so a job that makes more notifications than its
// bound cannot keep a dead destination's circuit closed by having every
// try's entry dropped before the try fails.
func (d *Deliverer) tried(ctx context.Context, e *entry, err error, sent bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.poke()
	now := d.cfg.Clock.Now()
	e.sending = false
	e.dest.inFlight--
	e.job.inFlight--
	d.inFlight--
	o := e.o
	defer o.tidyJobLocked(e.job) // once nothing is pending or in flight
	if ctx.Err() != nil {
		// Cancelled: the deliverer stopped (e is tried again when it
		// runs), or the outbox closed (e is forgotten). The destination
		// neither answered nor failed.
		return
	}
	lg := o.logger(e)
	e.tries++
	switch {
	case err == nil:
		d.cfg.Metrics.result(resultDelivered, 1)
		lg.Info("notification delivered")
		if e.dest.br.succeeded() {
			lg.Info("notification destination answers again; circuit closed", zap.String("destination", e.dest.name))
		}
		if !e.gone {
			last := ""
			if r, ok := o.records[e.Key]; ok {
				last = r.LastError // of the failed tries before
			}
			o.recordLocked(e, api.DeliveryDelivered, last, now)
		}
		o.finishLocked(e, true)
		return
	case errors.Is(err, ErrRefused):
		// No later try can succeed: retrying until MaxAge would only
		// repeat the refusal.
		d.cfg.Metrics.result(resultGivenUp, 1)
		lg.Error("notification given up: its destination is refused", zap.String("url", redactedURL(e.Outbox.URL)), zap.Error(err))
		if !e.gone {
			o.recordLocked(e, api.DeliveryGivenUp, "given up: "+err.Error(), now)
		}
		o.finishLocked(e, true)
		return
	case errors.Is(err, ErrGone):
		if !e.gone {
			d.cfg.Metrics.result(resultGivenUp, 1)
			lg.Error("notification given up: its run document is gone", zap.Error(err))
			o.recordLocked(e, api.DeliveryGivenUp, "given up: "+err.Error(), now)
			o.finishLocked(e, true)
		}
		return
	}
	d.cfg.Metrics.result(resultFailed, 1)
	if sent {
		if opened, wait := e.dest.br.failed(now, d.cfg.BreakerFailures, d.cfg.BreakerBackoff); opened {
			lg.Warn("notification destination failing; circuit open", zap.String("destination", e.dest.name), zap.Int("failures", e.dest.br.failures), zap.Duration("wait", wait), zap.Error(err))
		}
	}
	if e.gone {
		return // dropped meanwhile: not tried again
	}
	o.recordLocked(e, api.DeliveryRetrying, err.Error(), now)
	if e.bo == nil {
		e.bo = retry.New(d.cfg.Backoff)
		lg.Warn("notification not delivered; retrying with backoff", zap.Error(err))
	}
	e.next = now.Add(e.bo.Next())
}
