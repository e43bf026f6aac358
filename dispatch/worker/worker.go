package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/store"
)

// maxPollMax is the largest PollRequest.Max the protocol allows.
const maxPollMax = 100

// errShuttingDown is the cause given to in-flight attempts that are
// cancelled at the end of the shutdown timeout; its message is what the
// orchestrator records.
var errShuttingDown = errors.New("worker shutting down")

// Worker pulls attempts from orchestrators, runs them and reports their
// results. Create it with New, register handlers with Handle, and run it
// with Run.
type Worker struct {
	cfg           Config
	lg            *zap.Logger
	client        *apiClient      // worker protocol and members list
	ownClient     bool            // client.hc was made by New
	execTransport *http.Transport // "http" executor; its dials go through policy
	policy        *destPolicy     // "http" executor's destinations
	creds         credentialLog

	slots  *slots
	ran    atomic.Bool
	polled atomic.Int32 // number of orchestrators polled
	// settling is when the set of orchestrators polled last changed plus
	// PollWait, in the clock's UnixNano: until then polls are kept short
	// (see pollWait).
	settling atomic.Int64

	hmu      sync.RWMutex // guards handlers
	handlers map[string]Handler

	// Set by Run before any goroutine starts.
	hardCtx  context.Context // cancelled (errShuttingDown) when the shutdown timeout ends
	attempts sync.WaitGroup  // one per held attempt
	inFlight atomic.Int64    // attempts started and not yet ended

	amu       sync.Mutex    // guards addrs
	addrs     []string      // latest from discovery, normalized
	addrsNote chan struct{} // buffer 1: addrs changed
}

// New validates cfg (after filling zero fields from DefaultConfig) and
// returns a worker. It starts nothing.
func New(cfg Config) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy, err := newDestPolicy(cfg.HTTPPolicy)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch d := cfg.Orchestrators.(type) {
	case *MemberList:
		// The seeds are orchestrators too (or a load balancer in front of
		// them): jobs must not reach them either.
		for _, seed := range d.Seeds {
			if e, err := parseEndpoint(seed, "orchestrator"); err == nil {
				policy.fixed = append(policy.fixed, e)
			}
		}
	case *EtcdMembers:
		// So is the etcd the members are read from.
		for _, ep := range d.client.Endpoints() {
			if e, err := parseEndpoint(ep, "etcd endpoint"); err == nil {
				policy.fixed = append(policy.fixed, e)
			}
		}
	}
	w := &Worker{
		cfg:           cfg,
		lg:            cfg.Logger.Named("worker").With(zap.String("worker", cfg.ID)),
		client:        &apiClient{hc: cfg.HTTPClient, token: cfg.Token},
		execTransport: newExecTransport(policy, cfg.HTTPPolicy.ProxyFromEnvironment),
		policy:        policy,
		slots:         newSlots(cfg.Concurrency),
		handlers:      map[string]Handler{},
		addrsNote:     make(chan struct{}, 1),
	}
	if w.client.hc == nil {
		w.client.hc = defaultHTTPClient(min(cfg.Concurrency, 64)+4, cfg.TLS)
		w.ownClient = true
	}
	return w, nil
}

// ID returns the worker's ID.
func (w *Worker) ID() string { return w.cfg.ID }

// Handle registers h for jobs whose executor type is name: letters,
// digits, '-', '_', '.' and ':', starting with a letter, at most 64 bytes,
// and neither "http" nor "shell". The worker advertises the name from its
// next poll on. It returns an error wrapping ErrInvalidHandler for a bad
// name, a nil handler or a name already registered.
func (w *Worker) Handle(name string, h Handler) error {
	if !validHandlerName(name) {
		return fmt.Errorf("%w: bad name %q: want letters, digits, '-', '_', '.' and ':', starting with a letter, at most %d bytes, not \"http\" or \"shell\"", ErrInvalidHandler, name, maxHandlerBytes)
	}
	if h == nil {
		return fmt.Errorf("%w: nil handler for %q", ErrInvalidHandler, name)
	}
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if _, ok := w.handlers[name]; ok {
		return fmt.Errorf("%w: %q is already registered", ErrInvalidHandler, name)
	}
	w.handlers[name] = h
	return nil
}

func (w *Worker) handler(name string) Handler {
	w.hmu.RLock()
	defer w.hmu.RUnlock()
	return w.handlers[name]
}

