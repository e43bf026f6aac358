package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/store"
)

// Registry is the fleet's worker registry, as one member sees and keeps
// it. Create it with New and run it with Run; its methods are safe for
// concurrent use.
type Registry struct {
	client *clientv3.Client
	cfg    Config
	keys   store.Keys
	lg     *zap.Logger
	limits *budgets
	regs   *mirror.Mirror // the registrations
	claims *mirror.Mirror // the IDs' bindings to credentials
	now    func() time.Time

	regView   atomic.Pointer[regView]
	claimView atomic.Pointer[claimView]

	presenceState

	mu      sync.Mutex                     // guards subs and renewed
	subs    []func(gone []string)          // told of registrations that ended
	renewed map[clientv3.LeaseID]time.Time // claim leases this member renewed, and when (now)
}

// regView is the registrations as of one etcd revision.
type regView struct {
	rev     int64 // 0 before the first list
	workers map[string]entry
	perCred map[string]int // live registrations by credential
	changed chan struct{}  // closed when the next view replaces this one
}

// entry is one live registration.
type entry struct {
	doc       api.Worker
	createRev int64 // identifies the registration: a worker that expires and registers again gets a new one
}

// claimView is the IDs' bindings as of one etcd revision.
type claimView struct {
	rev     int64
	byID    map[string]string // credential by worker ID
	perCred map[string]int    // IDs held by credential
}

// New returns a registry. It validates cfg (errors wrap ErrInvalidConfig)
// and starts nothing.
func New(client *clientv3.Client, cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	keys := store.Keys{NS: cfg.Namespace}
	regs, err := mirror.New(client, mirror.Config{Prefix: keys.WorkersPrefix(), Clock: cfg.Clock, Logger: cfg.Logger.Named("workers-mirror")})
	if err != nil {
		return nil, err
	}
	claims, err := mirror.New(client, mirror.Config{Prefix: claimsPrefix(keys), Clock: cfg.Clock, Logger: cfg.Logger.Named("worker-ids-mirror")})
	if err != nil {
		return nil, err
	}
	r := &Registry{
		client:  client,
		cfg:     cfg,
		keys:    keys,
		lg:      cfg.Logger.Named("workers").With(zap.String("member", cfg.Member)),
		limits:  newBudgets(cfg),
		regs:    regs,
		claims:  claims,
		now:     time.Now,
		renewed: map[clientv3.LeaseID]time.Time{},
	}
	r.streams, r.stop = map[string]*presence{}, make(chan struct{})
	r.regView.Store(&regView{workers: map[string]entry{}, perCred: map[string]int{}, changed: make(chan struct{})})
	r.claimView.Store(&claimView{byID: map[string]string{}, perCred: map[string]int{}})
	return r, nil
}

// TTL returns the registrations' lifetime without a refresh.
func (r *Registry) TTL() time.Duration { return r.cfg.TTL }

// Run follows the registrations and the IDs' bindings until ctx is
// cancelled, telling the subscribers of registrations that ended. It
// returns when its goroutines have exited.
func (r *Registry) Run(ctx context.Context) {
	defer r.stopped.Do(func() { close(r.stop) })
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.regs.Run(ctx) })
	wg.Go(func() { _ = r.claims.Run(ctx) })
	defer wg.Wait()
	for {
		rs, cs := r.regs.Snapshot(), r.claims.Snapshot()
		if rs.Revision > 0 && rs.Revision != r.regView.Load().rev {
			r.applyRegs(rs)
		}
		if cs.Revision > 0 && cs.Revision != r.claimView.Load().rev {
			r.applyClaims(cs)
		}
		select {
		case <-ctx.Done():
			return
		case <-rs.Changed():
		case <-cs.Changed():
		}
	}
}

