package dispatch

import (
	"container/heap"
	"time"
)

// timerHeap is a min-heap of keys (job or run IDs) by instant, ties
// broken by key, with one entry per key: set, remove and min take O(log
// n) or O(1) in the number of entries, and visiting the entries due at
// an instant costs O(k) in the k entries due plus their direct children.
// Not safe for concurrent use: the partition's state lock guards it.
type timerHeap = keyedHeap[stringPositions]

func newTimerHeap() *timerHeap { return &timerHeap{pos: stringPositions{}} }

// jobHeap is a timerHeap of job IDs whose positions are kept in the
// jobs' entries (jobEntry.firePos) instead of a map by ID: the index of
// the jobs by next fire time holds every resident job. Every ID in it is
// in its partition's jobs (see setJobLocked).
type jobHeap = keyedHeap[jobPositions]

// keyedHeap is the heap of timerHeap and jobHeap: items by instant,
// then by key, and P where each key's position in items is.
type keyedHeap[P positions] struct {
	items []keyedItem
	pos   P
}

// keyedItem is a key of a keyedHeap and its instant.
type keyedItem struct {
	at  time.Time
	key string
}

// positions records where each key of a keyedHeap is in its items.
type positions interface {
	get(key string) (int, bool)
	put(key string, i int)
	drop(key string)
}

// stringPositions are the positions of a timerHeap's keys, by key.
type stringPositions map[string]int

func (p stringPositions) get(k string) (int, bool) { i, ok := p[k]; return i, ok }
func (p stringPositions) put(k string, i int)      { p[k] = i }
func (p stringPositions) drop(k string)            { delete(p, k) }

// jobPositions keeps a jobHeap's positions in the entries of its
// partition's jobs.
type jobPositions struct{ pt *partition }

func (p jobPositions) get(id string) (int, bool) {
	e := p.pt.jobs[id]
	if e == nil || e.firePos == 0 {
		return 0, false
	}
	return int(e.firePos) - 1, true
}
func (p jobPositions) put(id string, i int) { p.pt.jobs[id].firePos = int32(i) + 1 }
func (p jobPositions) drop(id string)       { p.pt.jobs[id].firePos = 0 }

// set places key at instant at, adding it if absent.
func (h *keyedHeap[P]) set(key string, at time.Time) {
	if i, ok := h.pos.get(key); ok {
		if h.items[i].at.Equal(at) {
			return
		}
		h.items[i].at = at
		heap.Fix((*heapOrder[P])(h), i)
		return
	}
	heap.Push((*heapOrder[P])(h), keyedItem{at: at, key: key})
}

// remove drops key if present.
func (h *keyedHeap[P]) remove(key string) {
	if i, ok := h.pos.get(key); ok {
		heap.Remove((*heapOrder[P])(h), i)
	}
}

// len returns the number of entries.
func (h *keyedHeap[P]) len() int { return len(h.items) }

// min returns the earliest instant, false if the heap is empty.
func (h *keyedHeap[P]) min() (time.Time, bool) {
	if len(h.items) == 0 {
		return time.Time{}, false
	}
	return h.items[0].at, true
}

// due calls fn for every entry at or before now, in no particular order,
// and returns the earliest instant after now (zero if none): the heap
// order lets it skip every subtree whose root is later than now. fn must
// not change the heap.
func (h *keyedHeap[P]) due(now time.Time, fn func(key string, at time.Time)) (after time.Time) {
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.items) {
			continue
		}
		it := h.items[i]
		if it.at.After(now) {
			if after.IsZero() || it.at.Before(after) {
				after = it.at
			}
			continue
		}
		fn(it.key, it.at)
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return after
}

// heapOrder is keyedHeap's heap.Interface.
type heapOrder[P positions] keyedHeap[P]

func (o *heapOrder[P]) Len() int { return len(o.items) }

func (o *heapOrder[P]) Less(i, j int) bool {
	if c := o.items[i].at.Compare(o.items[j].at); c != 0 {
		return c < 0
	}
	return o.items[i].key < o.items[j].key
}

func (o *heapOrder[P]) Swap(i, j int) {
	o.items[i], o.items[j] = o.items[j], o.items[i]
	o.pos.put(o.items[i].key, i)
	o.pos.put(o.items[j].key, j)
}

func (o *heapOrder[P]) Push(x any) {
	it := x.(keyedItem)
	o.pos.put(it.key, len(o.items))
	o.items = append(o.items, it)
}

func (o *heapOrder[P]) Pop() any {
	it := o.items[len(o.items)-1]
	o.items = o.items[:len(o.items)-1]
	o.pos.drop(it.key)
	return it
}
