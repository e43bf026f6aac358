package chaos

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Recorder records a fleet's etcd history (specs, run documents, owner
// keys) as the fault suite does, for other harnesses (the process tests,
// the failover benchmark) to check with FireViolations. Create it with
// Record; Stop ends it.
type Recorder struct {
	w *historyWatch
}

// Record starts recording namespace ns, of a cluster of partitions
// partitions, after revision from (record from before the fleet starts).
func Record(client *clientv3.Client, ns string, partitions int, from int64, lg *zap.Logger) *Recorder {
	if lg == nil {
		lg = zap.NewNop()
	}
	return &Recorder{w: watchHistory(client, ns, partitions, from, lg)}
}

// Stop writes a marker key, waits until the recording has seen it (so
// the history holds every write committed before Stop was called), ends
// the recording and returns the history.
func (r *Recorder) Stop(ctx context.Context) (History, error) {
	err := r.w.mark(ctx, "stop")
	r.w.stop()
	return r.w.snapshot(), err
}

// FireViolations returns what the checker (Check) would count as broken
// in h's fires and owner keys, whatever fault caused it, one line each:
// a run key created more than once (a duplicate fire), a run created by
// another member or epoch than the partition's owner key at that
// revision (an unfenced fire), an owner key written while it existed
// (two owners).
func FireViolations(h History) []string {
	var out []string
	for key, r := range h.Runs {
		if len(r.Creates) > 1 {
			out = append(out, fmt.Sprintf("duplicate fire: run %s created %d times (revisions %v)", key, len(r.Creates), revs(r.Creates)))
		}
		for _, cr := range r.Creates {
			if cr.Epoch != cr.KeyEpoch || cr.Owner != cr.KeyOwner {
				out = append(out, fmt.Sprintf("unfenced fire: run %s created at revision %d by %s with epoch %d while the owner key said %q epoch %d", key, cr.Rev, cr.Owner, cr.Epoch, cr.KeyOwner, cr.KeyEpoch))
			}
		}
	}
	for _, o := range h.OwnerOverlaps {
		out = append(out, fmt.Sprintf("two owners: partition %d at revision %d: %s", o.Partition, o.Rev, o.Detail))
	}
	return out
}

// Fires returns how many run keys h saw created.
func (h History) Fires() int {
	n := 0
	for _, r := range h.Runs {
		n += len(r.Creates)
	}
	return n
}
