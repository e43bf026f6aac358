package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/placement"
	"github.com/jobfleet/jobfleet/store"
)

// Register creates or refreshes req.Worker's registration, bound to
// req.Credential.
//
// A refresh of a live registration renews its lease first, whatever
// follows. Then it writes only what changed: the worker's executors,
// concurrency or orchestrators at once; its Active count and the member
// it registers with as a sample, at most every Config.UpdateInterval
// (Active) and within the credential's write rate, and skipped while the
// store is above its high-water mark. An identical refresh writes
// nothing.
//
// Its labels must satisfy req.WorkerLabels, the credential's worker label
// selector: a registration, or a refresh, whose labels do not is refused
// before anything is read or written (dispatch.ErrForbidden), so a refused refresh
// renews nothing and the registration expires.
//
// Errors: dispatch.ErrBadRequest (naming the field), dispatch.ErrForbidden, ErrIDTaken,
// ErrTooManyWorkers, a *RateError, and etcd's errors classified by
// store.Classify (store.ErrHighWater and store.ErrNoSpace when the write
// a registration needs is refused, store.ErrUnavailable).
func (r *Registry) Register(ctx context.Context, req api.RegisterRequest) (api.RegisterResponse, error) {
	if err := validateRegister(req); err != nil {
		r.cfg.Metrics.refuse("invalid")
		return api.RegisterResponse{}, err
	}
	if err := r.limits.request(req.Credential); err != nil {
		r.cfg.Metrics.refuse("rate")
		return api.RegisterResponse{}, err
	}
	if err := checkLabels(req); err != nil {
		r.cfg.Metrics.refuse("labels")
		r.lg.Warn("worker registration refused: labels outside its credential's", zap.String("worker", req.Worker), zap.String("credential", req.Credential),
			zap.String("labels", placement.FormatLabels(req.Labels)), zap.String("worker_labels", req.WorkerLabels))
		return api.RegisterResponse{}, err
	}
	paid := false // a write was paid for: a try after a lost compare-and-swap pays nothing more
	for range 3 {
		st, err := r.read(ctx, req.Worker)
		if err != nil {
			return api.RegisterResponse{}, err
		}
		if err := r.checkHolder(ctx, req.Worker, req.Credential, st); err != nil {
			return api.RegisterResponse{}, err
		}
		if st.reg == nil || !st.reg.valid {
			err = r.create(ctx, req, st, &paid)
		} else {
			err = r.refresh(ctx, req, st, &paid)
		}
		switch {
		case err == nil:
			r.registeredAgain(req.Worker)
			return api.RegisterResponse{TTL: api.Duration(r.cfg.TTL), Orchestrator: r.cfg.Member}, nil
		case !errors.Is(err, errChanged):
			return api.RegisterResponse{}, err
		}
	}
	return api.RegisterResponse{}, fmt.Errorf("%w: registration of worker %s changed under three tries; retry", store.ErrUnavailable, strconv.Quote(req.Worker))
}

// create writes a new registration under a new lease, with the ID's
// binding to the credential if it has none yet (one revision for both).
func (r *Registry) create(ctx context.Context, req api.RegisterRequest, st state, paid *bool) error {
	if err := r.checkQuota(req.Worker, req.Credential, st); err != nil {
		return err
	}
	if err := r.admit(); err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	doc := r.document(req, now, now)
	val, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if err := r.pay(req.Credential, len(val), paid); err != nil {
		return err
	}
	key := r.keys.Worker(req.Worker)
	lease, err := r.grant(ctx, r.cfg.TTL)
	if err != nil {
		return err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	if st.reg != nil { // undecodable: replaced
		cmps[0] = clientv3.Compare(clientv3.ModRevision(key), "=", st.reg.mod)
	}
	ops := []clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithLease(lease))}
	var claimLease clientv3.LeaseID
	if st.claim != nil && st.claim.valid {
		// The ID's binding lives on (the worker lapsed within the grace,
		// or stopped and came back): renew it, unchanged.
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(claimKey(r.keys, req.Worker)), "=", st.claim.mod))
		if err := r.keepAlive(ctx, st.claim.lease); err != nil {
			r.revoke(lease)
			return err
		}
		r.noteRenewed(st.claim.lease)
	} else {
		cmp, put, l, err := r.claimOps(ctx, req.Worker, req.Credential, st, now)
		if err != nil {
			r.revoke(lease)
			return err
		}
		cmps, ops, claimLease = append(cmps, cmp), append(ops, put), l
	}
	if err := r.commit(ctx, lease, cmps, ops...); err != nil {
		r.revoke(claimLease)
		return err
	}
	r.cfg.Metrics.wrote("create")
	r.lg.Info("worker registered", zap.String("worker", req.Worker), zap.String("credential", req.Credential),
		zap.Strings("executors", req.Executors), zap.Int("concurrency", req.Concurrency), zap.String("labels", placement.FormatLabels(req.Labels)))
	return nil
}

