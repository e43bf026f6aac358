package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// DefaultPresenceGrace is Config.PresenceGrace's default: a live worker
// whose stream was cut opens a new one at once (its request fails the
// moment its connection does), well within it.
const DefaultPresenceGrace = 500 * time.Millisecond

// ErrNotRegistered: a presence stream of a worker this member knows no
// live registration of by the stream's credential. The worker registers
// first. HTTP 409.
var ErrNotRegistered = errors.New("no live registration of this worker ID by this credential; register first")

// PresenceStream is one worker's presence stream (api.PathPresence) as
// the HTTP layer reads it: the request body, a line per tick.
type PresenceStream interface {
	// Accept answers the stream as accepted (HTTP 200 at once; the reply
	// stays open until the stream ends), so that the worker notices at
	// once when the connection fails. Presence calls it once, after the
	// hello and the registration checked out.
	Accept() error
	// Next waits up to timeout for the next line. It returns io.EOF when
	// the body ended properly (the worker closed the stream on purpose),
	// an error wrapping os.ErrDeadlineExceeded when nothing came within
	// timeout, io.ErrUnexpectedEOF or an error wrapping
	// syscall.ECONNRESET when the other side closed or reset the
	// connection without the body's end (as the kernel does when the
	// worker's process dies, or something between them cuts it), and
	// other errors (the connection closed on this side) as they come.
	Next(timeout time.Duration) ([]byte, error)
}

// presence is the presence stream this member holds of one worker.
type presence struct {
	superseded chan struct{} // closed when a newer stream of the worker opens here, or it registers here while awaited
	awaited    bool          // the stream broke: its worker has the grace to come back
	ended      bool          // superseded is closed
}

// supersedeLocked closes p.superseded once. The caller holds pmu.
func (p *presence) supersedeLocked() {
	if !p.ended {
		p.ended = true
		close(p.superseded)
	}
}

// registeredAgain tells worker's broken stream, if the grace of one runs
// here, that the worker registered (refreshed or anew) through this
// member: a process that does is alive (a worker restarted with the same
// ID, or one whose stream alone was cut), so its registration is not
// revoked. A stream that is not broken is left alone.
func (r *Registry) registeredAgain(worker string) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if p := r.streams[worker]; p != nil && p.awaited {
		p.supersedeLocked()
	}
}

// Presence serves a worker's presence stream s, opened with credential,
// and returns when it ends (after s.Accept): nil when the worker ended it
// on purpose, or after acting on its loss; at once (before s.Accept), an
// error wrapping
// dispatch.ErrBadRequest for a stream that does not begin with a valid
// hello, ErrIDTaken for a worker ID bound to another credential,
// ErrNotRegistered when this member knows no live registration of the
// worker by credential, or store.ErrUnavailable.
//
// The stream's first line is an api.PresenceHello naming the worker; a
// line ("{}") follows every api.PresenceTick. Every line is decoded
// strictly (api.Unmarshal): a later line that is not a tick ends the
// stream, as ctx ending does (the stream's credential revoked), neither
// being evidence. A stream that ends without its end
// (the connection closed or reset: the kernel closes a dead process's
// sockets) is the evidence: if the worker opens no new stream and sends
// no registration here within
// Config.PresenceGrace (a live worker whose connection was cut does so at
// once), its registration's lease is revoked, provided the registration
// is still the one the stream began under (create revision and lease).
// Every member then sees the registration end, and the owners retry its
// attempts at once. A stream that falls silent (no line for three ticks:
// a paused worker, a cut network) or ends because this member stops is
// no evidence; the registration lives until its TTL as before.
func (r *Registry) Presence(ctx context.Context, credential string, s PresenceStream) error {
	line, err := s.Next(2 * api.PresenceTick)
	if err != nil {
		return fmt.Errorf("%w: presence stream: no first line within %v: %v", dispatch.ErrBadRequest, 2*api.PresenceTick, err)
	}
	var hello api.PresenceHello
	if err := api.Unmarshal(line, &hello); err != nil {
		return fmt.Errorf("%w: presence stream: the first line must be {\"worker\": ID}: %v", dispatch.ErrBadRequest, err)
	}
	worker := hello.Worker
	if err := dispatch.ValidateWorkerID(worker); err != nil {
		return err
	}
	if err := r.CheckID(worker, credential); err != nil {
		return err
	}
	reg, err := r.liveRegistration(ctx, worker, credential)
	if err != nil {
		return err
	}
	p := r.openPresence(worker)
	defer r.closePresence(worker, p)
	if err := s.Accept(); err != nil {
		return nil // the connection is gone already
	}
	lg := r.lg.With(zap.String("worker", worker), zap.String("credential", credential))
	for {
		line, err := s.Next(3 * api.PresenceTick)
		switch {
		case err == nil:
			if err := api.Unmarshal(line, &presenceTick{}); err != nil {
				// Not the protocol: the stream ends, and is no evidence.
				lg.Info("presence stream ended: a line is not a tick ({})", zap.Error(err))
				return nil
			}
			select {
			case <-p.superseded:
				return nil // the worker opened another stream here: this one is over
			case <-ctx.Done():
				return nil // its credential was revoked, or the server stops: no evidence
			default:
			}
			continue
		case errors.Is(err, io.EOF):
			return nil
		case !closedByPeer(err) || r.stopping() || r.cfg.PresenceGrace < 0:
			// Silent (a read deadline), closed on this side (the server
			// stopping), or this member stopping: no evidence.
			return nil
		}
		r.cfg.Metrics.presenceLost()
		lg.Info("worker's presence stream ended without its end; waiting for it to open another", zap.Error(err), zap.Duration("grace", r.cfg.PresenceGrace))
		r.pmu.Lock()
		p.awaited = true
		r.pmu.Unlock()
		return r.awaitReturn(ctx, lg, worker, reg, p)
	}
}

