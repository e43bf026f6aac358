package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// A worker ID's binding to its credential (a claim) is stored at
// claimKey, apart from the registration: the registration lives one TTL
// after the worker's last refresh, the claim Config.IDGrace longer, under
// a lease of its own (claimTTL) that the members renew while the
// registration lives (every claimRenewal). Another credential may take
// the ID only once the claim's lease has expired.

// claim is the document of a worker ID's binding.
type claim struct {
	Worker     string `json:"worker"`
	Credential string `json:"credential"`
	// Since is when the binding was made (the first registration of the
	// ID by this credential, or the first after a lapse).
	Since time.Time `json:"since"`
}

// claimsPrefix is the prefix of every binding; claimKey is worker id's.
func claimsPrefix(k store.Keys) string { return k.NS + "workerids/" }

func claimKey(k store.Keys, id string) string { return claimsPrefix(k) + api.EscapeID(id) }

// stored is a key as read: its decoded document (valid false if it did
// not decode), mod revision and lease.
type stored[T any] struct {
	doc   T
	valid bool
	mod   int64
	lease clientv3.LeaseID
}

// state is worker ID's registration and binding as read from etcd; nil
// where absent.
type state struct {
	reg   *stored[api.Worker]
	claim *stored[claim]
}

// heldBy reports whether the ID is bound to a credential other than
// credential: by its binding, or by its registration (one made before
// bindings existed, or by a member of an older version).
func (s state) heldBy(credential string) bool {
	return s.claim != nil && s.claim.valid && s.claim.doc.Credential != credential ||
		s.reg != nil && s.reg.valid && s.reg.doc.Credential != credential
}

// read reads worker id's registration and binding in one request.
func (r *Registry) read(ctx context.Context, id string) (state, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Txn(ctx).Then(clientv3.OpGet(r.keys.Worker(id)), clientv3.OpGet(claimKey(r.keys, id))).Commit()
	if err != nil {
		r.cfg.Metrics.refuse("store")
		return state{}, fmt.Errorf("read worker registration: %w", store.Classify(err))
	}
	var st state
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		st.reg = decode[api.Worker](kvs[0].Value, kvs[0].ModRevision, kvs[0].Lease)
		if !st.reg.valid {
			r.lg.Warn("undecodable worker registration; replacing it", zap.String("worker", id))
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		st.claim = decode[claim](kvs[0].Value, kvs[0].ModRevision, kvs[0].Lease)
	}
	return st, nil
}

func decode[T any](val []byte, mod, lease int64) *stored[T] {
	s := &stored[T]{mod: mod, lease: clientv3.LeaseID(lease)}
	s.valid = json.Unmarshal(val, &s.doc) == nil
	return s
}

// checkHolder returns an error wrapping ErrIDTaken if st binds the ID to
// a credential other than credential; the error says until when.
func (r *Registry) checkHolder(ctx context.Context, id, credential string, st state) error {
	if !st.heldBy(credential) {
		return nil
	}
	r.cfg.Metrics.refuse("id_taken")
	q := strconv.Quote(id)
	if st.reg != nil || st.claim == nil || !st.claim.valid {
		return fmt.Errorf("%w: %s is registered with another credential, and stays bound to it while that registration lives and for %v after it ends; give this worker another ID",
			ErrIDTaken, q, r.cfg.IDGrace)
	}
	until := "for up to " + r.cfg.claimTTL().String()
	tctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if ttl, err := r.client.TimeToLive(tctx, st.claim.lease); err == nil && ttl.TTL >= 0 {
		until = "until " + r.cfg.Clock.Now().Add(time.Duration(ttl.TTL)*time.Second).UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: %s was registered with another credential, whose registration ended less than %v ago; it stays bound to that credential %s; give this worker another ID",
		ErrIDTaken, q, r.cfg.IDGrace, until)
}

