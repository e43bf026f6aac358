package dispatch

import (
	"container/heap"
	"time"
)

// timerHeap is a min-heap of keys (job IDs) by instant, ties broken by
// key, with one entry per key: set, remove and min take O(log n) or O(1)
// in the number of entries, and visiting the entries due at an instant
// costs O(k) in the k entries due plus their direct children. Not safe
// for concurrent use: the partition's state lock guards it.
type timerHeap struct {
	items []timerItem
	index map[string]int // position of each key in items
}

type timerItem struct {
	at  time.Time
	key string
}

func newTimerHeap() *timerHeap { return &timerHeap{index: map[string]int{}} }

// set places key at instant at, adding it if absent.
func (h *timerHeap) set(key string, at time.Time) {
	if i, ok := h.index[key]; ok {
		if h.items[i].at.Equal(at) {
			return
		}
		h.items[i].at = at
		heap.Fix((*timerOrder)(h), i)
		return
	}
	heap.Push((*timerOrder)(h), timerItem{at: at, key: key})
}

// remove drops key if present.
func (h *timerHeap) remove(key string) {
	if i, ok := h.index[key]; ok {
		heap.Remove((*timerOrder)(h), i)
	}
}

// len returns the number of entries.
func (h *timerHeap) len() int { return len(h.items) }

// min returns the earliest instant, false if the heap is empty.
func (h *timerHeap) min() (time.Time, bool) {
	if len(h.items) == 0 {
		return time.Time{}, false
	}
	return h.items[0].at, true
}

// due calls fn for every entry at or before now, in no particular order,
// and returns the earliest instant after now (zero if none): the heap
// order lets it skip every subtree whose root is later than now. fn must
// not change the heap.
func (h *timerHeap) due(now time.Time, fn func(key string, at time.Time)) (after time.Time) {
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

// timerOrder is timerHeap's heap.Interface.
type timerOrder timerHeap

func (o *timerOrder) Len() int { return len(o.items) }

func (o *timerOrder) Less(i, j int) bool {
	if c := o.items[i].at.Compare(o.items[j].at); c != 0 {
		return c < 0
	}
	return o.items[i].key < o.items[j].key
}

func (o *timerOrder) Swap(i, j int) {
	o.items[i], o.items[j] = o.items[j], o.items[i]
	o.index[o.items[i].key] = i
	o.index[o.items[j].key] = j
}

func (o *timerOrder) Push(x any) {
	it := x.(timerItem)
	o.index[it.key] = len(o.items)
	o.items = append(o.items, it)
}

func (o *timerOrder) Pop() any {
	it := o.items[len(o.items)-1]
	o.items = o.items[:len(o.items)-1]
	delete(o.index, it.key)
	return it
}