// refresh renews a live registration's lease and its binding's, then
// writes what changed (see Register).
func (r *Registry) refresh(ctx context.Context, req api.RegisterRequest, st state, paid *bool) error {
	if err := r.keepAlive(ctx, st.reg.lease); err != nil {
		return err
	}
	r.keepClaim(ctx, req.Worker, req.Credential, st)
	cur := st.reg.doc
	now := r.cfg.Clock.Now()
	next := r.document(req, cur.RegisteredAt, now)
	switch {
	case changed(cur, next):
		if err := r.admit(); err != nil {
			return err
		}
		return r.rewrite(ctx, req, st.reg, next, paid, "change")
	case sampleDue(cur, next, now, r.cfg.UpdateInterval):
		if r.admit() != nil || !r.limits.tryWrite(req.Credential, cost(next)) {
			r.cfg.Metrics.skip()
			return nil
		}
		err := r.rewrite(ctx, req, st.reg, next, nil, "update")
		if errors.Is(err, errChanged) {
			return nil // written meanwhile (by another refresh): this sample is moot
		}
		return err
	}
	return nil
}

// rewrite replaces the registration with next, keeping its lease, if it is
// unchanged since read; paid is nil for a write paid for already.
func (r *Registry) rewrite(ctx context.Context, req api.RegisterRequest, reg *stored[api.Worker], next api.Worker, paid *bool, kind string) error {
	val, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if paid != nil {
		if err := r.pay(req.Credential, len(val), paid); err != nil {
			return err
		}
	}
	key := r.keys.Worker(req.Worker)
	if err := r.commit(ctx, 0, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", reg.mod)}, clientv3.OpPut(key, string(val), clientv3.WithLease(reg.lease))); err != nil {
		return err
	}
	r.cfg.Metrics.wrote(kind)
	if kind == "change" {
		r.lg.Info("worker registration changed", zap.String("worker", req.Worker), zap.Strings("executors", next.Executors),
			zap.Int("concurrency", next.Concurrency), zap.Strings("orchestrators", next.Orchestrators), zap.String("labels", placement.FormatLabels(next.Labels)))
	}
	return nil
}

// changed reports whether next differs from cur in what the worker says
// it is: its executors, concurrency, orchestrators, labels or scope.
func changed(cur, next api.Worker) bool {
	return !slices.Equal(cur.Executors, next.Executors) || cur.Concurrency != next.Concurrency ||
		!slices.Equal(cur.Orchestrators, next.Orchestrators) || cur.Prefix != next.Prefix || !maps.Equal(cur.Labels, next.Labels)
}

// sampleDue reports whether next's sample (Active, the member it
// registers with) is to be stored over cur's: the member changed, or
// Active did and the last write is interval old (never for a negative
// interval).
func sampleDue(cur, next api.Worker, now time.Time, interval time.Duration) bool {
	if cur.Orchestrator != next.Orchestrator {
		return true
	}
	return cur.Active != next.Active && interval > 0 && now.Sub(cur.LastContact) >= interval
}

// pay takes the write rate's tokens for a write of n bytes, once per
// request.
func (r *Registry) pay(credential string, n int, paid *bool) error {
	if *paid {
		return nil
	}
	if err := r.limits.write(credential, costOf(n)); err != nil {
		r.cfg.Metrics.refuse("rate")
		return err
	}
	*paid = true
	return nil
}

