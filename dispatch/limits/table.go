package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/store"
)

// Table is the fleet's limit keys as this member sees them: the limits,
// each key's grant state and the slots held, from one watch of the
// limits prefix (internal/mirror: list, then watch, listing again after
// compaction or a lost connection), plus the grants this member made
// that the watch has not delivered yet. Safe for concurrent use.
type Table struct {
	m    *mirror.Mirror
	keys store.Keys
	lg   *zap.Logger

	mu      sync.Mutex // guards the fields below
	rev     int64      // the snapshot revision the index was built from
	defs    map[string]api.Limit
	states  map[string]stateOf            // by limit key
	held    map[string]map[string]Holder  // by limit key, then holder key
	byPart  map[int]map[string]Holder     // by partition, then holder key
	overlay []granted                     // own grants newer than the snapshot
	queue   map[string]map[int]QueueEntry // waiting entries, by limit key, then partition
	subs    []func()
}

// stateOf is a key's grant state and the mod revision it was read at (0:
// no state stored).
type stateOf struct {
	mod int64
	st  api.LimitState
}

// Holder is a slot held, as stored.
type Holder struct {
	// Key is the holder's etcd key; Limit the limit key it holds.
	Key, Limit string
	api.LimitHolder
}

// granted is a grant this member made, applied at rev.
type granted struct {
	rev     int64
	states  map[string]api.LimitState
	holders []Holder
}

// New returns a table of namespace ns's limits. It starts nothing: Run
// keeps it current. A nil logger logs nothing.
func New(client *clientv3.Client, ns string, lg *zap.Logger) (*Table, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	keys := store.Keys{NS: ns}
	m, err := mirror.New(client, mirror.Config{Prefix: keys.LimitsPrefix(), Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	return &Table{m: m, keys: keys, lg: lg}, nil
}

// Run keeps the table current until ctx is cancelled, calling the
// functions given to Subscribe after each change; it returns once its
// goroutines have.
func (t *Table) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { _ = t.m.Run(ctx) })
	wg.Go(func() {
		snap := t.m.Snapshot()
		for {
			select {
			case <-ctx.Done():
				return
			case <-snap.Changed():
			}
			snap = t.m.Snapshot()
			t.mu.Lock()
			subs := slices.Clone(t.subs)
			t.mu.Unlock()
			for _, f := range subs {
				f()
			}
		}
	})
	wg.Wait()
}

// Subscribe has f called after every change the watch delivers (from
// Run's goroutine; f must not block).
func (t *Table) Subscribe(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subs = append(t.subs, f)
}

// WaitRevision blocks until the table reflects etcd revision rev, or
// returns ctx's error.
func (t *Table) WaitRevision(ctx context.Context, rev int64) error {
	_, err := t.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return s.Revision >= rev })
	return err
}

// syncLocked rebuilds the index if the snapshot moved on, and drops the
// own grants it now includes. It reports false until the first list.
func (t *Table) syncLocked() bool {
	snap := t.m.Snapshot()
	if snap.Revision == 0 {
		return false
	}
	if snap.Revision == t.rev {
		return true
	}
	t.rev = snap.Revision
	t.defs, t.states = map[string]api.Limit{}, map[string]stateOf{}
	t.held, t.byPart = map[string]map[string]Holder{}, map[int]map[string]Holder{}
	t.queue = map[string]map[int]QueueEntry{}
	for rest, kv := range snap.KVs {
		kind, name, _ := strings.Cut(rest, "/")
		switch kind {
		case "def":
			key, err := api.UnescapeID(name)
			if err != nil {
				continue
			}
			l, err := store.DecodeLimit(kv.Value, kv.ModRevision)
			if err != nil {
				t.lg.Warn("ignoring a corrupt limit", zap.String("key", key), zap.Error(err))
				continue
			}
			t.defs[key] = l
		case "state":
			key, err := api.UnescapeID(name)
			if err != nil {
				continue
			}
			var st api.LimitState
			if err := json.Unmarshal(kv.Value, &st); err != nil {
				t.lg.Warn("ignoring a corrupt limit state", zap.String("key", key), zap.Error(err))
			}
			t.states[key] = stateOf{mod: kv.ModRevision, st: st}
		case "held":
			key, ok := store.ParseLimitHeld(name)
			if !ok {
				continue
			}
			h := Holder{Key: t.keys.LimitsPrefix() + rest, Limit: key}
			if err := json.Unmarshal(kv.Value, &h.LimitHolder); err != nil {
				t.lg.Warn("a corrupt slot holder counts as held", zap.String("holder", h.Key), zap.Error(err))
				h.Partition = -1
			}
			t.addLocked(h)
		case "queue":
			t.addQueuedLocked(name, kv.Value, kv.ModRevision)
		}
	}
	t.overlay = slices.DeleteFunc(t.overlay, func(g granted) bool { return g.rev <= snap.Revision })
	for _, g := range t.overlay {
		t.applyLocked(g)
	}
	return true
}

func (t *Table) addLocked(h Holder) {
	if t.held[h.Limit] == nil {
		t.held[h.Limit] = map[string]Holder{}
	}
	t.held[h.Limit][h.Key] = h
	if t.byPart[h.Partition] == nil {
		t.byPart[h.Partition] = map[string]Holder{}
	}
	t.byPart[h.Partition][h.Key] = h
}

func (t *Table) applyLocked(g granted) {
	for key, st := range g.states {
		t.states[key] = stateOf{mod: g.rev, st: st}
	}
	for _, h := range g.holders {
		t.addLocked(h)
	}
}