// applyRegs decodes snapshot s into the view and tells the subscribers
// which registrations ended since the previous one.
func (r *Registry) applyRegs(s mirror.Snapshot) {
	old := r.regView.Load()
	next := &regView{rev: s.Revision, workers: make(map[string]entry, len(s.KVs)), perCred: map[string]int{}, changed: make(chan struct{})}
	for _, kv := range s.KVs {
		var w api.Worker
		if err := json.Unmarshal(kv.Value, &w); err != nil || w.ID == "" {
			r.lg.Warn("undecodable worker registration ignored", zap.String("key", kv.Key), zap.Error(err))
			continue
		}
		next.workers[w.ID] = entry{doc: w, createRev: kv.CreateRevision}
		next.perCred[w.Credential]++
	}
	r.regView.Store(next)
	close(old.changed)
	r.cfg.Metrics.setLive(len(next.workers))
	var gone []string
	for id, was := range old.workers {
		if now, ok := next.workers[id]; !ok || now.createRev != was.createRev {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return
	}
	slices.Sort(gone)
	r.lg.Info("worker registrations ended", zap.Strings("workers", gone))
	r.mu.Lock()
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	for _, f := range subs {
		f(gone)
	}
}

// applyClaims decodes snapshot s into the bindings' view.
func (r *Registry) applyClaims(s mirror.Snapshot) {
	next := &claimView{rev: s.Revision, byID: make(map[string]string, len(s.KVs)), perCred: map[string]int{}}
	for _, kv := range s.KVs {
		var c claim
		if err := json.Unmarshal(kv.Value, &c); err != nil || c.Worker == "" {
			r.lg.Warn("undecodable worker ID binding ignored", zap.String("key", kv.Key), zap.Error(err))
			continue
		}
		next.byID[c.Worker] = c.Credential
		next.perCred[c.Credential]++
	}
	r.claimView.Store(next)
}

// Changed returns a channel closed when the registrations next change, as
// this member's copy shows them (a registration created, changed or
// ended, or the first list).
func (r *Registry) Changed() <-chan struct{} { return r.regView.Load().changed }

// Subscribe has gone called, from Run's goroutine, with the IDs of
// workers whose registration ended (expired, removed, or replaced by a
// new one).
func (r *Registry) Subscribe(gone func(workers []string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = append(r.subs, gone)
}

// Registration returns worker's live registration as this member's copy
// shows it: its credential and create revision (0: none), and whether the
// copy has been listed from etcd.
func (r *Registry) Registration(worker string) (credential string, rev int64, synced bool) {
	v := r.regView.Load()
	e, ok := v.workers[worker]
	if !ok {
		return "", 0, v.rev > 0
	}
	return e.doc.Credential, e.createRev, v.rev > 0
}

// CheckID returns an error wrapping ErrIDTaken if worker is bound to a
// credential other than credential, as this member's copy shows it: its
// registration lives, or ended less than the grace ago.
func (r *Registry) CheckID(worker, credential string) error {
	holder, ok := r.claimView.Load().byID[worker]
	if !ok {
		e, live := r.regView.Load().workers[worker]
		holder, ok = e.doc.Credential, live
	}
	if ok && holder != credential {
		return fmt.Errorf("%w: %s is bound to another credential while its registration lives and for %v after it ends; give this worker another ID",
			ErrIDTaken, strconv.Quote(worker), r.cfg.IDGrace)
	}
	return nil
}

// Workers returns the live registrations, by ID, as this member's copy
// shows them. It returns ErrNotLoaded before the registry has listed
// etcd.
func (r *Registry) Workers() ([]api.Worker, error) {
	v := r.regView.Load()
	if v.rev == 0 {
		return nil, ErrNotLoaded
	}
	out := make([]api.Worker, 0, len(v.workers))
	for _, id := range slices.Sorted(maps.Keys(v.workers)) {
		out = append(out, v.workers[id].doc)
	}
	return out, nil
}

// Live returns the live registrations with their create revisions, by
// ID, as this member's copy shows them, and whether the copy has been
// listed from etcd (none before).
func (r *Registry) Live() ([]dispatch.LiveWorker, bool) {
	v := r.regView.Load()
	if v.rev == 0 {
		return nil, false
	}
	out := make([]dispatch.LiveWorker, 0, len(v.workers))
	for _, id := range slices.Sorted(maps.Keys(v.workers)) {
		e := v.workers[id]
		out = append(out, dispatch.LiveWorker{Worker: e.doc, Registration: e.createRev})
	}
	return out, true
}
