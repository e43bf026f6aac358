package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/mirror"
)

// Member is one registered orchestrator: api.Member.
//
// Deprecated: use api.Member; kept for one release.
type Member = api.Member

// View is the set of live members at one etcd revision: api.View.
//
// Deprecated: use api.View; kept for one release.
type View = api.View

// Prefix returns the key prefix of member registrations in namespace ns.
func Prefix(ns string) string { return ns + "members/" }

// Key returns the registration key of member id in namespace ns.
func Key(ns, id string) string { return Prefix(ns) + id }

// ValidateID reports whether id can be a member ID: 1 to 128 bytes of
// letters, digits, '.', '-', '_' and ':'.
func ValidateID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: member ID must be 1 to 128 bytes, got %d", ErrInvalidConfig, len(id))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:", r)) {
			return fmt.Errorf("%w: member ID %q may only hold letters, digits, '.', '-', '_' and ':'", ErrInvalidConfig, id)
		}
	}
	return nil
}

// Register records m under its key, bound to the session's lease, and
// returns the stored member. lg should carry the member's ID. If the key is
// held by another lease (an earlier
// incarnation of the same member that crashed, or a second process started
// with the same ID), Register logs why and waits until that registration is
// gone: two live registrations of one ID would give two processes the same
// place on the ring. It returns when registered, or with the context's or
// the session's error.
func Register(ctx context.Context, client *clientv3.Client, s *Session, ns string, m Member, lg *zap.Logger) (Member, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.Ctx(), cancel)()
	key := Key(ns, m.ID)
	m.LeaseID = int64(s.Lease())
	logged := false
	for {
		if m.StartedAt.IsZero() {
			m.StartedAt = s.cfg.Clock.Now().UTC()
		}
		val, err := json.Marshal(m)
		if err != nil {
			return Member{}, fmt.Errorf("membership: encode member: %w", err)
		}
		resp, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(s.Lease()))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			if ctx.Err() != nil && s.Err() != nil {
				return Member{}, s.Err()
			}
			return Member{}, fmt.Errorf("membership: register %s: %w", m.ID, err)
		}
		if resp.Succeeded {
			return m, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // deleted in between
		}
		if !logged {
			lg.Warn("another registration holds this member ID; waiting for it to be released or to expire",
				zap.String("holder_lease", fmt.Sprintf("%x", kvs[0].Lease)))
			logged = true
		}
		if err := waitDeleted(ctx, client, key, resp.Header.Revision); err != nil {
			if s.Err() != nil {
				return Member{}, s.Err()
			}
			return Member{}, err
		}
		m.StartedAt = time.Time{}
	}
}

// Deregister deletes member id's registration if it is still bound to
// lease, so the rest of the fleet rebalances without waiting for the lease
// to expire.
func Deregister(ctx context.Context, client *clientv3.Client, ns, id string, lease clientv3.LeaseID) error {
	key := Key(ns, id)
	_, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("membership: deregister %s: %w", id, err)
	}
	return nil
}

// waitDeleted blocks until key is deleted after revision rev.
func waitDeleted(ctx context.Context, client *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range client.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if err := resp.Err(); err != nil {
			return nil // compacted or cancelled: let the caller re-check
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}

// Watcher keeps the current View by mirroring the members prefix. Create it
// with NewWatcher and run it with Run. Safe for concurrent use.
type Watcher struct {
	m *mirror.Mirror
}

// NewWatcher returns a watcher of namespace ns. It starts nothing.
func NewWatcher(client *clientv3.Client, ns string, lg *zap.Logger) (*Watcher, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	m, err := mirror.New(client, mirror.Config{Prefix: Prefix(ns), Logger: lg.Named("members")})
	if err != nil {
		return nil, err
	}
	return &Watcher{m: m}, nil
}

// Run keeps the view current until ctx is cancelled; it returns nil then.
func (w *Watcher) Run(ctx context.Context) error { return w.m.Run(ctx) }

// View returns the current view and a channel closed when it is superseded.
// Before the first list the view has Revision 0 and no members. Entries
// whose value cannot be decoded are left out.
func (w *Watcher) View() (View, <-chan struct{}) {
	s := w.m.Snapshot()
	return viewOf(s), s.Changed()
}

// Member returns member id as the current view has it, looking up and
// decoding that one registration only; false if it is not registered.
func (w *Watcher) Member(id string) (Member, bool) {
	kv, ok := w.m.Snapshot().KVs[id]
	if !ok {
		return Member{}, false
	}
	var m Member
	if err := json.Unmarshal(kv.Value, &m); err != nil || m.ID != kv.Key {
		return Member{}, false
	}
	m.LeaseID = kv.Lease
	return m, true
}

// WaitFor blocks until cond holds for the current view and returns it.
func (w *Watcher) WaitFor(ctx context.Context, cond func(View) bool) (View, error) {
	s, err := w.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return cond(viewOf(s)) })
	return viewOf(s), err
}

func viewOf(s mirror.Snapshot) View {
	v := View{Revision: s.Revision, Members: make([]Member, 0, len(s.KVs))}
	for _, kv := range s.KVs {
		var m Member
		if err := json.Unmarshal(kv.Value, &m); err != nil || m.ID != kv.Key {
			continue
		}
		m.LeaseID = kv.Lease
		v.Members = append(v.Members, m)
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return v
}
