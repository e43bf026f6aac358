package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/store"
)

// DefaultWorkerTTL is api.DefaultWorkerTTL.
//
// Deprecated: use api.DefaultWorkerTTL; kept for one release.
const DefaultWorkerTTL = api.DefaultWorkerTTL

// Registration limits.
const (
	// DefaultMaxWorkersPerCredential is RegistryConfig.MaxPerCredential's
	// default.
	DefaultMaxWorkersPerCredential = 1024

	maxRegisterOrchestrators = 64
	maxOrchestratorURLBytes  = 512
	maxWorkerConcurrency     = 1024
)

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	// Namespace is the cluster's etcd key prefix.
	Namespace string
	// Member is this member's ID, recorded as the holder of the
	// registrations it keeps.
	Member string
	// TTL is a registration's lifetime without a refresh: whole seconds,
	// 2s to 5m. Default DefaultWorkerTTL.
	TTL time.Duration
	// RequestTimeout bounds each etcd request. Default 5s.
	RequestTimeout time.Duration
	// MaxPerCredential bounds the live registrations of one credential,
	// so that what the registry keeps in etcd is bounded by the
	// credentials an admin issues, not by what their holders do. Default
	// DefaultMaxWorkersPerCredential.
	MaxPerCredential int
	// Clock stamps registrations; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
}

func (c *RegistryConfig) setDefaults() {
	if c.TTL == 0 {
		c.TTL = DefaultWorkerTTL
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.MaxPerCredential == 0 {
		c.MaxPerCredential = DefaultMaxWorkersPerCredential
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports the first problem with c after defaults are applied;
// errors wrap ErrInvalidConfig.
func (c RegistryConfig) Validate() error {
	c.setDefaults()
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return fmt.Errorf("%w: registry namespace %q must end in '/'", ErrInvalidConfig, c.Namespace)
	case c.Member == "":
		return fmt.Errorf("%w: registry member ID is empty", ErrInvalidConfig)
	case c.TTL < 2*time.Second || c.TTL > 5*time.Minute || c.TTL%time.Second != 0:
		return fmt.Errorf("%w: worker TTL %v must be whole seconds from 2s to 5m", ErrInvalidConfig, c.TTL)
	case c.MaxPerCredential < 1:
		return fmt.Errorf("%w: registry max workers per credential %d must be at least 1", ErrInvalidConfig, c.MaxPerCredential)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("%w: registry request timeout %v must be positive", ErrInvalidConfig, c.RequestTimeout)
	}
	return nil
}

// Registry is the fleet's worker registry, as one member sees and keeps
// it. Every worker registers with one orchestrator at a time (POST
// /v1/worker/register); that member writes the registration at
// store.Keys.Worker under a lease of its own for that worker and keeps
// the lease alive only while the worker keeps registering, so the key
// disappears one TTL after the worker's last contact (crash, cut off) or
// at once on a graceful stop (deregister). A worker that moves to another
// orchestrator (its registrar stopped answering) has its key re-bound to
// that member's lease, keeping the registration (same create revision).
// Workers never need etcd access for this, whatever they discover
// orchestrators with.
//
// Every member follows the registrations with one prefix watch (a
// mirror), so lookups answer from memory.
//
// Guarantees: a worker ID is bound to the credential that registered it
// while its registration lives (another credential can neither register
// nor remove it, and the dispatcher refuses its polls). Not guaranteed:
// a registration outliving its worker by less than a TTL; a worker that
// never registers (an older version) is still served, and only its run
// leases detect its loss.
//
// Create it with NewRegistry and run it with Run; its methods are safe for
// concurrent use.
type Registry struct {
	client *clientv3.Client
	cfg    RegistryConfig
	keys   store.Keys
	lg     *zap.Logger
	mirror *mirror.Mirror

	view atomic.Pointer[registryView] // decoded from the mirror

	mu   sync.Mutex           // guards held and subs
	held map[string]heldLease // leases this member keeps, by worker ID
	subs []func(gone []string)
}

// heldLease is the lease of a registration this member keeps, and the
// revision at which it bound the registration to it.
type heldLease struct {
	id  clientv3.LeaseID
	rev int64
}

// registryView is the registrations as of one etcd revision.
type registryView struct {
	rev     int64 // 0 before the first list
	workers map[string]registration
}

// registration is one live registration.
type registration struct {
	doc       store.Worker
	createRev int64 // identifies the registration: a worker that expires and registers again gets a new one
	lease     int64
}

// NewRegistry returns a registry. It starts nothing.
func NewRegistry(client *clientv3.Client, cfg RegistryConfig) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	keys := store.Keys{NS: cfg.Namespace}
	m, err := mirror.New(client, mirror.Config{Prefix: keys.WorkersPrefix(), Clock: cfg.Clock, Logger: cfg.Logger.Named("workers-mirror")})
	if err != nil {
		return nil, err
	}
	r := &Registry{
		client: client,
		cfg:    cfg,
		keys:   keys,
		lg:     cfg.Logger.Named("workers").With(zap.String("member", cfg.Member)),
		mirror: m,
		held:   map[string]heldLease{},
	}
	r.view.Store(&registryView{workers: map[string]registration{}})
	return r, nil
}

// TTL returns the registrations' lifetime without a refresh.
func (r *Registry) TTL() time.Duration { return r.cfg.TTL }

// Run follows the registrations until ctx is cancelled, telling the
// subscribers of registrations that ended. It returns when its goroutines
// have exited.
func (r *Registry) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.mirror.Run(ctx) })
	defer wg.Wait()
	for {
		s := r.mirror.Snapshot()
		if s.Revision > 0 {
			r.apply(s)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.Changed():
		}
	}
}

