package limits

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// QueueEntry is the best run waiting for a limit key in one partition, as
// its owner published it (limits/queue/<key>/<partition>): its priority
// and since when it waits. Entries only order grants; they never admit
// one (docs/ownership.md, "Priority across the fleet").
type QueueEntry struct {
	// Member is the member that published the entry: it counts only
	// while that member owns the partition.
	Member string `json:"member"`
	// Priority is the run's priority (api.PriorityOf), without aging;
	// Since when it waits (readers age it with their clock).
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
	// Key and Partition are the entry's limit key and partition; ModRev
	// its mod revision (from the etcd key, not stored in the value).
	Key       string `json:"-"`
	Partition int    `json:"-"`
	ModRev    int64  `json:"-"`
}

// Same reports whether e and o publish the same waiting run.
func (e QueueEntry) Same(o QueueEntry) bool {
	return e.Member == o.Member && e.Priority == o.Priority && e.Since.Equal(o.Since)
}

// addQueuedLocked indexes the entry stored under queue/<name>.
func (t *Table) addQueuedLocked(name string, value []byte, mod int64) {
	esc, part, ok := strings.Cut(name, "/")
	if !ok {
		return
	}
	key, err := api.UnescapeID(esc)
	if err != nil {
		return
	}
	p, err := strconv.Atoi(part)
	if err != nil {
		return
	}
	var e QueueEntry
	if err := json.Unmarshal(value, &e); err != nil {
		return // an unreadable entry orders nothing
	}
	e.Key, e.Partition, e.ModRev = key, p, mod
	if t.queue[key] == nil {
		t.queue[key] = map[int]QueueEntry{}
	}
	t.queue[key][p] = e
}

// Queue returns the waiting entries of limit key, by partition (a copy);
// none until the table is read.
func (t *Table) Queue(key string) []QueueEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return nil
	}
	out := make([]QueueEntry, 0, len(t.queue[key]))
	for _, e := range t.queue[key] {
		out = append(out, e)
	}
	return out
}

// QueuedIn returns the waiting entries stored for partition p, by limit
// key, whoever published them; false until the table is read.
func (t *Table) QueuedIn(p int) (map[string]QueueEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncLocked() {
		return nil, false
	}
	out := map[string]QueueEntry{}
	for key, byPart := range t.queue {
		if e, ok := byPart[p]; ok {
			out[key] = e
		}
	}
	return out, true
}