// executors returns the executor types to advertise: "http", "shell" if
// allowed, and the handler names.
func (w *Worker) executors() []string {
	w.hmu.RLock()
	names := slices.Sorted(maps.Keys(w.handlers))
	w.hmu.RUnlock()
	ex := []string{store.ExecutorHTTP}
	if w.cfg.AllowShell {
		ex = append(ex, store.ExecutorShell)
	}
	return append(ex, names...)
}

// Run polls the orchestrators and runs attempts until ctx is cancelled,
// then shuts down gracefully: it stops polling, lets in-flight attempts
// finish for up to ShutdownTimeout, cancels the rest and reports them
// failed ("worker shutting down"), and returns once every goroutine it
// started has exited and every attempt has been reported or dropped as
// stale. It returns nil after a shutdown caused by ctx, or the error that
// ended the Discovery. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	if w.cfg.AllowShell {
		if err := protectFromShellJobs(); err != nil {
			return fmt.Errorf("protect the worker from its shell jobs: %w", err)
		}
	}
	hardCtx, hardCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardCancel(nil)
	w.hardCtx = hardCtx
	if w.ownClient {
		defer w.client.hc.CloseIdleConnections()
	}
	defer w.execTransport.CloseIdleConnections()

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	w.lg.Info("worker starting", zap.Int("concurrency", w.cfg.Concurrency), zap.Strings("executors", w.executors()))

	discDone := make(chan error, 1)
	go func() {
		if ml, ok := w.cfg.Orchestrators.(*MemberList); ok {
			// The members list is read with the worker's credentials.
			c := w.client
			if ml.HTTPClient != nil {
				c = &apiClient{hc: ml.HTTPClient, token: w.cfg.Token}
			}
			discDone <- ml.watch(pollCtx, c, w.setAddrs)
			return
		}
		discDone <- w.cfg.Orchestrators.Watch(pollCtx, w.setAddrs)
	}()

	type poller struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	pollers := map[string]*poller{}
	var stopping []*poller // removed, maybe not exited yet
	var runErr error
	discovering := true
	warnedEmpty := false
loop:
	for {
		select {
		case <-pollCtx.Done():
			break loop
		case err := <-discDone:
			discovering = false
			if err != nil {
				runErr = fmt.Errorf("worker: orchestrator discovery: %w", err)
				w.lg.Error("orchestrator discovery failed; shutting down", zap.Error(err))
				break loop
			}
			// Watch returned early without error: keep the last list.
			discDone = nil
		case <-w.addrsNote:
			addrs := w.currentAddrs()
			if len(addrs) != len(pollers) || slices.ContainsFunc(addrs, func(a string) bool { return pollers[a] == nil }) {
				// Before any new poller starts: see pollWait.
				w.settling.Store(w.cfg.Clock.Now().Add(w.cfg.PollWait).UnixNano())
			}
			for addr, p := range pollers {
				if !slices.Contains(addrs, addr) {
					w.lg.Info("orchestrator removed; no longer polling it", zap.String("orchestrator", addr))
					p.cancel()
					stopping = append(stopping, p)
					delete(pollers, addr)
					w.polled.Store(int32(len(pollers)))
				}
			}
			// Count every poller before starting any, so that the first
			// polls already size themselves for all orchestrators.
			var added []string
			for _, addr := range addrs {
				if pollers[addr] == nil {
					added = append(added, addr)
					pollers[addr] = &poller{done: make(chan struct{})}
				}
			}
			w.polled.Store(int32(len(pollers)))
			for _, addr := range added {
				p := pollers[addr]
				pctx, cancel := context.WithCancel(pollCtx)
				p.cancel = cancel
				w.lg.Info("polling orchestrator", zap.String("orchestrator", addr))
				go func() {
					defer close(p.done)
					w.pollLoop(pctx, addr)
				}()
			}
			if len(addrs) == 0 && !warnedEmpty {
				w.lg.Warn("no orchestrator known; waiting for discovery")
			}
			warnedEmpty = len(addrs) == 0
		}
	}

	// Stop polling: no attempt is taken after this.
	stopPolling()
	for _, p := range pollers {
		stopping = append(stopping, p)
	}
	for _, p := range stopping {
		p.cancel()
		<-p.done
	}
	if discovering {
		<-discDone
	}

	// Let in-flight attempts finish, up to ShutdownTimeout.
	idle := make(chan struct{})
	go func() {
		w.attempts.Wait()
		close(idle)
	}()
	if n := w.inFlight.Load(); n > 0 {
		timer := w.cfg.Clock.NewTimer(w.cfg.ShutdownTimeout)
		w.lg.Info("worker stopping; waiting for in-flight attempts", zap.Int64("in_flight", n), zap.Duration("shutdown_timeout", w.cfg.ShutdownTimeout))
		select {
		case <-idle:
		case <-timer.Chan():
			w.lg.Warn("shutdown timeout: cancelling in-flight attempts", zap.Int64("in_flight", w.inFlight.Load()))
			hardCancel(errShuttingDown)
			<-idle
		}
		timer.Stop()
	}
	<-idle
	w.lg.Info("worker stopped")
	return runErr
}