// apply decodes snapshot s into the view and tells the subscribers which
// registrations ended since the previous one.
func (r *Registry) apply(s mirror.Snapshot) {
	old := r.view.Load()
	next := &registryView{rev: s.Revision, workers: make(map[string]registration, len(s.KVs))}
	for _, kv := range s.KVs {
		var w store.Worker
		if err := json.Unmarshal(kv.Value, &w); err != nil || w.ID == "" {
			r.lg.Warn("undecodable worker registration ignored", zap.String("key", kv.Key), zap.Error(err))
			continue
		}
		next.workers[w.ID] = registration{doc: w, createRev: kv.CreateRevision, lease: kv.Lease}
	}
	r.view.Store(next)
	var gone []string
	for id, was := range old.workers {
		if now, ok := next.workers[id]; !ok || now.createRev != was.createRev {
			gone = append(gone, id)
		}
	}
	r.mu.Lock()
	for id, h := range r.held {
		if h.rev > s.Revision {
			continue // bound after this snapshot
		}
		if w, ok := next.workers[id]; !ok || w.lease != int64(h.id) {
			delete(r.held, id) // expired, removed, or moved to another member: no longer ours to keep
		}
	}
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	slices.Sort(gone)
	r.lg.Info("worker registrations ended", zap.Strings("workers", gone))
	for _, f := range subs {
		f(gone)
	}
}

