package deathwatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/membership"
)

// MemberView supplies the member view; *membership.Watcher implements it.
type MemberView interface {
	// View returns the current view and a channel closed when it changes.
	View() (api.View, <-chan struct{})
}

// Detector probes the other members' addresses and revokes the lease of
// a member whose process is dead (see the package comment). Create it
// with New and run it with Run; it is safe for concurrent use.
type Detector struct {
	client *clientv3.Client
	view   MemberView
	cfg    Config
	lg     *zap.Logger
}

// New returns a detector of the members view shows, revoking through
// client. It validates cfg (errors wrap ErrInvalidConfig) and starts
// nothing.
func New(client *clientv3.Client, view MemberView, cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil || view == nil {
		return nil, fmt.Errorf("%w: a client and a member view are required", ErrInvalidConfig)
	}
	cfg.setDefaults()
	return &Detector{client: client, view: view, cfg: cfg, lg: cfg.Logger.With(zap.String("member", cfg.Self))}, nil
}

// watched is one registration being probed: a member ID under one lease.
type watched struct {
	id    string
	lease int64
}

// Run probes every other member of the view, one goroutine per
// registration, until ctx ends, then returns once those goroutines have
// exited. With the detector off it returns at once.
func (d *Detector) Run(ctx context.Context) {
	if d.cfg.Off() {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	probers := map[watched]context.CancelFunc{}
	defer func() {
		for _, stop := range probers {
			stop()
		}
	}()
	for {
		view, changed := d.view.View()
		live := make(map[watched]api.Member, len(view.Members))
		for _, m := range view.Members {
			if m.ID != d.cfg.Self && m.LeaseID != 0 {
				live[watched{m.ID, m.LeaseID}] = m
			}
		}
		for w, stop := range probers {
			if _, ok := live[w]; !ok {
				stop() // left, expired, revoked, or registered again under a new lease
				delete(probers, w)
			}
		}
		for w, m := range live {
			if _, ok := probers[w]; ok {
				continue
			}
			pctx, stop := context.WithCancel(ctx)
			probers[w] = stop
			wg.Go(func() { d.watch(ctx, pctx, m) })
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// outcome is what one probe found.
type outcome int

const (
	connected outcome = iota // something accepts connections at the address
	refused                  // the host said nothing listens there
	failed                   // anything else: no evidence
)

func (o outcome) String() string {
	switch o {
	case connected:
		return "connected"
	case refused:
		return "refused"
	default:
		return "failed"
	}
}

// probe connects to addr once; the connection is returned if it was made.
func (d *Detector) probe(ctx context.Context, addr string) (outcome, net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout)
	defer cancel()
	c, err := d.cfg.Dial(ctx, "tcp", addr)
	switch {
	case err == nil:
		d.cfg.Metrics.probed(connected)
		return connected, c, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		d.cfg.Metrics.probed(refused)
		return refused, nil, err
	default:
		d.cfg.Metrics.probed(failed)
		return failed, nil, err
	}
}

// dialAddr returns the host:port a member's advertised URL names (port
// 80 or 443 by default).
func dialAddr(advertised string) (string, bool) {
	u, err := url.Parse(advertised)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "http":
		port = "80"
	case u.Scheme == "https":
		port = "443"
	default:
		return "", false
	}
	return net.JoinHostPort(u.Hostname(), port), true
}

// watch probes member m's registration until ctx ends (the registration
// left the view, or runCtx, Run's, ended) or its lease was revoked or
// found changed. See the
// package comment for the evidence rule; the states are
//
//	unreached --connected--> reached
//	reached --refused--> suspected (first refusal at t0; probe again at t0+Confirm)
//	suspected --refused at ≥ t0+Confirm--> confirmed: revoke the lease, end
//	suspected --connected--> reached;  suspected --failed--> reached
//
// A refusal while unreached is no evidence. Between probes the last
// connection made stays open; its end (read error or EOF: the process
// exited, or the server closed an idle connection) brings the next probe
// forward.
func (d *Detector) watch(runCtx, ctx context.Context, m api.Member) {
	lg := d.lg.With(zap.String("peer", m.ID), zap.String("lease", fmt.Sprintf("%x", m.LeaseID)), zap.String("addr", m.Addr))
	addr, ok := dialAddr(m.Addr)
	if !ok {
		lg.Debug("advertised address has no host:port to probe; its death is left to its lease")
		return
	}
	clock := d.cfg.Clock
	var (
		reached   bool
		suspected time.Time // the first refusal of the current streak; zero if none
		lastProbe time.Time
		held      *heldConn // the last connection made, kept open; nil if none
		holdOK    = true    // false once a held connection was closed soon after it was made
		closed    <-chan struct{}
	)
	defer func() { held.close() }()
	next := clock.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.Chan():
		case <-closed:
			// The held connection ended: probe now, but not sooner than
			// Confirm after the last probe.
			lived := clock.Since(held.made)
			held.close()
			held, closed = nil, nil
			if lived < d.cfg.Interval {
				holdOK = false // the server closes at once: fall back to the interval alone
			}
			if wait := d.cfg.Confirm - clock.Since(lastProbe); wait > 0 {
				next.Reset(wait)
				continue
			}
			next.Stop()
		}
		lastProbe = clock.Now()
		res, conn, err := d.probe(ctx, addr)
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return
		}
		wait := d.cfg.Interval
		if held != nil {
			// The held connection reveals a death at once; the probes
			// only check on it meanwhile (and cost a name lookup each).
			wait = heldProbeFactor * d.cfg.Interval
		}
		switch res {
		case connected:
			if !reached {
				lg.Debug("peer reached; its death will be detected")
			}
			reached, suspected = true, time.Time{}
			if held == nil && holdOK {
				held = hold(conn, clock.Now())
				closed = held.done
				wait = heldProbeFactor * d.cfg.Interval
			} else {
				conn.Close()
			}
		case refused:
			switch {
			case !reached:
				// An address that never accepted proves nothing.
			case suspected.IsZero():
				suspected = lastProbe
				wait = d.cfg.Confirm
			case lastProbe.Sub(suspected) >= d.cfg.Confirm:
				d.cfg.Metrics.detected()
				lg.Warn("peer's address refuses connections: its process is gone; revoking its lease",
					zap.Time("first_refusal", suspected), zap.Duration("confirmed_after", lastProbe.Sub(suspected)))
				d.revoke(runCtx, ctx, lg, m, suspected)
				return
			default:
				wait = d.cfg.Confirm - lastProbe.Sub(suspected)
			}
		default:
			if !suspected.IsZero() {
				lg.Debug("probe failed after a refusal; no evidence", zap.Error(err))
			}
			suspected = time.Time{}
		}
		next.Reset(wait)
	}
}

