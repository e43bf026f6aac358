package membership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// SessionConfig configures a Session. The zero value is not valid; start
// from DefaultSessionConfig.
type SessionConfig struct {
	// TTL is the lease's time to live on the etcd server. etcd counts it in
	// whole seconds and enforces a minimum (about 2 s with default raft
	// settings). Default 5 s.
	TTL time.Duration
	// RenewInterval is the time between keepalive requests. Default TTL/4.
	RenewInterval time.Duration
	// RetryInterval is the time between keepalive requests after one
	// failed. Default RenewInterval/4.
	RetryInterval time.Duration
	// RenewDeadline is how long after sending the last successful
	// keepalive the session gives up and fences itself (Done closes). The
	// server cannot expire the lease before TTL has passed since that same
	// instant, so TTL-RenewDeadline is the margin in which owners stop
	// working before anyone else may take over. Default TTL*3/5.
	RenewDeadline time.Duration
	// RequestTimeout bounds one keepalive request; a request never
	// outlives the renew deadline either. Requests overlap: the next one
	// is sent RenewInterval after the previous one was sent, answered or
	// not. Default RenewDeadline: a keepalive the server is slow to answer
	// still counts if it succeeds before the session would fence itself.
	RequestTimeout time.Duration
	// Clock measures the deadlines; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives lease events; nil means no logs.
	Logger *zap.Logger
	// Metrics records keepalive metrics; nil records nothing.
	Metrics *Metrics
}

// DefaultSessionConfig returns the defaults for a lease of ttl (5 s if ttl
// is 0).
func DefaultSessionConfig(ttl time.Duration) SessionConfig {
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	renew := ttl / 4
	return SessionConfig{
		TTL:            ttl,
		RenewInterval:  renew,
		RetryInterval:  renew / 4,
		RenewDeadline:  ttl * 3 / 5,
		RequestTimeout: ttl * 3 / 5,
	}
}

// Validate checks the relations between the durations:
// TTL ≥ 1s, whole seconds; 0 < RetryInterval ≤ RenewInterval < RenewDeadline
// < TTL; 0 < RequestTimeout ≤ RenewDeadline.
func (c SessionConfig) Validate() error {
	switch {
	case c.TTL < time.Second || c.TTL%time.Second != 0:
		return fmt.Errorf("%w: lease TTL %v must be a whole number of seconds, at least 1s", ErrInvalidConfig, c.TTL)
	case c.RenewInterval <= 0 || c.RenewInterval >= c.RenewDeadline:
		return fmt.Errorf("%w: renew interval %v must be positive and below the renew deadline %v", ErrInvalidConfig, c.RenewInterval, c.RenewDeadline)
	case c.RetryInterval <= 0 || c.RetryInterval > c.RenewInterval:
		return fmt.Errorf("%w: retry interval %v must be positive and at most the renew interval %v", ErrInvalidConfig, c.RetryInterval, c.RenewInterval)
	case c.RenewDeadline >= c.TTL:
		return fmt.Errorf("%w: renew deadline %v must be below the lease TTL %v", ErrInvalidConfig, c.RenewDeadline, c.TTL)
	case c.RequestTimeout <= 0 || c.RequestTimeout > c.RenewDeadline:
		return fmt.Errorf("%w: request timeout %v must be positive and at most the renew deadline %v", ErrInvalidConfig, c.RequestTimeout, c.RenewDeadline)
	}
	return nil
}

// Session owns one etcd lease and keeps it alive. Its Done channel closes,
// and its context is cancelled, as soon as the session can no longer be sure
// the lease is alive: the lease was revoked or expired, no keepalive
// succeeded within RenewDeadline, or Close was called. Work bound to the
// lease (member registration, partition ownership) must run under Ctx so it
// stops before the server can expire the lease and hand that work to
// someone else (self-fencing).
//
// A Session is safe for concurrent use. Close must be called to release
// its goroutine.
type Session struct {
	client *clientv3.Client
	cfg    SessionConfig
	lease  clientv3.LeaseID
	lg     *zap.Logger

	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the keepalive goroutine exits

	mu        sync.Mutex // guards the fields below
	lastRenew time.Time  // send time of the latest successful keepalive (or grant)
	err       error      // why the session ended
	closeOnce sync.Once
}

// NewSession grants a lease of cfg.TTL and starts keeping it alive. It
// returns ErrInvalidConfig for a bad cfg, or the etcd error of the grant.
func NewSession(ctx context.Context, client *clientv3.Client, cfg SessionConfig) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	sent := cfg.Clock.Now()
	gctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	resp, err := client.Grant(gctx, int64(cfg.TTL/time.Second))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("membership: grant lease: %w", err)
	}
	s := &Session{
		client:    client,
		cfg:       cfg,
		lease:     resp.ID,
		lg:        cfg.Logger.With(zap.String("lease", fmt.Sprintf("%x", int64(resp.ID)))),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		lastRenew: sent,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.keepAlive()
	return s, nil
}

// Lease returns the session's lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// TTL returns the lease's time to live as configured.
func (s *Session) TTL() time.Duration { return s.cfg.TTL }