// subscribe has f called, from Run's goroutine, with the IDs of workers
// whose registration ended (expired, removed, or replaced by a new one).
func (r *Registry) subscribe(f func(gone []string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = append(r.subs, f)
}

// lookup returns worker id's live registration as this member knows it,
// and whether the registry has listed etcd yet (synced).
func (r *Registry) lookup(id string) (reg registration, ok, synced bool) {
	v := r.view.Load()
	reg, ok = v.workers[id]
	return reg, ok, v.rev > 0
}

// Workers returns the live registrations, by ID, and the etcd revision
// they reflect (0 before the registry has listed etcd).
func (r *Registry) Workers() ([]store.Worker, int64) {
	v := r.view.Load()
	out := make([]store.Worker, 0, len(v.workers))
	for _, id := range slices.Sorted(maps.Keys(v.workers)) {
		out = append(out, v.workers[id].doc)
	}
	return out, v.rev
}

// Register creates or refreshes req.Worker's registration, bound to
// req.Credential. It returns ErrWorkerIDTaken if the ID is registered to
// another credential, an error wrapping ErrBadRequest for a malformed
// request, or an etcd error.
func (r *Registry) Register(ctx context.Context, req RegisterRequest) (RegisterResponse, error) {
	if err := validateRegister(req); err != nil {
		return RegisterResponse{}, err
	}
	if err := r.checkQuota(req.Worker, req.Credential); err != nil {
		return RegisterResponse{}, err
	}
	key := r.keys.Worker(req.Worker)
	resp := RegisterResponse{TTL: store.Duration(r.cfg.TTL), Orchestrator: r.cfg.Member}
	for range 3 {
		cur, kv, err := r.get(ctx, key)
		if err != nil {
			return RegisterResponse{}, err
		}
		if kv != nil && cur.Credential != req.Credential {
			return RegisterResponse{}, fmt.Errorf("%w: worker %q", ErrWorkerIDTaken, req.Worker)
		}
		now := r.cfg.Clock.Now()
		mine := r.heldLease(req.Worker)
		if kv != nil && mine != 0 && kv.Lease == int64(mine) {
			done, err := r.refresh(ctx, key, req, cur, kv.ModRevision, mine, now)
			if err != nil {
				return RegisterResponse{}, err
			}
			if done {
				return resp, nil
			}
			continue // lost our lease, or the key changed: look again
		}
		done, err := r.bind(ctx, key, req, cur, kv, now)
		if err != nil {
			return RegisterResponse{}, err
		}
		if done {
			return resp, nil
		}
	}
	return RegisterResponse{}, fmt.Errorf("registration of worker %q changed under three tries; retry", req.Worker)
}

// checkQuota refuses a new worker ID of a credential that has
// MaxPerCredential live registrations (as this member's mirror
// shows them).
func (r *Registry) checkQuota(worker, credential string) error {
	v := r.view.Load()
	if _, ok := v.workers[worker]; ok {
		return nil
	}
	n := 0
	for _, w := range v.workers {
		if w.doc.Credential == credential {
			n++
		}
	}
	if n >= r.cfg.MaxPerCredential {
		return fmt.Errorf("%w: credential %q has %d live workers, at most %d; give workers stable IDs (--id) or wait for stopped ones to expire", ErrTooManyWorkers, credential, n, r.cfg.MaxPerCredential)
	}
	return nil
}

// refresh keeps our lease on key alive and rewrites the document if it
// changed, or if its LastContact is half a TTL old. done is false if the
// lease or the key changed meanwhile.
func (r *Registry) refresh(ctx context.Context, key string, req RegisterRequest, cur store.Worker, modRev int64, lease clientv3.LeaseID, now time.Time) (done bool, err error) {
	kctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.KeepAliveOnce(kctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.dropHeld(req.Worker, lease)
			return false, nil
		}
		return false, fmt.Errorf("refresh worker registration: %w", err)
	}
	next := r.document(req, cur, now)
	if !changed(cur, next) && now.Sub(cur.LastContact) < r.cfg.TTL/2 {
		return true, nil
	}
	done, _, err = r.put(ctx, key, next, clientv3.Compare(clientv3.ModRevision(key), "=", modRev), lease)
	if err != nil {
		// The registration lives (its lease was renewed); only its
		// document is stale. etcd refusing writes (its space quota) must
		// not make the worker look for another orchestrator, where a new
		// lease would be refused too.
		r.lg.Debug("updating a worker registration failed; kept as it was", zap.String("worker", req.Worker), zap.Error(err))
		return true, nil
	}
	return done, nil
}