// claimOps returns what binds id to credential in a transaction: the
// compare (no binding, or the undecodable one st read) and the put, under
// a new lease of claimTTL. The caller revokes the lease if the
// transaction does not apply.
func (r *Registry) claimOps(ctx context.Context, id, credential string, st state, now time.Time) (clientv3.Cmp, clientv3.Op, clientv3.LeaseID, error) {
	key := claimKey(r.keys, id)
	lease, err := r.grant(ctx, r.cfg.claimTTL())
	if err != nil {
		return clientv3.Cmp{}, clientv3.Op{}, 0, err
	}
	val, _ := json.Marshal(claim{Worker: id, Credential: credential, Since: now.UTC()})
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if st.claim != nil {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", st.claim.mod) // undecodable: replaced
	}
	r.noteRenewed(lease)
	return cmp, clientv3.OpPut(key, string(val), clientv3.WithLease(lease)), lease, nil
}

// keepClaim keeps the binding of a live registration: it renews the
// binding's lease if this member has not for claimRenewal, and binds a
// registration that has no binding (made by an older version). Failures
// are logged: the registration itself is renewed apart, and checked on
// its own while it lives.
func (r *Registry) keepClaim(ctx context.Context, id, credential string, st state) {
	if st.claim == nil || !st.claim.valid {
		if r.cfg.Space != nil && r.cfg.Space.Admit() != nil {
			return // bound once the store takes writes again; the registration is checked meanwhile
		}
		cmp, put, lease, err := r.claimOps(ctx, id, credential, st, r.cfg.Clock.Now())
		if err == nil {
			err = r.commit(ctx, lease, []clientv3.Cmp{cmp}, put)
		}
		if err != nil {
			r.lg.Debug("binding a worker ID to its credential failed; tried again at its next refresh", zap.String("worker", id), zap.Error(err))
			return
		}
		r.cfg.Metrics.wrote("bind")
		return
	}
	if !r.renewalDue(st.claim.lease) {
		return
	}
	kctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.KeepAliveOnce(kctx, st.claim.lease); err != nil {
		r.lg.Debug("renewing a worker ID's binding failed; tried again at its next refresh", zap.String("worker", id), zap.Error(err))
		return
	}
	r.noteRenewed(st.claim.lease)
}

// commit applies put under cmp, revoking lease (a fresh one of ours) if
// it does not apply.
func (r *Registry) commit(ctx context.Context, lease clientv3.LeaseID, cmps []clientv3.Cmp, ops ...clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil || !resp.Succeeded {
		r.revoke(lease)
	}
	switch {
	case err != nil:
		return r.writeFailed(err)
	case !resp.Succeeded:
		return errChanged
	}
	return nil
}

// errChanged: a compare-and-swap write found the keys changed; read again.
var errChanged = errors.New("worker registration changed concurrently")

// renewalDue reports whether this member should renew claim lease id now.
func (r *Registry) renewalDue(id clientv3.LeaseID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.renewed[id]
	return !ok || r.now().Sub(at) >= r.cfg.claimRenewal()
}

// noteRenewed records that claim lease id was granted or renewed now.
// Records older than claimRenewal are dropped when there are many: they
// are due anyway.
func (r *Registry) noteRenewed(id clientv3.LeaseID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if len(r.renewed) >= 4096 {
		for k, at := range r.renewed {
			if now.Sub(at) >= r.cfg.claimRenewal() {
				delete(r.renewed, k)
			}
		}
	}
	r.renewed[id] = now
}

// grant grants a lease of ttl, rounded up to whole seconds.
func (r *Registry) grant(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	g, err := r.client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return 0, r.writeFailed(fmt.Errorf("grant worker registration lease: %w", err))
	}
	return g.ID, nil
}

// revoke revokes a lease that holds no key of ours, with a fresh bounded
// context; failing, it expires by itself.
func (r *Registry) revoke(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.lg.Debug("revoking a worker registration lease failed; it expires by itself", zap.Error(err))
	}
}

// writeFailed classifies a failed write's error, tells the space guard
// and counts the refusal.
func (r *Registry) writeFailed(err error) error {
	err = store.Classify(err)
	if r.cfg.Space != nil {
		r.cfg.Space.NoteWriteError(err)
	}
	r.cfg.Metrics.refuse("store")
	return err
}