// Bounded returns the keys among keys that have a stored limit, and false
// until the table has been read (every key then counts as bounded: no
// attempt naming one starts).
func (t *Table) Bounded(keys []string) ([]string, bool) {
	if len(keys) == 0 {
		return nil, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return keys, false
	}
	var out []string
	for _, k := range keys {
		if _, ok := t.defs[k]; ok {
			out = append(out, k)
		}
	}
	return out, true
}

// Room returns how many more attempts naming keys may start now, up to
// want, and when that is fewer than want, the key that bounds it (the
// first with the least room). Keys without a limit bound nothing.
func (t *Table) Room(keys []string, want int, now time.Time) (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		if len(keys) > 0 {
			return 0, keys[0]
		}
		return want, ""
	}
	room, by := want, ""
	for _, k := range keys {
		if r := t.roomLocked(k, now); r < room {
			room, by = max(r, 0), k
		}
	}
	return room, by
}

// roomLocked is key k's room: its free slots, less the starts its rate
// window holds. Large without a limit.
func (t *Table) roomLocked(k string, now time.Time) int {
	l, ok := t.defs[k]
	if !ok {
		return api.MaxLimitRunning + 1
	}
	room := api.MaxLimitRunning + 1
	if l.MaxRunning != nil {
		room = *l.MaxRunning - len(t.held[k])
	}
	if r := l.Rate; r != nil {
		room = min(room, r.Count-inWindow(t.states[k].st.Starts, now, r.Per.Std()))
	}
	return room
}

// inWindow counts the starts after now-per.
func inWindow(starts []time.Time, now time.Time, per time.Duration) int {
	from := now.Add(-per)
	n := 0
	for _, s := range starts {
		if s.After(from) {
			n++
		}
	}
	return n
}

// Grant is a prepared grant of slots: the compares the fenced
// transaction that starts the attempts must make, and the writes it
// must make with them (the keys' new states, the holders).
type Grant struct {
	Cmps []clientv3.Cmp
	Ops  []clientv3.Op
	g    granted
}

// Prepare returns the grant of a slot of every bounded key among keys to
// each of holders, at now, or false with the key that has no room for
// them all. The grant's compares hold while no other grant under any of
// the keys applied since the state this member read: the count of
// holders it read is then an upper bound of the count at commit (only a
// grant, which rewrites the state, adds a holder), so a grant that
// applies never exceeds a key's max_running nor its rate.
func (t *Table) Prepare(keys []string, holders []api.LimitHolder, now time.Time) (Grant, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return Grant{}, keys[0], false
	}
	g := Grant{g: granted{states: map[string]api.LimitState{}}}
	for _, k := range keys {
		l, ok := t.defs[k]
		if !ok {
			continue
		}
		if t.roomLocked(k, now) < len(holders) {
			return Grant{}, k, false
		}
		cur := t.states[k]
		next := api.LimitState{Grants: cur.st.Grants + int64(len(holders))}
		if r := l.Rate; r != nil {
			next.Starts = slices.Clone(cur.st.Starts)
			for range holders {
				next.Starts = append(next.Starts, now)
			}
			if len(next.Starts) > r.Count {
				next.Starts = next.Starts[len(next.Starts)-r.Count:]
			}
		}
		val, err := json.Marshal(next)
		if err != nil {
			return Grant{}, k, false
		}
		sk := t.keys.LimitState(k)
		g.Cmps = append(g.Cmps, clientv3.Compare(clientv3.ModRevision(sk), "=", cur.mod))
		g.Ops = append(g.Ops, clientv3.OpPut(sk, string(val)))
		g.g.states[k] = next
		for _, lh := range holders {
			hv, err := json.Marshal(lh)
			if err != nil {
				return Grant{}, k, false
			}
			hk := t.keys.LimitHeld(k, lh.RunID, lh.Item, lh.Attempt)
			g.Ops = append(g.Ops, clientv3.OpPut(hk, string(hv)))
			g.g.holders = append(g.g.holders, Holder{Key: hk, Limit: k, LimitHolder: lh})
		}
	}
	return g, "", true
}

// Granted records that grant g applied at revision rev, so that this
// member's next grants count it before the watch delivers it.
func (t *Table) Granted(g Grant, rev int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() || rev <= t.rev {
		return
	}
	g.g.rev = rev
	t.overlay = append(t.overlay, g.g)
	t.applyLocked(g.g)
}

// Holders returns the slots held by attempts of partition p.
func (t *Table) Holders(p int) []Holder {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return nil
	}
	out := make([]Holder, 0, len(t.byPart[p]))
	for _, h := range t.byPart[p] {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// HeldBy returns the holder keys of attempt attempt of run runID's chain
// item.
func (t *Table) HeldBy(p int, runID string, item, attempt int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return nil
	}
	var out []string
	for _, h := range t.byPart[p] {
		if h.RunID == runID && h.Item == item && h.Attempt == attempt {
			out = append(out, h.Key)
		}
	}
	slices.Sort(out)
	return out
}

// Status returns key's use (Waiting left 0 for the caller) and its
// limit, false if it has none.
func (t *Table) Status(key string, now time.Time) (api.Limit, api.LimitStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return api.Limit{}, api.LimitStatus{}, false
	}
	l, ok := t.defs[key]
	if !ok {
		return api.Limit{}, api.LimitStatus{}, false
	}
	st := api.LimitStatus{Running: len(t.held[key])}
	if r := l.Rate; r != nil {
		st.Started = inWindow(t.states[key].st.Starts, now, r.Per.Std())
	}
	return l, st, true
}

// Limits returns every stored limit, by key.
func (t *Table) Limits() []api.Limit {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return nil
	}
	out := make([]api.Limit, 0, len(t.defs))
	for _, l := range t.defs {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b api.Limit) int { return strings.Compare(a.Key, b.Key) })
	return out
}
