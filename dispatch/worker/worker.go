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

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
	"github.com/jobfleet/jobfleet/egress"
)

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
	policy        *egress.Guard   // "http" executor's destinations
	creds         *credentialLog

	slots *slots
	// reporting holds a token per attempt that gave its slot back to
	// report its result (attempt.freeSlot); its capacity is Concurrency.
	reporting chan struct{}
	ran       atomic.Bool
	polled    atomic.Int32 // number of orchestrators polled
	// settling is when the set of orchestrators polled last changed plus
	// PollWait, in the clock's UnixNano: until then polls are kept short
	// (see pollWait).
	settling atomic.Int64

	hmu      sync.RWMutex // guards handlers
	handlers map[string]StepHandler

	// Set by Run before any goroutine starts.
	hardCtx context.Context // cancelled (errShuttingDown) when the shutdown timeout ends
	// stopping is done once the worker stops polling for good (Run's
	// context ended, or a fatal error): a poll cut then ends its polls at
	// the orchestrator (poll) instead of being cut.
	stopping context.Context
	attempts sync.WaitGroup // one per held attempt
	inFlight atomic.Int64   // attempts started and not yet ended

	// firstRegister is closed once the first registration was tried
	// with an orchestrator; polls wait for it.
	firstRegister chan struct{}
	regNote       chan struct{} // buffer 1: addrs changed (for registerLoop)

	// presenceAddr is the orchestrator the presence stream belongs with
	// (presence.go); presenceNote (buffer 1) tells presenceLoop it moved.
	presenceAddr atomic.Pointer[string]
	presenceNote chan struct{}
	// presenceHC sends presence streams on connections of their own
	// (presenceClient).
	presenceHC *http.Client

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
	cfg.Labels = maps.Clone(cfg.Labels) // the caller's map may change

	policy, err := egress.NewGuard(cfg.HTTPPolicy)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch d := cfg.Orchestrators.(type) {
	case *MemberList:
		// The seeds are orchestrators too (or a load balancer in front of
		// them): jobs must not reach them either.
		policy.AddFleet("orchestrator", d.Seeds...)
	case EtcdEndpointer:
		// So is the etcd the members are read from.
		policy.AddFleet("etcd endpoint", d.EtcdEndpoints()...)
	}
	lg := cfg.Logger.Named("worker").With(zap.String("worker", cfg.ID))
	w := &Worker{
		cfg:           cfg,
		lg:            lg,
		client:        &apiClient{hc: cfg.HTTPClient, token: cfg.Token},
		execTransport: policy.HTTPTransport(cfg.HTTPPolicy.ProxyFromEnvironment),
		policy:        policy,
		slots:         newSlots(cfg.Concurrency),
		reporting:     make(chan struct{}, cfg.Concurrency),
		creds:         newCredentialLog(cfg.Clock, lg),
		handlers:      map[string]StepHandler{},
		addrsNote:     make(chan struct{}, 1),
		firstRegister: make(chan struct{}),
		regNote:       make(chan struct{}, 1),
		presenceNote:  make(chan struct{}, 1),
	}
	if w.client.hc == nil {
		w.client.hc = defaultHTTPClient(min(cfg.Concurrency, 64)+4, cfg.TLS)
		w.ownClient = true
	}
	w.presenceHC = presenceClient(w.client.hc)
	return w, nil
}

// ID returns the worker's ID.
func (w *Worker) ID() string { return w.cfg.ID }

// Handle registers h for jobs whose executor type is name: letters,
// digits, '-', '_', '.' and ':', starting with a letter, at most 64 bytes,
// and neither "http" nor "shell". The worker advertises the name from its
// next poll on. It returns an error wrapping ErrInvalidHandler for a bad
// name, a nil handler, a name already registered, or a 63rd handler (a
// registration lists at most 64 executor types).
func (w *Worker) Handle(name string, h Handler) error {
	var sh StepHandler
	if h != nil {
		sh = func(ctx context.Context, run Run) (json.RawMessage, error) { return nil, h(ctx, run) }
	}
	return w.HandleStep(name, sh)
}

// HandleStep is Handle for a handler that returns a result: a step's
// attempt that succeeds records it (at most api.MaxStepResultBytes of
// JSON: a longer one, or one that is not JSON, fails the attempt), and
// the steps that need the step receive it in Run.Needs. The result of an
// attempt that is not a step's is dropped.
func (w *Worker) HandleStep(name string, h StepHandler) error {
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
	if len(w.handlers) >= maxHandlers {
		return fmt.Errorf("%w: %q: a worker registers at most %d handlers (its registration lists at most %d executor types)", ErrInvalidHandler, name, maxHandlers, maxHandlers+2)
	}
	w.handlers[name] = h
	return nil
}