// presenceTick is a presence stream's line after the hello: "{}",
// decoded as strictly as every request body (api.Unmarshal).
type presenceTick struct{}

// closedByPeer reports whether a stream's read error is its connection
// closed (mid-body: io.ErrUnexpectedEOF) or reset by the other side.
func closedByPeer(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// liveRegistration reads worker's registration and checks that it is
// live and credential's.
func (r *Registry) liveRegistration(ctx context.Context, worker, credential string) (*mvccpb.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Get(ctx, r.keys.Worker(worker))
	if err != nil {
		return nil, fmt.Errorf("read worker registration: %w", store.Classify(err))
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotRegistered
	}
	kv := resp.Kvs[0]
	var doc api.Worker
	if json.Unmarshal(kv.Value, &doc) != nil || kv.Lease == 0 {
		return nil, ErrNotRegistered
	}
	if doc.Credential != credential {
		// This member's copy of the bindings (CheckID) may not show the
		// registration yet; etcd does, and answers the same as the copy
		// would have.
		return nil, fmt.Errorf("%w: %s is registered with another credential; give this worker another ID",
			ErrIDTaken, strconv.Quote(worker))
	}
	return kv, nil
}

// awaitReturn waits PresenceGrace for a new stream of worker at this
// member (p superseded), then revokes the registration reg if it is
// unchanged.
func (r *Registry) awaitReturn(ctx context.Context, lg *zap.Logger, worker string, reg *mvccpb.KeyValue, p *presence) error {
	t := r.cfg.Clock.NewTimer(r.cfg.PresenceGrace)
	defer t.Stop()
	select {
	case <-p.superseded:
		r.cfg.Metrics.presenceReturned()
		lg.Info("worker opened a new presence stream or registered again here; it lives")
		return nil
	case <-t.Chan():
	case <-r.stop:
		return nil
	}
	key := r.keys.Worker(worker)
	lease := clientv3.LeaseID(reg.Lease)
	// The request outlives the stream's request context (ended with its
	// connection): a fresh one, bounded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Txn(rctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", reg.CreateRevision),
		clientv3.Compare(clientv3.LeaseValue(key), "=", lease),
	).Commit()
	if err != nil {
		lg.Warn("revoking a dead worker's registration failed; it expires after its TTL", zap.Error(err))
		return nil
	}
	if !resp.Succeeded {
		r.cfg.Metrics.presenceRefused("changed")
		lg.Info("not revoking: the worker's registration is not the one its stream began under (it ended, or the worker registered again)")
		return nil
	}
	if _, err := r.client.Revoke(rctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.cfg.Metrics.presenceRefused("changed")
			return nil
		}
		lg.Warn("revoking a dead worker's registration failed; it expires after its TTL", zap.Error(err))
		return nil
	}
	r.cfg.Metrics.presenceRevoked()
	lg.Warn("revoked a dead worker's registration: its presence stream broke and it did not come back; its attempts are retried now",
		zap.Duration("grace", r.cfg.PresenceGrace), zap.String("lease", fmt.Sprintf("%x", reg.Lease)))
	return nil
}

// openPresence records a new stream of worker, superseding the previous
// one.
func (r *Registry) openPresence(worker string) *presence {
	p := &presence{superseded: make(chan struct{})}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if old := r.streams[worker]; old != nil {
		old.supersedeLocked()
	}
	r.streams[worker] = p
	r.cfg.Metrics.setPresence(len(r.streams))
	return p
}

// closePresence forgets p unless a newer stream replaced it.
func (r *Registry) closePresence(worker string, p *presence) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.streams[worker] == p {
		delete(r.streams, worker)
	}
	r.cfg.Metrics.setPresence(len(r.streams))
}

// stopping reports whether Run has returned or is returning.
func (r *Registry) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// presenceState is the registry's part for presence streams.
type presenceState struct {
	pmu     sync.Mutex           // guards streams
	streams map[string]*presence // the open stream of each worker
	stop    chan struct{}        // closed when Run returns
	stopped sync.Once
}
