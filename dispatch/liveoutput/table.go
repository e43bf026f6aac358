package liveoutput

import (
	"sync"
)

// Key names one attempt: its run, its item (NoItem for a run of one
// item) and its number.
type Key struct {
	Run     string
	Item    int
	Attempt int
}

// NoItem is Key.Item for an attempt of a run's own chain.
const NoItem = -1

// Table holds the rings of the attempts whose output is followed. The
// zero value is not usable; see New. Safe for concurrent use.
type Table struct {
	cfg Config

	mu sync.Mutex // guards the fields below
	// entries are the attempts held.
	entries map[Key]*entry
	// seq numbers the entries' starts and ends, for eviction order.
	seq uint64
}

// entry is one attempt's ring and followers.
type entry struct {
	mu    sync.Mutex // guards the fields below
	r     ring
	ended bool
	// changed is closed, and replaced, when bytes are added or the
	// attempt ends: one close wakes every follower, whatever their number.
	changed chan struct{}

	// started and endedAt are Table.seq values (under Table.mu).
	started, endedAt uint64
}

// New returns an empty table bounded by cfg (with its defaults); it
// starts nothing. cfg must be valid (Config.Validate).
func New(cfg Config) *Table {
	return &Table{cfg: cfg.WithDefaults(), entries: map[Key]*entry{}}
}

// Write places data at offset off of attempt k's output, creating the
// attempt's ring if it has none, and wakes its followers. Bytes before
// what the ring has are ignored (sent again); bytes beyond it after a gap
// leave the gap counted as skipped. It reports whether the attempt is
// held (false if it has ended: nothing is written after its end). Never
// blocks on readers.
func (t *Table) Write(k Key, off int64, data []byte) bool {
	e := t.entry(k, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return false
	}
	if e.r.writeAt(off, data) {
		e.wakeLocked()
	}
	return true
}

// End marks attempt k ended: its followers read what is left and then
// see it ended. Its ring is kept (for Snapshot) until evicted. Ending an
// attempt not held does nothing.
func (t *Table) End(k Key) {
	e := t.entry(k, false)
	if e == nil {
		return
	}
	t.mu.Lock()
	t.seq++
	e.endedAt = t.seq
	t.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endLocked()
}

// Forget drops attempt k: its followers see it ended.
func (t *Table) Forget(k Key) {
	t.mu.Lock()
	e := t.entries[k]
	delete(t.entries, k)
	t.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		e.endLocked()
		e.mu.Unlock()
	}
}

// Snapshot returns what is held of attempt k: the bytes, the offset of
// their first byte in the attempt's output (the bytes before it were
// dropped or never arrived), and whether it has ended; ok is false if the
// attempt is not held.
func (t *Table) Snapshot(k Key) (data []byte, start int64, ended, ok bool) {
	e := t.entry(k, false)
	if e == nil {
		return nil, 0, false, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	data, start = e.r.readFrom(0)
	return data, start, e.ended, true
}

// Latest returns the highest attempt number held for run's item, 0 if
// none.
func (t *Table) Latest(run string, item int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k := range t.entries {
		if k.Run == run && k.Item == item && k.Attempt > n {
			n = k.Attempt
		}
	}
	return n
}

// Len returns how many attempts are held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Follow starts following attempt k from its output's first byte held,
// creating its ring if it has none (call it only for an attempt that
// runs). Close the follower when done.
func (t *Table) Follow(k Key) *Follower {
	e := t.entry(k, true)
	f := &Follower{e: e, wake: closed}
	return f
}

// closed is a closed channel: a new follower's first read has what is
// held.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// entry returns k's entry, making it if create is set (and evicting to
// stay within Config.Attempts), else nil if it has none.
func (t *Table) entry(k Key, create bool) *entry {
	t.mu.Lock()
	e := t.entries[k]
	if e != nil || !create {
		t.mu.Unlock()
		return e
	}
	var evicted *entry
	if t.cfg.Attempts > 0 && len(t.entries) >= t.cfg.Attempts {
		evicted = t.evictLocked()
	}
	t.seq++
	e = &entry{r: ring{max: int(t.cfg.AttemptBytes)}, changed: make(chan struct{}), started: t.seq}
	t.entries[k] = e
	t.mu.Unlock()
	if evicted != nil {
		evicted.mu.Lock()
		evicted.endLocked()
		evicted.mu.Unlock()
	}
	return e
}

// evictLocked drops the entry that ended first or, if none has ended,
// the one that started first, and returns it.
func (t *Table) evictLocked() *entry {
	var (
		victim Key
		best   *entry
	)
	for k, e := range t.entries {
		switch {
		case best == nil:
		case e.endedAt != 0 && (best.endedAt == 0 || e.endedAt < best.endedAt):
		case e.endedAt == 0 && best.endedAt == 0 && e.started < best.started:
		default:
			continue
		}
		victim, best = k, e
	}
	delete(t.entries, victim)
	return best
}

func (e *entry) endLocked() {
	if e.ended {
		return
	}
	e.ended = true
	e.wakeLocked()
}

// wakeLocked tells every follower there is something to read: one close,
// without waiting for any (a follower that has not read since the last
// wake-up sees this at its next read too).
func (e *entry) wakeLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Follower reads one attempt's output as it grows. Its methods are for
// one goroutine; it holds nothing the writer waits for.
type Follower struct {
	e    *entry
	wake chan struct{} // closed when there is more than the last Read saw
	next int64         // offset of the next byte to read
}

// Wake returns a channel that is closed when there may be something to
// read (bytes, or the attempt's end) beyond what the last Read returned.
// Call it again after each Read.
func (f *Follower) Wake() <-chan struct{} { return f.wake }

// Read returns the bytes written since the last Read, how many bytes
// before them the follower missed (dropped from the ring before it read
// them, or never arrived), and whether the attempt has ended (then there
// is nothing more after these bytes). It does not block.
func (f *Follower) Read() (data []byte, skipped int64, ended bool) {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	data, start := f.e.r.readFrom(f.next)
	skipped = start - f.next
	f.next = start + int64(len(data))
	f.wake = f.e.changed
	if f.e.ended {
		f.wake = closed
	}
	return data, skipped, f.e.ended
}

// Close stops following. (A follower holds no resource the table must
// release; Close is there so that callers need not know.)
func (f *Follower) Close() {}