// bind writes the registration under a new lease of ours: a new
// registration (kv nil), or one held by another member or by a lease of
// ours that is gone. done is false if the key changed meanwhile.
func (r *Registry) bind(ctx context.Context, key string, req RegisterRequest, cur store.Worker, kv *registeredKV, now time.Time) (done bool, err error) {
	gctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	g, err := r.client.Grant(gctx, int64(r.cfg.TTL/time.Second))
	if err != nil {
		return false, fmt.Errorf("grant worker registration lease: %w", err)
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	next := r.document(req, store.Worker{}, now)
	if kv != nil {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		next = r.document(req, cur, now) // the same registration, held here from now on
	}
	done, rev, err := r.put(ctx, key, next, cmp, g.ID)
	if err != nil || !done {
		r.revoke(g.ID)
		return done, err
	}
	r.mu.Lock()
	old := r.held[req.Worker]
	r.held[req.Worker] = heldLease{id: g.ID, rev: rev}
	r.mu.Unlock()
	if old.id != 0 {
		r.revoke(old.id) // holds no key any more
	}
	if kv == nil {
		r.lg.Info("worker registered", zap.String("worker", req.Worker), zap.String("credential", req.Credential),
			zap.Strings("executors", req.Executors), zap.Int("concurrency", req.Concurrency))
	} else {
		r.lg.Info("worker registration taken over", zap.String("worker", req.Worker), zap.String("from", cur.Orchestrator))
	}
	return true, nil
}

// put writes doc at key under lease if cmp holds, and returns whether it
// did and the revision of the write.
func (r *Registry) put(ctx context.Context, key string, doc store.Worker, cmp clientv3.Cmp, lease clientv3.LeaseID) (bool, int64, error) {
	val, err := json.Marshal(doc)
	if err != nil {
		return false, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return false, 0, fmt.Errorf("write worker registration: %w", err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

// registeredKV is what Register needs of the stored key.
type registeredKV struct {
	ModRevision int64
	Lease       int64
}

// get reads key: its document and revision, or nil if absent. An
// undecodable document counts as present with no credential (it is then
// replaced by whoever registers, compare-and-swap).
func (r *Registry) get(ctx context.Context, key string) (store.Worker, *registeredKV, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.client.Get(ctx, key)
	if err != nil {
		return store.Worker{}, nil, fmt.Errorf("read worker registration: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return store.Worker{}, nil, nil
	}
	kv := resp.Kvs[0]
	var w store.Worker
	if err := json.Unmarshal(kv.Value, &w); err != nil {
		r.lg.Warn("undecodable worker registration; replacing it", zap.String("key", key), zap.Error(err))
		return store.Worker{}, &registeredKV{ModRevision: kv.ModRevision, Lease: kv.Lease}, nil
	}
	return w, &registeredKV{ModRevision: kv.ModRevision, Lease: kv.Lease}, nil
}

// document returns the registration to store for req, continuing cur if
// it is the same registration (cur.ID set).
func (r *Registry) document(req RegisterRequest, cur store.Worker, now time.Time) store.Worker {
	w := store.Worker{
		ID:            req.Worker,
		Credential:    req.Credential,
		Prefix:        req.Prefix,
		Executors:     slices.Clone(req.Executors),
		Concurrency:   req.Concurrency,
		Active:        req.Active,
		RegisteredAt:  now.UTC(),
		LastContact:   now.UTC(),
		Orchestrator:  r.cfg.Member,
		Orchestrators: slices.Clone(req.Orchestrators),
	}
	if cur.ID != "" {
		w.RegisteredAt = cur.RegisteredAt
	}
	return w
}

// changed reports whether next differs from cur in more than its
// LastContact.
func changed(cur, next store.Worker) bool {
	cur.LastContact = next.LastContact
	a, _ := json.Marshal(cur)
	b, _ := json.Marshal(next)
	return string(a) != string(b)
}

// Deregister removes req.Worker's registration (a worker stopping
// gracefully). It returns ErrWorkerIDTaken if the worker is registered
// to another credential; removing an absent registration succeeds.
func (r *Registry) Deregister(ctx context.Context, req DeregisterRequest) error {
	if err := validateWorkerID(req.Worker); err != nil {
		return err
	}
	key := r.keys.Worker(req.Worker)
	cur, kv, err := r.get(ctx, key)
	if err != nil || kv == nil {
		return err
	}
	if cur.Credential != req.Credential {
		return fmt.Errorf("%w: worker %q", ErrWorkerIDTaken, req.Worker)
	}
	dctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.Txn(dctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return fmt.Errorf("remove worker registration: %w", err)
	}
	if lease := r.heldLease(req.Worker); lease != 0 {
		r.dropHeld(req.Worker, lease)
		r.revoke(lease)
	}
	r.lg.Info("worker deregistered", zap.String("worker", req.Worker), zap.String("credential", req.Credential))
	return nil
}

func (r *Registry) heldLease(id string) clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[id].id
}

func (r *Registry) dropHeld(id string, lease clientv3.LeaseID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[id].id == lease {
		delete(r.held, id)
	}
}

// revoke revokes a lease that holds no key of ours any more, with a
// fresh bounded context; failing, it expires by itself.
func (r *Registry) revoke(lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.lg.Debug("revoking a worker registration lease failed; it expires by itself", zap.Error(err))
	}
}

func validateRegister(req RegisterRequest) error {
	if err := validateWorkerID(req.Worker); err != nil {
		return err
	}
	switch {
	case len(req.Executors) == 0 || len(req.Executors) > 1000:
		return fmt.Errorf("%w: executors: must list 1 to 1000 executor types", ErrBadRequest)
	case req.Concurrency < 1 || req.Concurrency > maxWorkerConcurrency:
		return fmt.Errorf("%w: concurrency: must be 1 to %d, got %d", ErrBadRequest, maxWorkerConcurrency, req.Concurrency)
	case req.Active < 0 || req.Active > req.Concurrency:
		return fmt.Errorf("%w: active: must be 0 to concurrency (%d), got %d", ErrBadRequest, req.Concurrency, req.Active)
	case len(req.Orchestrators) > maxRegisterOrchestrators:
		return fmt.Errorf("%w: orchestrators: at most %d", ErrBadRequest, maxRegisterOrchestrators)
	}
	for i, e := range req.Executors {
		if err := printable(e, 64); err != nil {
			return fmt.Errorf("%w: executors[%d]: %v", ErrBadRequest, i, err)
		}
	}
	for i, o := range req.Orchestrators {
		if err := printable(o, maxOrchestratorURLBytes); err != nil {
			return fmt.Errorf("%w: orchestrators[%d]: %v", ErrBadRequest, i, err)
		}
	}
	return nil
}

// printable checks a short display string: 1 to max bytes of UTF-8
// without control characters or spaces.
func printable(s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("must be 1 to %d bytes", max)
	}
	for i, r := range s {
		if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("invalid character %U at byte %d", r, i)
		}
	}
	return nil
}