// Ctx returns a context cancelled when the session ends.
func (s *Session) Ctx() context.Context { return s.ctx }

// Done returns a channel closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns why the session ended: ErrLeaseLost, ErrRenewDeadline or
// ErrSessionClosed; nil while it is live.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastRenewal returns when the latest successful keepalive was sent, on the
// session's clock. The server keeps the lease at least TTL past it.
func (s *Session) LastRenewal() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastRenew
}

// Close ends the session and revokes the lease (bounded by the request
// timeout), deleting every key bound to it. It waits for the keepalive
// goroutine to exit. Idempotent; it returns the revoke error, if any, the
// first time.
func (s *Session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.end(ErrSessionClosed) // also aborts an in-flight keepalive
		<-s.done
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		if _, rerr := s.client.Revoke(ctx, s.lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("membership: revoke lease: %w", rerr)
		}
	})
	return err
}

// Lost ends the session at once, as when the server reports the lease
// gone: Done closes, Err returns ErrLeaseLost. It is for a holder that
// learns of the loss before its next keepalive would, such as a member
// whose registration, bound to the lease, was deleted by a peer that
// revoked the lease (package membership/deathwatch). It revokes nothing;
// Close must still be called. Idempotent, and harmless after the session
// ended.
func (s *Session) Lost() { s.end(ErrLeaseLost) }

// Orphan ends the session without revoking the lease, which then expires on
// the server after its TTL, as if the process had crashed. For tests.
func (s *Session) Orphan() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.end(ErrSessionClosed)
		<-s.done
	})
}

func (s *Session) end(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
	}
	s.mu.Unlock()
	if first {
		s.cfg.Metrics.ended(err)
	}
	s.cancel()
}

// renewal is the outcome of one keepalive request sent at sent.
type renewal struct {
	sent time.Time
	resp *clientv3.LeaseKeepAliveResponse
	err  error
}

// keepAlive sends a keepalive request every RenewInterval after the
// previous one was sent (RetryInterval after one failed), whether or not
// earlier ones have answered, and ends the session when the server says
// the lease is gone or RenewDeadline passes since the send of the latest
// successful one. Requests overlap: a request the store is slow to answer
// (behind a backlog of writes to apply) still counts if it succeeds
// before the deadline, while later ones go out on schedule in case it
// never does. A request is cancelled when the session ends, so none can
// delay self-fencing. It owns the requests' goroutines and waits
// for them.
func (s *Session) keepAlive() {
	defer close(s.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	clock := s.cfg.Clock
	renew := clock.NewTimer(s.cfg.RenewInterval)
	defer renew.Stop()
	fence := clock.NewTimer(s.cfg.RenewDeadline)
	defer fence.Stop()
	results := make(chan renewal)
	failing := false
	for {
		select {
		case <-s.stop:
			s.end(ErrSessionClosed)
			return
		case <-s.ctx.Done(): // Lost
			return
		case <-fence.Chan():
			s.lg.Warn("lease not renewed within the renew deadline; fencing", zap.Duration("renew_deadline", s.cfg.RenewDeadline), zap.Time("last_renewal", s.LastRenewal()))
			s.end(ErrRenewDeadline)
			return
		case <-renew.Chan():
			sent := clock.Now()
			// Under the session's context: if the session fences itself,
			// every request in flight ends with it.
			ctx, cancel := clockwork.WithDeadline(s.ctx, clock, sent.Add(s.cfg.RequestTimeout))
			wg.Go(func() {
				defer cancel()
				resp, err := s.client.KeepAliveOnce(ctx, s.lease)
				s.cfg.Metrics.keepaliveTook(clock.Since(sent).Seconds())
				select {
				case results <- renewal{sent: sent, resp: resp, err: err}:
				case <-s.ctx.Done():
				}
			})
			renew.Reset(s.cfg.RenewInterval)
		case r := <-results:
			switch {
			case r.err == nil && r.resp.TTL > 0:
				s.mu.Lock()
				newer := r.sent.After(s.lastRenew)
				if newer {
					s.lastRenew = r.sent
				}
				s.mu.Unlock()
				if !newer {
					continue // a later request already renewed
				}
				s.cfg.Metrics.renewed(float64(r.sent.UnixNano()) / 1e9)
				if failing {
					s.lg.Info("lease renewal recovered")
					failing = false
					renew.Reset(s.cfg.RenewInterval - clock.Since(r.sent))
				}
				fence.Reset(s.cfg.RenewDeadline - clock.Since(r.sent))
			case errors.Is(r.err, rpctypes.ErrLeaseNotFound) || (r.err == nil && r.resp.TTL <= 0):
				s.lg.Warn("lease expired or revoked on the server")
				s.end(ErrLeaseLost)
				return
			case !r.sent.After(s.LastRenewal()):
				// A later request already renewed: this one's failure
				// (its deadline, most likely) says nothing now.
			default:
				s.cfg.Metrics.keepaliveFailed()
				if !failing {
					s.lg.Warn("lease renewal failing", zap.Error(r.err))
					failing = true
				}
				renew.Reset(s.cfg.RetryInterval)
			}
		}
	}
}
