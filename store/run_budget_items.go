package store

import (
	"fmt"
	"slices"
)

// MaxItemRunBytes bounds the stored document of a run with items, its
// steps' results aside: what its items' statuses and attempts take
// without any output or error may exceed the run document budget (10 000
// items, 20 000 attempts), never this. The results of a run of steps (at
// most api.MaxRunResultsBytes) come on top, so a stored run document is
// at most MaxItemRunBytes + api.MaxRunResultsBytes (1.25 MiB), under
// etcd's request limit (1.5 MiB by default). The limits on shards and
// steps (api.MaxShards, api.MaxShardAttempts, api.MaxSteps,
// api.MaxStepNeeds, api.MaxRunRounds, api.MaxReasonBytes) keep a run
// within it.
const MaxItemRunBytes = 1 << 20

// fitItems is FitRun for a run with items, over budget maxBytes: in this
// order until the document fits, each item's attempts before its last
// lose their output and keep 64 bytes of their error; then the items'
// last attempts' outputs are cut to 4 KiB, 1 KiB and 256 bytes (their
// errors to at least 256 bytes); then they keep none and 64 bytes of
// their error; then every output and error goes. A document that is
// still over maxBytes is the items' statuses and attempts alone: it is
// kept as it is (the budget makes room for what no trimming can remove)
// unless it exceeds MaxItemRunBytes plus its results (ErrTooLarge),
// which are never cut. Attempts are never
// removed; each shortened one counts what it lost in DroppedBytes.
func fitItems(r Run, maxBytes int) (Run, []byte, error) {
	r.Items = slices.Clone(r.Items)
	for i := range r.Items {
		r.Items[i].Attempts = slices.Clone(r.Items[i].Attempts)
	}
	each := func(f func(a *Attempt, last bool)) {
		for i := range r.Items {
			as := r.Items[i].Attempts
			for k := range as {
				f(&as[k], k == len(as)-1)
			}
		}
	}
	steps := []func(a *Attempt, last bool){
		func(a *Attempt, last bool) {
			if !last {
				shorten(a, 0, 64)
			}
		},
	}
	for _, keep := range []int{4096, 1024, 256} {
		steps = append(steps, func(a *Attempt, last bool) { shorten(a, keep, max(keep, 256)) })
	}
	steps = append(steps,
		func(a *Attempt, last bool) { shorten(a, 0, 64) },
		func(a *Attempt, last bool) { shorten(a, 0, 0) },
	)
	var val []byte
	var err error
	for _, step := range steps {
		each(step)
		if val, err = EncodeRun(r); err != nil || len(val) <= maxBytes {
			return r, val, err
		}
	}
	if len(val) > MaxItemRunBytes+r.ResultsBytes() {
		return r, nil, fmt.Errorf("run %s: %d bytes without any output: %w", r.ID, len(val), ErrTooLarge)
	}
	return r, val, nil
}