// revoke revokes m's lease if its registration still carries it,
// retrying on etcd errors until it is done, runCtx ends, or watchCtx
// ends (the registration left the view: another member revoked it, or
// it expired). A request runs under runCtx: the registration leaving the
// view, which the revocation itself causes, does not cut it. since is the
// first refusal, for the log and the histogram.
func (d *Detector) revoke(runCtx, watchCtx context.Context, lg *zap.Logger, m api.Member, since time.Time) {
	key := membership.Key(d.cfg.Namespace, m.ID)
	lease := clientv3.LeaseID(m.LeaseID)
	bo := retry.New(retry.Etcd)
	for {
		err := d.revokeOnce(runCtx, key, lease)
		switch {
		case err == nil:
			took := d.cfg.Clock.Since(since)
			d.cfg.Metrics.revoked(took.Seconds())
			lg.Warn("revoked a dead peer's lease: its registration and owner keys are gone", zap.Duration("since_first_refusal", took))
			return
		case errors.Is(err, errLeaseChanged):
			d.cfg.Metrics.refusedRevocation("lease_changed")
			lg.Info("not revoking: the peer's registration no longer carries that lease (it left, expired, or registered again)")
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			d.cfg.Metrics.refusedRevocation("lease_gone")
			lg.Info("not revoking: the lease is already gone (expired, or revoked by another member)")
			return
		}
		if runCtx.Err() != nil || watchCtx.Err() != nil {
			return
		}
		lg.Warn("revoking a dead peer's lease failed; retrying", zap.Error(err))
		if !retry.Sleep(watchCtx, d.cfg.Clock, bo.Next()) {
			return
		}
	}
}

// errLeaseChanged: the registration does not carry the lease any more.
var errLeaseChanged = errors.New("registration's lease changed")

// revokeOnce checks, in a transaction, that key is bound to lease, and
// revokes lease if so. A new registration of the same ID has another
// lease, so the check and the revocation, both of one lease, never touch
// it even if it appears between them.
func (d *Detector) revokeOnce(ctx context.Context, key string, lease clientv3.LeaseID) error {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.client.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errLeaseChanged
	}
	_, err = d.client.Revoke(rctx, lease)
	return err
}

// heldProbeFactor stretches the probe interval while a connection to the
// member is held open: its end brings the next probe forward anyway.
const heldProbeFactor = 10

// heldConn is a connection kept open to a member between probes, with
// the goroutine that reads it until it ends.
type heldConn struct {
	conn net.Conn
	made time.Time
	done chan struct{} // closed when a read fails: the peer closed or reset it, or close was called
}

// hold starts reading c; done closes when the peer ends the connection.
// Nothing is ever sent on it.
func hold(c net.Conn, now time.Time) *heldConn {
	h := &heldConn{conn: c, made: now, done: make(chan struct{})}
	go func() { // owned by h: ends when the connection does, at the latest at close
		defer close(h.done)
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	return h
}

// close closes the connection and waits for its reader; nil-safe and
// idempotent.
func (h *heldConn) close() {
	if h == nil {
		return
	}
	h.conn.Close()
	<-h.done
}