// setAddrs is the Discovery's update callback. The orchestrators'
// addresses are denied to the "http" executor from now on.
func (w *Worker) setAddrs(addrs []string) {
	addrs = normalizeAddrs(addrs)
	w.policy.setOrchestrators(addrs)
	w.amu.Lock()
	w.addrs = addrs
	w.amu.Unlock()
	select {
	case w.addrsNote <- struct{}{}:
	default: // a notification is pending; it will read the latest addrs
	}
}

func (w *Worker) currentAddrs() []string {
	w.amu.Lock()
	defer w.amu.Unlock()
	return w.addrs
}

// pollLoop long-polls one orchestrator until ctx ends. Before each poll it
// reserves the slots it asks for, so the worker never holds more attempts
// than Concurrency however many orchestrators it polls; slots the reply
// does not fill are given back at once. See initialWant and nextWant for
// how many it asks for.
func (w *Worker) pollLoop(ctx context.Context, addr string) {
	lg := w.lg.With(zap.String("orchestrator", addr))
	bo := newBackOff(w.cfg.RetryInitial, w.cfg.RetryMax)
	want, failing := w.initialWant(), false
	for {
		n, err := w.slots.take(ctx, min(want, maxPollMax))
		if err != nil {
			return
		}
		start, wait := w.cfg.Clock.Now(), w.pollWait()
		got, err := w.poll(ctx, addr, n, wait)
		if err != nil {
			w.slots.put(n)
			if ctx.Err() != nil {
				return
			}
			w.cfg.Metrics.pollFailed()
			var refused *CredentialError
			switch {
			case errors.As(err, &refused):
				w.creds.refused(w.lg, addr, refused)
				failing = true
			case !failing:
				lg.Warn("poll failed; backing off", zap.Error(err))
				failing = true
			default:
				lg.Debug("poll failed", zap.Error(err))
			}
			if !retry.Sleep(ctx, w.cfg.Clock, bo.Next()) {
				return
			}
			continue
		}
		w.creds.accepted(w.lg)
		if failing {
			lg.Info("poll succeeded again")
			failing = false
		}
		bo.Reset()
		lg.Debug("polled", zap.Int("max", n), zap.Int("attempts", len(got)))
		take := min(len(got), n)
		w.slots.put(n - take)
		for _, a := range got[:take] {
			w.startAttempt(a, addr)
		}
		for _, a := range got[take:] {
			// More than Max: a protocol violation. Holding them would break
			// the concurrency bound; report them failed so they are retried.
			lg.Error("orchestrator handed out more attempts than asked for; reporting the extra ones failed",
				zap.Int("max", n), zap.Int("attempts", len(got)), zap.String("run_id", a.RunID))
			w.startRefused(a, addr)
		}
		want = w.nextWant(len(got))
		// An orchestrator that answers an empty long poll at once (which the
		// protocol does not do) must not make this loop spin.
		if len(got) == 0 && w.cfg.Clock.Since(start) < wait/4 {
			if !retry.Sleep(ctx, w.cfg.Clock, w.cfg.RetryInitial) {
				return
			}
		}
	}
}

// initialWant is how many slots a new poller asks for: all free ones when
// the worker polls a single orchestrator, else a fair share.
func (w *Worker) initialWant() int {
	n := max(int(w.polled.Load()), 1)
	if n == 1 {
		return maxPollMax
	}
	return max(1, w.cfg.Concurrency/n)
}

// nextWant is how many slots a poller asks for after a reply of got
// attempts. With one orchestrator, all free slots. With several it adapts:
// one after an empty reply (an idle long poll then holds a single slot,
// leaving the rest to orchestrators with work), 2·got after a reply of got.
// take caps it at the free slots, the protocol at 100.
func (w *Worker) nextWant(got int) int {
	if w.polled.Load() <= 1 {
		return maxPollMax
	}
	return max(1, 2*got)
}