// cost is what writing w costs of the write rate.
func cost(w api.Worker) int {
	b, _ := json.Marshal(w)
	return costOf(len(b))
}

// costOf is what a write of n bytes costs of the write rate: one token
// per KiB begun, so that the largest registrations (about 7 KiB) count
// as what they store.
func costOf(n int) int { return max(1, (n+1023)/1024) }

// admit asks the space guard whether a write may grow the store now.
func (r *Registry) admit() error {
	if r.cfg.Space == nil {
		return nil
	}
	if err := r.cfg.Space.Admit(); err != nil {
		r.cfg.Metrics.refuse("store")
		return err
	}
	return nil
}

// keepAlive renews lease; a lease that is gone (the registration or
// binding expired just now) is errChanged, for the caller to read again.
func (r *Registry) keepAlive(ctx context.Context, lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.KeepAliveOnce(ctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return errChanged
		}
		return fmt.Errorf("renew worker registration: %w", store.Classify(err))
	}
	return nil
}

// checkQuota refuses a new registration of a credential that has
// MaxPerCredential live registrations, or holds four times as many IDs,
// as this member's copies show them.
func (r *Registry) checkQuota(worker, credential string, st state) error {
	if r.cfg.MaxPerCredential < 0 {
		return nil
	}
	live := r.regView.Load().perCred[credential]
	held := r.claimView.Load().perCred[credential]
	if st.claim != nil && st.claim.valid {
		held = 0 // the ID is held already: no new one
	}
	switch {
	case live >= r.cfg.MaxPerCredential:
		r.cfg.Metrics.refuse("too_many")
		return fmt.Errorf("%w: credential %s has %d live workers, at most %d; give workers stable IDs (--id) or wait for stopped ones to expire",
			ErrTooManyWorkers, strconv.Quote(credential), live, r.cfg.MaxPerCredential)
	case held >= r.cfg.maxClaims():
		r.cfg.Metrics.refuse("too_many")
		return fmt.Errorf("%w: credential %s holds %d worker IDs (live, or ended within the last %v), at most %d; give workers stable IDs (--id)",
			ErrTooManyWorkers, strconv.Quote(credential), held, r.cfg.IDGrace, r.cfg.maxClaims())
	}
	return nil
}

// document returns the registration to store for req.
func (r *Registry) document(req api.RegisterRequest, registered, now time.Time) api.Worker {
	return api.Worker{
		ID:            req.Worker,
		Credential:    req.Credential,
		Prefix:        req.Prefix,
		Executors:     slices.Clone(req.Executors),
		Concurrency:   req.Concurrency,
		Active:        req.Active,
		RegisteredAt:  registered.UTC(),
		LastContact:   now.UTC(),
		Orchestrator:  r.cfg.Member,
		Orchestrators: slices.Clone(req.Orchestrators),
		Labels:        labelsOf(req.Labels),
	}
}

// labelsOf returns a copy of l, nil when it is empty (the registration
// then omits it).
func labelsOf(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	return maps.Clone(l)
}

// Deregister removes req.Worker's registration (a worker stopping
// gracefully). The ID stays bound to its credential for Config.IDGrace,
// as after any end of a registration, so that no other credential takes
// it while the worker restarts. It returns ErrIDTaken if the ID is bound
// to another credential; removing an absent registration succeeds.
func (r *Registry) Deregister(ctx context.Context, req api.DeregisterRequest) error {
	if err := dispatch.ValidateWorkerID(req.Worker); err != nil {
		r.cfg.Metrics.refuse("invalid")
		return err
	}
	if err := r.limits.request(req.Credential); err != nil {
		r.cfg.Metrics.refuse("rate")
		return err
	}
	st, err := r.read(ctx, req.Worker)
	if err != nil {
		return err
	}
	if err := r.checkHolder(ctx, req.Worker, req.Credential, st); err != nil {
		return err
	}
	if st.reg == nil {
		return nil
	}
	// The lease is the registration's own: revoking it removes the key
	// (and nothing else).
	dctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.Revoke(dctx, st.reg.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("remove worker registration: %w", store.Classify(err))
	}
	r.lg.Info("worker deregistered", zap.String("worker", req.Worker), zap.String("credential", req.Credential))
	return nil
}
