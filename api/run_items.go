package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Item is one item of a sharded or broadcast run: an attempt chain of its
// own, as a run of one item is, with its index among the run's items.
// Its status is one of a run's: pending (no attempt yet), running, failed
// (its latest attempt failed and a retry follows), succeeded, dead (its
// last allowed attempt failed or was lost, or its pinned worker's
// registration ended), skipped (never run: the run was decided without
// it, see Reason). Its attempts are numbered from 1, on their own.
type Item struct {
	// Index is the item's index, 0 to the run's item count - 1; it is
	// also its position in Run.Items.
	Index int `json:"index"`
	// Status is the item's state.
	Status RunStatus `json:"status"`
	// Worker is the worker a broadcast item is pinned to; empty for a
	// sharded run's items, which any worker may take.
	Worker string `json:"worker,omitempty"`
	// Registration is the create revision of Worker's registration when
	// the run fired: the item is dead once that registration ends.
	Registration int64 `json:"registration,omitempty"`
	// Attempts are the item's tries so far, oldest first.
	Attempts []Attempt `json:"attempts"`
	// Reason says why the item is dead without a failed attempt, or
	// skipped; empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Step is the ID of the step the item belongs to, in a run made of
	// steps (not stored per item: Run.Steps has the ranges).
	Step string `json:"step,omitempty"`
	// Result is the JSON its succeeded attempt returned, in a run made
	// of steps (at most MaxStepResultBytes); absent if none.
	Result json.RawMessage `json:"result,omitempty"`
}

// ItemCounts counts a run's items by status.
type ItemCounts struct {
	Pending, Running, Failed, Succeeded, Dead, Skipped int
}

// Count returns the run's items counted by status.
func (r *Run) Count() ItemCounts {
	var c ItemCounts
	for _, it := range r.Items {
		switch it.Status {
		case RunPending:
			c.Pending++
		case RunRunning:
			c.Running++
		case RunFailed:
			c.Failed++
		case RunSucceeded:
			c.Succeeded++
		case RunDead:
			c.Dead++
		case RunSkipped:
			c.Skipped++
		}
	}
	return c
}

// Required returns how many of the run's items must succeed for it to
// succeed: MinSucceeded, or all of them.
func (r *Run) Required() int {
	if r.MinSucceeded > 0 && r.MinSucceeded <= len(r.Items) {
		return r.MinSucceeded
	}
	return len(r.Items)
}

// AttemptCount returns the number of attempts the run made: its own, or
// its items' together.
func (r *Run) AttemptCount() int {
	n := len(r.Attempts)
	for _, it := range r.Items {
		n += len(it.Attempts)
	}
	return n
}

// UnmarshalJSON reads a run document as the API writes it, or as it is
// stored in etcd, where a run's items are kept in a compact form
// (MarshalStored).
func (r *Run) UnmarshalJSON(data []byte) error {
	type plain Run // without methods: no recursion
	var doc struct {
		plain
		Stored *storedItems `json:"item_state,omitempty"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	*r = Run(doc.plain)
	if doc.Stored != nil {
		items, err := doc.Stored.decode()
		if err != nil {
			return fmt.Errorf("run %s: item_state: %w", r.ID, err)
		}
		r.Items = items
	}
	r.fillSteps()
	return nil
}

// MarshalStored returns r as it is stored in etcd: a run without items as
// json.Marshal writes it (its API form), a run with items with them in a
// compact form under "item_state" instead of "items" (worker and
// credential pairs listed once, times as milliseconds from Base, statuses
// as one letter; see storedItems), which Run.UnmarshalJSON reads back.
// Item attempts' times keep millisecond precision.
func (r Run) MarshalStored() ([]byte, error) {
	if len(r.Items) == 0 {
		return json.Marshal(r)
	}
	type plain Run
	st, err := encodeItems(r.Items, r.FiredAt)
	if err != nil {
		return nil, err
	}
	p := plain(r)
	p.Items = nil
	return json.Marshal(struct {
		plain
		Stored *storedItems `json:"item_state"`
	}{p, st})
}

// ItemTime returns t as item attempts record it: UTC, in whole
// milliseconds (the precision of the stored form).
func ItemTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