// shortPollWait is the long-poll wait used while the worker polls more
// orchestrators than it has slots, or while the set it polls is settling.
const shortPollWait = time.Second

// pollWait returns how long the next long poll may be held. Each poll holds
// the slots it asked for while it waits, so:
//
//   - while there are more orchestrators than slots, some pollers wait for
//     a slot while idle polls hold them all: polls are kept short so that
//     the orchestrators take turns quickly;
//   - for one PollWait after the set of orchestrators changed, polls are
//     kept short too. A poller that started while the worker knew a single
//     orchestrator asked for every slot; when more orchestrators appear
//     (members registering one by one as a fleet starts) their pollers
//     wait for slots until that poll returns. An idle long poll there,
//     at a member that owns none of the waiting runs, would hold their
//     runs back for a whole PollWait.
func (w *Worker) pollWait() time.Duration {
	if int(w.polled.Load()) > w.cfg.Concurrency || w.cfg.Clock.Now().UnixNano() < w.settling.Load() {
		return min(w.cfg.PollWait, shortPollWait)
	}
	return w.cfg.PollWait
}

// poll asks addr for up to max attempts, to be held up to wait.
func (w *Worker) poll(ctx context.Context, addr string, max int, wait time.Duration) ([]dispatch.AttemptGrant, error) {
	req := dispatch.PollRequest{
		Worker:    w.cfg.ID,
		Executors: w.executors(),
		Max:       max,
		Wait:      store.Duration(wait),
	}
	r, err := w.client.post(ctx, addr, dispatch.PathPoll, req, wait+w.cfg.RequestTimeout, maxPollReplyBytes)
	if err != nil {
		return nil, err
	}
	if r.refused() {
		return nil, r.credentialErr()
	}
	if r.status != http.StatusOK {
		return nil, r.err()
	}
	var resp dispatch.PollResponse
	if err := json.Unmarshal(r.body, &resp); err != nil {
		return nil, fmt.Errorf("decode poll reply: %w", err)
	}
	// Before any attempt of this reply runs: its "http" jobs must not
	// reach the fleet's etcd, which this worker may not have been told of.
	if n := w.policy.learnEtcd(resp.EtcdEndpoints); n > 0 {
		w.lg.Info("etcd endpoints learned from an orchestrator; denied to http jobs", zap.String("orchestrator", addr), zap.Strings("etcd_endpoints", resp.EtcdEndpoints))
	}
	return resp.Attempts, nil
}

// slots counts the free attempt slots. Pollers waiting for slots are
// served first come, first served, so a poller that gives its slot back
// (an idle long poll returning empty) and asks again at once queues behind
// the pollers already waiting, instead of starving them.
type slots struct {
	mu      sync.Mutex    // guards the fields below
	free    int           // slots neither held nor granted
	waiters []*slotWaiter // FIFO
}

// slotWaiter is a take waiting for slots; got is set, and ready closed,
// when it is granted.
type slotWaiter struct {
	want, got int
	ready     chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// take waits until a slot is free (and earlier takes are served), then
// takes up to want of the free ones and returns how many it took.
func (s *slots) take(ctx context.Context, want int) (int, error) {
	want = max(want, 1)
	s.mu.Lock()
	if len(s.waiters) == 0 && s.free > 0 {
		n := min(s.free, want)
		s.free -= n
		s.mu.Unlock()
		return n, nil
	}
	wt := &slotWaiter{want: want, ready: make(chan struct{})}
	s.waiters = append(s.waiters, wt)
	s.mu.Unlock()
	select {
	case <-wt.ready:
		return wt.got, nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-wt.ready: // granted meanwhile: give it back
			s.free += wt.got
			s.grantLocked()
		default:
			s.waiters = slices.DeleteFunc(s.waiters, func(o *slotWaiter) bool { return o == wt })
		}
		return 0, ctx.Err()
	}
}

// put gives n slots back.
func (s *slots) put(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	s.grantLocked()
}

// grantLocked hands free slots to waiters in order; s.mu must be held.
func (s *slots) grantLocked() {
	for len(s.waiters) > 0 && s.free > 0 {
		wt := s.waiters[0]
		s.waiters = s.waiters[1:]
		wt.got = min(s.free, wt.want)
		s.free -= wt.got
		close(wt.ready)
	}
}