func (w *Worker) handler(name string) StepHandler {
	w.hmu.RLock()
	defer w.hmu.RUnlock()
	return w.handlers[name]
}

// executors returns the executor types to advertise: "http" if served,
// "shell" if allowed, and the handler names.
func (w *Worker) executors() []string {
	w.hmu.RLock()
	names := slices.Sorted(maps.Keys(w.handlers))
	w.hmu.RUnlock()
	var ex []string
	if w.cfg.ServeHTTP {
		ex = append(ex, api.ExecutorHTTP)
	}
	if w.cfg.AllowShell {
		ex = append(ex, api.ExecutorShell)
	}
	return append(ex, names...)
}

// Run polls the orchestrators and runs attempts until ctx is cancelled,
// then shuts down gracefully: it stops polling, lets in-flight attempts
// finish for up to ShutdownTimeout, cancels the rest and reports them
// failed ("worker shutting down"), and returns once every goroutine it
// started has exited and every attempt has been reported or dropped as
// stale. It returns nil after a shutdown caused by ctx, the error that
// ended the Discovery, or an error wrapping ErrCredentialRefused when no
// orchestrator accepted the worker's credentials in its first 5 seconds
// of refusals, or an error wrapping ErrLabelsRefused when an orchestrator
// refuses the worker's labels. Run may be called once; it returns ErrNothingToServe at
// once if the worker serves no executor type (no handler registered, and
// neither ServeHTTP nor AllowShell).
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	if len(w.executors()) == 0 {
		return ErrNothingToServe
	}
	if w.cfg.AllowShell {
		if err := protectFromShellJobs(); err != nil {
			return fmt.Errorf("protect the worker from its shell jobs: %w", err)
		}
	}
	hardCtx, hardCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardCancel(nil)
	w.hardCtx = hardCtx
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	w.stopping = pollCtx
	if w.ownClient {
		defer w.client.hc.CloseIdleConnections()
	}
	if w.presenceHC != w.client.hc {
		defer w.presenceHC.CloseIdleConnections()
	}
	defer w.execTransport.CloseIdleConnections()

	// The registration outlives polling: attempts still running while the
	// worker stops must not be taken for lost.
	regCtx, stopRegistering := context.WithCancel(context.WithoutCancel(ctx))
	regDone := make(chan struct{})
	var reg registrar
	go func() {
		defer close(regDone)
		w.registerLoop(regCtx, &reg)
	}()
	presenceDone := make(chan struct{})
	go func() {
		defer close(presenceDone)
		w.presenceLoop(regCtx)
	}()
	defer func() { stopRegistering(); <-regDone; <-presenceDone }()

	w.lg.Info("worker starting", zap.Int("concurrency", w.cfg.Concurrency), zap.Strings("executors", w.executors()), zap.String("labels", placement.FormatLabels(w.cfg.Labels)))

	discDone := make(chan error, 1)
	go func() {
		if ml, ok := w.cfg.Orchestrators.(*MemberList); ok {
			// The members list is read with the worker's credentials,
			// and logged with the worker's logger unless it has its own.
			c := w.client
			if ml.HTTPClient != nil {
				c = &apiClient{hc: ml.HTTPClient, token: w.cfg.Token}
			}
			discDone <- ml.watch(pollCtx, c, w.setAddrs, w.creds, w.lg.Named("discovery"))
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
		case err := <-w.creds.fatal:
			runErr = err
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
	stopRegistering()
	<-regDone
	<-presenceDone // ended properly: the deregistration that follows is no death
	w.deregister(&reg)
	w.lg.Info("worker stopped")
	return runErr
}

// setAddrs is the Discovery's update callback. The orchestrators'
// addresses are denied to the "http" executor from now on.
func (w *Worker) setAddrs(addrs []string) {
	addrs = normalizeAddrs(addrs)
	w.policy.SetOrchestrators(addrs)
	w.amu.Lock()
	w.addrs = addrs
	w.amu.Unlock()
	select {
	case w.addrsNote <- struct{}{}:
	default: // a notification is pending; it will read the latest addrs
	}
	select {
	case w.regNote <- struct{}{}:
	default:
	}
}

func (w *Worker) currentAddrs() []string {
	w.amu.Lock()
	defer w.amu.Unlock()
	return w.addrs
}
